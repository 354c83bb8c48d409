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
}

}  // namespace
}  // namespace trainwatch
