#include "base/units.h"

#include <gtest/gtest.h>

#include <string>

namespace trainwatch {
namespace {

TEST(UnitsTest, FormatDurationMsLargestUnitFirstWithoutWeeks) {
  EXPECT_EQ(FormatDurationMs(600000), "10m");
  EXPECT_EQ(FormatDurationMs(90061001), "1d1h1m1s1ms");
  EXPECT_EQ(FormatDurationMs(15LL * 86400000), "15d");
  EXPECT_EQ(FormatDurationMs(0), "0s");
}

// Prometheus's model.ParseDuration, the one parser behind PromQL durations,
// flags, configs and HTTP parameters.
TEST(UnitsTest, ParseDurationMsUnitsInOrder) {
  EXPECT_EQ(*ParseDurationMs("0"), 0);
  EXPECT_EQ(*ParseDurationMs("1h30m"), 5400000);
  EXPECT_EQ(*ParseDurationMs("1y1w1d1h1m1s1ms"), 365LL * 86400000 + 7LL * 86400000 + 86400000 + 3661001);
  EXPECT_EQ(*ParseDurationMs("1500ms"), 1500);
  for (const char* bad : {"", "1", "h", "1m1h", "1s1s", "-1s", "1.5s", "1x", "1s "}) {
    EXPECT_FALSE(ParseDurationMs(bad).ok()) << bad;
  }
}

// Found by the promql fuzzer: a number of units past int64 milliseconds
// overflowed (undefined behaviour); now an error, as in Prometheus.
TEST(UnitsTest, DurationOverflowIsAnError) {
  EXPECT_EQ(*ParseDurationMs("9223372036854775s"), 9223372036854775000);
  EXPECT_EQ(*ParseDurationMs("292471208y"), 292471208LL * 31536000000);
  // A product past int64, a number past int64, and a sum past int64.
  for (const char* big : {"9223372036854775807h", "9223372036854776s", "292471209y", "99999999999999999999999s",
                          "292471208y52w"}) {
    auto r = ParseDurationMs(big);
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_EQ(r.error().message(), "duration \"" + std::string(big) + "\" out of range");
  }
}

}  // namespace
}  // namespace trainwatch
