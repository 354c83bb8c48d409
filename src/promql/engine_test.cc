#include "promql/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <map>
#include <thread>
#include <vector>

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

TEST_F(EngineTest, WarningsNameTheirPositionByLineAndColumn) {
  auto r = engine_.Range(db_, "sum(\n  sort(node_cpu_seconds_total))", 0, 60'000, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->warnings, std::vector<std::string>{"PromQL warning: sort is ineffective for range queries since "
                                                  "results are always ordered by labels (2:3)"});
  // An instant query keeps its sort order: no warning.
  auto i = engine_.Instant(db_, "sort(node_cpu_seconds_total)", 60'000);
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_TRUE(i->warnings.empty());
}

// Aggregations over range functions stream series into the accumulators;
// `* 1` forces the general (materializing) path. Both must agree bit for bit.
TEST_F(EngineTest, StreamedAggregationMatchesGeneralPath) {
  for (int i = 0; i < 12; ++i) {
    model::Labels l{{"__name__", i % 2 ? "m_a" : "m_b"}, {"job", i % 3 ? "x" : "y"}, {"i", std::to_string(i)}};
    double v = 1000.0 * i;
    for (int64_t t = 7'000 * i; t <= 1800'000; t += 15'000) {
      v += (t / 15'000) % 5 + 0.1 * i;
      if ((t / 15'000) % 37 == 36 && i % 4 == 1) v = 3;  // counter reset
      double x = v;
      if (i == 5 && t > 600'000 && t < 700'000) x = NAN;
      if (i == 7 && t > 900'000 && t < 1000'000) continue;  // gap
      if (i == 9 && t > 1200'000 && t < 1300'000) x = model::StaleNaN();
      db_.Add(l, t, x);
    }
  }
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  // topk and its kin stream too: the values include ties (count_over_time)
  // and NaN, so the order among equals is checked as well.
  for (const char* op : {"sum", "avg", "count", "min", "max", "stddev", "stdvar", "group", "topk", "bottomk",
                         "limitk", "limit_ratio"}) {
    std::string_view o(op);
    const char* param = o == "topk" ? "3, " : o == "bottomk" ? "2, " : o == "limitk" ? "4, "
                        : o == "limit_ratio" ? "0.4, " : "";
    for (const char* grp : {"", " by (job)", " without (i)", " by (__name__)", " by (__name__, job)"}) {
      for (const char* fn : {"rate", "increase", "avg_over_time", "count_over_time", "stddev_over_time",
                             "max_over_time", "quantile_over_time(0.3,", "last_over_time"}) {
        std::string call = std::string(fn).back() == ',' ? std::string(fn) + " {__name__=~\"m_.\"}[5m])"
                                                        : std::string(fn) + "({__name__=~\"m_.\"}[5m])";
        std::string fused = std::string(op) + grp + " (" + param + call + ")";
        // topk and kin output their input's labels, which limit_ratio also
        // hashes: a label_replace that changes nothing keeps them.
        std::string general = *param == '\0' ? std::string(op) + grp + " (" + call + " * 1)"
                                              : std::string(op) + grp + " (" + param + "label_replace(" + call +
                                                    ", \"none\", \"\", \"none\", \"\"))";
        if (std::string_view(fn) == "last_over_time" && *param == '\0' &&
            std::string_view(grp).find("__name__") != std::string_view::npos) {
          continue;  // `* 1` drops the name that last_over_time keeps
        }
        SCOPED_TRACE(fused);
        auto a = engine_.Range(db_, fused, 0, 1800'000, 30'000);
        auto b = engine_.Range(db_, general, 0, 1800'000, 30'000);
        ASSERT_EQ(a.ok(), b.ok()) << a.status().ToString() << " / " << b.status().ToString();
        if (!a.ok()) continue;
        ASSERT_EQ(a->matrix.size(), b->matrix.size());
        for (size_t s = 0; s < a->matrix.size(); ++s) {
          ASSERT_EQ(a->matrix[s].labels, b->matrix[s].labels);
          ASSERT_EQ(a->matrix[s].points.size(), b->matrix[s].points.size());
          for (size_t k = 0; k < a->matrix[s].points.size(); ++k) {
            EXPECT_EQ(a->matrix[s].points[k].t, b->matrix[s].points[k].t);
            EXPECT_PRED2(same, a->matrix[s].points[k].v, b->matrix[s].points[k].v);
          }
        }
        auto ia = engine_.Instant(db_, fused, 1234'000);
        auto ib = engine_.Instant(db_, general, 1234'000);
        ASSERT_EQ(ia.ok(), ib.ok());
        if (!ia.ok()) continue;
        ASSERT_EQ(ia->vector.size(), ib->vector.size());
        for (size_t s = 0; s < ia->vector.size(); ++s) {
          EXPECT_EQ(ia->vector[s].labels, ib->vector[s].labels);
          EXPECT_PRED2(same, ia->vector[s].v, ib->vector[s].v);
        }
      }
    }
  }
}

TEST_F(EngineTest, InfosForNonCounterRatesAndNonMonotonicBuckets) {
  model::Labels g{{"__name__", "temperature"}};
  for (int64_t t = 0; t <= 600'000; t += 15'000) db_.Add(g, t, 20 + static_cast<double>(t % 7));
  for (const char* le : {"0.1", "1", "+Inf"}) {
    model::Labels b{{"__name__", "lat_bucket"}, {"le", le}};
    // The le="1" bucket counts fewer than le="0.1": not monotonic.
    double v = std::string_view(le) == "1" ? 3 : std::string_view(le) == "0.1" ? 5 : 9;
    db_.Add(b, 600'000, v);
  }
  auto r = engine_.Instant(db_, "sum(rate(temperature[5m])) + sum(increase(node_cpu_seconds_total[5m]))", 600'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(r->infos, std::vector<std::string>{"PromQL info: metric might not be a counter, name does not end in "
                                               "_total/_sum/_count/_bucket: \"temperature\" (1:10)"});
  // Subqueries too, once per position; irate and delta do not ask.
  r = engine_.Range(db_, "rate(temperature[5m:1m]) or irate(temperature[5m]) or delta(temperature[5m])", 300'000,
                    600'000, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->infos, std::vector<std::string>{"PromQL info: metric might not be a counter, name does not end in "
                                               "_total/_sum/_count/_bucket: \"temperature\" (1:6)"});
  r = engine_.Instant(db_, "histogram_quantile(0.5, lat_bucket)", 600'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->infos, std::vector<std::string>{
                          "PromQL info: input to histogram_quantile needed to be fixed for monotonicity (see "
                          "https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile) for "
                          "metric name \"lat_bucket\" (1:25)"});
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

// A storage whose queriers wait until Release(): holds a query inside the
// engine (and its concurrency slot) for as long as a test needs.
class BlockingStorage : public storage::Queryable {
 public:
  explicit BlockingStorage(promqltest::TestStorage* db) : db_(db) {}
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.wait(lock, [&] { return released_; });
    --waiting_;
    return db_->NewQuerier(mint, maxt);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  promqltest::TestStorage* db_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int waiting_ = 0;
};

TEST_F(EngineTest, MaxSamplesDefaultsLikePrometheus) {
  EXPECT_EQ(EngineOptions{}.max_samples, 50'000'000);
  EXPECT_EQ(EngineOptions{}.timeout_ms, 120'000);
  EXPECT_EQ(EngineOptions{}.max_concurrent, 20);
  EngineOptions o;
  o.max_samples = 200;
  Engine small(o);
  // 241 samples of one series in the window: over the limit for a range function...
  auto r = small.Instant(db_, "count_over_time(node_cpu_seconds_total[1h])", 3600'000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // ...and for a subquery whose inner steps pile up; a smaller one passes.
  r = small.Instant(db_, "max_over_time(sum(node_cpu_seconds_total)[1h:1s])", 3600'000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  r = small.Instant(db_, "max_over_time(sum(node_cpu_seconds_total)[10m:1m])", 3600'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  r = small.Instant(db_, "count_over_time(node_cpu_seconds_total[10m])", 3600'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vector.size(), 4u);
  EXPECT_EQ(r->vector[0].v, 40);
}

TEST_F(EngineTest, TimeoutWhileWaitingForSlotAndInEvaluation) {
  EngineOptions o;
  o.max_concurrent = 1;
  Engine engine(o);
  BlockingStorage blocking(&db_);
  // A holds the only slot, blocked inside storage; its own 50 ms timeout will
  // have passed by the time storage lets it go.
  std::optional<Result<QueryResult>> a;
  std::thread ta([&] { a = engine.Instant(blocking, "sum(node_cpu_seconds_total)", 3600'000, 50); });
  while (blocking.waiting() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine.running(), 1);
  // B cannot get a slot before its timeout: it fails without running.
  auto b = engine.Instant(db_, "sum(node_cpu_seconds_total)", 3600'000, 50);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(b.status().message(), "query timed out in query queue");
  // C waits (with a generous timeout) and runs once A is done.
  std::optional<Result<QueryResult>> c;
  std::thread tc([&] { c = engine.Instant(db_, "sum(node_cpu_seconds_total)", 3600'000, 600'000); });
  blocking.Release();
  ta.join();
  tc.join();
  ASSERT_FALSE(a->ok());
  EXPECT_EQ(a->status().code(), StatusCode::kCancelled);
  EXPECT_EQ(a->status().message(), "query timed out in expression evaluation");
  ASSERT_TRUE(c->ok()) << c->status().ToString();
  ASSERT_EQ((*c)->vector.size(), 1u);
  EXPECT_EQ((*c)->vector[0].v, 4 * 3600.0);
  EXPECT_EQ(engine.running(), 0);
}

TEST_F(EngineTest, ConcurrentQueriesUpToTheLimitAllRun) {
  EngineOptions o;
  o.max_concurrent = 2;
  Engine engine(o);
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      auto r = engine.Range(db_, "sum(rate(node_cpu_seconds_total[5m]))", 600'000, 3600'000, 60'000, 600'000);
      if (r.ok() && r->matrix.size() == 1 && r->matrix[0].points.size() == 51) ok++;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(engine.running(), 0);
}

TEST_F(EngineTest, ResolutionAndNestingLimits) {
  // 11,000 points per series like Prometheus's API; 11,000 steps (10,999 intervals) pass.
  auto r = engine_.Range(db_, "vector(1)", 0, 11'000'000, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("exceeded maximum resolution of 11,000 points per timeseries"),
            std::string::npos);
  r = engine_.Range(db_, "vector(1)", 0, 10'999'000, 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->matrix[0].points.size(), 11'000u);
  // Deep nesting and long operator chains are parse errors, never a crash.
  std::string deep(100'000, '(');
  deep += "1" + std::string(100'000, ')');
  r = engine_.Instant(db_, deep, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nesting depth"), std::string::npos);
  std::string chain = "1";
  for (int i = 0; i < 100'000; ++i) chain += "+1";
  r = engine_.Instant(db_, chain, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nesting depth"), std::string::npos);
  std::string calls;
  for (int i = 0; i < 50'000; ++i) calls += "abs(";
  calls += "node_cpu_seconds_total" + std::string(50'000, ')');
  r = engine_.Instant(db_, calls, 0);
  ASSERT_FALSE(r.ok());
  // Moderate nesting still works.
  std::string ok_chain = "1";
  for (int i = 0; i < 200; ++i) ok_chain += "+1";
  r = engine_.Instant(db_, ok_chain, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scalar.v, 201);
  // A huge range is bounded by the sample limit, not memory.
  EngineOptions o;
  o.max_samples = 100'000;
  Engine small(o);
  r = small.Instant(db_, "count_over_time(vector(1)[10y:1s])", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(EngineTest, FillModifiersAndDurationExpressions) {
  promqltest::TestStorage db;
  db.Add({{"__name__", "l"}, {"k", "a"}}, 0, 1);
  db.Add({{"__name__", "l"}, {"k", "b"}}, 0, 2);
  db.Add({{"__name__", "r"}, {"k", "a"}}, 0, 10);
  db.Add({{"__name__", "r"}, {"k", "c"}}, 0, 30);
  auto r = engine_.Instant(db, "l + fill(100) r", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, double> got;
  for (const auto& s : r->vector) got[s.labels.ToString()] = s.v;
  EXPECT_EQ(got, (std::map<std::string, double>{{"{k=\"a\"}", 11}, {"{k=\"b\"}", 102}, {"{k=\"c\"}", 130}}));
  r = engine_.Instant(db, "l - fill_right(5) r", 0);
  ASSERT_TRUE(r.ok());
  got.clear();
  for (const auto& s : r->vector) got[s.labels.ToString()] = s.v;
  EXPECT_EQ(got, (std::map<std::string, double>{{"{k=\"a\"}", -9}, {"{k=\"b\"}", -3}}));
  // step() and range() resolve per query.
  for (int64_t t = 0; t <= 100'000; t += 1000) db.Add({{"__name__", "c"}}, t, static_cast<double>(t) / 1000);
  r = engine_.Range(db, "count_over_time(c[step() * 2])", 50'000, 60'000, 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->matrix.size(), 1u);
  for (const auto& p : r->matrix[0].points) EXPECT_EQ(p.v, 10);
  r = engine_.Range(db, "c offset range()", 50'000, 60'000, 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->matrix[0].points[0].v, 40);
  // An instant query has step() = 0: a zero range is rejected with a clear error.
  r = engine_.Instant(db, "count_over_time(c[step()])", 50'000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duration must be greater than 0"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::promql
