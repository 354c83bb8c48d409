#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::chunkenc {
namespace {

struct Series {
  std::vector<int64_t> ts;
  std::vector<double> vs;
};

uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }
double FromBits(uint64_t b) { return std::bit_cast<double>(b); }

// Decodes with DecodeAll and with the iterator; both must reproduce `s`
// bit-exactly.
void ExpectDecodes(Encoding enc, std::string_view data, const Series& s) {
  std::vector<int64_t> ts;
  std::vector<double> vs;
  Status st = DecodeAll(enc, data, &ts, &vs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(ts.size(), s.ts.size());
  ASSERT_EQ(vs.size(), s.vs.size());
  for (size_t i = 0; i < ts.size(); i++) {
    ASSERT_EQ(ts[i], s.ts[i]) << "sample " << i;
    ASSERT_EQ(Bits(vs[i]), Bits(s.vs[i])) << "sample " << i << " want " << s.vs[i] << " got " << vs[i];
  }
  Iterator it(enc, data);
  size_t i = 0;
  while (it.Next()) {
    ASSERT_LT(i, s.ts.size());
    ASSERT_EQ(it.t(), s.ts[i]);
    ASSERT_EQ(Bits(it.v()), Bits(s.vs[i]));
    i++;
  }
  ASSERT_TRUE(it.Err().ok()) << it.Err().ToString();
  ASSERT_EQ(i, s.ts.size());
  if (s.ts.empty()) return;
  // AppendUntil in pieces (cut at a sample, or just before one) reads the
  // same samples and stops on the first one after each cut.
  for (size_t parts : {1, 2, 5}) {
    Iterator ia(enc, data);
    ASSERT_TRUE(ia.Next());
    std::vector<model::Sample> got;
    bool more = true;
    for (size_t p = 1; p <= parts && more; ++p) {
      const int64_t at = s.ts[std::min(s.ts.size() - 1, s.ts.size() * p / parts)];
      int64_t cut = p == parts ? std::numeric_limits<int64_t>::max()
                    : p % 2 == 1 && at != std::numeric_limits<int64_t>::min() ? at - 1  // just before a sample
                                                                              : at;
      const size_t before = got.size();
      more = ia.AppendUntil(cut, &got);
      if (got.size() > before) {
        ASSERT_LE(got.back().t, cut);
      }
      if (more) {
        ASSERT_GT(ia.t(), cut);
      }
    }
    EXPECT_FALSE(more);
    ASSERT_TRUE(ia.Err().ok()) << ia.Err().ToString();
    ASSERT_EQ(got.size(), s.ts.size()) << parts << " parts";
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].t, s.ts[k]);
      ASSERT_EQ(Bits(got[k].v), Bits(s.vs[k]));
    }
  }
}

std::string DeltaBytes(const Series& s) {
  DeltaChunk c;
  for (size_t i = 0; i < s.ts.size(); i++) c.Append(s.ts[i], s.vs[i]);
  return std::string(c.Bytes());
}

