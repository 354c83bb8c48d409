#include "remote/prom_chunks.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "tsdb/chunkenc/histogram.h"  // IdenticalHistograms

namespace trainwatch::remote {
namespace {

using model::CounterResetHint;
using model::FloatHistogram;
using model::Span;

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string Hex(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

FloatHistogram H(double count, double zc, double sum, std::vector<Span> ps, std::vector<double> pb,
                 std::vector<Span> ns = {}, std::vector<double> nb = {}) {
  FloatHistogram h;
  h.schema = 0;
  h.zero_threshold = std::ldexp(1.0, -128);
  h.count = count;
  h.zero_count = zc;
  h.sum = sum;
  h.positive_spans = std::move(ps);
  h.positive_buckets = std::move(pb);
  h.negative_spans = std::move(ns);
  h.negative_buckets = std::move(nb);
  return h;
}

FloatHistogram Custom(double count, double sum, std::vector<double> pb) {
  const auto n = static_cast<uint32_t>(pb.size());
  FloatHistogram h = H(count, 0, sum, {{0, n}}, std::move(pb));
  h.schema = model::kCustomBucketsSchema;
  h.zero_threshold = 0;
  h.custom_values = {-1, 0.5, 2.5, 1e9};
  return h;
}

std::vector<PromChunk> Encode(const std::vector<std::pair<int64_t, FloatHistogram>>& samples) {
  PromChunkEncoder e;
  for (const auto& [t, h] : samples) e.AppendHistogram(t, h);
  return e.Finish();
}

std::vector<storage::HistogramSample> Decode(const PromChunk& c) {
  std::vector<model::Sample> floats;
  std::vector<storage::HistogramSample> hists;
  Status s = DecodePromChunk(static_cast<uint64_t>(c.encoding), c.data, INT64_MIN, INT64_MAX, &floats, &hists);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(floats.empty());
  return hists;
}

// The expected bytes below come from src/remote/prom_chunks_golden.py, a
// line-by-line transcription of Prometheus 3's Go writers (bstream.go,
// varbit.go, xorWrite, writeHistogramChunkLayout, appendFloatHistogram,
// appendHistogram); the case names match. The first bytes of float_plain
// were also worked out by hand: 0003 (3 samples), 00 (unknown counter
// reset), 74 (zero threshold 2^-128: exponent -127 + 243 = 116), then
// schema 0 '0', 1 span '10001', length 2 '10010', offset 0 '0', 1 negative
// span '10001', length 1 '10001', offset -1 '10111' = 46 48 c6 and 3 bits,
// t=1000 '11110' + 12 bits...
TEST(PromChunksTest, FloatHistogramGoldenBytes) {
  auto plain = Encode({{1000, H(3, 1, 2.5, {{0, 2}}, {1, 1}, {{-1, 1}}, {0})},
                       {2000, H(5, 1, 4.5, {{0, 2}}, {2, 1}, {{-1, 1}}, {1})},
                       {3000, H(6, 1, 5.0, {{0, 2}}, {2, 2}, {{-1, 1}}, {1})}});
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].encoding, PromChunkEncoding::kFloatHistogram);
  EXPECT_EQ(plain[0].min_time, 1000);
  EXPECT_EQ(plain[0].max_time, 3000);
  EXPECT_EQ(Hex(plain[0].data),
            "000300744648c6fe3e840080000000000003ff000000000000040040000000000003ff00000000000003ff000000000000000000000"
            "00000000f1f46b0fb589784bffec457fe9a3612fff8");

  // A new bucket recodes the chunk: one chunk, the first sample with a zero
  // bucket at index 2.
  auto recoded = Encode({{1000, H(2, 0, 1.0, {{0, 2}}, {1, 1})}, {1500, H(4, 0, 3.0, {{0, 3}}, {1, 2, 1})}});
  ASSERT_EQ(recoded.size(), 1u);
  EXPECT_EQ(Hex(recoded[0].data),
            "0002007446678fa100000000000000000000000000000000ffc0000000000000ffc0000000000000ffc000000000000000000000000"
            "00003c3e9ac1b099ffec25fffc457fe");

  // A counter reset cuts; the new chunk says CounterReset.
  auto reset = Encode({{1000, H(4, 0, 2.0, {{0, 1}}, {4})}, {2000, H(1, 0, 0.5, {{0, 1}}, {1})}});
  ASSERT_EQ(reset.size(), 2u);
  EXPECT_EQ(reset[0].data[2], '\0');
  EXPECT_EQ(Hex(reset[1].data), "0001807446279f40ffc00000000000000000000000000000ff80000000000000ffc0000000000000");
  EXPECT_EQ(reset[1].min_time, 2000);

