// Internals of the dense codec: the fast encoder against the exhaustive one,
// and the size model against the bytes written.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
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

// Sequences of one residual (regular timestamps, quadratic ones, constant
// counts) decode in closed form (GetIntSeq's orders 1 and 2), wrapping
// around as the step-by-step integration does.
TEST(DenseInternalTest, ConstantResidualsInClosedForm) {
  struct Case {
    uint64_t base, a, b;  // t_i = base + i*a + b*i*(i-1)/2 (mod 2^64)
    int order;            // the order the encoder picks; -1: not checked
  };
  const uint64_t big = uint64_t{1} << 62;
  for (const Case& c : {Case{1'700'000'000'000, 300'000, 0, 1}, Case{5, 0, 7, 2}, Case{1000, 15'000, 3, 2},
                        Case{big * 2 - 11, big / 3, 5, -1}, Case{0, uint64_t{0} - 5, uint64_t{0} - 2, -1}}) {
    for (size_t n : {2, 3, 4, 129, 1000}) {
      SCOPED_TRACE(testing::Message() << "base " << c.base << " a " << c.a << " b " << c.b << " n " << n);
      Series s;
      for (size_t i = 0; i < n; i++) {
        s.ts.push_back(static_cast<int64_t>(c.base + i * c.a + c.b * (i * (i - 1) / 2)));
        s.vs.push_back(1440);
      }
      std::string d;
      EncodeDense(s.ts.data(), s.vs.data(), n, &d);
      ExpectDecodes(d, s);
      size_t pos = 0;
      while (static_cast<uint8_t>(d[pos]) & 0x80) pos++;
      const auto hdr = static_cast<uint8_t>(d[pos + 1]);
      if (c.order >= 0 && n >= 100) {  // short ones may be packed at order 0, no larger
        EXPECT_EQ((hdr & 3) | ((hdr & kOrderHigh) ? 4 : 0), c.order);
        EXPECT_EQ(hdr & kPacked, 0);
      }
    }
  }
}

// A chunk written before Rice blocks and orders above 3 existed (decimal
// values, order-2 timestamps, a patched block with an exception) still reads.
TEST(DenseInternalTest, ReadsChunksOfEarlierVersions) {
  const std::string old_chunk(
      "\x14\x0d\xa6\xec\xe0\xc5\xdb\x66\x03\x90\x4e\x01\x00\x01\x00\x03\x04\x09\x60\x03\x89\x01\x06\x08\x04\x10"
      "\x60\x40\xc0\x80\x02\x01\x0c\x0c\x30\x00\x20\x00\x80\x01\x01\x0c\x18\x00\x0c\xc6\x3e",
      47);
  Series s;
  s.ts = {1764633615123, 1764633630123, 1764633645123, 1764633660123, 1764633675123, 1764633690123, 1764633705123,
          1764633720123, 1764633735123, 1764633750126, 1764633765126, 1764633780126, 1764633795126, 1764633810126,
          1764633825126, 1764633840126, 1764633855126, 1764633870126, 1764633885126, 1764633900126};
  s.vs = {12,     13,     13.5,    13.25,   13.25, 14.25,   14.25, 14.5,    15.25,   15,
          16,     16.25,  17.25,   1017.5,  1017.25, 1016.75, 1017, 1016.75, 1017.75, 1018.75};
  ExpectDecodes(old_chunk, s);
}

// The layout of a Rice block and of an order above 3, byte by byte
// (docs/format/chunks.md).
TEST(DenseInternalTest, RiceBlockAndHighOrderLayout) {
  const std::string chunk(
      "\x03"                      // n = 3
      "\x09\x14"                  // timestamps: order 1, packed; head 10
      "\x02\x41\x09"              // block: lo = 1, Rice k = 0; z = {0, 2}: unary '1', '001'
      "\x01\x00"                  // decimal mode, e = 0
      "\x15\x0e\x04\x05\x00\x02"  // order 5 (1 | order-high), only heads: 7, 2, -3
      ,
      14);
  std::vector<int64_t> ts;
  std::vector<double> vs;
  // n = 3 <= order 5: the divisor and packed bits must be clear.
  ASSERT_FALSE(DecodeDense(chunk, &ts, &vs).ok());
  std::string fixed = chunk.substr(0, 8) + std::string("\x11\x0e\x04\x05", 4);
  ts.clear();
  vs.clear();
  Status st = DecodeDense(fixed, &ts, &vs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ts, (std::vector<int64_t>{10, 11, 13}));
  EXPECT_EQ(vs, (std::vector<double>{7, 9, 8}));
  // A Rice block whose unary part runs past the chunk is corruption.
  std::string cut = fixed;
  cut[5] = '\x00';
  ts.clear();
  vs.clear();
  EXPECT_FALSE(DecodeDense(cut.substr(0, 6), &ts, &vs).ok());
  // Width byte 128 (Rice k = 63, too large) and unknown header bits are
  // corruption.
  for (auto [pos, byte] : {std::pair{4, '\x80'}, std::pair{1, '\x29'}}) {
    std::string bad = fixed;
    bad[static_cast<size_t>(pos)] = byte;
    ts.clear();
    vs.clear();
    EXPECT_FALSE(DecodeDense(bad, &ts, &vs).ok()) << pos;
  }
}