void RoundTrip(const Series& s) {
  SCOPED_TRACE(testing::Message() << "n=" << s.ts.size());
  {
    // The head's delta chunk, likewise decodable after every append.
    DeltaChunk dc;
    Series prefix;
    for (size_t i = 0; i < s.ts.size(); i++) {
      dc.Append(s.ts[i], s.vs[i]);
      prefix.ts.push_back(s.ts[i]);
      prefix.vs.push_back(s.vs[i]);
      if (s.ts.size() <= 64 || i % 97 == 0) ExpectDecodes(Encoding::kDelta, dc.Bytes(), prefix);
      if (testing::Test::HasFatalFailure()) return;
    }
    ASSERT_EQ(dc.NumSamples(), s.ts.size());
    if (!s.ts.empty()) {
      EXPECT_EQ(dc.MinTime(), s.ts.front());
      EXPECT_EQ(dc.MaxTime(), s.ts.back());
    }
    ExpectDecodes(Encoding::kDelta, dc.Bytes(), s);
    DeltaChunk copy(dc);
    DeltaChunk moved(std::move(dc));
    EXPECT_EQ(copy.Bytes(), moved.Bytes());
  }
  // Appendable chunk, checking Bytes() decodes after every append for short
  // series and at the end otherwise.
  XorChunk c;
  Series prefix;
  for (size_t i = 0; i < s.ts.size(); i++) {
    c.Append(s.ts[i], s.vs[i]);
    prefix.ts.push_back(s.ts[i]);
    prefix.vs.push_back(s.vs[i]);
    if (s.ts.size() <= 64 || i % 97 == 0) ExpectDecodes(Encoding::kXor, c.Bytes(), prefix);
  }
  ASSERT_EQ(c.NumSamples(), s.ts.size());
  if (!s.ts.empty()) {
    EXPECT_EQ(c.MinTime(), s.ts.front());
    EXPECT_EQ(c.MaxTime(), s.ts.back());
  }
  ExpectDecodes(Encoding::kXor, c.Bytes(), s);
  std::string x;
  EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
  EXPECT_EQ(x, c.Bytes());
  c.Shrink();
  ExpectDecodes(Encoding::kXor, c.Bytes(), s);
  if (s.ts.empty()) return;
  std::string d = "prefix";
  EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
  ExpectDecodes(Encoding::kDense, std::string_view(d).substr(6), s);
}

Series Regular(size_t n, int64_t t0, int64_t step, const std::function<double(size_t)>& f) {
  Series s;
  for (size_t i = 0; i < n; i++) {
    s.ts.push_back(t0 + static_cast<int64_t>(i) * step);
    s.vs.push_back(f(i));
  }
  return s;
}

const std::vector<double>& Specials() {
  static const std::vector<double> v = {
      0.0, -0.0, 1.0, -1.0,
      std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::quiet_NaN(), FromBits(0x7ff0000000000002ULL),  // stale marker
      FromBits(0x7ff8dead0000beefULL), FromBits(0xfff0000000000001ULL),          // NaN payloads
      std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
      FromBits(0x000fffffffffffffULL), std::numeric_limits<double>::min(),
      std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
      0.1, 123.456, 1e300, -1e-300, 9007199254740993.0, 4.5e18, -9.3e18, 1e19};
  return v;
}

TEST(ChunkencTest, EmptyXorChunk) {
  XorChunk c;
  EXPECT_EQ(c.NumSamples(), 0u);
  EXPECT_EQ(c.Bytes().size(), 2u);
  Series empty;
  ExpectDecodes(Encoding::kXor, c.Bytes(), empty);
}

TEST(ChunkencTest, SingleSample) {
  for (double v : Specials()) RoundTrip(Regular(1, 1700000000000, 15000, [&](size_t) { return v; }));
  RoundTrip(Regular(1, -5, 1, [](size_t) { return 3.0; }));
  RoundTrip(Regular(1, std::numeric_limits<int64_t>::min(), 1, [](size_t) { return 3.0; }));
  RoundTrip(Regular(1, std::numeric_limits<int64_t>::max(), 1, [](size_t) { return 3.0; }));
}

TEST(ChunkencTest, SpecialValues) {
  const auto& sp = Specials();
  // Every special as a constant series, in pairs, and all in sequence.
  for (double v : sp) RoundTrip(Regular(50, 1000, 15000, [&](size_t) { return v; }));
  for (double a : sp) {
    for (double b : sp) RoundTrip(Regular(5, 0, 10, [&](size_t i) { return i % 2 ? a : b; }));
  }
  RoundTrip(Regular(sp.size() * 3, 0, 15000, [&](size_t i) { return sp[(i * 7) % sp.size()]; }));
  // Decimal-looking data with one stale marker and one -0.0.
  RoundTrip(Regular(300, 0, 15000, [](size_t i) {
    if (i == 100) return FromBits(0x7ff0000000000002ULL);
    if (i == 200) return -0.0;
    return static_cast<double>(i % 17) / 100.0;
  }));
}

