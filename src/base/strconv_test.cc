#include "base/strconv.h"

#include <gtest/gtest.h>

#include <string>

namespace trainwatch {
namespace {

// Go's strconv.Unquote, as PromQL and text/template read string literals.
TEST(StrconvTest, GoUnquoteEscapesAndQuotes) {
  auto ok = [](std::string_view in, const std::string& want) {
    auto r = GoUnquote(in);
    ASSERT_TRUE(r.ok()) << in;
    EXPECT_EQ(*r, want) << in;
  };
  ok(R"("a\tb\n\\\"")", "a\tb\n\\\"");
  ok(R"('it\'s')", "it's");
  ok("`raw \\n`", "raw \\n");
  ok(R"("\x41\101\u00e9\U0001F600")", "AA\xc3\xa9\xf0\x9f\x98\x80");
  for (std::string_view bad : {R"("a)", R"("\q")", R"("\'")", R"('\"')", R"("\400")", R"("\U00110000")", R"("a"b")", "x"}) {
    auto r = GoUnquote(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), "invalid syntax") << bad;
  }
}

TEST(StrconvTest, GoQueryEscapeAsNetUrl) {
  // Go: url.QueryEscape("a b/c?d=é&x~_-.") == "a+b%2Fc%3Fd%3D%C3%A9%26x~_-."
  EXPECT_EQ(GoQueryEscape("a b/c?d=\xc3\xa9&x~_-."), "a+b%2Fc%3Fd%3D%C3%A9%26x~_-.");
  EXPECT_EQ(GoQueryEscape(""), "");
  EXPECT_EQ(GoQueryEscape(std::string_view("\0+", 2)), "%00%2B");
}

}  // namespace
}  // namespace trainwatch