  auto custom = Encode({{-5, Custom(7, 12.25, {1, 2, 0, 3, 1})}, {10, Custom(9, 15, {1, 2, 1, 4, 1})}});
  ASSERT_EQ(custom.size(), 1u);
  EXPECT_EQ(Hex(custom[0].data),
            "00020000ee5c6a517fe0000000000001df5f4e290737359400000003768038000000000000000000000000000080510000000000007f"
            "e00000000000008000000000000000000000000000000080100000000000007fe00000000000018fd42fdb44d3115ffeb0b0");

  FloatHistogram g1 = H(4, 2, -1.5, {{1, 1}}, {2}), g2 = H(2, 1, 3.0, {{1, 1}}, {1});
  for (FloatHistogram* g : {&g1, &g2}) {
    g->schema = 3;
    g->zero_threshold = 0.001;
    g->counter_reset_hint = CounterResetHint::kGauge;
  }
  auto gauge = Encode({{100, g1}, {200, g2}});
  ASSERT_EQ(gauge.size(), 1u);
  EXPECT_EQ(Hex(gauge[0].data),
            "0002c0ff3f50624dd2f1a9fc9c631719100400000000000010000000000000002ffe0000000000001000000000000000"
            "38c9ac1e12fffe033fff097ffc");
}

// HISTOGRAM chunks come only from Prometheus servers; golden bytes from the
// same script (case int_plain: NotCounterReset header, buckets 3 and 5 as
// the deltas 3, 2).
TEST(PromChunksTest, IntegerHistogramGoldenBytesDecode) {
  PromChunk c{1000, 3000, PromChunkEncoding::kHistogram, Unhex("0003407446478fa313140340000000000009cbc7d138ec17f10d237a00")};
  auto hs = Decode(c);
  ASSERT_EQ(hs.size(), 3u);
  const double counts[] = {9, 12, 15}, zcs[] = {1, 2, 3}, sums[] = {20, 27.5, 35};
  const std::vector<double> buckets[] = {{3, 5}, {4, 6}, {5, 7}};
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(hs[i].t, 1000 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(hs[i].h.count, counts[i]);
    EXPECT_EQ(hs[i].h.zero_count, zcs[i]);
    EXPECT_EQ(hs[i].h.sum, sums[i]);
    EXPECT_EQ(hs[i].h.positive_buckets, buckets[i]);
    EXPECT_EQ(hs[i].h.positive_spans, (std::vector<Span>{{0, 2}}));
    EXPECT_EQ(hs[i].h.zero_threshold, std::ldexp(1.0, -128));
    // Prometheus's iterators: unknown for a chunk's first sample.
    EXPECT_EQ(hs[i].h.counter_reset_hint, i == 0 ? CounterResetHint::kUnknown : CounterResetHint::kNotCounterReset);
  }
}

// XOR chunks as Prometheus writes them, read as Prometheus reads them: the
// delta-of-deltas +8192, +65536 and +524288 sit at the top of the 14-, 17-
// and 20-bit buckets (case xor_edges of the script).
TEST(PromChunksTest, XorGoldenBytesDecodeBucketEdges) {
  std::vector<model::Sample> floats;
  std::vector<storage::HistogramSample> hists;
  ASSERT_TRUE(DecodePromChunk(1, Unhex("0007003ff0000000000000e8075000612fffd000ed07a000180efff7a00002bff0"), INT64_MIN,
                              INT64_MAX, &floats, &hists)
                  .ok());
  const std::vector<model::Sample> want = {{0, 1.0},      {1000, 1.0},   {10192, 2.0},  {11193, 2.5},
                                           {77730, -1.0}, {668555, 0.0}, {1259380, 0.0}};
  ASSERT_EQ(floats.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(floats[i].t, want[i].t) << i;
    EXPECT_EQ(floats[i].v, want[i].v) << i;
  }
  // What PromChunkEncoder writes for floats (our XOR writer) reads the same.
  PromChunkEncoder e;
  for (const model::Sample& s : want) e.AppendFloat(s.t, s.v);
  auto chunks = e.Finish();
  ASSERT_EQ(chunks.size(), 1u);
  floats.clear();
  ASSERT_TRUE(DecodePromChunk(1, chunks[0].data, INT64_MIN, INT64_MAX, &floats, &hists).ok());
  ASSERT_EQ(floats.size(), want.size());
  EXPECT_EQ(floats.back().t, 1259380);
}

TEST(PromChunksTest, GoldenFloatChunksDecode) {
  auto custom = Decode({-5, 10, PromChunkEncoding::kFloatHistogram,
                        Unhex("00020000ee5c6a517fe0000000000001df5f4e290737359400000003768038000000000000000000000000000080"
                              "510000000000007fe00000000000008000000000000000000000000000000080100000000000007fe000000000"
                              "00018fd42fdb44d3115ffeb0b0")});
  ASSERT_EQ(custom.size(), 2u);
  EXPECT_EQ(custom[1].t, 10);
  EXPECT_EQ(custom[1].h.custom_values, (std::vector<double>{-1, 0.5, 2.5, 1e9}));
  EXPECT_EQ(custom[1].h.positive_buckets, (std::vector<double>{1, 2, 1, 4, 1}));
  EXPECT_EQ(custom[1].h.schema, model::kCustomBucketsSchema);
  auto gauge = Decode({100, 200, PromChunkEncoding::kFloatHistogram,
                       Unhex("0002c0ff3f50624dd2f1a9fc9c631719100400000000000010000000000000002ffe0000000000001000000000"
                             "00000038c9ac1e12fffe033fff097ffc")});
  ASSERT_EQ(gauge.size(), 2u);
  EXPECT_EQ(gauge[0].h.zero_threshold, 0.001);
  EXPECT_EQ(gauge[0].h.counter_reset_hint, CounterResetHint::kGauge);
  EXPECT_EQ(gauge[1].h.sum, 3.0);
}

// Round trips through the encoder and decoder: a random walk with buckets
// appearing (recode), empty buckets vanishing (filled back in), resets,
// schema changes, gauges, stale markers and custom buckets.
TEST(PromChunksTest, RoundTripWithLayoutChangesAndResets) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<int64_t, FloatHistogram>> in;
  std::vector<double> b = {1, 0, 2};
  std::vector<Span> spans = {{0, 3}};
  int64_t t = 0;
  for (int i = 0; i < 700; i++) {
    t += 1 + static_cast<int64_t>(rng() % 3000);
    const uint64_t r = rng() % 100;
    FloatHistogram h;
    if (r < 3) {
      b.assign(b.size(), 0);  // reset
    } else if (r < 8 && spans.back().length < 20) {
      spans.back().length++;  // a new bucket: recode
      b.push_back(1);
    } else {
      for (double& x : b) x += static_cast<double>(rng() % 3) * 0.5;
    }
    double total = 0;
    for (double x : b) total += x;
    h = H(total, 0, total * 1.5, spans, b);
    if (r >= 8 && r < 12) {
      // The empty middle bucket missing from this sample: filled back in.
      if (b[1] == 0) h = H(total, 0, total * 1.5, {{0, 1}, {1, static_cast<uint32_t>(b.size() - 2)}},
                           [&] { std::vector<double> v = b; v.erase(v.begin() + 1); return v; }());
    }
    if (r >= 12 && r < 14) h.schema = static_cast<int32_t>(rng() % 3);  // layout change: cut
    if (r >= 14 && r < 16) h.counter_reset_hint = CounterResetHint::kGauge;
    if (r == 16) h.sum = model::StaleNaN();
    if (r == 17) {
      h = Custom(3, 1, {1, 1, 0, 1, 0});
    }
    in.emplace_back(t, h);
  }
  auto chunks = Encode(in);
  ASSERT_GT(chunks.size(), 6u);
  // The walk met resets, gauges and recodes (a chunk whose first sample has
  // fewer buckets than its layout).
  int headers[4] = {};
  for (const PromChunk& c : chunks) headers[static_cast<uint8_t>(c.data[2]) >> 6]++;
  EXPECT_GT(headers[2], 0);  // CounterReset
  EXPECT_GT(headers[3], 0);  // GaugeType
  size_t k = 0;
  int64_t prev_max = INT64_MIN;
  for (const PromChunk& c : chunks) {
    EXPECT_GT(c.min_time, prev_max);
    prev_max = c.max_time;
    auto out = Decode(c);
    ASSERT_LE(out.size(), 120u);
    EXPECT_EQ(out.front().t, c.min_time);
    EXPECT_EQ(out.back().t, c.max_time);
    for (const auto& s : out) {
      ASSERT_LT(k, in.size());
      const FloatHistogram& want = in[k].second;
      EXPECT_EQ(s.t, in[k].first);
      if (model::IsStaleNaN(want.sum)) {
        EXPECT_TRUE(model::IsStaleNaN(s.h.sum)) << k;
      } else {
        // Equal data, though recoding may have added empty buckets.
        FloatHistogram got = s.h, w = want;
        got.Compact(0);
        w.Compact(0);
        EXPECT_TRUE(got.Equals(w)) << k;
        EXPECT_EQ(s.h.counter_reset_hint == CounterResetHint::kGauge, want.counter_reset_hint == CounterResetHint::kGauge)
            << k;
      }
      k++;
    }
  }
  EXPECT_EQ(k, in.size());
}