TEST(ChunkencTest, TimestampShapes) {
  auto val = [](size_t i) { return static_cast<double>(i); };
  RoundTrip(Regular(1000, -1000000, 15000, val));           // negative timestamps
  RoundTrip(Regular(1000, 1700000000000, 1, val));          // 1 ms step
  RoundTrip(Regular(20, 0, int64_t{1} << 58, val));         // huge steps
  Series s;
  // Huge jumps in both directions of the delta, incl. across int64 range.
  int64_t ts[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1, -1000, 0, 1,
                  1 << 20, int64_t{1} << 40, (int64_t{1} << 40) + 1, std::numeric_limits<int64_t>::max() - 1,
                  std::numeric_limits<int64_t>::max()};
  for (int64_t t : ts) {
    s.ts.push_back(t);
    s.vs.push_back(1.5);
  }
  RoundTrip(s);
  // Irregular intervals of every dod bucket size.
  std::mt19937_64 rng(7);
  for (int bits : {3, 13, 14, 16, 17, 19, 20, 21, 40}) {
    Series r;
    int64_t t = 1700000000000;
    for (int i = 0; i < 500; i++) {
      t += 15000 + static_cast<int64_t>(rng() % (uint64_t{1} << bits));
      r.ts.push_back(t);
      r.vs.push_back(static_cast<double>(i));
    }
    RoundTrip(r);
  }
}

TEST(ChunkencTest, RandomSeries) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 300; iter++) {
    size_t n = 1 + rng() % (iter % 10 == 0 ? 5000 : 300);
    Series s;
    int64_t t = static_cast<int64_t>(rng() % 2000000000000ULL) - 1000000000000LL;
    int64_t step = 1 + static_cast<int64_t>(rng() % 60000);
    int kind = iter % 8;
    double v = static_cast<double>(rng() % 1000);
    for (size_t i = 0; i < n; i++) {
      t += step + (rng() % 4 == 0 ? static_cast<int64_t>(rng() % 100) - 50 + 50 : 0);
      switch (kind) {
        case 0: v = FromBits(rng()); break;                                         // random bits
        case 1: v += static_cast<double>(static_cast<int64_t>(rng() % 7) - 3); break;  // int walk
        case 2: v = std::round((v + (static_cast<double>(rng() % 2001) - 1000) / 1000.0) * 1000) / 1000; break;
        case 3: v = static_cast<double>(rng() % 1000000) / 1e6; break;              // 6 decimals
        case 4: v = std::sin(static_cast<double>(i) * 0.01) * 1e-3; break;         // full precision
        case 5: v = i % 2 ? 1e300 : -1e-300; break;                                 // alternating
        case 6: v += static_cast<double>(rng() % 1000) * 4096; break;               // counter with gcd
        default: v = rng() % 50 == 0 ? Specials()[rng() % Specials().size()] : 42.0; break;
      }
      s.ts.push_back(t);
      s.vs.push_back(v);
    }
    RoundTrip(s);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkencTest, Seek) {
  Series s = Regular(500, 1000, 10, [](size_t i) { return static_cast<double>(i) * 0.5; });
  std::string x, d;
  EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
  EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
  for (auto [enc, data] : {std::pair{Encoding::kXor, std::string_view(x)}, std::pair{Encoding::kDense, std::string_view(d)}}) {
    Iterator it(enc, data);
    ASSERT_TRUE(it.Seek(0));  // before the first sample
    EXPECT_EQ(it.t(), 1000);
    ASSERT_TRUE(it.Seek(500));  // never goes backwards
    EXPECT_EQ(it.t(), 1000);
    ASSERT_TRUE(it.Seek(1005));  // between samples
    EXPECT_EQ(it.t(), 1010);
    EXPECT_EQ(it.v(), 0.5);
    ASSERT_TRUE(it.Seek(1010));  // at the current sample
    EXPECT_EQ(it.t(), 1010);
    ASSERT_TRUE(it.Next());
    EXPECT_EQ(it.t(), 1020);
    ASSERT_TRUE(it.Seek(3000));
    EXPECT_EQ(it.t(), 3000);
    EXPECT_EQ(it.v(), 100.0);
    ASSERT_TRUE(it.Seek(5990));  // last sample
    EXPECT_EQ(it.t(), 5990);
    EXPECT_FALSE(it.Next());
    EXPECT_FALSE(it.Seek(5990));  // exhausted
    EXPECT_TRUE(it.Err().ok());
    Iterator it2(enc, data);
    EXPECT_FALSE(it2.Seek(6000));  // past the end
    EXPECT_TRUE(it2.Err().ok());
  }
}

