#include "runs/downsample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

namespace trainwatch::runs {
namespace {

// TensorBoard's smoothing as written in vz_line_chart2/line-chart.ts, transcribed.
std::vector<double> TensorBoardReference(const std::vector<double>& ys, double w) {
  std::vector<double> out;
  double last = ys.empty() ? 0 : 0;
  int num_accum = 0;
  bool is_constant = true;
  for (double y : ys) is_constant = is_constant && y == ys[0];
  for (double y : ys) {
    if (is_constant || !std::isfinite(y)) {
      out.push_back(y);
    } else {
      last = last * w + (1 - w) * y;
      num_accum++;
      double debias = w == 1 ? 1 : 1 - std::pow(w, num_accum);
      out.push_back(last / debias);
    }
  }
  return out;
}

TEST(DownsampleTest, EmaMatchesTensorBoard) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 0.1);
  std::vector<XY> pts;
  std::vector<double> ys;
  for (int i = 0; i < 1000; i++) {
    double y = 2.0 * std::pow(1 + i / 50.0, -0.5) + noise(rng);
    if (i == 500) y = std::nan("");
    if (i == 700) y = HUGE_VAL;
    pts.push_back({i, y});
    ys.push_back(y);
  }
  for (double w : {0.0, 0.6, 0.9, 0.99}) {
    auto got = DebiasedEma(pts, w);
    auto want = TensorBoardReference(ys, w);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << i;
      else EXPECT_DOUBLE_EQ(got[i], want[i]) << "w=" << w << " i=" << i;
    }
  }
  // The first smoothed value is the first value (debiasing), not (1-w)*y.
  EXPECT_DOUBLE_EQ(DebiasedEma({{0, 4.0}, {1, 2.0}}, 0.9)[0], 4.0);
  // Hand-computed second value: (0.9*0.4 + 0.1*2) / (1 - 0.81).
  EXPECT_DOUBLE_EQ(DebiasedEma({{0, 4.0}, {1, 2.0}}, 0.9)[1], (0.9 * 0.4 + 0.1 * 2.0) / (1 - 0.81));
}

TEST(DownsampleTest, FewPointsAreKeptAsIs) {
  std::vector<XY> pts = {{1, 0.5}, {2, 0.25}, {10, 0.125}};
  auto b = Downsample(pts, 3, {});
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(b[i].x, pts[i].x);
    EXPECT_EQ(b[i].min, pts[i].y);
    EXPECT_EQ(b[i].max, pts[i].y);
    EXPECT_EQ(b[i].last, pts[i].y);
    EXPECT_EQ(b[i].count, 1);
  }
}

// Every bucket's min, max and last equal a brute-force pass over the points
// of its x range; no point is lost (counts add up); the budget is kept.
TEST(DownsampleTest, BucketsKeepMinMaxLastExactly) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; trial++) {
    std::vector<XY> pts;
    int64_t x = static_cast<int64_t>(rng() % 1000);
    int n = 1 + static_cast<int>(rng() % 5000);
    for (int i = 0; i < n; i++) {
      x += 1 + static_cast<int64_t>(rng() % 20);
      double y = std::uniform_real_distribution<double>(-1, 1)(rng);
      if (rng() % 1000 == 0) y = std::nan("");
      pts.push_back({x, y});
    }
    int64_t budget = 1 + static_cast<int64_t>(rng() % 300);
    std::vector<double> ema = DebiasedEma(pts, 0.9);
    auto buckets = Downsample(pts, budget, ema);
    ASSERT_LE(static_cast<int64_t>(buckets.size()), budget);
    size_t i = 0;
    for (size_t k = 0; k < buckets.size(); k++) {
      const Bucket& b = buckets[k];
      ASSERT_EQ(pts[i].x, b.x);
      int64_t next_x = k + 1 < buckets.size() ? buckets[k + 1].x : INT64_MAX;
      double mn = NAN, mx = NAN, last = 0, e = 0;
      int64_t count = 0, nans = 0;
      for (; i < pts.size() && pts[i].x < next_x; i++) {
        count++;
        if (std::isnan(pts[i].y)) nans++;
        else {
          if (std::isnan(mn) || pts[i].y < mn) mn = pts[i].y;
          if (std::isnan(mx) || pts[i].y > mx) mx = pts[i].y;
        }
        last = pts[i].y;
        e = ema[i];
      }
      EXPECT_EQ(b.count, count);
      EXPECT_EQ(b.nan, nans);
      if (std::isnan(mn)) EXPECT_TRUE(std::isnan(b.min));
      else EXPECT_EQ(b.min, mn);
      if (std::isnan(mx)) EXPECT_TRUE(std::isnan(b.max));
      else EXPECT_EQ(b.max, mx);
      if (std::isnan(last)) EXPECT_TRUE(std::isnan(b.last));
      else EXPECT_EQ(b.last, last);
      if (std::isnan(e)) EXPECT_TRUE(std::isnan(b.ema));
      else EXPECT_EQ(b.ema, e);
    }
    EXPECT_EQ(i, pts.size());
  }
}

TEST(DownsampleTest, EqualWidthBucketsOverTheRange) {
  std::vector<XY> pts;
  for (int64_t x = 0; x < 100; x++) pts.push_back({x, static_cast<double>(x)});
  auto b = Downsample(pts, 10, {});
  ASSERT_EQ(b.size(), 10u);
  for (int k = 0; k < 10; k++) {
    EXPECT_EQ(b[k].x, k * 10);
    EXPECT_EQ(b[k].min, k * 10);
    EXPECT_EQ(b[k].max, k * 10 + 9);
    EXPECT_EQ(b[k].last, k * 10 + 9);
  }
  // Extreme x values do not overflow.
  auto wide = Downsample({{INT64_MIN / 2, 1}, {0, 2}, {INT64_MAX / 2, 3}}, 2, {});
  ASSERT_EQ(wide.size(), 2u);
  EXPECT_EQ(wide[1].last, 3);
}

TEST(DownsampleTest, BucketOfEachPointIsItsEqualWidthRange) {
  // Uneven spans, gaps and repeated x: every point lands in bucket
  // floor((x - x0) * n / span), as the definition says.
  uint64_t seed = 42;
  auto next = [&] { return (seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int64_t n : {1, 3, 7, 64, 999}) {
    std::vector<XY> pts;
    int64_t x = -5000;
    for (int i = 0; i < 5000; i++) {
      x += static_cast<int64_t>(next() % 4);  // 0 repeats the step
      pts.push_back({x, static_cast<double>(i)});
    }
    auto b = Downsample(pts, n, {});
    const __int128 x0 = pts.front().x, span = static_cast<__int128>(pts.back().x) - x0 + 1;
    std::vector<std::tuple<int64_t, int64_t, double>> want;  // x, count, last per bucket
    int64_t cur = -1;
    for (const XY& p : pts) {
      auto k = static_cast<int64_t>((p.x - x0) * n / span);
      if (k != cur) want.emplace_back(p.x, 0, 0);
      cur = k;
      std::get<1>(want.back())++;
      std::get<2>(want.back()) = p.y;
    }
    std::vector<std::tuple<int64_t, int64_t, double>> got;
    for (const Bucket& k : b) got.emplace_back(k.x, k.count, k.last);
    EXPECT_EQ(got, want) << "n=" << n;
    EXPECT_LE(static_cast<int64_t>(b.size()), n);
  }
}

}  // namespace
}  // namespace trainwatch::runs