// The appender's other widenings (float_histogram.go AppendFloatHistogram):
// a sample lacking an empty bucket of the chunk gets it (backward inserts
// only: the chunk's spans); gauge histograms merge both ways.
TEST(PromChunksTest, MissingEmptyBucketsAndGaugesWiden) {
  auto back = Encode({{1, H(3, 0, 1, {{0, 3}}, {1, 0, 2})}, {2, H(5, 0, 2, {{0, 1}, {1, 1}}, {2, 3})}});
  ASSERT_EQ(back.size(), 1u);
  auto hs = Decode(back[0]);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1].h.positive_spans, (std::vector<Span>{{0, 3}}));
  EXPECT_EQ(hs[1].h.positive_buckets, (std::vector<double>{2, 0, 3}));
  // A bucket that still holds counts vanishing is a reset.
  EXPECT_EQ(Encode({{1, H(3, 0, 1, {{0, 2}}, {1, 2})}, {2, H(4, 0, 1, {{1, 1}}, {4})}}).size(), 2u);

  FloatHistogram g1 = H(1, 0, 1, {{0, 1}}, {1}), g2 = H(2, 0, 1, {{1, 1}}, {2});
  g1.counter_reset_hint = g2.counter_reset_hint = CounterResetHint::kGauge;
  auto gauge = Encode({{1, g1}, {2, g2}});
  ASSERT_EQ(gauge.size(), 1u);
  EXPECT_EQ(gauge[0].data[2], '\xc0');
  hs = Decode(gauge[0]);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0].h.positive_spans, (std::vector<Span>{{0, 2}}));
  EXPECT_EQ(hs[0].h.positive_buckets, (std::vector<double>{1, 0}));
  EXPECT_EQ(hs[1].h.positive_buckets, (std::vector<double>{0, 2}));
  // A counter histogram after gauges starts a chunk with an unknown header.
  auto mixed = Encode({{1, g1}, {2, H(3, 0, 1, {{0, 1}}, {3})}});
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[1].data[2], '\0');
}

