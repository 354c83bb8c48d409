#include "tsdb/wal/records.h"

#include <bit>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "model/sample.h"
#include "tsdb/chunkenc/histogram_testing.h"

namespace trainwatch::wal {
namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

double FromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

void ExpectSamplesEqual(const std::vector<RefSample>& got, const std::vector<RefSample>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].ref, want[i].ref) << i;
    EXPECT_EQ(got[i].t, want[i].t) << i;
    EXPECT_EQ(Bits(got[i].v), Bits(want[i].v)) << i;
  }
}

std::vector<RefSample> SpecialSamples() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr uint64_t kMaxRef = std::numeric_limits<uint64_t>::max();
  return {
      {1, 1700000000000, 1.5},
      {1, 1700000000000, model::StaleNaN()},
      {2, 1700000015000, std::nan("")},
      {kMaxRef, -1, -0.0},
      {0, kMin, kInf},
      {kMaxRef - 1, kMax, -kInf},
      {42, -1700000000000, FromBits(0x7ff8dead0000beefull)},
      {1ull << 40, 0, std::numeric_limits<double>::denorm_min()},
      {3, kMin, std::numeric_limits<double>::max()},
      {3, kMax, 0.0},
  };
}

TEST(WalRecordsTest, SamplesRoundTripBitExact) {
  auto want = SpecialSamples();
  std::string rec;
  EncodeSamples(want, &rec);
  EXPECT_EQ(Type(rec), RecordType::kSamples);
  std::vector<RefSample> got;
  ASSERT_TRUE(DecodeSamples(rec, &got).ok());
  ExpectSamplesEqual(got, want);
  EXPECT_EQ(Bits(got[1].v), model::kStaleNaNBits);
}

TEST(WalRecordsTest, SamplesRecordsCarryTheirLatestTimeAndOldOnesStillDecode) {
  std::vector<RefSample> want = {{1, 5000, 1.5}, {2, 9000, 2.5}, {1, -3, 0}};
  std::string rec;
  EncodeSamples(want, &rec);
  int64_t maxt = 0;
  ASSERT_TRUE(SamplesMaxTime(rec, &maxt));
  EXPECT_EQ(maxt, 9000);
  // The layout before it: type byte 2, then the count and the samples.
  std::string old(1, '\x02');
  size_t head = 1;
  while (static_cast<uint8_t>(rec[head]) & 0x80) head++;  // the latest time's varint
  old += rec.substr(head + 1);
  std::vector<RefSample> got;
  ASSERT_TRUE(DecodeSamples(old, &got).ok());
  ExpectSamplesEqual(got, want);
  EXPECT_FALSE(SamplesMaxTime(old, &maxt));
  // A head that understates the latest time would make replay skip samples.
  std::string lying = rec;
  lying[1] = static_cast<char>(lying[1] - 2);
  Status s = DecodeSamples(lying, &got);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("latest timestamp"), std::string::npos) << s.ToString();
}

TEST(WalRecordsTest, SamplesRoundTripRandom) {
  std::mt19937_64 rng(3);
  std::vector<RefSample> want(5000);
  for (auto& s : want) s = {rng() >> (rng() % 64), static_cast<int64_t>(rng()), FromBits(rng())};
  std::string rec;
  EncodeSamples(want, &rec);
  std::vector<RefSample> got;
  ASSERT_TRUE(DecodeSamples(rec, &got).ok());
  ExpectSamplesEqual(got, want);
}

TEST(WalRecordsTest, TypicalSamplesAreCompact) {
  std::vector<RefSample> batch;
  for (uint64_t i = 0; i < 5000; i++) batch.push_back({1000 + i, 1700000000000, static_cast<double>(i)});
  std::string rec;
  EncodeSamples(batch, &rec);
  // ~1 byte ref delta + ~1 byte time delta + 8 value bytes.
  EXPECT_LE(rec.size(), 5000u * 10 + 16);
}

