// FloatHistogram behaviour beyond Prometheus's transcribed table tests
// (histogram_prom_cases_test.cc): formatting, bounds and iteration, Equals,
// Validate, Kahan summation, and the trim operators against the PromQL
// corpus.

#include "model/histogram.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "model/histogram_test_util.h"

namespace trainwatch::model {
namespace {

using testing::AlmostEqual;
using testing::ParseTestHistogram;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The comparison promqltest makes between an expected and a computed
// histogram: both compacted, floats within a relative 1e-6.
::testing::AssertionResult MatchesLikePromqlTest(FloatHistogram want, FloatHistogram got) {
  want.Compact(0);
  got.Compact(0);
  bool ok = want.schema == got.schema && AlmostEqual(want.count, got.count) && AlmostEqual(want.sum, got.sum) &&
            want.zero_threshold == got.zero_threshold && AlmostEqual(want.zero_count, got.zero_count) &&
            want.positive_spans == got.positive_spans && want.negative_spans == got.negative_spans &&
            want.positive_buckets.size() == got.positive_buckets.size() &&
            want.negative_buckets.size() == got.negative_buckets.size() &&
            (!want.UsesCustomBuckets() || want.custom_values == got.custom_values);
  for (size_t i = 0; ok && i < want.positive_buckets.size(); i++) {
    ok = AlmostEqual(want.positive_buckets[i], got.positive_buckets[i]);
  }
  for (size_t i = 0; ok && i < want.negative_buckets.size(); i++) {
    ok = AlmostEqual(want.negative_buckets[i], got.negative_buckets[i]);
  }
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "want " << want.TestExpression() << " " << want.String() << "\n got "
                                       << got.TestExpression() << " " << got.String();
}

TEST(FloatHistogramTest, StringUsesGoPercentG) {
  FloatHistogram h = ParseTestHistogram("schema:0 count:1000000 sum:0.00001 z_bucket:3 z_bucket_w:0.001 buckets:[1e+06]");
  EXPECT_EQ(h.String(), "{count:1e+06, sum:1e-05, [-0.001,0.001]:3, (0.5,1]:1e+06}");
  h = ParseTestHistogram("schema:0 count:123456.5 sum:-0.0001 buckets:[0 2.5] n_buckets:[4]");
  // Empty buckets are left out; negative ones come first, most negative first.
  EXPECT_EQ(h.String(), "{count:123456.5, sum:-0.0001, [-1,-0.5):4, (1,2]:2.5}");
  h = ParseTestHistogram("count:NaN sum:Inf buckets:[Inf]");
  EXPECT_EQ(h.String(), "{count:NaN, sum:+Inf, (0.5,1]:+Inf}");
  EXPECT_EQ(FloatHistogram().String(), "{count:0, sum:0}");
}

TEST(FloatHistogramTest, BucketStringMarksInclusiveBounds) {
  Bucket b{-2, -1, true, false, 3.5, 0};
  EXPECT_EQ(b.String(), "[-2,-1):3.5");
  b = Bucket{1, 2, false, true, 1e21, 1};
  EXPECT_EQ(b.String(), "(1,2]:1e+21");
  b = Bucket{-kInf, 1.5, true, true, 0, 0};
  EXPECT_EQ(b.String(), "[-Inf,1.5]:0");
}

TEST(FloatHistogramTest, TestExpressionRoundTripsPromqlTestLiterals) {
  const char* literals[] = {
      "{{count:4 sum:5 buckets:[1 2 1]}}",
      "{{schema:2 count:28 sum:12.8286080906 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]}}",
      "{{schema:-53 count:15 sum:172.5 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
      "{{count:2 sum:-2.8284271247461903 z_bucket_w:0.001 n_offset:1 n_buckets:[2]}}",
      "{{schema:-1 count:1e+06 sum:1e-05 counter_reset_hint:gauge offset:-3 buckets:[1e+06]}}",
      "{{count:3 sum:NaN counter_reset_hint:reset buckets:[3]}}",
      "{{z_bucket_w:0.5 counter_reset_hint:not_reset}}",
  };
  for (const char* lit : literals) {
    std::string inner(lit + 2, std::string(lit).size() - 4);
    EXPECT_EQ(ParseTestHistogram(inner).TestExpression(), lit);
  }
}

TEST(FloatHistogramTest, TestExpressionCompactsToOneSpanPerSide) {
  FloatHistogram h;
  h.count = 6;
  h.sum = 1;
  h.positive_spans = {{-2, 1}, {2, 2}};
  h.positive_buckets = {1, 0, 2};
  h.negative_spans = {{1, 1}, {0, 1}};
  h.negative_buckets = {0, 3};
  EXPECT_EQ(h.TestExpression(), "{{count:6 sum:1 offset:-2 buckets:[1 0 0 0 2] n_offset:2 n_buckets:[3]}}");
}

TEST(FloatHistogramTest, BucketBoundsMatchPrometheus) {
  std::vector<double> none;
  EXPECT_EQ(BucketBound(0, 0, none), 1);
  EXPECT_EQ(BucketBound(1, 0, none), 2);
  EXPECT_EQ(BucketBound(-1, 0, none), 0.5);
  // From Prometheus's table, which is not always the nearest double to
  // the exact power (sqrt(2) is 1.4142135623730951).
  EXPECT_EQ(BucketBound(1, 1, none), 1.414213562373095);
  EXPECT_EQ(BucketBound(3, 2, none), 1.6817928305074288);
  EXPECT_EQ(BucketBound(1, 3, none), 1.0905077326652577);
  EXPECT_EQ(BucketBound(1, -1, none), 4);
  EXPECT_EQ(BucketBound(-2, -4, none), std::ldexp(1.0, -32));
  // The last finite bucket ends at DBL_MAX, the next one (for ±Inf) at +Inf.
  EXPECT_EQ(BucketBound(1024, 0, none), DBL_MAX);
  EXPECT_EQ(BucketBound(1025, 0, none), kInf);
  EXPECT_EQ(BucketBound(1024 * 256, 8, none), DBL_MAX);
  EXPECT_EQ(BucketBound(64, -4, none), DBL_MAX);
  std::vector<double> custom = {1, 5, 10};
  EXPECT_EQ(BucketBound(0, kCustomBucketsSchema, custom), 1);
  EXPECT_EQ(BucketBound(2, kCustomBucketsSchema, custom), 10);
  EXPECT_EQ(BucketBound(3, kCustomBucketsSchema, custom), kInf);
  EXPECT_EQ(BucketBound(-1, kCustomBucketsSchema, custom), -kInf);
}

TEST(FloatHistogramTest, FractionBelowIsLinearOrLogarithmic) {
  Bucket b{1, 4, false, true, 8, 2};
  EXPECT_DOUBLE_EQ(b.FractionBelow(2.5, true), 0.5);
  EXPECT_DOUBLE_EQ(b.FractionBelow(2, false), 0.5);  // log2: halfway between 0 and 2
  Bucket neg{-4, -1, true, false, 8, 2};
  EXPECT_DOUBLE_EQ(neg.FractionBelow(-2, false), 0.5);
  EXPECT_DOUBLE_EQ(neg.FractionBelow(-3.5, true), 0.5 / 3);
}

TEST(FloatHistogramTest, AllBucketsGoFromMinusInfToPlusInfAndClampToTheZeroBucket) {
  // Zero threshold 0.75 cuts into (0.5,1] and [-1,-0.5).
  FloatHistogram h = ParseTestHistogram("schema:0 count:10 sum:1 z_bucket:1 z_bucket_w:0.75 buckets:[1 2] n_buckets:[3 0 4]");
  std::vector<Bucket> all = h.AllBuckets();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].String(), "[-4,-2):4");
  EXPECT_EQ(all[1].String(), "[-2,-1):0");
  EXPECT_EQ(all[2].String(), "[-1,-0.75):3");
  EXPECT_EQ(all[3].String(), "[-0.75,0.75]:1");
  EXPECT_EQ(all[4].String(), "(0.75,1]:1");
  EXPECT_EQ(all[5].String(), "(1,2]:2");
  std::vector<Bucket> rev = h.AllBucketsReverse();
  ASSERT_EQ(rev.size(), 6u);
  for (size_t i = 0; i < rev.size(); i++) EXPECT_EQ(rev[i].String(), all[all.size() - 1 - i].String());
  // No zero bucket without zero count.
  h.zero_count = 0;
  EXPECT_EQ(h.AllBuckets().size(), 5u);
  // Per side, by index: the negative side from zero outwards.
  std::vector<Bucket> neg = h.NegativeBuckets();
  ASSERT_EQ(neg.size(), 3u);
  EXPECT_EQ(neg[0].index, 0);
  EXPECT_EQ(neg[0].String(), "[-1,-0.5):3");
  EXPECT_EQ(h.PositiveBuckets()[1].String(), "(1,2]:2");
}

