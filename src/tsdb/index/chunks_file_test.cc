#include "tsdb/index/chunks_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <random>

#include "base/file.h"

namespace trainwatch::index {
namespace {

std::string TestDir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/tw_index_" + name + "_" + std::to_string(::getpid());
  EXPECT_TRUE(file::RemoveAll(d).ok());
  return d;
}

TEST(ChunksFileTest, RoundTripAcrossSegments) {
  const std::string dir = TestDir("chunks");
  auto w = ChunkWriter::Create(dir, /*segment_size=*/4096);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::mt19937_64 rng(1);
  std::vector<std::pair<ChunkRef, std::string>> written;
  for (int i = 0; i < 500; ++i) {
    std::string data(rng() % (i == 7 ? 10000 : 300), '\0');
    for (char& c : data) c = static_cast<char>(rng());
    auto ref = (*w)->Write(static_cast<uint8_t>(1 + i % 2), data);
    ASSERT_TRUE(ref.ok());
    ASSERT_NE(*ref, 0u);
    written.emplace_back(*ref, data);
  }
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_TRUE((*w)->Write(1, "x").status().IsInvalidArgument());
  auto r = ChunkReader::Open(dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(ChunkRefSegment(written.back().first), 10u);
  EXPECT_EQ((*r)->TotalBytes(), (*w)->bytes_written());
  for (size_t i = 0; i < written.size(); ++i) {
    auto v = (*r)->Get(written[i].first);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->encoding, 1 + i % 2);
    EXPECT_EQ(v->data, written[i].second);
  }
  EXPECT_TRUE((*r)->Get(0).status().IsCorruption());
  EXPECT_TRUE((*r)->Get(MakeChunkRef(9999, 8)).status().IsCorruption());
  EXPECT_TRUE((*r)->Get(MakeChunkRef(1, 1 << 30)).status().IsCorruption());
  EXPECT_TRUE(ChunkWriter::Create(dir).status().IsInvalidArgument());  // segments exist
}

TEST(ChunksFileTest, CorruptionDetected) {
  const std::string dir = TestDir("chunks_corrupt");
  auto w = ChunkWriter::Create(dir);
  ASSERT_TRUE(w.ok());
  auto ref = (*w)->Write(1, "hello world chunk");
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE((*w)->Finish().ok());
  const std::string seg = dir + "/000001";
  std::string data;
  ASSERT_TRUE(file::ReadFile(seg, &data).ok());
  for (size_t i = kChunksSegmentHeaderSize; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] ^= 0x10;
    ASSERT_TRUE(file::WriteFileAtomic(seg, bad).ok());
    auto r = ChunkReader::Open(dir);
    ASSERT_TRUE(r.ok());
    auto v = (*r)->Get(*ref);
    EXPECT_FALSE(v.ok()) << "flip at " << i;
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("000001"), std::string::npos);
    }
  }
  for (size_t n = 0; n < data.size(); ++n) {
    ASSERT_TRUE(file::WriteFileAtomic(seg, data.substr(0, n)).ok());
    auto r = ChunkReader::Open(dir);
    if (!r.ok()) continue;
    EXPECT_FALSE((*r)->Get(*ref).ok());
  }
}

}  // namespace
}  // namespace trainwatch::index