// Shapes the Rice blocks and orders 4..7 are for; with `specials`, the
// values every mode must keep bit-exact mixed in.
Series RiceShape(int kind, size_t n, bool specials, std::mt19937_64* rng) {
  static constexpr double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(),
                                         std::bit_cast<double>(uint64_t{0x7ff0000000000002}),  // stale marker
                                         std::numeric_limits<double>::infinity(),
                                         -std::numeric_limits<double>::infinity(),
                                         -0.0,
                                         std::numeric_limits<double>::denorm_min(),
                                         std::numeric_limits<double>::max(),
                                         -1e-300};
  std::normal_distribution<double> gauss(0.0, 1.0);
  Series s;
  double walk = 1e6;
  int64_t t = 1764633600000;
  for (size_t i = 0; i < n; i++) {
    t += 15000;
    const auto x = static_cast<double>(i);
    double v = 0;
    switch (kind) {
      case 0: v = walk += std::round(gauss(*rng) * 3000); break;  // Rice, k ~ 11
      case 1: v = 3e-4 * 0.5 * (1 + std::cos(std::numbers::pi * (50000.0 + 37.0 * x) / 1e5)); break;
      case 2: v = static_cast<double>(((*rng)() % 10 == 0) - ((*rng)() % 10 == 0)) + 60; break;  // temperatures
      case 3: v = walk += std::round(gauss(*rng) * 30) / 1000; break;                            // 3 decimals
      case 4: v = std::ldexp(1.0 + x * x * x, 900); break;                                       // huge, cubic
      default: v = kSpecials[i % 8]; break;
    }
    if (specials && (kind == 5 || i % 97 == 50)) v = kSpecials[(i / 97 + i) % 8];
    s.ts.push_back(t);
    s.vs.push_back(v);
  }
  return s;
}

// Every length from 1 sample, against the exhaustive encoder, and every
// prefix of the bytes.
TEST(DenseInternalTest, RiceAndHighOrdersRoundTrip) {
  std::mt19937_64 rng(23);
  for (int kind = 0; kind < 6; kind++) {
    for (bool specials : {false, true}) {
      for (size_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 130, 240, 600}) {
        SCOPED_TRACE(testing::Message() << "kind " << kind << " specials " << specials << " n " << n);
        Series s = RiceShape(kind, n, specials, &rng);
        std::string d, slow;
        EncodeDense(s.ts.data(), s.vs.data(), n, &d);
        ExpectDecodes(d, s);
        EncodeDenseExhaustive(s.ts.data(), s.vs.data(), n, &slow);
        ExpectDecodes(slow, s);
        EXPECT_LE(d.size(), slow.size() + slow.size() / 32 + 2);
        for (size_t len = 0; len < d.size(); len++) {
          std::vector<int64_t> ts;
          std::vector<double> vs;
          EXPECT_FALSE(DecodeDense(std::string_view(d).substr(0, len), &ts, &vs).ok()) << "prefix " << len;
        }
      }
    }
  }
}

// What the two additions buy: a cosine schedule in full precision (orders
// <= 3 left 2-3 bytes per sample; its fifth differences are a few bits) and
// a Gaussian walk (sigma 3000: 13.6 bits of entropy, frame of reference
// about 15 bits with the padding to whole widths).
TEST(DenseInternalTest, RiceAndHighOrdersSize) {
  std::mt19937_64 rng(29);
  auto bits_per_sample = [&](int kind) {
    Series s = RiceShape(kind, 480, false, &rng);
    std::string d;
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    ExpectDecodes(d, s);
    return static_cast<double>(d.size()) * 8 / 480;
  };
  EXPECT_LT(bits_per_sample(1), 12);
  EXPECT_LT(bits_per_sample(0), 14.4);
}

}  // namespace
}  // namespace trainwatch::chunkenc::internal