TEST(FloatHistogramTest, CustomBucketsIterateWithInfiniteEnds) {
  FloatHistogram h = ParseTestHistogram("schema:-53 count:6 sum:1 custom_values:[1 2] buckets:[1 2 3]");
  std::vector<Bucket> all = h.AllBuckets();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].String(), "[-Inf,1]:1");
  EXPECT_EQ(all[1].String(), "(1,2]:2");
  EXPECT_EQ(all[2].String(), "(2,+Inf]:3");
  EXPECT_EQ(h.AllBucketsReverse().front().String(), "(2,+Inf]:3");
}

TEST(FloatHistogramTest, EqualsComparesBitsAndIgnoresSpanSpelling) {
  FloatHistogram h1;
  h1.schema = 3;
  h1.count = 2.2;
  h1.sum = 9.7;
  h1.zero_threshold = 0.1;
  h1.zero_count = 1.1;
  h1.positive_buckets = {3};
  h1.negative_buckets = {4};
  auto equals = [](const FloatHistogram& a, const FloatHistogram& b) { return a.Equals(b) && b.Equals(a); };
  auto not_equals = [](const FloatHistogram& a, const FloatHistogram& b) { return !a.Equals(b) && !b.Equals(a); };
  EXPECT_TRUE(equals(h1, h1));
  FloatHistogram nan_count = h1;
  nan_count.count = kNaN;
  EXPECT_TRUE(not_equals(h1, nan_count));
  EXPECT_TRUE(equals(nan_count, nan_count));
  FloatHistogram nan_zero = h1;
  nan_zero.zero_count = kNaN;
  EXPECT_TRUE(not_equals(h1, nan_zero));
  EXPECT_TRUE(equals(nan_zero, nan_zero));
  FloatHistogram nan_pos = h1;
  nan_pos.positive_buckets[0] = kNaN;
  EXPECT_TRUE(not_equals(h1, nan_pos));
  EXPECT_TRUE(equals(nan_pos, nan_pos));
  FloatHistogram nan_neg = h1;
  nan_neg.negative_buckets[0] = kNaN;
  EXPECT_TRUE(not_equals(h1, nan_neg));
  // Custom bounds only count for custom buckets; the hint never does.
  FloatHistogram custom = h1;
  custom.custom_values = {1, 2, 3};
  custom.counter_reset_hint = CounterResetHint::kGauge;
  EXPECT_TRUE(equals(h1, custom));
  // Different NaN payloads (the stale marker) differ.
  FloatHistogram stale = h1;
  uint64_t bits = 0x7ff0000000000002ull;
  std::memcpy(&stale.sum, &bits, 8);
  FloatHistogram plain_nan = h1;
  plain_nan.sum = kNaN;
  EXPECT_TRUE(not_equals(stale, plain_nan));

  FloatHistogram cbh = ParseTestHistogram("schema:-53 count:2.2 sum:9.7 custom_values:[1 2 3] buckets:[3]");
  ASSERT_TRUE(cbh.Validate().ok());
  EXPECT_TRUE(equals(cbh, cbh));
  FloatHistogram other = cbh;
  other.custom_values = {1, 2, 3, 4};
  EXPECT_TRUE(not_equals(cbh, other));
  other = cbh;
  other.negative_spans = {{0, 1}};
  other.negative_buckets = {1};
  EXPECT_TRUE(not_equals(cbh, other));
  other = cbh;
  other.zero_threshold = 0.1;
  other.zero_count = 10;
  EXPECT_TRUE(not_equals(cbh, other));

  // Zero-length spans pass their offsets on; spans joined with offset 0 are
  // still different spans, as in Prometheus.
  FloatHistogram a = ParseTestHistogram("count:3 sum:1 offset:1 buckets:[1 2]");
  FloatHistogram b = a;
  b.positive_spans = {{0, 0}, {1, 0}, {0, 2}, {3, 0}};
  EXPECT_TRUE(equals(a, b));
  b.positive_spans = {{1, 1}, {0, 1}};
  EXPECT_TRUE(not_equals(a, b));
  b.positive_spans = {{2, 2}};
  EXPECT_TRUE(not_equals(a, b));
}