TEST(WalRecordsTest, EmptyRecordsRoundTrip) {
  std::string rec = "stale";
  EncodeSamples({}, &rec);
  std::vector<RefSample> samples{{1, 2, 3}};
  ASSERT_TRUE(DecodeSamples(rec, &samples).ok());
  EXPECT_TRUE(samples.empty());
  EncodeSeries({}, &rec);
  std::vector<RefSeries> series{{1, {}}};
  ASSERT_TRUE(DecodeSeries(rec, &series).ok());
  EXPECT_TRUE(series.empty());
}

TEST(WalRecordsTest, SeriesRoundTrip) {
  std::vector<RefSeries> want = {
      {1, model::Labels{{"__name__", "gpu_util"}, {"gpu", "0"}, {"host", "a"}}},
      {std::numeric_limits<uint64_t>::max(), model::Labels{{"__name__", "up"}}},
      {7, model::Labels{}},
      {8, model::Labels{{"k", std::string("v\0\xff\n", 4)}, {"long", std::string(1000, 'z')}}},
  };
  std::string rec;
  EncodeSeries(want, &rec);
  EXPECT_EQ(Type(rec), RecordType::kSeries);
  std::vector<RefSeries> got;
  ASSERT_TRUE(DecodeSeries(rec, &got).ok());
  EXPECT_EQ(got, want);
  // Pre-encoded label sets give the same bytes.
  std::vector<std::string> enc(want.size());
  std::vector<std::pair<uint64_t, std::string_view>> pairs;
  for (size_t i = 0; i < want.size(); i++) {
    model::AppendEncodedLabels(want[i].labels, &enc[i]);
    pairs.emplace_back(want[i].ref, enc[i]);
  }
  std::string rec2;
  EncodeSeriesEncoded(pairs, &rec2);
  EXPECT_EQ(rec2, rec);
}

TEST(WalRecordsTest, TypeOfUnknownRecords) {
  EXPECT_EQ(Type(""), RecordType::kUnknown);
  EXPECT_EQ(Type(std::string_view("\0", 1)), RecordType::kUnknown);
  EXPECT_EQ(Type("\x09rest"), RecordType::kUnknown);
  std::vector<RefSample> s;
  std::vector<RefSeries> r;
  EXPECT_TRUE(DecodeSamples("\x09rest", &s).IsCorruption());
  EXPECT_TRUE(DecodeSeries("", &r).IsCorruption());
}

TEST(WalRecordsTest, WrongDecoderRejected) {
  std::string samples, series;
  EncodeSamples(SpecialSamples(), &samples);
  EncodeSeries({{1, model::Labels{{"a", "b"}}}}, &series);
  std::vector<RefSample> s;
  std::vector<RefSeries> r;
  EXPECT_TRUE(DecodeSamples(series, &s).IsCorruption());
  EXPECT_TRUE(DecodeSeries(samples, &r).IsCorruption());
}

TEST(WalRecordsTest, TruncatedOrExtendedSamplesRejected) {
  std::string rec;
  EncodeSamples(SpecialSamples(), &rec);
  std::vector<RefSample> got;
  for (size_t n = 0; n < rec.size(); n++) {
    Status s = DecodeSamples(std::string_view(rec).substr(0, n), &got);
    EXPECT_TRUE(s.IsCorruption()) << "prefix " << n;
    EXPECT_TRUE(got.empty());
  }
  EXPECT_TRUE(DecodeSamples(rec + '\0', &got).IsCorruption());
}

TEST(WalRecordsTest, TruncatedOrExtendedSeriesRejected) {
  std::string rec;
  EncodeSeries({{5, model::Labels{{"__name__", "x"}, {"job", "node"}}}, {6, model::Labels{{"a", "b"}}}}, &rec);
  std::vector<RefSeries> got;
  for (size_t n = 0; n < rec.size(); n++) {
    EXPECT_TRUE(DecodeSeries(std::string_view(rec).substr(0, n), &got).IsCorruption()) << "prefix " << n;
  }
  EXPECT_TRUE(DecodeSeries(rec + 'x', &got).IsCorruption());
}

