// Internals of the dense codec: the fast encoder against the exhaustive one,
// and the size model against the bytes written.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/dense_internal.h"

namespace trainwatch::chunkenc::internal {
namespace {

struct Series {
  std::vector<int64_t> ts;
  std::vector<double> vs;
};

// Series shapes that exercise every value mode, divisors that are not powers
// of two, and blocks worth patching (rare spikes, mostly-constant blocks).
Series Shape(int kind, size_t n, std::mt19937_64* rng) {
  Series s;
  int64_t t = 1764633600000 + static_cast<int64_t>((*rng)() % 15000);
  double v = 1000;
  for (size_t i = 0; i < n; i++) {
    t += 15000 + (kind % 3 == 0 && (*rng)() % 10 == 0 ? static_cast<int64_t>((*rng)() % 40) - 20 : 0);
    switch (kind) {
      case 0: v += static_cast<double>((*rng)() % 5) * 105000; break;  // counter, gcd 105000
      case 1: v = (*rng)() % 40 == 0 ? 1e6 : static_cast<double>((*rng)() % 8); break;  // rare spikes
      case 2: v = (*rng)() % 30 == 0 ? static_cast<double>((*rng)() % 100) : 60; break;  // mostly constant
      case 3: v = std::round(std::sin(static_cast<double>(i) / 20) * 1e4) / 100; break;  // 2 decimals
      case 4: v += std::ldexp(static_cast<double>((*rng)() % 64), -10); break;            // binary fixed point
      case 5: v = 0.5 + std::sin(static_cast<double>(i)) * 1e-3; break;                   // full precision
      case 6: v = -static_cast<double>(i % 7) * 0x1p62; break;                            // huge multiples
      default: v = (*rng)() % 20 == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(i); break;
    }
    s.ts.push_back(t);
    s.vs.push_back(v);
  }
  return s;
}

void ExpectDecodes(std::string_view data, const Series& s) {
  std::vector<int64_t> ts;
  std::vector<double> vs;
  Status st = DecodeDense(data, &ts, &vs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(ts, s.ts);
  ASSERT_EQ(vs.size(), s.vs.size());
  for (size_t i = 0; i < vs.size(); i++) ASSERT_EQ(std::bit_cast<uint64_t>(vs[i]), std::bit_cast<uint64_t>(s.vs[i]));
}

TEST(DenseInternalTest, EncoderStaysCloseToExhaustive) {
  std::mt19937_64 rng(5);
  size_t fast_total = 0, exhaustive_total = 0;
  for (int kind = 0; kind < 8; kind++) {
    for (size_t n : {1, 2, 3, 5, 127, 128, 129, 480, 1000}) {
      SCOPED_TRACE(testing::Message() << "kind " << kind << " n " << n);
      Series s = Shape(kind, n, &rng);
      std::string fast, slow;
      EncodeDense(s.ts.data(), s.vs.data(), n, &fast);
      EncodeDenseExhaustive(s.ts.data(), s.vs.data(), n, &slow);
      ExpectDecodes(fast, s);
      ExpectDecodes(slow, s);
      // Only candidates within a small margin of the best plain size are
      // sized exactly.
      EXPECT_LE(fast.size(), slow.size() + slow.size() / 32 + 2);
      fast_total += fast.size();
      exhaustive_total += slow.size();
    }
  }
  EXPECT_LE(fast_total, exhaustive_total + exhaustive_total / 200);
}

TEST(DenseInternalTest, XorValueBitsMatchesWriter) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 200; iter++) {
    std::vector<double> vs(1 + rng() % 300);
    double v = 1;
    for (double& x : vs) {
      switch (iter % 4) {
        case 0: x = std::bit_cast<double>(rng()); break;
        case 1: x = v += 0.25; break;
        case 2: x = rng() % 3 == 0 ? v : (v = static_cast<double>(rng() % 1000) / 7); break;
        default: x = std::ldexp(1.0, static_cast<int>(rng() % 200) - 100); break;
      }
    }
    std::string out;
    uint8_t bit_pos = 0;
    BitWriter w(&out, &bit_pos);
    uint64_t prev = std::bit_cast<uint64_t>(vs[0]);
    w.WriteBits(prev, 64);
    uint8_t leading = 0xff, trailing = 0;
    for (size_t i = 1; i < vs.size(); i++) {
      uint64_t cur = std::bit_cast<uint64_t>(vs[i]);
      WriteXorValue(&w, prev, cur, &leading, &trailing);
      prev = cur;
    }
    uint64_t bits = out.size() * 8 - (bit_pos == 0 ? 0 : 8 - bit_pos);
    ASSERT_EQ(XorValueBits(vs.data(), vs.size()), bits) << "iter " << iter;
  }
}

TEST(DenseInternalTest, DivisorsAndExtremeResiduals) {
  // Timestamps and values whose differences share odd, even and huge
  // divisors, incl. residuals of INT64_MIN (divisor 2^63 is not applied).
  std::vector<std::vector<int64_t>> seqs = {
      {0, 105000, 210000, 420000, 525000, 630000},
      {-7, -7 - 3 * 15015, -7 - 5 * 15015, -7 - 6 * 15015, -7 - 11 * 15015},
      {std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max()},
      {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + (int64_t{1} << 62), 0},
  };
  for (const auto& ts : seqs) {
    Series s;
    for (size_t i = 0; i < ts.size(); i++) {
      s.ts.push_back(ts[i]);
      s.vs.push_back(static_cast<double>(ts[i]) * 3);
    }
    std::string d;
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    ExpectDecodes(d, s);
  }
}

}  // namespace
}  // namespace trainwatch::chunkenc::internal
