#include "base/units.h"

#include <gtest/gtest.h>

namespace trainwatch {
namespace {

TEST(UnitsTest, FormatDurationMsLargestUnitFirstWithoutWeeks) {
  EXPECT_EQ(FormatDurationMs(600000), "10m");
  EXPECT_EQ(FormatDurationMs(90061001), "1d1h1m1s1ms");
  EXPECT_EQ(FormatDurationMs(15LL * 86400000), "15d");
  EXPECT_EQ(FormatDurationMs(0), "0s");
}

}  // namespace
}  // namespace trainwatch
