#include "tsdb/chunkenc/histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "tsdb/chunkenc/histogram_testing.h"

namespace trainwatch::chunkenc {
namespace {

struct HistogramSample {
  int64_t t = 0;
  model::FloatHistogram h;
};

Status DecodeAllHistograms(std::string_view data, std::vector<HistogramSample>* out) {
  std::vector<int64_t> ts;
  std::vector<model::FloatHistogram> hs;
  Status s = chunkenc::DecodeAllHistograms(data, &ts, &hs);
  EXPECT_EQ(ts.size(), hs.size());
  for (size_t i = 0; i < ts.size(); i++) out->push_back({ts[i], hs[i]});
  return s;
}

using model::CounterResetHint;
using testing_hist::CustomHistogram;
using testing_hist::ExpectSameHistogram;
using testing_hist::ExpHistogram;
using testing_hist::StaleHistogram;

std::string Encode(const std::vector<HistogramSample>& s) {
  FloatHistogramChunk c;
  for (const auto& x : s) {
    EXPECT_TRUE(c.CanAppend(x.h));
    c.Append(x.t, x.h);
  }
  EXPECT_EQ(c.NumSamples(), s.size());
  if (!s.empty()) {
    EXPECT_EQ(c.MinTime(), s.front().t);
    EXPECT_EQ(c.MaxTime(), s.back().t);
  }
  return std::string(c.Bytes());
}

void ExpectDecodes(std::string_view data, const std::vector<HistogramSample>& want) {
  std::vector<HistogramSample> got;
  Status st = DecodeAllHistograms(data, &got);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(got[i].t, want[i].t) << i;
    ExpectSameHistogram(want[i].h, got[i].h, "sample " + std::to_string(i));
  }
  FloatHistogramIterator it(data);
  EXPECT_EQ(it.NumSamples(), want.size());
  size_t i = 0;
  while (it.Next()) {
    ASSERT_LT(i, want.size());
    EXPECT_EQ(it.t(), want[i].t);
    EXPECT_TRUE(IdenticalHistograms(it.h(), want[i].h)) << i;
    i++;
  }
  EXPECT_TRUE(it.Err().ok()) << it.Err().ToString();
  EXPECT_EQ(i, want.size());
}

TEST(FloatHistogramChunkTest, ExponentialRoundTrip) {
  std::vector<HistogramSample> s;
  for (int i = 0; i < 120; i++) {
    // Irregular times, hints that change now and then.
    CounterResetHint hint = i == 0 ? CounterResetHint::kCounterReset
                            : i % 17 == 0 ? CounterResetHint::kNotCounterReset
                                          : CounterResetHint::kUnknown;
    s.push_back({1700000000000 + 15000 * i + (i % 5 == 0 ? 37 * i : 0), ExpHistogram(i, hint)});
  }
  const std::string data = Encode(s);
  ExpectDecodes(data, s);
  // Compact: far less than the 9 floats x 8 bytes x 120 of the raw values.
  EXPECT_LT(data.size(), 9u * 8u * 120u / 2);
}

TEST(FloatHistogramChunkTest, CustomBucketsGaugeAndStale) {
  std::vector<HistogramSample> s;
  for (int i = 0; i < 30; i++) s.push_back({1000 * i, CustomHistogram(i, CounterResetHint::kGauge)});
  ExpectDecodes(Encode(s), s);
  // A stale marker has a layout of its own (no buckets): a chunk of its own.
  FloatHistogramChunk c;
  c.Append(5, s[0].h);
  EXPECT_FALSE(c.CanAppend(StaleHistogram()));
  std::vector<HistogramSample> stale = {{7, StaleHistogram()}};
  const std::string data = Encode(stale);
  ExpectDecodes(data, stale);
  std::vector<HistogramSample> got;
  ASSERT_TRUE(DecodeAllHistograms(data, &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(model::IsStaleNaN(got[0].h.sum));
}

TEST(FloatHistogramChunkTest, SpecialValuesAndExtremeTimes) {
  std::vector<HistogramSample> s;
  const double specials[] = {0.0, -0.0, std::numeric_limits<double>::infinity(), std::nan(""), 1e-310, 1e300,
                             model::StaleNaN()};
  int i = 0;
  for (double v : specials) {
    model::FloatHistogram h = ExpHistogram(3);
    h.sum = v;
    h.positive_buckets[1] = v;
    s.push_back({model::kMinTime + i * 1000003LL * (i + 1), h});
    i++;
  }
  s.push_back({model::kMaxTime, ExpHistogram(4)});
  ExpectDecodes(Encode(s), s);
}

TEST(FloatHistogramChunkTest, LayoutChangesAreRefused) {
  FloatHistogramChunk c;
  model::FloatHistogram h = ExpHistogram(1);
  EXPECT_TRUE(c.CanAppend(h));
  c.Append(1, h);
  model::FloatHistogram o = h;
  o.schema = 2;
  EXPECT_FALSE(c.CanAppend(o));
  o = h;
  o.zero_threshold = 0.01;
  EXPECT_FALSE(c.CanAppend(o));
  o = h;
  o.positive_spans[1].offset = 2;
  EXPECT_FALSE(c.CanAppend(o));
  o = CustomHistogram(1);
  EXPECT_FALSE(c.CanAppend(o));
  model::FloatHistogram a = CustomHistogram(1), b = CustomHistogram(1);
  b.custom_values[3] = 6;
  FloatHistogramChunk d;
  d.Append(1, a);
  EXPECT_FALSE(d.CanAppend(b));
  o = h;
  o.counter_reset_hint = CounterResetHint::kCounterReset;  // hints are per sample
  o.count = 1;
  EXPECT_TRUE(c.CanAppend(o));
}

TEST(FloatHistogramChunkTest, SeekAndFloatReadersRefuse) {
  std::vector<HistogramSample> s;
  for (int i = 0; i < 10; i++) s.push_back({100 * i, ExpHistogram(i)});
  const std::string data = Encode(s);
  FloatHistogramIterator it(data);
  ASSERT_TRUE(it.Seek(250));
  EXPECT_EQ(it.t(), 300);
  ExpectSameHistogram(s[3].h, it.h());
  ASSERT_TRUE(it.Seek(100));  // stays
  EXPECT_EQ(it.t(), 300);
  EXPECT_FALSE(it.Seek(5000));
  EXPECT_FALSE(it.Seek(100));  // at the end
  EXPECT_TRUE(it.Err().ok());
  // The float readers do not mistake it for floats.
  Iterator fit(Encoding::kFloatHistogram, data);
  EXPECT_FALSE(fit.Next());
  EXPECT_FALSE(fit.Err().ok());
  std::vector<int64_t> ts;
  std::vector<double> vs;
  EXPECT_FALSE(DecodeAll(Encoding::kFloatHistogram, data, &ts, &vs).ok());
  EXPECT_TRUE(ts.empty());
}

void DecodeGarbage(std::string_view data) {
  std::unique_ptr<char[]> buf(new char[data.empty() ? 1 : data.size()]);
  std::memcpy(buf.get(), data.data(), data.size());
  std::string_view view(buf.get(), data.size());
  std::vector<HistogramSample> out;
  (void)DecodeAllHistograms(view, &out);
  EXPECT_LE(out.size(), 0xffffu);
  FloatHistogramIterator it(view);
  (void)it.Seek(500);
  while (it.Next()) {
  }
}

TEST(FloatHistogramChunkTest, TruncationAndCorruption) {
  std::vector<HistogramSample> s;
  for (int i = 0; i < 40; i++) s.push_back({1000 * i + (i * i) % 7, i % 2 ? ExpHistogram(i) : ExpHistogram(i + 50)});
  const std::string data = Encode(s);
  for (size_t len = 0; len < data.size(); len++) {
    std::string_view cut(data.data(), len);
    DecodeGarbage(cut);
    std::vector<HistogramSample> out;
    EXPECT_FALSE(DecodeAllHistograms(cut, &out).ok()) << len;
  }
  std::mt19937_64 rng(7);
  for (int k = 0; k < 2000; k++) {
    std::string d = data;
    for (int f = 0; f < 1 + k % 3; f++) d[rng() % d.size()] ^= static_cast<char>(1 << (rng() % 8));
    DecodeGarbage(d);
  }
  for (int k = 0; k < 500; k++) {
    std::string d(rng() % 64, '\0');
    for (auto& ch : d) ch = static_cast<char>(rng());
    DecodeGarbage(d);
  }
}

}  // namespace
}  // namespace trainwatch::chunkenc
