#include "promql/engine.h"

#include <gtest/gtest.h>

#include <cmath>

#include "promql/promqltest/test_storage.h"

namespace trainwatch::promql {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // node_cpu_seconds_total: counters increasing 1/s, scraped every 15s for 1h.
    for (const char* inst : {"a", "b"}) {
      for (const char* mode : {"idle", "user"}) {
        model::Labels l{{"__name__", "node_cpu_seconds_total"}, {"instance", inst}, {"mode", mode}};
        for (int64_t t = 0; t <= 3600'000; t += 15'000) db_.Add(l, t, static_cast<double>(t) / 1000.0);
      }
    }
  }
  promqltest::TestStorage db_;
  Engine engine_{EngineOptions{}};
};

TEST_F(EngineTest, RateSumBy) {
  auto r = engine_.Range(db_, "sum by (instance) (rate(node_cpu_seconds_total{mode!=\"idle\"}[5m]))", 600'000,
                         3600'000, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->type, ValueType::kMatrix);
  ASSERT_EQ(r->matrix.size(), 2u);
  EXPECT_EQ(r->matrix[0].labels, (model::Labels{{"instance", "a"}}));
  ASSERT_EQ(r->matrix[0].points.size(), 51u);
  for (const auto& p : r->matrix[0].points) EXPECT_NEAR(p.v, 1.0, 1e-9);
}

TEST_F(EngineTest, InstantLookbackAndStaleness) {
  model::Labels l{{"__name__", "g"}};
  db_.Add(l, 0, 1);
  db_.Add(l, 60'000, model::StaleNaN());
  auto r = engine_.Instant(db_, "g", 30'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 1);
  EXPECT_EQ(r->vector[0].t, 30'000);
  r = engine_.Instant(db_, "g", 90'000);  // stale marker ends the series
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->vector.empty());
  r = engine_.Instant(db_, "g offset -30s", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->vector.size(), 1u);
}

TEST_F(EngineTest, ScalarsStringsAndNameDropping) {
  auto r = engine_.Instant(db_, "1 + 2 * 3", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, ValueType::kScalar);
  EXPECT_EQ(r->scalar.v, 7);
  r = engine_.Instant(db_, "\"hi\"", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, ValueType::kString);
  EXPECT_EQ(r->str, "hi");
  r = engine_.Instant(db_, "node_cpu_seconds_total{instance=\"a\",mode=\"idle\"} * 2", 60'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_FALSE(r->vector[0].labels.Has("__name__"));
  EXPECT_EQ(r->vector[0].v, 120);
  r = engine_.Instant(db_, "last_over_time(node_cpu_seconds_total{instance=\"a\",mode=\"idle\"}[1m])", 60'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_TRUE(r->vector[0].labels.Has("__name__"));
}

TEST_F(EngineTest, BinaryMatchingAndTopk) {
  auto r = engine_.Instant(
      db_, "node_cpu_seconds_total{mode=\"user\"} / ignoring(mode) node_cpu_seconds_total{mode=\"idle\"}", 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vector.size(), 2u);
  r = engine_.Instant(db_, "node_cpu_seconds_total / on(instance) node_cpu_seconds_total", 60'000);
  ASSERT_FALSE(r.ok());
  r = engine_.Instant(db_, "topk(1, node_cpu_seconds_total)", 60'000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->vector.size(), 1u);
  r = engine_.Instant(db_, "count(node_cpu_seconds_total) by (mode)", 60'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->vector.size(), 2u);
  EXPECT_EQ(r->vector[0].v, 2);
}

TEST_F(EngineTest, MatrixAndSubquery) {
  auto r = engine_.Instant(db_, "node_cpu_seconds_total{instance=\"a\",mode=\"idle\"}[1m]", 60'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->type, ValueType::kMatrix);
  ASSERT_EQ(r->matrix.size(), 1u);
  EXPECT_EQ(r->matrix[0].points.size(), 4u);  // (0, 60s]: 15, 30, 45, 60
  r = engine_.Instant(db_, "max_over_time(node_cpu_seconds_total{instance=\"a\",mode=\"idle\"}[10m:1m])", 600'000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->vector.size(), 1u);
  EXPECT_EQ(r->vector[0].v, 600);
}

TEST_F(EngineTest, Limits) {
  EngineOptions o;
  o.max_samples = 10;
  Engine small(o);
  auto r = small.Range(db_, "node_cpu_seconds_total", 0, 3600'000, 60'000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "query processing would load too many samples into memory in query execution");
  r = engine_.Range(db_, "foo[5m]", 0, 10, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
}

}  // namespace
}  // namespace trainwatch::promql