TEST(ChunkencTest, UnknownEncoding) {
  Iterator it(static_cast<Encoding>(9), "abc");
  EXPECT_FALSE(it.Next());
  EXPECT_FALSE(it.Err().ok());
  std::vector<int64_t> ts;
  std::vector<double> vs;
  EXPECT_FALSE(DecodeAll(static_cast<Encoding>(0), "abc", &ts, &vs).ok());
}

std::vector<Series> CorpusForCorruption() {
  std::vector<Series> out;
  out.push_back(Regular(120, 1700000000000, 15000, [](size_t i) { return 60.0 + static_cast<double>(i % 3); }));
  out.push_back(Regular(120, 1700000000000, 15000, [](size_t i) { return std::sin(static_cast<double>(i)); }));
  out.push_back(Regular(120, 1700000000000, 15000, [](size_t i) { return static_cast<double>(i * i) / 1000.0; }));
  out.push_back(Regular(300, 5, 7, [](size_t i) { return static_cast<double>(i) * 4096.0; }));
  Series irregular = Regular(200, 0, 1000, [](size_t i) { return Specials()[i % Specials().size()]; });
  for (size_t i = 0; i < irregular.ts.size(); i++) irregular.ts[i] += static_cast<int64_t>(i * i * i % 997);
  out.push_back(irregular);
  return out;
}

// Decoding must terminate without crashing or reading out of bounds, and
// return at most the encoded number of samples.
void DecodeGarbage(Encoding enc, std::string_view data) {
  // Copy to an exact-size heap buffer so ASan catches any over-read.
  std::unique_ptr<char[]> buf(new char[data.size() == 0 ? 1 : data.size()]);
  std::memcpy(buf.get(), data.data(), data.size());
  std::string_view view(buf.get(), data.size());
  std::vector<int64_t> ts;
  std::vector<double> vs;
  (void)DecodeAll(enc, view, &ts, &vs);
  Iterator it(enc, view);
  size_t n = 0;
  while (it.Next()) n++;
  Iterator it2(enc, view);
  (void)it2.Seek(1700000900000);
  while (it2.Next()) {
  }
}

TEST(ChunkencTest, TruncationReportsError) {
  for (const Series& s : CorpusForCorruption()) {
    std::string x, d, dl = DeltaBytes(s);
    EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    for (auto [enc, full] :
         {std::pair{Encoding::kXor, &x}, std::pair{Encoding::kDense, &d}, std::pair{Encoding::kDelta, &dl}}) {
      for (size_t len = 0; len < full->size(); len++) {
        std::string_view cut(full->data(), len);
        DecodeGarbage(enc, cut);
        std::vector<int64_t> ts;
        std::vector<double> vs;
        Status st = DecodeAll(enc, cut, &ts, &vs);
        // XOR and delta chunks cut in the last byte's padding may still
        // decode fully; anything shorter must fail.
        if (enc == Encoding::kDense || len + 1 < full->size()) {
          EXPECT_FALSE(st.ok()) << "enc " << static_cast<int>(enc) << " len " << len << "/" << full->size();
          Iterator it(enc, cut);
          size_t n = 0;
          while (it.Next()) n++;
          EXPECT_FALSE(it.Err().ok());
          EXPECT_FALSE(it.Seek(0));  // error is sticky
          EXPECT_FALSE(it.Next());
        }
      }
    }
  }
}