TEST(WalRecordsTest, HugeCountsRejectedWithoutAllocating) {
  std::string rec(1, static_cast<char>(RecordType::kSamples));
  rec += std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9);
  std::vector<RefSample> s;
  EXPECT_TRUE(DecodeSamples(rec, &s).IsCorruption());
  rec[0] = static_cast<char>(RecordType::kSeries);
  std::vector<RefSeries> r;
  EXPECT_TRUE(DecodeSeries(rec, &r).IsCorruption());
}

TEST(WalRecordsTest, InvalidLabelsRejected) {
  auto encode = [](std::vector<std::pair<std::string, std::string>> pairs) {
    std::string rec(1, static_cast<char>(RecordType::kSeries));
    rec += '\x01';  // one series
    rec += '\x05';  // ref
    rec += static_cast<char>(pairs.size());
    for (auto& [n, v] : pairs) {
      rec += static_cast<char>(n.size()) + n;
      rec += static_cast<char>(v.size()) + v;
    }
    return rec;
  };
  std::vector<RefSeries> got;
  ASSERT_TRUE(DecodeSeries(encode({{"a", "1"}, {"b", "2"}}), &got).ok());
  EXPECT_TRUE(DecodeSeries(encode({{"b", "1"}, {"a", "2"}}), &got).IsCorruption());
  EXPECT_TRUE(DecodeSeries(encode({{"a", "1"}, {"a", "2"}}), &got).IsCorruption());
  EXPECT_TRUE(DecodeSeries(encode({{"", "1"}}), &got).IsCorruption());
}

// Random garbage after a valid type byte never crashes (run under ASan).
TEST(WalRecordsTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(11);
  std::vector<RefSample> s;
  std::vector<RefSeries> r;
  for (int i = 0; i < 20000; i++) {
    std::string rec(rng() % 64, '\0');
    for (auto& c : rec) c = static_cast<char>(rng() % 4 == 0 ? rng() : rng() % 8);
    if (!rec.empty()) rec[0] = static_cast<char>(1 + rng() % 2);
    (void)DecodeSamples(rec, &s);
    (void)DecodeSeries(rec, &r);
  }
}

}  // namespace
}  // namespace trainwatch::wal

