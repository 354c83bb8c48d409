#include "runs/steps.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace trainwatch::runs {
namespace {

std::vector<StepPoint> RoundTrip(const std::vector<StepPoint>& in, size_t* bytes = nullptr) {
  std::string data;
  EncodeStepChunk(in.data(), in.size(), &data);
  if (bytes) *bytes = data.size();
  std::vector<StepPoint> out;
  Status s = DecodeStepChunk(data, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

void ExpectSame(const std::vector<StepPoint>& a, const std::vector<StepPoint>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) {
    EXPECT_EQ(a[i].step, b[i].step) << i;
    EXPECT_EQ(a[i].ts_ms, b[i].ts_ms) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(a[i].value), std::bit_cast<uint64_t>(b[i].value)) << i;
  }
}

TEST(StepChunkTest, FastLoopRoundTripsInAFewBytesPerPoint) {
  // 10,000 steps a second: many points share a millisecond.
  std::vector<StepPoint> pts;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 0.01);
  for (int64_t s = 0; s < 5000; s++) pts.push_back({s, 1796218600123 + s / 10, 2.0 * std::exp(-s / 1000.0) + noise(rng)});
  size_t bytes = 0;
  ExpectSame(RoundTrip(pts, &bytes), pts);
  // Full-precision noisy floats cost most of their 8 bytes; steps and
  // times must add little on top.
  EXPECT_LT(bytes, pts.size() * 9);
  // Decimal values (a learning rate schedule, an accuracy) are much cheaper.
  for (auto& p : pts) p.value = static_cast<double>(p.step % 100) / 100;
  ExpectSame(RoundTrip(pts, &bytes), pts);
  EXPECT_LT(bytes, pts.size() * 3);
}

TEST(StepChunkTest, AnyValueStepAndTimeRoundTrip) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<StepPoint> pts = {{-5, -1000, -0.0},
                                {0, 0, std::numeric_limits<double>::quiet_NaN()},
                                {1, 1796218600123, inf},
                                {1000000, 1796218600000, -inf},  // time going back (a resumed run)
                                {1000001, 4102444800000, 1e-300},
                                {INT64_MAX / 4, 1, std::bit_cast<double>(uint64_t{0x7ff0000000000002})}};
  ExpectSame(RoundTrip(pts), pts);
  ExpectSame(RoundTrip({{3, 4, 5}}), {{3, 4, 5}});
}

TEST(StepChunkTest, CorruptChunksAreErrorsNotCrashes) {
  std::vector<StepPoint> pts;
  for (int64_t s = 0; s < 300; s++) pts.push_back({s, 1000 + s, s * 0.5});
  std::string data;
  EncodeStepChunk(pts.data(), pts.size(), &data);
  std::vector<StepPoint> out;
  EXPECT_TRUE(DecodeStepChunk("", &out).IsCorruption());
  EXPECT_TRUE(DecodeStepChunk(std::string(1, '\x02') + data.substr(1), &out).IsCorruption());
  for (size_t cut = 1; cut < data.size(); cut += 7) {
    out.clear();
    EXPECT_FALSE(DecodeStepChunk(std::string_view(data).substr(0, cut), &out).ok()) << cut;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; i++) {
    std::string bad = data;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    out.clear();
    (void)DecodeStepChunk(bad, &out);  // any answer but a crash (ASan checks the reads)
  }
}

TEST(SortLastWinsTest, OrdersByStepAndTheLaterWriteOfAStepWins) {
  std::vector<StepPoint> pts = {{0, 1, 10}, {1, 2, 11}, {2, 3, 12}, {1, 9, 21}, {5, 10, 15}, {2, 11, 22}, {1, 12, 31}};
  SortLastWins(&pts);
  ExpectSame(pts, {{0, 1, 10}, {1, 12, 31}, {2, 11, 22}, {5, 10, 15}});
  std::vector<StepPoint> sorted = {{1, 1, 1}, {2, 2, 2}};
  SortLastWins(&sorted);
  ExpectSame(sorted, {{1, 1, 1}, {2, 2, 2}});
  std::vector<StepPoint> empty;
  SortLastWins(&empty);
  EXPECT_TRUE(empty.empty());
}

}  // namespace
}  // namespace trainwatch::runs
