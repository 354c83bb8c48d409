#include "http/params.h"

#include <gtest/gtest.h>

namespace trainwatch::http {
namespace {

TEST(ParamsTest, ParsesTimes) {
  auto f = [](std::string_view s) {
    auto r = ParseTime(s);
    EXPECT_TRUE(r.ok()) << s;
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(f("1700000000"), 1700000000000);
  EXPECT_EQ(f("1700000000.123"), 1700000000123);
  EXPECT_EQ(f("1796207149.698"), 1796207149698);
  EXPECT_EQ(f("2023-11-14T22:13:20Z"), 1700000000000);
  EXPECT_EQ(f("2023-11-14T22:13:20.5Z"), 1700000000500);
  EXPECT_EQ(f("2023-11-14T23:13:20+01:00"), 1700000000000);
  EXPECT_EQ(f("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(f("-1.5"), -1500);
  for (std::string_view bad : {"", "abc", "2023-13-01T00:00:00Z", "2023-11-14", "NaN", "Inf"}) {
    auto r = ParseTime(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), "cannot parse \"" + std::string(bad) + "\" to a valid timestamp");
  }
}

TEST(ParamsTest, ParsesDurations) {
  auto f = [](std::string_view s) {
    auto r = ParseDuration(s);
    EXPECT_TRUE(r.ok()) << s;
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(f("15"), 15000);
  EXPECT_EQ(f("0.5"), 500);
  EXPECT_EQ(f("15s"), 15000);
  EXPECT_EQ(f("1m"), 60000);
  EXPECT_EQ(f("1h30m"), 5400000);
  EXPECT_EQ(f("100ms"), 100);
  EXPECT_EQ(f("1d"), 86400000);
  EXPECT_EQ(f("2w"), 14 * 86400000LL);
  EXPECT_EQ(f("1y"), 365 * 86400000LL);
  EXPECT_EQ(f("1m30s500ms"), 90500);
  for (std::string_view bad : {"", "1x", "s", "1s1m", "1h1h", "-"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace trainwatch::http
