// Range functions over native histograms (functions_range_histogram.cc):
// values worked out by hand from Prometheus's rules, and the annotations.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "promql/engine.h"
#include "promql/promqltest/test_storage.h"

namespace trainwatch::promql {
namespace {

using model::CounterResetHint;
using model::FloatHistogram;

// A histogram with one positive bucket (index 0, (0.5, 1]) holding all of
// `count` observations, each of value 1.
std::shared_ptr<const FloatHistogram> Hist(double count,
                                           CounterResetHint hint = CounterResetHint::kUnknown) {
  auto h = std::make_shared<FloatHistogram>();
  h->counter_reset_hint = hint;
  h->count = count;
  h->sum = count;
  h->positive_spans = {{0, 1}};
  h->positive_buckets = {count};
  return h;
}

class RangeHistogramTest : public ::testing::Test {
 protected:
  const model::Labels kH{{"__name__", "req_duration_seconds"}};
  const model::Labels kMixed{{"__name__", "mixed"}};
  promqltest::TestStorage db_;
  Engine engine_{EngineOptions{}};
};

TEST_F(RangeHistogramTest, RateIncreaseAndResets) {
  // Counts 0, 15, 30, 5 (a reset), 20 every 15s.
  const double counts[] = {0, 15, 30, 5, 20};
  for (int i = 0; i < 5; ++i) db_.AddHistogram(kH, i * 15'000, Hist(counts[i]));
  // Window (0, 60s]: samples 15s..60s, increase 5 + 30 + 15 = 35 over 45s,
  // extrapolated 15s to the start (the count would reach 0 sooner:
  // 45s * 15/35 = 19.3s, so the 15s threshold wins): 35 * 60/45.
  auto r = engine_.Instant(db_, "increase(req_duration_seconds[1m])", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  const FloatHistogram& inc = *r->vector[0].h;
  EXPECT_NEAR(inc.count, 35.0 * 60 / 45, 1e-9);
  EXPECT_NEAR(inc.sum, 35.0 * 60 / 45, 1e-9);
  ASSERT_EQ(inc.positive_buckets.size(), 1u);
  EXPECT_NEAR(inc.positive_buckets[0], 35.0 * 60 / 45, 1e-9);
  EXPECT_EQ(inc.counter_reset_hint, CounterResetHint::kGauge);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_TRUE(r->infos.empty());  // histograms get no "might not be a counter" info

  r = engine_.Instant(db_, "rate(req_duration_seconds[1m])", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_NEAR(r->vector[0].h->count, 35.0 / 45, 1e-9);

  // irate: the last two samples, 5 -> 20 over 15s.
  r = engine_.Instant(db_, "irate(req_duration_seconds[1m])", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_NEAR(r->vector[0].h->count, 1.0, 1e-9);

  r = engine_.Instant(db_, "resets(req_duration_seconds[1m])", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].v, 1);

  r = engine_.Instant(db_, "changes(req_duration_seconds[1m])", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 3);

  // A range query gives histogram points at each step with two samples.
  auto m = engine_.Range(db_, "rate(req_duration_seconds[30s])", 30'000, 60'000, 15'000);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->matrix.size(), 1u);
  EXPECT_TRUE(m->matrix[0].points.empty());
  EXPECT_EQ(m->matrix[0].hpoints.size(), 3u);
}

TEST_F(RangeHistogramTest, IdeltaAndDeltaWarnOnCounters) {
  for (int i = 0; i < 3; ++i) db_.AddHistogram(kH, i * 15'000, Hist(10.0 * i));
  auto r = engine_.Instant(db_, "idelta(req_duration_seconds[1m])", 30'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].h->count, 10);
  EXPECT_EQ(r->warnings, std::vector<std::string>{
                             "PromQL warning: this native histogram metric is not a gauge: \"req_duration_seconds\" (1:8)"});
}

TEST_F(RangeHistogramTest, GaugeHistogramsInRateWarn) {
  for (int i = 0; i < 3; ++i) db_.AddHistogram(kH, i * 15'000, Hist(10.0 * i, CounterResetHint::kGauge));
  auto r = engine_.Instant(db_, "rate(req_duration_seconds[1m])", 30'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->warnings, std::vector<std::string>{
                             "PromQL warning: this native histogram metric is not a counter: \"req_duration_seconds\" (1:6)"});
  // delta of gauges: no warning.
  r = engine_.Instant(db_, "delta(req_duration_seconds[1m])", 30'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(RangeHistogramTest, OverTimeFunctions) {
  for (int i = 0; i < 4; ++i) db_.AddHistogram(kH, i * 15'000, Hist(2.0 * (i + 1)));  // 2 4 6 8
  auto r = engine_.Instant(db_, "sum_over_time(req_duration_seconds[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].h->count, 20);
  r = engine_.Instant(db_, "avg_over_time(req_duration_seconds[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].h->count, 5);
  r = engine_.Instant(db_, "last_over_time(req_duration_seconds[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].h->count, 8);
  EXPECT_EQ(r->vector[0].labels, kH);  // keeps the name
  r = engine_.Instant(db_, "first_over_time(req_duration_seconds[30s])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].h->count, 6);
  r = engine_.Instant(db_, "count_over_time(req_duration_seconds[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vector[0].v, 4);
  r = engine_.Instant(db_, "ts_of_last_over_time(req_duration_seconds[1m])", 50'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vector[0].v, 45);
  // Functions of floats alone: nothing, and no annotation.
  r = engine_.Instant(db_, "max_over_time(req_duration_seconds[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->vector.empty());
  EXPECT_TRUE(r->infos.empty());
}

TEST_F(RangeHistogramTest, FloatsAndHistogramsInOneWindow) {
  db_.Add(kMixed, 0, 1);
  db_.Add(kMixed, 15'000, 3);
  db_.AddHistogram(kMixed, 30'000, Hist(4));
  db_.AddHistogram(kMixed, 45'000, Hist(6));
  auto r = engine_.Instant(db_, "rate(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->vector.empty());
  EXPECT_EQ(r->warnings, std::vector<std::string>{
                             "PromQL warning: encountered a mix of histograms and floats for metric name \"mixed\" (1:6)"});
  r = engine_.Instant(db_, "max_over_time(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 3);
  EXPECT_EQ(r->infos, std::vector<std::string>{"PromQL info: ignored histograms in a range containing both floats "
                                               "and histograms for metric name \"mixed\" (1:15)"});
  // irate of the last two samples, both histograms: fine.
  r = engine_.Instant(db_, "irate(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_NEAR(r->vector[0].h->count, 2.0 / 15, 1e-12);
  // A float then a histogram: one change (and not a reset of values).
  r = engine_.Instant(db_, "changes(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vector[0].v, 3);
  // Windows of floats only still go the float way in a mixed series.
  r = engine_.Instant(db_, "rate(mixed[20s])", 15'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].h, nullptr);
  // last_over_time: the newest sample, whatever its kind.
  r = engine_.Instant(db_, "last_over_time(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->vector[0].h, nullptr);
  r = engine_.Instant(db_, "first_over_time(mixed[1m])", 45'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vector[0].h, nullptr);
  EXPECT_EQ(r->vector[0].v, 1);
}

TEST_F(RangeHistogramTest, AnchoredAndSmoothed) {
  for (int i = 0; i < 5; ++i) db_.AddHistogram(kH, i * 15'000, Hist(1.0 + i));  // 1..5 every 15s
  // Anchored at 50s: from the sample at 0s (count 1) to the one at 45s (4).
  auto r = engine_.Instant(db_, "increase(req_duration_seconds[1m] anchored)", 50'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_NEAR(r->vector[0].h->count, 3, 1e-12);
  // Smoothed: the end interpolated between 45s (4) and 60s (5) at 50s.
  r = engine_.Instant(db_, "increase(req_duration_seconds[1m] smoothed)", 50'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  ASSERT_NE(r->vector[0].h, nullptr);
  EXPECT_NEAR(r->vector[0].h->count, 10.0 / 3, 1e-12);
  r = engine_.Instant(db_, "resets(req_duration_seconds[1m] anchored)", 50'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 0);
}

TEST_F(RangeHistogramTest, SubqueryForgetsResetHints) {
  // The reset sample says so in its hint; a subquery repeating it must not
  // count the reset once per repetition.
  db_.AddHistogram(kH, 0, Hist(10));
  db_.AddHistogram(kH, 60'000, Hist(2, CounterResetHint::kCounterReset));
  db_.AddHistogram(kH, 120'000, Hist(4));
  auto r = engine_.Instant(db_, "resets(req_duration_seconds[3m:15s])", 120'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 1);
}

}  // namespace
}  // namespace trainwatch::promql