TEST(PromChunksTest, SeriesCutsAsSeriesToChunkEncoder) {
  PromChunkEncoder e;
  for (int i = 0; i < 130; i++) e.AppendFloat(i, i * 0.5);
  for (int i = 130; i < 135; i++) e.AppendHistogram(i, H(i, 0, 1, {{0, 1}}, {static_cast<double>(i)}));
  e.AppendFloat(135, 1);
  auto chunks = e.Finish();
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].encoding, PromChunkEncoding::kXor);
  EXPECT_EQ(chunks[0].max_time, 119);
  EXPECT_EQ(chunks[1].min_time, 120);
  EXPECT_EQ(chunks[2].encoding, PromChunkEncoding::kFloatHistogram);
  EXPECT_EQ(chunks[2].data[2], '\0');  // a type change is no counter reset
  EXPECT_EQ(chunks[3].encoding, PromChunkEncoding::kXor);
  std::vector<model::Sample> floats;
  std::vector<storage::HistogramSample> hists;
  for (const PromChunk& c : chunks) {
    ASSERT_TRUE(DecodePromChunk(static_cast<uint64_t>(c.encoding), c.data, 10, 132, &floats, &hists).ok());
  }
  EXPECT_EQ(floats.size(), 120u);  // 10..129
  EXPECT_EQ(floats.front().t, 10);
  ASSERT_EQ(hists.size(), 3u);  // 130..132
  EXPECT_EQ(hists.back().h.positive_buckets, std::vector<double>{132});
}

TEST(PromChunksTest, MalformedChunksAreNamed) {
  auto err = [](uint64_t enc, std::string data) {
    std::vector<model::Sample> f;
    std::vector<storage::HistogramSample> h;
    Status s = DecodePromChunk(enc, data, INT64_MIN, INT64_MAX, &f, &h);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_EQ(err(7, "x"), "chunk encoding 7 (only XOR = 1, HISTOGRAM = 2 and FLOAT_HISTOGRAM = 3 are read)");
  EXPECT_EQ(err(3, "\x00"), "float histogram chunk: shorter than its 3-byte header");
  std::string good = Encode({{1, H(1, 0, 1, {{0, 1}}, {1})}, {2, H(2, 0, 1, {{0, 1}}, {2})}})[0].data;
  EXPECT_NE(err(3, good.substr(0, good.size() - 2)).find("float histogram chunk: sample 2: "), std::string::npos);
  // Schema 100 (zero threshold 0xff + 0.0, then varbit 100).
  EXPECT_EQ(err(3, Unhex("000100ff0000000000000000e320")), "float histogram chunk: unknown schema 100");
  // One span claiming 2^25-1 buckets in a few bytes: refused before allocating.
  EXPECT_EQ(err(3, Unhex("0001000047f7fffffc")), "float histogram chunk: layout: 33554431 buckets, more than the chunk holds");
  EXPECT_EQ(err(1, std::string("\x00\x05", 2)), "xor chunk: sample 1: timestamp truncated");
  EXPECT_EQ(err(1, "\x00"), "xor chunk: shorter than its 2-byte header");
}

}  // namespace
}  // namespace trainwatch::remote