TEST(FloatHistogramTest, ValidateNamesTheProblem) {
  EXPECT_TRUE(ParseTestHistogram("count:4 sum:5 buckets:[1 2 1] n_buckets:[0]").Validate().ok());
  FloatHistogram h = ParseTestHistogram("count:4 sum:5 buckets:[1 2 1]");
  h.positive_spans = {{0, 2}};
  EXPECT_EQ(h.Validate().message(),
            "positive side: spans need 2 buckets, have 3 buckets: histogram spans specify different number of "
            "buckets than provided");
  h = ParseTestHistogram("count:4 sum:5 n_buckets:[1 -2 1]");
  EXPECT_EQ(h.Validate().message(),
            "negative side: bucket number 2 has observation count of -2: histogram has a bucket whose observation "
            "count is negative");
  h = ParseTestHistogram("count:4 sum:5 buckets:[1 1]");
  h.positive_spans = {{0, 1}, {-1, 1}};
  EXPECT_EQ(h.Validate().message(),
            "positive side: span number 2 with offset -1: histogram has a span whose offset is negative");
  h = ParseTestHistogram("count:-1 sum:5");
  EXPECT_EQ(h.Validate().message(), "observation count is  -1: histogram's observation count is negative");
  h = ParseTestHistogram("count:1 sum:5 z_bucket:-0.5");
  EXPECT_EQ(h.Validate().message(),
            "zero bucket has observation count of -0.5: histogram has a bucket whose observation count is negative");
  h = ParseTestHistogram("schema:9 count:1");
  EXPECT_EQ(h.Validate().message(),
            "histogram has an invalid schema, which must be between -4 and 8 for exponential buckets, or -53 for "
            "custom buckets, got schema 9");
  h = ParseTestHistogram("count:1 custom_values:[1]");
  EXPECT_EQ(h.Validate().message(), "histogram with exponential schema must not have custom bounds");
  h = ParseTestHistogram("schema:-53 count:1 custom_values:[2 1] buckets:[1]");
  EXPECT_EQ(h.Validate().message(),
            "custom buckets: previous bound is 2.000000 and current is 1.000000: histogram custom bounds must be in "
            "strictly increasing order");
  h = ParseTestHistogram("schema:-53 count:1 custom_values:[1 Inf] buckets:[1]");
  EXPECT_EQ(h.Validate().message(),
            "custom buckets: last +Inf bound must not be explicitly defined: histogram custom bounds must be finite");
  h = ParseTestHistogram("schema:-53 count:1 custom_values:[1 NaN] buckets:[1]");
  EXPECT_EQ(h.Validate().message(), "custom buckets: histogram custom bounds must not be NaN");
  h = ParseTestHistogram("schema:-53 count:1 custom_values:[1] buckets:[1 1 1]");
  EXPECT_EQ(h.Validate().message(),
            "custom buckets: only 1 custom bounds defined which is insufficient to cover total span length of 3: "
            "histogram custom bounds are too few");
  h = ParseTestHistogram("schema:-53 count:1 z_bucket:1 custom_values:[1] buckets:[1]");
  EXPECT_EQ(h.Validate().message(), "custom buckets: must have zero count of 0");
  h = ParseTestHistogram("schema:-53 count:1 custom_values:[1] buckets:[1] n_buckets:[1]");
  EXPECT_EQ(h.Validate().message(), "custom buckets: must not have negative spans");
  EXPECT_TRUE(h.Validate().IsInvalidArgument());
}