TEST(ChunkencTest, RandomCorruptionNeverCrashes) {
  std::mt19937_64 rng(1234);
  for (const Series& s : CorpusForCorruption()) {
    std::string x, d, dl = DeltaBytes(s);
    EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    for (auto [enc, full] :
         {std::pair{Encoding::kXor, &x}, std::pair{Encoding::kDense, &d}, std::pair{Encoding::kDelta, &dl}}) {
      for (int iter = 0; iter < 600; iter++) {
        std::string bad = *full;
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; f++) bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
        if (iter % 5 == 0) bad.resize(rng() % (bad.size() + 1));
        DecodeGarbage(enc, bad);
      }
    }
  }
  // Pure random bytes.
  for (int iter = 0; iter < 2000; iter++) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    DecodeGarbage(Encoding::kXor, junk);
    DecodeGarbage(Encoding::kDense, junk);
  }
}

TEST(ChunkencTest, XorAndDenseAgree) {
  std::mt19937_64 rng(99);
  for (int iter = 0; iter < 100; iter++) {
    Series s = Regular(1 + rng() % 1000, 1700000000000, 15000, [&](size_t) {
      return static_cast<double>(rng() % 100000) / 100.0;
    });
    std::string x, d;
    EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    Iterator a(Encoding::kXor, x), b(Encoding::kDense, d);
    while (true) {
      bool na = a.Next(), nb = b.Next();
      ASSERT_EQ(na, nb);
      if (!na) break;
      ASSERT_EQ(a.t(), b.t());
      ASSERT_EQ(Bits(a.v()), Bits(b.v()));
    }
    ASSERT_TRUE(a.Err().ok());
    ASSERT_TRUE(b.Err().ok());
  }
}

TEST(ChunkencTest, XorChunkMemoryIsCompact) {
  XorChunk c;
  for (int i = 0; i < 120; i++) c.Append(1700000000000 + i * 15000, 60.0 + (i % 5));
  size_t size = c.Bytes().size();
  EXPECT_LE(c.MemoryBytes(), size + size / 4 + 64);
  c.Shrink();
  EXPECT_LE(c.MemoryBytes(), size + 32);  // malloc's size classes; a smaller rest is not split off
  c.Append(1700000000000 + 120 * 15000, 1.0);  // still appendable after Shrink
  EXPECT_EQ(c.NumSamples(), 121u);
  // Copies and moves keep the bytes and stay appendable.
  XorChunk copy(c);
  XorChunk moved(std::move(c));
  EXPECT_EQ(copy.Bytes(), moved.Bytes());
  copy.Append(1700000000000 + 121 * 15000, 2.0);
  moved.Append(1700000000000 + 121 * 15000, 2.0);
  EXPECT_EQ(copy.Bytes(), moved.Bytes());
  XorChunk assigned;
  assigned = copy;
  EXPECT_EQ(assigned.Bytes(), copy.Bytes());
  EXPECT_EQ(assigned.NumSamples(), 122u);
}

