#include "model/nhcb.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace trainwatch::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The cases of Prometheus's util/convertnhcb/convertnhcb_test.go.
TEST(NhcbBuilderTest, EmptyAndSumOnly) {
  NhcbBuilder b;
  auto h = b.Convert();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->schema, kCustomBucketsSchema);
  EXPECT_EQ(h->count, 0);
  EXPECT_TRUE(h->positive_spans.empty());
  EXPECT_TRUE(h->positive_buckets.empty());
  ASSERT_TRUE(b.SetSum(1000.25).ok());
  h = b.Convert();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->sum, 1000.25);
  EXPECT_TRUE(h->positive_buckets.empty());
}

TEST(NhcbBuilderTest, SingleBucketWithoutInfTakesItsCount) {
  NhcbBuilder b;
  ASSERT_TRUE(b.SetSum(1000.25).ok());
  ASSERT_TRUE(b.SetBucketCount(0.5, 1000).ok());
  auto h = b.Convert();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->count, 1000);
  EXPECT_EQ(h->positive_spans, (std::vector<Span>{{0, 1}}));
  EXPECT_EQ(h->positive_buckets, (std::vector<double>{1000}));
  EXPECT_EQ(h->custom_values, (std::vector<double>{0.5}));
  b.Reset();
  ASSERT_TRUE(b.SetBucketCount(0.5, 1337.42).ok());
  h = b.Convert();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->count, 1337.42);
  EXPECT_EQ(h->positive_buckets, (std::vector<double>{1337.42}));
}

TEST(NhcbBuilderTest, HappyCases) {
  NhcbBuilder b;
  ASSERT_TRUE(b.SetCount(1000).ok());
  ASSERT_TRUE(b.SetSum(1000.25).ok());
  ASSERT_TRUE(b.SetBucketCount(0.5, 50).ok());
  ASSERT_TRUE(b.SetBucketCount(1.0, 950.5).ok());
  ASSERT_TRUE(b.SetBucketCount(kInf, 1000).ok());
  auto h = b.Convert();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->count, 1000);
  EXPECT_EQ(h->sum, 1000.25);
  EXPECT_EQ(h->positive_spans, (std::vector<Span>{{0, 3}}));
  EXPECT_EQ(h->positive_buckets, (std::vector<double>{50, 900.5, 49.5}));
  EXPECT_EQ(h->custom_values, (std::vector<double>{0.5, 1.0}));
}

TEST(NhcbBuilderTest, UnsortedAndDuplicateBounds) {
  NhcbBuilder b;
  ASSERT_TRUE(b.SetBucketCount(kInf, 10).ok());
  ASSERT_TRUE(b.SetBucketCount(1, 4).ok());
  ASSERT_TRUE(b.SetBucketCount(0.5, 1).ok());
  ASSERT_TRUE(b.SetBucketCount(1, 7).ok());  // repeated: the first count stays
  ASSERT_TRUE(b.SetCount(10).ok());
  auto h = b.Convert();
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  EXPECT_EQ(h->custom_values, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(h->positive_buckets, (std::vector<double>{1, 3, 6}));
}

TEST(NhcbBuilderTest, ErrorsAreSticky) {
  auto err = [](NhcbBuilder& b) { auto h = b.Convert(); return h.ok() ? std::string() : h.error().message(); };
  NhcbBuilder b;
  ASSERT_TRUE(b.SetCount(1000).ok());
  ASSERT_TRUE(b.SetBucketCount(0.5, 50).ok());
  ASSERT_TRUE(b.SetBucketCount(1.0, 950).ok());
  EXPECT_FALSE(b.SetBucketCount(kInf, 900).ok());
  EXPECT_NE(err(b).find("count is not cumulative: 900 < 950"), std::string::npos) << err(b);
  EXPECT_FALSE(b.SetSum(1).ok());  // sticky

  b.Reset();
  ASSERT_TRUE(b.SetBucketCount(2, 5).ok());
  EXPECT_FALSE(b.SetBucketCount(1, 6).ok());  // inserted below a smaller count
  EXPECT_NE(err(b).find("count is not cumulative: 6 > 5"), std::string::npos) << err(b);

  b.Reset();
  EXPECT_FALSE(b.SetCount(-1000).ok());
  EXPECT_NE(err(b).find("count must be non-negative"), std::string::npos);
  b.Reset();
  EXPECT_FALSE(b.SetBucketCount(std::nan(""), 1).ok());
  EXPECT_NE(err(b).find("bucket boundary must not be NaN"), std::string::npos);
  b.Reset();
  EXPECT_FALSE(b.SetBucketCount(1, -1).ok());
  EXPECT_NE(err(b).find("bucket count must be non-negative"), std::string::npos);

  // _count disagreeing with the +Inf bucket.
  b.Reset();
  ASSERT_TRUE(b.SetCount(12).ok());
  ASSERT_TRUE(b.SetBucketCount(1, 4).ok());
  ASSERT_TRUE(b.SetBucketCount(kInf, 10).ok());
  EXPECT_NE(err(b).find("count mismatch: count=12 != le=inf count=10"), std::string::npos) << err(b);
}

}  // namespace
}  // namespace trainwatch::model
