// Range functions' shortcuts (functions_range.cc) against the plain
// per-window computation: window sums of integer series from prefix sums, and
// the extrapolation factor a window shares with the one before. Both must give
// the same bits as computing each window afresh.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "promql/engine.h"
#include "promql/functions_internal.h"
#include "promql/promqltest/test_storage.h"

namespace trainwatch::promql {
namespace {

constexpr int64_t kStep = 60'000;
constexpr int64_t kRange = 5 * 60'000;

// Each window (t - range, t] of `smp` computed alone by the function's own
// per-window code, with no memo: the reference the engine's result must match.
std::vector<Point> Reference(const char* fn, const std::vector<model::Sample>& smp, int64_t start, int64_t end,
                             int64_t step = kStep, int64_t range = kRange) {
  const RangeFnDef* def = LookupRangeFn(fn);
  EXPECT_NE(def, nullptr);
  std::vector<Point> out;
  for (int64_t t = start; t <= end; t += step) {
    std::vector<model::Sample> w;
    for (const auto& s : smp) {
      if (s.t > t - range && s.t <= t) w.push_back(s);
    }
    if (w.empty()) continue;
    RangeCtx ctx;
    ctx.t = t;
    ctx.range_start = t - range;
    ctx.range_end = t;
    ctx.range_sec = static_cast<double>(range) / 1000.0;
    double v;
    if (def->fn(w, ctx, &v)) out.push_back({t, v});
  }
  return out;
}

void ExpectSameBits(const std::vector<Point>& got, const std::vector<Point>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].t, want[i].t) << what << " point " << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(got[i].v), std::bit_cast<uint64_t>(want[i].v))
        << what << " at " << got[i].t << ": " << got[i].v << " against " << want[i].v;
  }
}

struct Case {
  std::string name;
  std::vector<model::Sample> samples;
};

