#include "tsdb/chunkenc/st.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "tsdb/chunkenc/histogram.h"

namespace trainwatch::chunkenc {
namespace {

TEST(STRunsTest, RunsOfChangesOnly) {
  const std::vector<int64_t> ts = {10, 20, 30, 40, 50, 60};
  const std::vector<int64_t> sts = {0, 5, 5, 35, 35, 0};
  std::vector<STRun> runs;
  RunsOf(ts.data(), sts.data(), ts.size(), &runs);
  EXPECT_EQ(runs, (std::vector<STRun>{{20, 5}, {40, 35}, {60, 0}}));
  for (size_t i = 0; i < ts.size(); i++) EXPECT_EQ(STAt(runs, ts[i]), sts[i]) << ts[i];
  STCursor c;
  c.Reset(&runs);
  for (size_t i = 0; i < ts.size(); i++) EXPECT_EQ(c.At(ts[i]), sts[i]) << ts[i];
}

TEST(STRunsTest, ClipKeepsTheRunInForce) {
  const std::vector<STRun> runs = {{20, 5}, {40, 35}, {60, 0}, {70, 65}};
  std::vector<STRun> out;
  ClipRuns(runs, 30, 65, &out);
  EXPECT_EQ(out, (std::vector<STRun>{{30, 5}, {40, 35}, {60, 0}}));
  ClipRuns(runs, 0, 15, &out);
  EXPECT_TRUE(out.empty());
  ClipRuns(runs, 61, 69, &out);  // in force: 0
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(AnyST(out));
  ClipRuns(runs, 61, 100, &out);
  EXPECT_EQ(out, (std::vector<STRun>{{70, 65}}));
}

TEST(STChunkTest, WrappedFloatChunkRoundTrips) {
  XorChunk c;
  std::vector<int64_t> ts, sts;
  for (int i = 0; i < 100; i++) {
    ts.push_back(1'000'000 + i * 15'000);
    sts.push_back(i < 40 ? 0 : i < 70 ? 1'000'000 + 39 * 15'000 + 1 : 1'000'000 + 69 * 15'000 + 7);
    c.Append(ts.back(), i);
  }
  std::vector<STRun> runs;
  RunsOf(ts.data(), sts.data(), ts.size(), &runs);
  ASSERT_EQ(runs.size(), 2u);
  std::string wrapped;
  WrapST(Encoding::kXor, c.Bytes(), runs, &wrapped);
  EXPECT_LT(wrapped.size(), c.Bytes().size() + 16);

  std::vector<int64_t> got_ts, got_sts;
  std::vector<double> got_vs;
  ASSERT_TRUE(DecodeAllST(Encoding::kStartTimes, wrapped, &got_ts, &got_vs, &got_sts).ok());
  EXPECT_EQ(got_ts, ts);
  EXPECT_EQ(got_sts, sts);
  // Readers that do not ask for start timestamps read the chunk inside.
  std::vector<int64_t> plain_ts;
  std::vector<double> plain_vs;
  ASSERT_TRUE(DecodeAll(Encoding::kStartTimes, wrapped, &plain_ts, &plain_vs).ok());
  EXPECT_EQ(plain_ts, ts);
  Iterator it(Encoding::kStartTimes, wrapped);
  ASSERT_TRUE(it.Seek(ts[50]));
  EXPECT_EQ(it.v(), 50);

  // An unwrapped chunk after a wrapped one: zeros are padded in.
  ASSERT_TRUE(DecodeAllST(Encoding::kXor, c.Bytes(), &got_ts, &got_vs, &got_sts).ok());
  ASSERT_EQ(got_sts.size(), 200u);
  EXPECT_EQ(got_sts[150], 0);
  // While no sample has one, *sts stays empty.
  std::vector<int64_t> none;
  ASSERT_TRUE(DecodeAllST(Encoding::kXor, c.Bytes(), &plain_ts, &plain_vs, &none).ok());
  EXPECT_TRUE(none.empty());
}

TEST(STChunkTest, ExtremeValuesRoundTrip) {
  const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const std::vector<STRun> runs = {{kMin, kMax}, {-5, 1}, {0, kMin}, {kMax, -1}};
  std::string wrapped;
  WrapST(Encoding::kXor, std::string_view("\0\0", 2), runs, &wrapped);
  std::vector<STRun> got;
  Result<Unwrapped> u = UnwrapST(Encoding::kStartTimes, wrapped, &got);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(got, runs);
  EXPECT_EQ(u->enc, Encoding::kXor);
  EXPECT_EQ(u->data.size(), 2u);
}

TEST(STChunkTest, WrappedHistogramChunk) {
  FloatHistogramChunk c;
  model::FloatHistogram h;
  h.schema = 0;
  h.count = 3;
  h.sum = 4;
  h.positive_spans = {{0, 1}};
  h.positive_buckets = {3};
  std::vector<int64_t> ts = {100, 200, 300}, sts = {50, 50, 250};
  for (int64_t t : ts) c.Append(t, h);
  std::vector<STRun> runs;
  RunsOf(ts.data(), sts.data(), ts.size(), &runs);
  std::string wrapped;
  WrapST(Encoding::kFloatHistogram, c.Bytes(), runs, &wrapped);
  std::vector<int64_t> got_ts, got_sts;
  std::vector<model::FloatHistogram> got_hs;
  ASSERT_TRUE(DecodeAllHistogramsST(Encoding::kStartTimes, wrapped, &got_ts, &got_hs, &got_sts).ok());
  EXPECT_EQ(got_ts, ts);
  EXPECT_EQ(got_sts, sts);
  EXPECT_EQ(got_hs.size(), 3u);
  std::vector<double> vs;
  EXPECT_EQ(DecodeAll(Encoding::kStartTimes, wrapped, &got_ts, &vs).code(), StatusCode::kNotSupported);
}

TEST(STChunkTest, MalformedWrappersAreRefused) {
  std::vector<STRun> runs;
  auto bad = [&](std::string data, const std::string& want) {
    Result<Unwrapped> u = UnwrapST(Encoding::kStartTimes, data, &runs);
    ASSERT_FALSE(u.ok()) << want;
    EXPECT_TRUE(u.status().IsCorruption());
    EXPECT_NE(u.status().message().find(want), std::string::npos) << u.status().message();
    std::vector<int64_t> ts;
    std::vector<double> vs;
    EXPECT_FALSE(DecodeAll(Encoding::kStartTimes, data, &ts, &vs).ok());
    Iterator it(Encoding::kStartTimes, data);
    EXPECT_FALSE(it.Next());
    EXPECT_FALSE(it.Err().ok());
  };
  bad("", "empty");
  bad(std::string("\x05\x00", 2), "wraps another");
  bad(std::string("\x01\x09\x01", 3), "runs length");
  bad(std::string("\x01\x02\x05\x00", 4), "run count");
  bad(std::string("\x01\x02\x01\x02", 4), "run 0 truncated");
  // Two runs at the same time.
  bad(std::string("\x01\x05\x02\x02\x00\x00\x00", 7), "does not start after");
  bad(std::string("\x01\x04\x01\x02\x00\x00", 6), "bytes after the runs");
}

}  // namespace
}  // namespace trainwatch::chunkenc