namespace trainwatch::wal {
namespace {

std::vector<RefHistogramSample> SomeHistogramSamples() {
  std::vector<RefHistogramSample> out;
  out.push_back({3, 1700000000000, testing_hist::ExpHistogram(1, model::CounterResetHint::kCounterReset)});
  out.push_back({1, 1700000000001, testing_hist::CustomHistogram(2, model::CounterResetHint::kGauge)});
  out.push_back({3, 1699999999000, testing_hist::StaleHistogram()});
  model::FloatHistogram h = testing_hist::ExpHistogram(5, model::CounterResetHint::kNotCounterReset);
  h.schema = -4;
  h.sum = -0.0;
  h.positive_buckets[2] = std::numeric_limits<double>::infinity();
  out.push_back({1ull << 40, model::kMinTime, h});
  return out;
}

TEST(WalRecordsTest, HistogramSamplesRoundTripEveryField) {
  const auto want = SomeHistogramSamples();
  std::string rec;
  EncodeHistogramSamples(want, &rec);
  EXPECT_EQ(Type(rec), RecordType::kHistogramSamples);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), 4);
  int64_t maxt = 0;
  ASSERT_TRUE(HistogramSamplesMaxTime(rec, &maxt));
  EXPECT_EQ(maxt, 1700000000001);
  EXPECT_FALSE(SamplesMaxTime(rec, &maxt));  // not a float samples record
  std::vector<RefHistogramSample> got;
  Status s = DecodeHistogramSamples(rec, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(got[i].ref, want[i].ref);
    EXPECT_EQ(got[i].t, want[i].t);
    testing_hist::ExpectSameHistogram(want[i].h, got[i].h, "sample " + std::to_string(i));
  }
  EXPECT_TRUE(model::IsStaleNaN(got[2].h.sum));
  // Other decoders refuse it; it refuses theirs.
  std::vector<RefSample> samples;
  EXPECT_TRUE(DecodeSamples(rec, &samples).IsCorruption());
  std::string frec;
  EncodeSamples({{1, 2, 3.0}}, &frec);
  EXPECT_TRUE(DecodeHistogramSamples(frec, &got).IsCorruption());
  EXPECT_TRUE(got.empty());
  // Empty.
  EncodeHistogramSamples({}, &rec);
  ASSERT_TRUE(DecodeHistogramSamples(rec, &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST(WalRecordsTest, CorruptHistogramSamplesRejected) {
  std::string rec;
  EncodeHistogramSamples(SomeHistogramSamples(), &rec);
  std::vector<RefHistogramSample> got;
  for (size_t n = 0; n < rec.size(); n++) {
    Status s = DecodeHistogramSamples(std::string_view(rec).substr(0, n), &got);
    EXPECT_TRUE(s.IsCorruption()) << "prefix " << n;
    EXPECT_TRUE(got.empty());
  }
  EXPECT_TRUE(DecodeHistogramSamples(rec + '\0', &got).IsCorruption());
  // A hint byte out of range, spans that do not cover the buckets.
  std::vector<RefHistogramSample> one = {{1, 10, testing_hist::ExpHistogram(1)}};
  EncodeHistogramSamples(one, &rec);
  std::string bad = rec;
  bad[5] = 9;  // type, maxt, count, ref delta, t delta (a byte each), then the hint
  Status hs = DecodeHistogramSamples(bad, &got);
  EXPECT_TRUE(hs.IsCorruption());
  EXPECT_NE(hs.message().find("hint"), std::string::npos) << hs.message();
  one[0].h.positive_buckets.pop_back();
  EncodeHistogramSamples(one, &rec);
  Status s = DecodeHistogramSamples(rec, &got);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("spans"), std::string::npos) << s.message();
  // A huge count does not allocate.
  std::string huge(1, static_cast<char>(RecordType::kHistogramSamples));
  huge += std::string("\x02\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
  EXPECT_TRUE(DecodeHistogramSamples(huge, &got).IsCorruption());
  // Random bytes after the type byte never crash.
  std::mt19937_64 rng(3);
  for (int k = 0; k < 3000; k++) {
    std::string r(1 + rng() % 80, '\0');
    for (auto& ch : r) ch = static_cast<char>(rng());
    r[0] = static_cast<char>(RecordType::kHistogramSamples);
    (void)DecodeHistogramSamples(r, &got);
    std::string flipped = rec;
    flipped[1 + rng() % (flipped.size() - 1)] ^= static_cast<char>(1 << (rng() % 8));
    Status fs = DecodeHistogramSamples(flipped, &got);
    EXPECT_TRUE(fs.ok() || fs.IsCorruption());
  }
}

TEST(WalRecordsTest, SamplesWithStartTimestampsRoundTrip) {
  const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const std::vector<RefSampleST> want = {{5, 1000, 1.5, 900},
                                         {5, 2000, 2.5, 900},
                                         {7, 1500, model::StaleNaN(), 0},
                                         {1ull << 50, kMin, -0.0, kMax},
                                         {2, kMax, std::numeric_limits<double>::infinity(), kMin}};
  std::string rec;
  EncodeSamplesST(want, &rec);
  EXPECT_EQ(Type(rec), RecordType::kSamplesST);
  int64_t maxt = 0;
  ASSERT_TRUE(SamplesSTMaxTime(rec, &maxt));
  EXPECT_EQ(maxt, kMax);
  EXPECT_FALSE(SamplesMaxTime(rec, &maxt));
  std::vector<RefSampleST> got;
  ASSERT_TRUE(DecodeSamplesST(rec, &got).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(got[i].ref, want[i].ref);
    EXPECT_EQ(got[i].t, want[i].t);
    EXPECT_EQ(std::bit_cast<uint64_t>(got[i].v), std::bit_cast<uint64_t>(want[i].v)) << i;
    EXPECT_EQ(got[i].st, want[i].st) << i;
  }
  // A start kept from sample to sample costs one byte.
  std::vector<RefSampleST> steady, none;
  for (int i = 0; i < 100; i++) {
    steady.push_back({1, 1000 + i * 15000, 1.0 * i, 77});
  }
  std::string with, without;
  EncodeSamplesST(steady, &with);
  std::vector<RefSample> plain;
  for (const auto& x : steady) plain.push_back({x.ref, x.t, x.v});
  EncodeSamples(plain, &without);
  EXPECT_LE(with.size(), without.size() + 100 + 8);
  // Malformed: every prefix, a trailing byte, a wrong latest time, other decoders.
  for (size_t n = 0; n < rec.size(); n++) {
    EXPECT_TRUE(DecodeSamplesST(std::string_view(rec).substr(0, n), &got).IsCorruption()) << n;
    EXPECT_TRUE(got.empty());
  }
  EXPECT_TRUE(DecodeSamplesST(rec + '\0', &got).IsCorruption());
  std::vector<RefSample> s;
  EXPECT_TRUE(DecodeSamples(rec, &s).IsCorruption());
  std::string frec;
  EncodeSamples({{1, 2, 3.0}}, &frec);
  Status ws = DecodeSamplesST(frec, &got);
  EXPECT_NE(ws.message().find("wrong type byte"), std::string::npos) << ws.message();
  std::string lie = with;
  lie[1] = static_cast<char>(lie[1] ^ 2);  // the latest timestamp in the head
  EXPECT_TRUE(DecodeSamplesST(lie, &got).IsCorruption());
  std::mt19937_64 rng(5);
  for (int k = 0; k < 3000; k++) {
    std::string r = rec;
    r[1 + rng() % (r.size() - 1)] ^= static_cast<char>(1 << (rng() % 8));
    Status fs = DecodeSamplesST(r, &got);
    EXPECT_TRUE(fs.ok() || fs.IsCorruption());
  }
}

TEST(WalRecordsTest, HistogramSamplesWithStartTimestampsRoundTrip) {
  auto want = SomeHistogramSamples();
  want[0].st = 1;
  want[1].st = want[1].t;
  std::string rec;
  EncodeHistogramSamples(want, &rec);
  EXPECT_EQ(Type(rec), RecordType::kHistogramSamples);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), 6);
  int64_t maxt = 0;
  ASSERT_TRUE(HistogramSamplesMaxTime(rec, &maxt));
  EXPECT_EQ(maxt, 1700000000001);
  std::vector<RefHistogramSample> got;
  ASSERT_TRUE(DecodeHistogramSamples(rec, &got).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(got[i].st, want[i].st) << i;
    testing_hist::ExpectSameHistogram(want[i].h, got[i].h, "sample " + std::to_string(i));
  }
  for (size_t n = 0; n < rec.size(); n++) {
    EXPECT_TRUE(DecodeHistogramSamples(std::string_view(rec).substr(0, n), &got).IsCorruption()) << n;
  }
  // Reused output: a type 4 record leaves no start timestamp behind.
  got.assign(4, {1, 1, {}, 99});
  EncodeHistogramSamples(SomeHistogramSamples(), &rec);
  ASSERT_TRUE(DecodeHistogramSamples(rec, &got).ok());
  for (const auto& x : got) EXPECT_EQ(x.st, 0);
}

}  // namespace
}  // namespace trainwatch::wal