// EncodeDenseLike: a search gives EncodeDense's bytes and keeps its
// choices; without one the choices are reused where the values allow their
// mode (a chunk as small, give or take), and a search again where not. Every
// chunk decodes to its samples.
TEST(ChunkencTest, DenseLikeReusesChoicesWhereTheyFit) {
  std::mt19937_64 rng(7);
  const int64_t t0 = 1700000000000;
  auto gauge = [&](int64_t start) {  // two decimals, a random walk: decimal mode, order 1
    double v = 40;
    return Regular(120, start, 15000, [&](size_t) { return v = std::round((v + static_cast<double>(rng() % 21) / 100 - 0.1) * 100) / 100; });
  };
  auto dense = [](const Series& s) {
    std::string d;
    EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
    return d;
  };
  auto like = [](const Series& s, DenseChoice* c, bool search) {
    std::string d;
    EncodeDenseLike(s.ts.data(), s.vs.data(), s.ts.size(), &d, c, search ? DenseSearch::kAll : DenseSearch::kNone);
    return d;
  };
  DenseChoice choice;
  Series a = gauge(t0);
  EXPECT_EQ(like(a, &choice, false), dense(a));  // nothing to reuse yet: a search
  ASSERT_NE(choice.bits, 0);
  const uint8_t gauge_choice = choice.bits;
  for (int i = 1; i <= 3; i++) {
    Series b = gauge(t0 + i * 1800000);
    const std::string d = like(b, &choice, false);
    ExpectDecodes(Encoding::kDense, d, b);
    EXPECT_LE(d.size(), dense(b).size() + 4) << i;
    EXPECT_EQ(choice.bits, gauge_choice);
  }
  // Full-precision values do not fit the decimal mode: searched.
  Series x = Regular(120, t0, 15000, [&](size_t) { return static_cast<double>(rng()) / 3.0; });
  EXPECT_EQ(like(x, &choice, false), dense(x));
  EXPECT_NE(choice.bits, gauge_choice);
  // Back to the gauge, searched when asked: EncodeDense's bytes, its choices.
  Series g = gauge(t0);
  EXPECT_EQ(like(g, &choice, true), dense(g));
  EXPECT_EQ(choice.bits, gauge_choice);
  // A smooth integer curve (a higher order wins) under the gauge's choices,
  // then searched; special values under any choice; jittered timestamps.
  Series q = Regular(120, t0, 15000, [](size_t i) { return static_cast<double>(i * i * 3 + 1000); });
  ExpectDecodes(Encoding::kDense, like(q, &choice, false), q);
  EXPECT_EQ(like(q, &choice, true), dense(q));
  EXPECT_NE(choice.bits, gauge_choice);
  // Another series' choices with the values' order searched (a metric's
  // choice on a new series): the curve's order, not the gauge's.
  DenseChoice none{gauge_choice}, orders{gauge_choice};
  std::string by_none, by_orders;
  EncodeDenseLike(q.ts.data(), q.vs.data(), q.ts.size(), &by_none, &none, DenseSearch::kNone);
  EncodeDenseLike(q.ts.data(), q.vs.data(), q.ts.size(), &by_orders, &orders, DenseSearch::kOrders);
  ExpectDecodes(Encoding::kDense, by_orders, q);
  EXPECT_LT(by_orders.size(), by_none.size());
  EXPECT_EQ(none.bits, gauge_choice);
  EXPECT_NE(orders.bits, gauge_choice);
  EXPECT_EQ(orders.bits & 0xf8, gauge_choice & 0xf8);  // the same mode and timestamps' order
  Series sp;
  for (size_t i = 0; i < Specials().size(); i++) {
    sp.ts.push_back(t0 + static_cast<int64_t>(i) * 1000);
    sp.vs.push_back(Specials()[i]);
  }
  ExpectDecodes(Encoding::kDense, like(sp, &choice, false), sp);
  Series j = gauge(t0);
  for (size_t i = 1; i < j.ts.size(); i++) j.ts[i] = j.ts[i - 1] + 14000 + static_cast<int64_t>(rng() % 2000);
  ExpectDecodes(Encoding::kDense, like(j, &choice, false), j);
  Series one = Regular(1, t0, 15000, [](size_t) { return 1.5; });
  ExpectDecodes(Encoding::kDense, like(one, &choice, false), one);
}

TEST(ChunkencTest, DenseIsSmallOnRegularData) {
  // Exactly periodic integer gauge: timestamps nearly free, small deltas.
  Series s = Regular(480, 1700000000000, 15000, [](size_t i) { return 60.0 + static_cast<double>((i / 7) % 3); });
  std::string x, d;
  EncodeXor(s.ts.data(), s.vs.data(), s.ts.size(), &x);
  EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &d);
  EXPECT_LT(d.size(), x.size());
  EXPECT_LT(d.size(), 480u / 3);
}

}  // namespace
}  // namespace trainwatch::chunkenc