TEST(FloatHistogramTest, HasOverflowLooksForInfinities) {
  FloatHistogram h = ParseTestHistogram("count:4 sum:5 buckets:[1 2 1]");
  EXPECT_FALSE(h.HasOverflow());
  h.negative_spans = {{0, 1}};
  h.negative_buckets = {kInf};
  EXPECT_TRUE(h.HasOverflow());
  h = ParseTestHistogram("count:4 sum:-Inf");
  EXPECT_TRUE(h.HasOverflow());
  h = ParseTestHistogram("count:4 sum:NaN");
  EXPECT_FALSE(h.HasOverflow());
}

TEST(FloatHistogramTest, MulAndDivTurnNegativeScalingIntoGauges) {
  FloatHistogram h = ParseTestHistogram("count:4 sum:5 buckets:[1 2 1] counter_reset_hint:not_reset");
  h.Mul(2);
  EXPECT_EQ(h.counter_reset_hint, CounterResetHint::kNotCounterReset);
  EXPECT_EQ(h.positive_buckets, (std::vector<double>{2, 4, 2}));
  h.Div(-2);
  EXPECT_EQ(h.counter_reset_hint, CounterResetHint::kGauge);
  EXPECT_EQ(h.sum, -5);
  h.Div(0);
  EXPECT_TRUE(h.positive_buckets.empty());
  EXPECT_TRUE(h.positive_spans.empty());
  EXPECT_EQ(h.count, -kInf);
}

TEST(FloatHistogramTest, CopyToSchemaMergesBucketsAndDropsTheHint) {
  FloatHistogram h = ParseTestHistogram("schema:2 count:10 sum:5 counter_reset_hint:gauge offset:-1 buckets:[1 2 3 4]");
  FloatHistogram c = h.CopyToSchema(0);
  // Indexes -1..2 at schema 2 fall into schema-0 buckets 0 and 1.
  EXPECT_EQ(c.TestExpression(), "{{count:10 sum:5 buckets:[3 7]}}");
  EXPECT_EQ(h.CopyToSchema(2).counter_reset_hint, CounterResetHint::kGauge);
  EXPECT_EQ(h.schema, 2);
  h.ReduceResolution(-1);
  EXPECT_EQ(h.TestExpression(), "{{schema:-1 count:10 sum:5 counter_reset_hint:gauge buckets:[3 7]}}");
  h.ReduceResolution(3);  // not a reduction: no-op
  EXPECT_EQ(h.schema, -1);
}

TEST(FloatHistogramTest, DetectResetHonoursHints) {
  FloatHistogram prev = ParseTestHistogram("count:4 sum:5 buckets:[1 2 1]");
  FloatHistogram cur = ParseTestHistogram("count:5 sum:6 buckets:[1 1 3]");
  EXPECT_TRUE(cur.DetectReset(prev));  // one bucket went down
  cur.counter_reset_hint = CounterResetHint::kNotCounterReset;
  EXPECT_FALSE(cur.DetectReset(prev));
  cur = ParseTestHistogram("count:6 sum:7 buckets:[1 2 3] counter_reset_hint:reset");
  EXPECT_TRUE(cur.DetectReset(prev));
  cur.counter_reset_hint = CounterResetHint::kGauge;  // checked like unknown
  EXPECT_FALSE(cur.DetectReset(prev));
  // Exponential after custom buckets, and custom after exponential.
  FloatHistogram nhcb = ParseTestHistogram("schema:-53 count:6 sum:7 custom_values:[1 2] buckets:[1 2 3]");
  EXPECT_TRUE(nhcb.DetectReset(prev));
  cur.counter_reset_hint = CounterResetHint::kUnknown;
  EXPECT_TRUE(cur.DetectReset(nhcb));
}