// Series the range query below reads, each with its samples.
std::vector<Case> Series(std::mt19937_64& rng) {
  std::vector<Case> out;
  auto add = [&](std::string name, auto value, int64_t interval, int64_t jitter) {
    Case c{std::move(name), {}};
    std::uniform_int_distribution<int64_t> j(0, jitter);
    for (int64_t t = 1'000; t < 3'600'000; t += interval) c.samples.push_back({t + j(rng), value(c.samples.size())});
    out.push_back(std::move(c));
  };
  std::uniform_int_distribution<int> pct(0, 100);
  std::uniform_int_distribution<int64_t> big(-(int64_t{1} << 45), int64_t{1} << 45);
  add("util", [&](size_t) { return static_cast<double>(pct(rng)); }, 15'000, 0);
  add("util_jittered", [&](size_t) { return static_cast<double>(pct(rng)); }, 15'000, 40);
  add("signed_big", [&](size_t) { return static_cast<double>(big(rng)); }, 10'000, 5);
  add("zeros", [&](size_t i) { return i % 2 ? -0.0 : 0.0; }, 15'000, 0);
  // Integers whose magnitudes add up past 2^53: the plain sums round.
  add("too_big", [&](size_t i) { return (i % 2 ? 1.0 : -1.0) * 0x1p52 + static_cast<double>(i); }, 15'000, 0);
  add("fractional", [&](size_t) { return static_cast<double>(pct(rng)) / 3.0; }, 15'000, 0);
  add("one_nan", [&](size_t i) { return i == 50 ? NAN : static_cast<double>(pct(rng)); }, 15'000, 0);
  // Counters: steady, jittered, with resets, one that starts from near zero
  // (its zero point shortens the extrapolation), sparse.
  double c1 = 1e6, c2 = 0, c3 = 5, c4 = 0.5;
  add("counter", [&](size_t) { return c1 += pct(rng); }, 15'000, 0);
  add("counter_jittered", [&](size_t) { return c2 += pct(rng); }, 15'000, 2'000);
  add("counter_resets", [&](size_t i) { return i % 37 == 0 ? (c3 = 1) : (c3 += pct(rng)); }, 15'000, 0);
  add("counter_from_zero", [&](size_t i) { return i < 3 ? (c4 = 0.5 * static_cast<double>(i)) : (c4 += 1000); },
      15'000, 0);
  add("counter_sparse", [&](size_t i) { return static_cast<double>(i * i); }, 140'000, 9'000);
  return out;
}

// The engine's fn(series[range]) over an hour at kStep for every series of
// Series(seed), each against Reference: the same bits.
void ExpectAsEachWindowAlone(uint64_t seed, std::initializer_list<const char*> fns,
                             std::initializer_list<std::pair<int64_t, const char*>> ranges) {
  std::mt19937_64 rng(seed);
  promqltest::TestStorage db;
  const std::vector<Case> cases = Series(rng);
  for (const Case& c : cases) {
    for (const auto& s : c.samples) db.Add(model::Labels{{"__name__", c.name}}, s.t, s.v);
  }
  Engine engine{EngineOptions{}};
  const int64_t start = 0, end = 3'600'000;
  for (const auto& [range, range_str] : ranges) {
    for (const char* fn : fns) {
      for (const Case& c : cases) {
        const std::string q = std::string(fn) + "(" + c.name + "[" + range_str + "])";
        auto r = engine.Range(db, q, start, end, kStep);
        ASSERT_TRUE(r.ok()) << q << ": " << r.status().ToString();
        const std::vector<Point> want = Reference(fn, c.samples, start, end, kStep, range);
        if (want.empty()) {
          EXPECT_TRUE(r->matrix.empty()) << q;
          continue;
        }
        ASSERT_EQ(r->matrix.size(), 1u) << q;
        ExpectSameBits(r->matrix[0].points, want, q);
      }
    }
  }
}

TEST(RangeFunctionShortcuts, SameBitsAsEachWindowAlone) {
  ExpectAsEachWindowAlone(20261206, {"sum_over_time", "avg_over_time", "rate", "increase", "delta"},
                          {{kRange, "5m"}});
}

// A window that does not overlap the one before starts where that one
// ended (ForEachWindow): windows that abut (range = step, a Grafana panel's
// $__interval), that leave gaps, and that overlap, for the functions a tier
// answers (called inline) and the others.
TEST(RangeFunctionShortcuts, WindowsThatAbutLeaveGapsOrOverlapTakeTheirOwnSamples) {
  ExpectAsEachWindowAlone(20261207,
                          {"min_over_time", "max_over_time", "sum_over_time", "count_over_time", "avg_over_time",
                           "last_over_time", "stddev_over_time", "rate"},
                          {{60'000, "1m"}, {40'000, "40s"}, {150'000, "150s"}});
}

TEST(RangeFunctionShortcuts, IntegerSeriesWhosePrefixSumsWouldRoundAddUpSampleBySample) {
  // Prefix sums of {2^53, 1, 1} are {2^53, 2^53, 2^53 + 2} (2^53 + 1 rounds to
  // even): the middle sample alone would come out as 0. Of {2^53 - 1, 2, 2}
  // the middle one would come out as 1. Each sums to 1 and 2 sample by sample.
  promqltest::TestStorage db;
  const model::Labels a{{"__name__", "g"}, {"s", "a"}}, b{{"__name__", "g"}, {"s", "b"}};
  const double av[] = {0x1p53, 1, 1}, bv[] = {0x1p53 - 1, 2, 2};
  for (int i = 0; i < 3; ++i) {
    db.Add(a, (i + 1) * 15'000, av[i]);
    db.Add(b, (i + 1) * 15'000, bv[i]);
  }
  Engine engine{EngineOptions{}};
  for (const char* fn : {"sum_over_time", "avg_over_time"}) {
    // Windows of one sample each: 15 s, 30 s and 45 s.
    auto r = engine.Range(db, std::string(fn) + "(g[10s])", 15'000, 45'000, 15'000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->matrix.size(), 2u) << fn;
    ASSERT_EQ(r->matrix[0].points.size(), 3u) << fn;
    ASSERT_EQ(r->matrix[1].points.size(), 3u) << fn;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(r->matrix[0].points[i].v, av[i]) << fn << " " << i;
      EXPECT_EQ(r->matrix[1].points[i].v, bv[i]) << fn << " " << i;
    }
  }
}

}  // namespace
}  // namespace trainwatch::promql