namespace trainwatch::chunkenc {
namespace {

TEST(DeltaChunkTest, ExponentChangesAndXorFallback) {
  // Integers, then 1, 3 and 6 decimals (exponent raises), then a
  // full-precision float (XOR for the rest), then decimals again.
  std::vector<double> vs = {40, 41, 41, 43, 42.5, 42.25, 42.125, 42.123456, 42.1, 0.1 + 0.2, 7, 8, 9};
  Series s;
  for (size_t i = 0; i < vs.size(); i++) {
    s.ts.push_back(1700000000000 + static_cast<int64_t>(i) * 15000);
    s.vs.push_back(vs[i]);
  }
  RoundTrip(s);
  // A raise that would overflow the mantissa bound falls back to XOR.
  RoundTrip(Regular(10, 0, 15000, [](size_t i) { return i < 5 ? 1e17 + static_cast<double>(i) * 64 : 0.5; }));
  // Negative values, zero crossings, huge jumps between decimal values.
  RoundTrip(Regular(200, 0, 15000, [](size_t i) {
    return (i % 7 == 0 ? -1.0 : 1.0) * static_cast<double>((i * 7919) % 100003) / (i % 3 == 0 ? 1000.0 : 10.0);
  }));
  RoundTrip(Regular(50, 0, 15000, [](size_t i) { return i % 2 ? 1e15 : -1e15; }));
}

TEST(DeltaChunkTest, SmallerThanXorOnDecimalData) {
  std::mt19937_64 rng(5);
  double temp = 45, power = 250.125, counter = 1234567.89;
  Series a, b, c;
  for (int i = 0; i < 120; i++) {
    int64_t t = 1700000000000 + i * 15000;
    temp += static_cast<double>(static_cast<int>(rng() % 3) - 1);
    power = std::round((power + (static_cast<double>(rng() % 20001) - 10000) / 1000.0) * 1000) / 1000;
    counter = std::round((counter + 1500 + static_cast<double>(rng() % 200)) * 100) / 100;
    a.ts.push_back(t), a.vs.push_back(temp);
    b.ts.push_back(t), b.vs.push_back(power);
    c.ts.push_back(t), c.vs.push_back(counter);
  }
  // A 3-decimal gauge: well under XOR; an integer walk and a 2-decimal
  // counter with noisy increments: no worse than XOR.
  for (const Series* s : {&a, &b, &c}) {
    std::string x;
    EncodeXor(s->ts.data(), s->vs.data(), s->ts.size(), &x);
    std::string d = DeltaBytes(*s);
    if (s == &b) {
      EXPECT_LT(d.size(), x.size() * 7 / 10);
    } else {
      EXPECT_LE(d.size(), x.size() + 2);
    }
    ExpectDecodes(Encoding::kDelta, d, *s);
  }
  // Full-precision floats: XOR mode, within a byte of plain XOR.
  Series f = Regular(120, 1700000000000, 15000, [](size_t i) { return std::sin(static_cast<double>(i) * 0.37); });
  std::string x;
  EncodeXor(f.ts.data(), f.vs.data(), f.ts.size(), &x);
  EXPECT_LE(DeltaBytes(f).size(), x.size() + 2);
}

TEST(DeltaChunkTest, RegularTimestampsCostNoBits) {
  // A constant on an exact 15 s clock: t0, the delta and a bit a value.
  Series s = Regular(120, 1700000000000, 15000, [](size_t) { return 7.0; });
  std::string d = DeltaBytes(s);
  ExpectDecodes(Encoding::kDelta, d, s);
  EXPECT_LE(d.size(), 4 + 7 + 3 + 2 + 120 / 8 + 1);
  EXPECT_EQ((static_cast<uint8_t>(d[2]) << 8) | static_cast<uint8_t>(d[3]), 120);  // all regular
  // A clock that slips once: regular up to there, every delta of delta after.
  for (size_t slip : {2, 3, 60, 119}) {
    Series j = s;
    for (size_t i = slip; i < j.ts.size(); i++) j.ts[i] += (i == slip ? 7 : 7 + static_cast<int64_t>(i % 3));
    std::string dj = DeltaBytes(j);
    EXPECT_EQ((static_cast<uint8_t>(dj[2]) << 8) | static_cast<uint8_t>(dj[3]), static_cast<int>(slip));
    ExpectDecodes(Encoding::kDelta, dj, j);
  }
  // Corrupt: more regular samples than samples.
  d[2] = 0x7f;
  Iterator it(Encoding::kDelta, d);
  EXPECT_FALSE(it.Next());
  EXPECT_FALSE(it.Err().ok());
}

TEST(DeltaChunkTest, RiceCodesFollowTheResiduals) {
  // A 2-decimal counter whose increments spread over 1000 (10 bits), then
  // over 16: each costs about its spread's bits plus 1-2, where the old
  // classes spent 16 and 11 bits.
  std::mt19937_64 rng(11);
  Series s;
  int64_t m = 123456;
  for (int i = 0; i < 240; i++) {
    m += i < 120 ? 500 + static_cast<int64_t>(rng() % 1000) : 10 + static_cast<int64_t>(rng() % 16);
    s.ts.push_back(1700000000000 + i * 15000);
    s.vs.push_back(static_cast<double>(m) / 100);
  }
  Series first{{s.ts.begin(), s.ts.begin() + 120}, {s.vs.begin(), s.vs.begin() + 120}};
  const std::string all = DeltaBytes(s), wide = DeltaBytes(first);
  ExpectDecodes(Encoding::kDelta, all, s);
  EXPECT_LE(wide.size() * 8, 120 * 12 + 64) << "wide residuals: " << wide.size() << " bytes";
  EXPECT_LE((all.size() - wide.size()) * 8, 120 * 8) << "narrow residuals: " << all.size() - wide.size() << " bytes";
}

TEST(DeltaChunkTest, ReadsChunksOfTheFirstFormat) {
  // A chunk as DeltaChunk wrote it before 2026-12-08 (Encoding 3: every
  // timestamp's bits, class-coded residuals), as chunk logs of then hold
  // it: a decimal gauge, a jittered clock, an exponent change, XOR after.
  const std::string old(
      "\x00\x10\xf6\x81\xdf\xc5\xdb\x66\x07\x86\x7e\x61\xd4\x95\xfe\x16\x7d\x20\x01\xf2\x5d\xff\x97\x04"
      "\xb4\x00\x3e\x7d\x47\xc3\xa9\x8d\x83\x7f\xb8\xad\x1c\x43\xae\x02\x4b\x78\x7e\x00\x07\x0f\xbf\xe6"
      "\x9c\xcc\xcc\xcc\xcc\xcd\xbf\xff\xbf\xcd\x59\x99\x99\x99\x99\x9a\x80\x01\xc0\x00\x00\x00\x00\x00",
      72);
  const double vs[] = {41.5, 41.5, 42.0, 43.25, 43.25, 44.0, 45.5, 46.75, 47.0, 48.5, 48.125, 49.0, 50.5, 0.1 + 0.2, 51.0, 52.0};
  const int64_t dts[] = {15000, 15000, 15000, 15000, 15007, 14993, 15000, 15000, 30000, 15000, 15000, 15000, 15001, 15000, 15000, 15000};
  Series s;
  int64_t t = 1764633600123;
  for (int i = 0; i < 16; i++) {
    s.ts.push_back(t);
    s.vs.push_back(vs[i]);
    t += dts[i];
  }
  ExpectDecodes(Encoding::kDelta1, old, s);
  // Read as the current format, the same bytes are not these samples.
  std::vector<int64_t> ts;
  std::vector<double> got;
  Status st = DecodeAll(Encoding::kDelta, old, &ts, &got);
  EXPECT_TRUE(!st.ok() || ts != s.ts || got != s.vs);
  // Both formats refuse a short header.
  for (Encoding e : {Encoding::kDelta1, Encoding::kDelta}) EXPECT_FALSE(Iterator(e, old.substr(0, 1)).Next());
}

}  // namespace
}  // namespace trainwatch::chunkenc