TEST(FloatHistogramTest, AddRejectsMixingCustomAndExponentialBuckets) {
  FloatHistogram a = ParseTestHistogram("count:4 sum:5 buckets:[1 2 1]");
  FloatHistogram b = ParseTestHistogram("schema:-53 count:1 sum:1 custom_values:[1] buckets:[1]");
  auto r = a.Add(b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas");
  FloatHistogram c;
  EXPECT_FALSE(a.KahanAdd(b, &c).ok());
  EXPECT_FALSE(a.Sub(b).ok());
}

TEST(FloatHistogramTest, AddToItselfDoubles) {
  FloatHistogram h = ParseTestHistogram("schema:1 count:4 sum:5 z_bucket:1 z_bucket_w:0.1 buckets:[1 2] n_buckets:[1]");
  ASSERT_TRUE(h.Add(h).ok());
  EXPECT_EQ(h.TestExpression(), "{{schema:1 count:8 sum:10 z_bucket:2 z_bucket_w:0.1 buckets:[2 4] n_buckets:[2]}}");
  ASSERT_TRUE(h.Sub(h).ok());
  EXPECT_EQ(h.count, 0);
}

TEST(FloatHistogramTest, KahanAddKeepsWhatPlainAddLoses) {
  // 1e100 + 1 + 1 - 1e100: plain addition loses both ones.
  const double values[] = {1e100, 1, 1, -1e100};
  FloatHistogram plain, kahan, comp;
  for (double v : values) {
    FloatHistogram h;
    h.count = 1;
    h.sum = v;
    h.positive_spans = {{0, 1}};
    h.positive_buckets = {v};
    ASSERT_TRUE(plain.Add(h).ok());
    ASSERT_TRUE(kahan.KahanAdd(h, &comp).ok());
  }
  EXPECT_EQ(plain.sum, 0);
  EXPECT_EQ(plain.positive_buckets, (std::vector<double>{0}));
  EXPECT_EQ(comp.sum, 2);
  EXPECT_EQ(comp.positive_spans, kahan.positive_spans);
  ASSERT_TRUE(kahan.Add(comp).ok());
  EXPECT_EQ(kahan.sum, 2);
  EXPECT_EQ(kahan.count, 4);
  EXPECT_EQ(kahan.positive_buckets, (std::vector<double>{2}));
}

TEST(FloatHistogramTest, KahanAddCarriesCompensationThroughSchemaAndZeroBucketChanges) {
  FloatHistogram sum = ParseTestHistogram("schema:1 count:2 sum:1e100 offset:1 buckets:[1e100 1]");
  FloatHistogram comp;
  // Lower schema: the receiver's buckets 1 and 2 merge into schema-0
  // bucket 1 with a Kahan step, and the 1 survives in the compensation.
  ASSERT_TRUE(sum.KahanAdd(ParseTestHistogram("schema:0 count:1 sum:1 offset:1 buckets:[1]"), &comp).ok());
  EXPECT_EQ(sum.schema, 0);
  EXPECT_EQ(comp.schema, 0);
  EXPECT_EQ(sum.positive_buckets, (std::vector<double>{1e100}));
  EXPECT_EQ(comp.positive_buckets, (std::vector<double>{2}));
  // A wider zero bucket swallows bucket (1,2], its compensation included.
  ASSERT_TRUE(sum.KahanAdd(ParseTestHistogram("count:1 sum:1 z_bucket:1 z_bucket_w:2"), &comp).ok());
  EXPECT_EQ(sum.zero_threshold, 2);
  EXPECT_EQ(comp.zero_threshold, 2);
  EXPECT_TRUE(sum.positive_buckets.empty());
  EXPECT_TRUE(comp.positive_buckets.empty());
  EXPECT_EQ(comp.zero_count, 3);
  ASSERT_TRUE(sum.KahanAdd(ParseTestHistogram("count:1 sum:-1e100 z_bucket:-1e100 z_bucket_w:2"), &comp).ok());
  ASSERT_TRUE(sum.Add(comp).ok());
  EXPECT_EQ(sum.zero_count, 3);
  EXPECT_EQ(sum.sum, 2);
  EXPECT_EQ(sum.count, 5);
}

TEST(FloatHistogramTest, KahanAddWithMismatchedCustomBoundsReconciles) {
  FloatHistogram sum = ParseTestHistogram("schema:-53 count:3 sum:3 custom_values:[1 2 3] buckets:[1 1 1]");
  FloatHistogram comp;
  auto r = sum.KahanAdd(ParseTestHistogram("schema:-53 count:2 sum:2 custom_values:[2 4] buckets:[1 1]"), &comp);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->nhcb_bounds_reconciled);
  EXPECT_EQ(sum.custom_values, (std::vector<double>{2}));
  EXPECT_EQ(comp.custom_values, sum.custom_values);
  ASSERT_TRUE(sum.Add(comp).ok());
  EXPECT_EQ(sum.TestExpression(), "{{schema:-53 count:5 sum:5 custom_values:[2] buckets:[3 2]}}");
}

