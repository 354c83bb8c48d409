#include "tsdb/chunk_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/file.h"
#include "tsdb/chunkenc/histogram_testing.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::tsdb::chunklog {
namespace {

HeadChunk Chunk(int64_t mint, int64_t maxt, std::string_view bytes, chunkenc::Encoding enc = chunkenc::Encoding::kDense) {
  HeadChunk c;
  c.mint = mint;
  c.maxt = maxt;
  c.num_samples = 3;
  c.enc = enc;
  c.data = ChunkBytes::Copy(bytes);
  return c;
}

TEST(ChunkLogTest, RecordsRoundTrip) {
  // Delta chunks of both formats (a log written before 2026-12-08 holds
  // the first's).
  std::vector<RefChunk> in = {{1, Chunk(-5000, 7000, "abc")},
                              {1ull << 40, Chunk(10, 10, std::string(300, 'x'), chunkenc::Encoding::kDelta)},
                              {2, Chunk(10, 10, "old", chunkenc::Encoding::kDelta1)}};
  std::string rec;
  EncodeChunks(in.data(), in.size(), &rec);
  std::vector<RefChunk> out;
  ASSERT_TRUE(DecodeChunks(rec, &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); i++) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.mint, in[i].second.mint);
    EXPECT_EQ(out[i].second.maxt, in[i].second.maxt);
    EXPECT_EQ(out[i].second.num_samples, 3u);
    EXPECT_EQ(out[i].second.enc, in[i].second.enc);
    EXPECT_EQ(out[i].second.data.view(), in[i].second.data.view());
  }
  RefOoo ooo{7, {{-3, 1.5}, {4, model::StaleNaN()}}}, ooo_out;
  std::vector<int64_t> st_out{9};
  EncodeOoo(ooo, {}, &rec);
  ASSERT_TRUE(DecodeOoo(rec, &ooo_out, &st_out).ok());
  EXPECT_EQ(ooo_out.first, 7u);
  ASSERT_EQ(ooo_out.second.size(), 2u);
  EXPECT_EQ(ooo_out.second[0].t, -3);
  EXPECT_TRUE(model::IsStaleNaN(ooo_out.second[1].v));
  EXPECT_TRUE(st_out.empty());
  // With start timestamps (another record type).
  EncodeOoo(ooo, {-10, 0}, &rec);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), static_cast<uint8_t>(RecordType::kOooST));
  ASSERT_TRUE(DecodeOoo(rec, &ooo_out, &st_out).ok());
  EXPECT_EQ(st_out, (std::vector<int64_t>{-10, 0}));
  EXPECT_EQ(ooo_out.second[1].t, 4);
  for (size_t cut = 1; cut < rec.size(); cut++) {
    EXPECT_TRUE(DecodeOoo(rec.substr(0, cut), &ooo_out, &st_out).IsCorruption()) << cut;
  }
  RefOooHist hist{3, {{5, model::FloatHistogram{}, 2}}}, hist_out;
  hist.second[0].h.count = 1;
  EncodeOooHistograms(hist, &rec);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), static_cast<uint8_t>(RecordType::kOooHistogramsST));
  ASSERT_TRUE(DecodeOooHistograms(rec, &hist_out).ok());
  ASSERT_EQ(hist_out.second.size(), 1u);
  EXPECT_EQ(hist_out.second[0].st, 2);
  Mark m{12, -77}, m_out;
  EncodeMark(m, &rec);
  ASSERT_TRUE(DecodeMark(rec, &m_out).ok());
  EXPECT_EQ(m_out, m);
}

TEST(ChunkLogTest, MalformedRecordsAreCorruptionNamingTheProblem) {
  std::vector<RefChunk> in = {{1, Chunk(0, 10, "abc")}};
  std::string rec;
  EncodeChunks(in.data(), in.size(), &rec);
  std::vector<RefChunk> out;
  for (size_t cut = 0; cut < rec.size(); cut++) {
    EXPECT_TRUE(DecodeChunks(rec.substr(0, cut), &out).IsCorruption()) << cut;
  }
  EXPECT_TRUE(DecodeChunks(rec + "x", &out).IsCorruption());
  std::string bad_enc = rec;
  bad_enc[rec.size() - 5] = 9;  // the encoding byte precedes the length (1) and the 3 bytes
  Status s = DecodeChunks(bad_enc, &out);
  EXPECT_NE(s.message().find("unknown encoding of chunk 0"), std::string::npos) << s.ToString();
  RefOoo ooo{1, {{5, 1}, {5, 2}}}, ooo_out;
  std::vector<int64_t> st_out;
  EncodeOoo(ooo, {}, &rec);
  s = DecodeOoo(rec, &ooo_out, &st_out);
  EXPECT_NE(s.message().find("not in time order"), std::string::npos) << s.ToString();
  Mark m;
  EXPECT_TRUE(DecodeMark(rec, &m).IsCorruption());  // wrong type
}

class ChunkLogDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tw_chunklog_test_" + std::to_string(::getpid()));
    ASSERT_TRUE(file::RemoveAll(dir_).ok());
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::vector<std::string>& recs) {
    wal::Options o;
    o.dir = dir_;
    auto w = wal::Writer::Open(o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Log(recs).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  static std::string Chunks(std::vector<RefChunk> cs) {
    std::string r;
    EncodeChunks(cs.data(), cs.size(), &r);
    return r;
  }
  static std::string MarkRec(int seg, int64_t t) {
    std::string r;
    EncodeMark(Mark{seg, t}, &r);
    return r;
  }
  static std::string OooRec(uint64_t ref, std::vector<model::Sample> s) {
    std::string r;
    EncodeOoo(RefOoo{ref, std::move(s)}, {}, &r);
    return r;
  }
  std::string dir_;
};

TEST_F(ChunkLogDirTest, LoadTakesWhatTheLastMarkCoversAndCutsTheRest) {
  Write({Chunks({{1, Chunk(0, 10, "a")}, {2, Chunk(0, 10, "b")}}), OooRec(1, {{-5, 1}}), MarkRec(3, 11),
         Chunks({{1, Chunk(5, 20, "dup")}, {1, Chunk(11, 20, "c")}}), OooRec(1, {{-5, 1}, {-4, 2}}), MarkRec(4, 21),
         Chunks({{2, Chunk(11, 20, "unpromised")}})});
  auto l = Load(dir_);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_TRUE(l->mark.has_value());
  EXPECT_EQ(*l->mark, (Mark{4, 21}));
  EXPECT_EQ(l->num_chunks, 3u);
  EXPECT_EQ(l->dropped_overlaps, 1u);  // [5, 20] overlaps [0, 10]
  ASSERT_EQ(l->chunks[1].size(), 2u);
  EXPECT_EQ(l->chunks[1][1].data.view(), "c");
  ASSERT_EQ(l->chunks[2].size(), 1u);
  ASSERT_EQ(l->ooo[1].size(), 2u);  // the later record replaces the earlier
  // The unpromised record is gone from the files: appending after it and
  // marking again does not revive it.
  Write({MarkRec(5, 30)});
  l = Load(dir_);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->chunks[2].size(), 1u);
  EXPECT_EQ(*l->mark, (Mark{5, 30}));
}

TEST_F(ChunkLogDirTest, WithoutAMarkNothingIsPromised) {
  Write({Chunks({{1, Chunk(0, 10, "a")}})});
  auto l = Load(dir_);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->mark.has_value());
  EXPECT_TRUE(l->chunks.empty());
}

TEST_F(ChunkLogDirTest, TornTailKeepsWhatEarlierMarksCover) {
  Write({Chunks({{1, Chunk(0, 10, "a")}}), MarkRec(3, 11), Chunks({{1, Chunk(11, 20, "b")}}), MarkRec(4, 21)});
  std::string seg;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) seg = e.path();
  const auto size = std::filesystem::file_size(seg);
  for (uint64_t cut = 0; cut < size; cut++) {
    std::filesystem::resize_file(seg, cut);
    auto l = Load(dir_);
    ASSERT_TRUE(l.ok()) << cut << ": " << l.status().ToString();
    if (l->mark.has_value()) {
      EXPECT_EQ(l->chunks[1].size(), l->mark->wal_segment == 4 ? 2u : 1u) << cut;
    } else {
      EXPECT_TRUE(l->chunks.empty()) << cut;
    }
    // Restore the whole segment for the next cut.
    ASSERT_TRUE(file::RemoveAll(dir_).ok());
    Write({Chunks({{1, Chunk(0, 10, "a")}}), MarkRec(3, 11), Chunks({{1, Chunk(11, 20, "b")}}), MarkRec(4, 21)});
    for (const auto& e : std::filesystem::directory_iterator(dir_)) seg = e.path();
  }
}

TEST(ChunkLogTest, OutOfOrderHistogramsAndHistogramChunksRoundTrip) {
  RefOooHist want{42, {{5, testing_hist::ExpHistogram(1, model::CounterResetHint::kCounterReset)},
                       {9, testing_hist::CustomHistogram(2, model::CounterResetHint::kGauge)},
                       {11, testing_hist::StaleHistogram()}}};
  std::string rec;
  EncodeOooHistograms(want, &rec);
  EXPECT_EQ(static_cast<uint8_t>(rec[0]), 19);
  RefOooHist got;
  ASSERT_TRUE(DecodeOooHistograms(rec, &got).ok());
  EXPECT_EQ(got.first, 42u);
  ASSERT_EQ(got.second.size(), 3u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(got.second[i].t, want.second[i].t);
    testing_hist::ExpectSameHistogram(want.second[i].h, got.second[i].h);
  }
  for (size_t n = 0; n < rec.size(); n++) {
    EXPECT_TRUE(DecodeOooHistograms(std::string_view(rec).substr(0, n), &got).IsCorruption()) << n;
  }
  RefOooHist unordered{1, {{9, testing_hist::ExpHistogram(1)}, {5, testing_hist::ExpHistogram(2)}}};
  EncodeOooHistograms(unordered, &rec);
  EXPECT_TRUE(DecodeOooHistograms(rec, &got).IsCorruption());
  // A histogram chunk is a valid chunk of the log.
  chunkenc::FloatHistogramChunk c;
  c.Append(100, testing_hist::ExpHistogram(3));
  c.Append(200, testing_hist::ExpHistogram(4));
  HeadChunk hc;
  hc.mint = 100;
  hc.maxt = 200;
  hc.num_samples = 2;
  hc.enc = chunkenc::Encoding::kFloatHistogram;
  hc.data = ChunkBytes::Copy(c.Bytes());
  RefChunk rc{7, hc};
  EncodeChunks(&rc, 1, &rec);
  std::vector<RefChunk> chunks;
  ASSERT_TRUE(DecodeChunks(rec, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].second.enc, chunkenc::Encoding::kFloatHistogram);
  EXPECT_EQ(chunks[0].second.data.view(), c.Bytes());
}

}  // namespace
}  // namespace trainwatch::tsdb::chunklog
