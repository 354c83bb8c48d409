#include "logs/json_scan.h"

#include <gtest/gtest.h>

#include "base/json.h"

namespace trainwatch::logs {
namespace {

TEST(JsonScannerTest, AcceptsValidAndRefusesInvalidValues) {
  auto valid = [](std::string_view s) {
    JsonScanner sc(s);
    JsonValue v;
    return sc.Value(&v) && sc.AtEnd();
  };
  for (std::string_view s : {"0", "-0", "1.5", "-1.5e+10", "1E-5", "1e308", "1.7976931348623157e308", "1e-400",
                             "0.0000e999", "\"\"", "\"a\\u00e9\\uD83D\\uDE00\\/\\b\\f\\n\\r\\t\\\\\\\"\"",
                             "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", "[]", "{}", "[1,[2,{\"a\":[]}],\"x\"]",
                             "{ \"a\" : { \"b\" : null } }", "true", "false", "null"}) {
    EXPECT_TRUE(valid(s)) << s;
  }
  for (std::string_view s : {"01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "0x10", "NaN", "Infinity", "1e309",
                             "-1.8e308", "1e999999999999", "\"\\uD800\"", "\"\\uDC00\"", "\"\\uD800\\u0041\"",
                             "\"\\uZZZZ\"", "\"\\x\"", "\"a\tb\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf5\x80\x80\x80\"",
                             "\"\x80\"", "\"\xe2\x82\"", "\"abc", "[1,]", "{\"a\":1,}", "{\"a\"}", "{a:1}", "[1 2]",
                             "tru", "nul", "{\"a\":1]", "[", "{", ""}) {
    EXPECT_FALSE(valid(s)) << s;
  }
}

// Containers are scanned without recursion, and nesting is bounded at
// kMaxJsonDepth: what is stored is later parsed and dumped recursively.
TEST(JsonScannerTest, DeepNestingNeedsNoStackAndIsBounded) {
  auto nested = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  JsonValue v;
  std::string ok = nested(kMaxJsonDepth);
  JsonScanner sc(ok);
  ASSERT_TRUE(sc.Value(&v));
  EXPECT_EQ(v.text.size(), ok.size());
  std::string deeper = nested(kMaxJsonDepth + 1);
  JsonScanner too_deep(deeper);
  EXPECT_FALSE(too_deep.Value(&v));
  std::string deep = nested(200000);
  JsonScanner very_deep(deep);
  EXPECT_FALSE(very_deep.Value(&v));
  ok.pop_back();
  JsonScanner bad(ok);
  EXPECT_FALSE(bad.Value(&v));
}

TEST(JsonScannerTest, DecodesEscapesAndCompactsSpace) {
  JsonScanner sc("\"a\\u00e9\\uD83D\\uDE00\\n\\/\\\"\"");
  JsonValue v;
  ASSERT_TRUE(sc.String(&v));
  EXPECT_TRUE(v.escaped);
  std::string out;
  AppendJsonStringContent(&out, v.text);
  EXPECT_EQ(out, "a\xc3\xa9\xf0\x9f\x98\x80\n/\"");
  JsonScanner obj("{ \"a b\" : [ 1 , \"x \\\" y\" ] }");
  ASSERT_TRUE(obj.Value(&v));
  EXPECT_TRUE(v.spaced);
  out.clear();
  AppendCompactJson(&out, v);
  EXPECT_EQ(out, "{\"a b\":[1,\"x \\\" y\"]}");
  out.clear();
  AppendJsonQuoted(&out, "q\"\\\b\f\n\r\t\x01\x7f\xc3\xa9");
  EXPECT_EQ(out, "\"q\\\"\\\\\\b\\f\\n\\r\\t\\u0001\x7f\xc3\xa9\"");
}

}  // namespace
}  // namespace trainwatch::logs