TEST(FloatHistogramTest, AddReportsCounterResetCollisions) {
  FloatHistogram a = ParseTestHistogram("count:1 sum:1 counter_reset_hint:reset");
  auto r = a.Add(ParseTestHistogram("count:1 sum:1 counter_reset_hint:not_reset"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->counter_reset_collision);
  EXPECT_EQ(a.counter_reset_hint, CounterResetHint::kUnknown);
  a.counter_reset_hint = CounterResetHint::kNotCounterReset;
  r = a.Add(ParseTestHistogram("count:1 sum:1 counter_reset_hint:gauge"));
  EXPECT_FALSE(r->counter_reset_collision);
  EXPECT_EQ(a.counter_reset_hint, CounterResetHint::kGauge);
  a.counter_reset_hint = CounterResetHint::kCounterReset;
  r = a.Add(ParseTestHistogram("count:1 sum:1"));
  EXPECT_FALSE(r->counter_reset_collision);
  EXPECT_EQ(a.counter_reset_hint, CounterResetHint::kUnknown);
}

struct TrimCase {
  int line;  // in native_histograms.test
  const char* in;
  bool upper;  // </ (else >/)
  double rhs;
  const char* want;
};

// Every trim of a histogram loaded on its own in the PromQL corpus
// (/work/shared/conformance/promql/native_histograms.test).
const TrimCase kTrimCases[] = {
    {2043, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, -kInf, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]"},
    {2046, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, kInf, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]"},
    {2049, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, kInf, "schema:0 z_bucket_w:0.001"},
    {2052, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, -kInf, "schema:0 z_bucket_w:0.001"},
    {2055, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, 0, "schema:0 sum:120.20840280171308 count:30.5 z_bucket:0.5 z_bucket_w:0.001 buckets:[2 4 8 16]"},
    {2058, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, 0, "schema:0 sum:-3.53578390593273768 count:3.5 z_bucket:0.5 z_bucket_w:0.001 n_buckets:[1 2]"},
    {2063, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, 1.4142135624, "count:8 sum:0.2570938865989847 z_bucket:1 z_bucket_w:0.001 buckets:[2 2] n_buckets:[1 2]"},
    {2066, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, 1.4142135624, "count:26 sum:116.50067065070982 z_bucket_w:0.001 buckets:[0 2 8 16]"},
    {2073, "schema:2 sum:12.8286080906 count:28 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]", true, 1.13, "schema:2 count:13.410582181123704 sum:-9.385798726068233 z_bucket:1 z_bucket_w:0.001 buckets:[1 1.410582181123704] n_buckets:[1 5 3 1]"},
    {2076, "schema:2 sum:12.8286080906 count:28 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]", false, 1.13, "schema:2 count:14.589417818876296 sum:22.168126492693734 z_bucket_w:0.001 offset:1 buckets:[0.589417818876296 4 7 3]"},
    {2079, "schema:2 sum:12.8286080906 count:28 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]", false, -1.3, "schema:2 count:25.54213947904476 sum:16.29588491217537 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 1.54213947904476]"},
    {2082, "schema:2 sum:12.8286080906 count:28 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]", true, -1.3, "schema:2 count:2.45786052095524 sum:-3.5189307983595066 z_bucket_w:0.001 n_offset:2 n_buckets:[1.45786052095524 1]"},
    {2086, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, 2, "count:10 sum:3.5355339059327373 z_bucket:1 z_bucket_w:0.001 buckets:[2 4] n_buckets:[1 2]"},
    {2089, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, 2, "count:24 sum:113.13708498984761 z_bucket_w:0.001 offset:2 buckets:[8 16]"},
    {2092, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", false, -1, "count:32 sum:119.50104602052653 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1]"},
    {2095, "schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]", true, -1, "count:2 sum:-2.8284271247461903 z_bucket_w:0.001 n_offset:1 n_buckets:[2]"},
    {2103, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", false, 0.5, "schema:0 count:10 sum:7.0710678118654755 z_bucket:0 z_bucket_w:0.5 buckets:[10]"},
    {2106, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", false, 0.1, "schema:0 count:11.6 sum:7.551067811865476 z_bucket:1.6 z_bucket_w:0.5 buckets:[10]"},
    {2109, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", false, 0, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]"},
    {2112, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", true, 0.5, "schema:0 count:2 sum:0.5 z_bucket:2 z_bucket_w:0.5"},
    {2115, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", true, 0.1, "schema:0 count:0.4 sum:0.02 z_bucket:0.4 z_bucket_w:0.5"},
    {2118, "schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]", true, 0, "schema:0 z_bucket_w:0.5"},
    {2126, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", true, -0.5, "schema:0 count:10 sum:-7.0710678118654755 z_bucket:0 z_bucket_w:0.5 n_buckets:[10]"},
    {2129, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", true, -0.1, "schema:0 count:11.6 sum:-7.551067811865476 z_bucket:1.6 z_bucket_w:0.5 n_buckets:[10]"},
    {2132, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", true, 0, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]"},
    {2135, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", false, -0.5, "schema:0 count:2 sum:-0.5 z_bucket:2 z_bucket_w:0.5"},
    {2138, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", false, -0.1, "schema:0 count:0.4 sum:-0.02 z_bucket:0.4 z_bucket_w:0.5"},
    {2141, "schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]", false, 0, "schema:0 z_bucket_w:0.5"},
    {2149, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", false, 0.1, "schema:0 count:0 sum:0 z_bucket:0 z_bucket_w:0.1"},
    {2152, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", true, 0.1, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1"},
    {2155, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", false, 0.05, "schema:0 count:1.25 sum:0.09375 z_bucket:1.25 z_bucket_w:0.1"},
    {2158, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", true, 0.05, "schema:0 count:3.75 sum:-0.09375 z_bucket:3.75 z_bucket_w:0.1"},
    {2161, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", false, 0, "schema:0 count:2.5 sum:0.125 z_bucket:2.5 z_bucket_w:0.1"},
    {2164, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", true, 0, "schema:0 count:2.5 sum:-0.125 z_bucket:2.5 z_bucket_w:0.1"},
    {2167, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", false, -0.05, "schema:0 count:3.75 sum:0.09375 z_bucket:3.75 z_bucket_w:0.1"},
    {2170, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", true, -0.05, "schema:0 count:1.25 sum:-0.09375 z_bucket:1.25 z_bucket_w:0.1"},
    {2173, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", true, -0.1, "schema:0 count:0 sum:0 z_bucket:0 z_bucket_w:0.1"},
    {2176, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1", false, -0.1, "schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1"},
    {2184, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, 15, "schema:-53 count:11 sum:97.5 custom_values:[5 10 15 20] buckets:[1 6 4]"},
    {2187, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", false, 15, "schema:-53 count:4 sum:72.5 custom_values:[5 10 15 20] offset:3 buckets:[3 1]"},
    {2191, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, 13, "schema:-53 count:9.4 sum:75.1 custom_values:[5 10 15 20] buckets:[1 6 2.4]"},
    {2194, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", false, 13, "schema:-53 count:5.6 sum:94.9 custom_values:[5 10 15 20] offset:2 buckets:[1.6 3 1]"},
    {2197, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, 7.5, "schema:-53 count:4 sum:21.25 custom_values:[5 10 15 20] buckets:[1 3]"},
    {2201, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, 50, "schema:-53 count:14 sum:150.0 custom_values:[5 10 15 20] buckets:[1 6 4 3]"},
    {2204, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, -kInf, "schema:-53 custom_values:[5 10 15 20]"},
    {2207, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", false, kInf, "schema:-53 custom_values:[5 10 15 20]"},
    {2210, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, kInf, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]"},
    {2213, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", false, -kInf, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]"},
    {2217, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", false, 0, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]"},
    {2220, "schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]", true, 0, "schema:-53 custom_values:[5 10 15 20]"},
    {2228, "schema:-53 sum:172.5 count:15 custom_values:[-10 5 10 15 20] buckets:[2 1 6 4 3 1]", true, 2, "schema:-53 count:2.8 sum:-23.2 custom_values:[-10 5 10 15 20] buckets:[2 0.8]"},
    {2231, "schema:-53 sum:172.5 count:15 custom_values:[-10 5 10 15 20] buckets:[2 1 6 4 3 1]", true, -4, "schema:-53 count:2.4 sum:-22.8 custom_values:[-10 5 10 15 20] buckets:[2 0.4]"},
    {2234, "schema:-53 sum:172.5 count:15 custom_values:[-10 5 10 15 20] buckets:[2 1 6 4 3 1]", true, -15, "schema:-53 count:2 sum:-30 custom_values:[-10 5 10 15 20] buckets:[2]"},
    {2242, "schema:0 sum:-6.75 z_bucket:5 z_bucket_w:0.01 buckets:[2 3] n_buckets:[1 2 3]", true, -0.005, "count:7.25 sum:-12.03019028017131 z_bucket:1.25 z_bucket_w:0.01 n_buckets:[1 2 3]"},
    {2245, "schema:0 sum:-6.75 z_bucket:5 z_bucket_w:0.01 buckets:[2 3] n_buckets:[1 2 3]", false, 0, "count:7.5 sum:5.669354249492381 z_bucket:2.5 z_bucket_w:0.01 buckets:[2 3]"},
    {2253, "schema:-53 sum:100.0 count:100 buckets:[100]", true, 10.0, "schema:-53 sum:0.0 count:0 buckets:[0]"},
    {2257, "schema:-53 sum:100.0 count:100 buckets:[100]", false, 10.0, "schema:-53 sum:0.0 count:0 buckets:[0]"},
    {2261, "schema:-53 sum:100.0 count:100 buckets:[100]", true, kInf, "schema:-53 sum:100 count:100 buckets:[100]"},
    {2265, "schema:-53 sum:100.0 count:100 buckets:[100]", false, kInf, "schema:-53 sum:0 count:0 buckets:[0]"},
    {2269, "schema:-53 sum:100.0 count:100 buckets:[100]", false, -kInf, "schema:-53 sum:100 count:100 buckets:[100]"},
    {2273, "schema:-53 sum:100.0 count:100 buckets:[100]", true, -kInf, "schema:-53 sum:0 count:0 buckets:[0]"},
    {2281, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", true, 10.0, "schema:-53 sum:0.0 count:1 custom_values:[0] buckets:[1 0]"},
    {2285, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", true, 0.0, "schema:-53 sum:0.0 count:1 custom_values:[0] buckets:[1 0]"},
    {2289, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", true, -10.0, "schema:-53 sum:-10.0 count:1 custom_values:[0] buckets:[1 0]"},
    {2293, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", false, -10.0, "schema:-53 sum:0.0 count:100 custom_values:[0] buckets:[0 100]"},
    {2297, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", false, 0.0, "schema:-53 sum:0.0 count:100 custom_values:[0] buckets:[0 100]"},
    {2301, "schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]", false, 10.0, "schema:-53 sum:1000.0 count:100 custom_values:[0] buckets:[0 100]"},
    {2309, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", true, 10.0, "schema:-53 sum:2.5 count:1 custom_values:[5] buckets:[1 0]"},
    {2313, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", true, 2.0, "schema:-53 sum:0.4 count:0.4 custom_values:[5] buckets:[0.4 0]"},
    {2317, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", true, 0.0, "schema:-53 custom_values:[5]"},
    {2321, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", true, -10.0, "schema:-53 sum:0.0 count:0 custom_values:[5] buckets:[0 0]"},
    {2325, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", false, -10.0, "schema:-53 sum:500.0 count:100 custom_values:[5] buckets:[0 100]"},
    {2329, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", false, 0.0, "schema:-53 sum:33.0 count:101 custom_values:[5] buckets:[1 100]"},
    {2333, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", false, 2.0, "schema:-53 sum:502.1 count:100.6 custom_values:[5] buckets:[0.6 100]"},
    {2337, "schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]", false, 10.0, "schema:-53 sum:1000.0 count:100 custom_values:[5] buckets:[0 100]"},
    {2345, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", true, 10.0, "schema:-53 sum:-5.0 count:1 custom_values:[-5] buckets:[1 0]"},
    {2349, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", true, 0.0, "schema:-53 sum:-5 count:1 custom_values:[-5] buckets:[1 0]"},
    {2353, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", true, -2.0, "schema:-53 sum:-5.0 count:1 custom_values:[-5] buckets:[1 0]"},
    {2357, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", true, -10.0, "schema:-53 sum:-10.0 count:1 custom_values:[-5] buckets:[1 0]"},
    {2361, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", false, -10.0, "schema:-53 sum:-500 count:100 custom_values:[-5] buckets:[0 100]"},
    {2365, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", false, -2.0, "schema:-53 sum:-200 count:100 custom_values:[-5] buckets:[0 100]"},
    {2369, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", false, 0.0, "schema:-53 sum:0.0 count:100 custom_values:[-5] buckets:[0 100]"},
    {2373, "schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]", false, 10.0, "schema:-53 sum:1000.0 count:100 custom_values:[-5] buckets:[0 100]"},
};

TEST(FloatHistogramTest, TrimBucketsMatchesPrometheusCorpus) {
  for (const TrimCase& c : kTrimCases) {
    SCOPED_TRACE("native_histograms.test:" + std::to_string(c.line) + (c.upper ? " </ " : " >/ ") +
                 std::to_string(c.rhs));
    FloatHistogram in = ParseTestHistogram(c.in);
    FloatHistogram got = in.TrimBuckets(c.rhs, c.upper);
    EXPECT_TRUE(MatchesLikePromqlTest(ParseTestHistogram(c.want), got));
    EXPECT_TRUE(in.Equals(ParseTestHistogram(c.in)));  // the receiver is untouched
  }
}

TEST(FloatHistogramTest, TrimBucketsLeavesTotalsAloneWhenNothingIsCut) {
  FloatHistogram h = ParseTestHistogram("count:30 sum:100 buckets:[5 5 10 10]");
  FloatHistogram same = h.TrimBuckets(8, true);
  EXPECT_EQ(same.sum, 100);
  FloatHistogram cut = h.TrimBuckets(4, true);
  // (4,8] is cut; the sum is re-estimated from the geometric midpoints of
  // the buckets kept, in bucket order.
  double want_sum = 0;
  want_sum += std::sqrt(0.5 * 1) * 5;
  want_sum += std::sqrt(1.0 * 2) * 5;
  want_sum += std::sqrt(2.0 * 4) * 10;
  EXPECT_EQ(cut.sum, want_sum);
  EXPECT_EQ(cut.count, 20);
  EXPECT_EQ(cut.positive_buckets, (std::vector<double>{5, 5, 10}));
  EXPECT_EQ(h.positive_buckets.size(), 4u);
}

}  // namespace
}  // namespace trainwatch::model
