#include "base/json.h"

#include <gtest/gtest.h>

namespace trainwatch {
namespace {

TEST(JsonTest, AppendJsonStringEscapesQuotesBackslashesAndControls) {
  auto j = [](std::string_view s) {
    std::string out = "x";
    AppendJsonString(&out, s);
    return out;
  };
  EXPECT_EQ(j(""), "x\"\"");
  EXPECT_EQ(j("plain"), "x\"plain\"");
  EXPECT_EQ(j("a\"b\\c\nd\re\tf"), "x\"a\\\"b\\\\c\\nd\\re\\tf\"");
  EXPECT_EQ(j(std::string_view("\x01\x1f\0", 3)), "x\"\\u0001\\u001f\\u0000\"");
  EXPECT_EQ(j("é/<>&"), "x\"é/<>&\"");  // UTF-8 and HTML characters pass through
  EXPECT_EQ(j("\xf0\x9f\x94\xa5 ok"), "x\"\xf0\x9f\x94\xa5 ok\"");
  // Bytes that are not UTF-8 become U+FFFD: the output stays valid JSON.
  EXPECT_EQ(j("a\xff" "b"), "x\"a\\ufffdb\"");
  EXPECT_EQ(j("\xc3"), "x\"\\ufffd\"");              // a sequence cut short
  EXPECT_EQ(j("\xc0\xaf"), "x\"\\ufffd\\ufffd\"");  // an overlong '/'
  EXPECT_EQ(j("\xed\xa0\x80"), "x\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
}

TEST(JsonTest, CheckJsonDepthAcceptsUpToTheLimit) {
  auto nested = [](size_t n, char open, char close) { return std::string(n, open) + std::string(n, close); };
  EXPECT_TRUE(CheckJsonDepth("").ok());
  EXPECT_TRUE(CheckJsonDepth("{\"a\": [1, {\"b\": []}], \"c\": {}}", 4).ok());
  EXPECT_FALSE(CheckJsonDepth("{\"a\": [1, {\"b\": []}], \"c\": {}}", 3).ok());
  EXPECT_TRUE(CheckJsonDepth(nested(kMaxJsonDepth, '[', ']')).ok());
  EXPECT_TRUE(CheckJsonDepth(nested(kMaxJsonDepth, '{', '}')).ok());
  // Siblings do not add up: depth goes back down after each closer.
  std::string siblings;
  for (int i = 0; i < 1000; i++) siblings += "[[]],";
  EXPECT_TRUE(CheckJsonDepth("[" + siblings + "1]", 3).ok());
}

TEST(JsonTest, CheckJsonDepthRejectsDeeperNestingWithItsOffset) {
  auto check = [](std::string_view text, size_t max, std::string_view want) {
    Status s = CheckJsonDepth(text, max);
    ASSERT_FALSE(s.ok()) << text.substr(0, 40);
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_EQ(s.message(), want);
  };
  check("[[[", 2, "json: nesting deeper than 2 levels at byte offset 2");
  check("{\"a\": {\"b\": [1]}}", 2, "json: nesting deeper than 2 levels at byte offset 12");
  check(std::string(kMaxJsonDepth + 1, '['), kMaxJsonDepth, "json: nesting deeper than 128 levels at byte offset 128");
  // The hostile bodies: a million levels of either kind, answered in one pass.
  check(std::string(1000000, '['), kMaxJsonDepth, "json: nesting deeper than 128 levels at byte offset 128");
  std::string objects;
  for (int i = 0; i < 1000000; i++) objects += "{\"a\":";
  check(objects, kMaxJsonDepth, "json: nesting deeper than 128 levels at byte offset 640");
}

TEST(JsonTest, CheckJsonDepthSkipsBracketsInsideStrings) {
  std::string in_string = "[\"" + std::string(1000, '[') + "\\\"{{{\"]";  // ["[[[...\"{{{"]
  EXPECT_TRUE(CheckJsonDepth(in_string, 1).ok());
  // An escaped backslash ends the escape: the quote after it closes the string.
  EXPECT_TRUE(CheckJsonDepth("[\"\\\\\", 1]", 1).ok());
  EXPECT_FALSE(CheckJsonDepth("[\"\\\\\", [1]]", 1).ok());
  // Unbalanced closers do not lower the depth below zero.
  EXPECT_FALSE(CheckJsonDepth("]]]][[", 1).ok());
}

}  // namespace
}  // namespace trainwatch
