#include "model/histogram.h"

#include <gtest/gtest.h>

namespace trainwatch::model {
namespace {

TEST(FloatHistogramTest, Placeholder) { EXPECT_EQ(FloatHistogram().String(), "{count:0, sum:0}"); }

}  // namespace
}  // namespace trainwatch::model
