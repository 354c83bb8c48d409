#include "tsdb/wal/reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "tsdb/wal/segment.h"
#include "tsdb/wal/wal.h"
#include "tsdb/wal/wal_test_util.h"

namespace trainwatch::wal {
namespace {

namespace fs = std::filesystem;
using testing::ReadAll;
using testing::ScratchDir;

class WalReaderTest : public ::testing::Test {
 protected:
  // Writes `n` records of varying size to a fresh log in `dir` with small
  // segments; returns them.
  std::vector<std::string> WriteLog(const std::string& dir, int n) {
    std::mt19937_64 rng(7);
    std::vector<std::string> recs;
    auto w = Writer::Open({.dir = dir, .segment_bytes = 2048});
    EXPECT_TRUE(w.ok());
    for (int i = 0; i < n; i++) {
      std::string r(50 + rng() % 250, '\0');
      for (auto& c : r) c = static_cast<char>(rng());
      EXPECT_TRUE((*w)->Log(r).ok());
      recs.push_back(std::move(r));
    }
    EXPECT_TRUE((*w)->Close().ok());
    return recs;
  }

  static void CopyDir(const std::string& from, const std::string& to) {
    (void)file::RemoveAll(to);
    fs::copy(from, to, fs::copy_options::recursive);
  }

  static void Resize(const std::string& path, uint64_t size) { fs::resize_file(path, size); }

  static void FlipBit(const std::string& path, uint64_t off, int bit) {
    std::string data;
    ASSERT_TRUE(file::ReadFile(path, &data).ok());
    data[off] = static_cast<char>(data[off] ^ (1 << bit));
    ASSERT_TRUE(file::WriteFileAtomic(path, data).ok());
  }

  // Segment index and frame offset of every record.
  static std::vector<std::pair<int, uint64_t>> Positions(const std::string& dir) {
    std::vector<std::pair<int, uint64_t>> out;
    auto r = Reader::Open(dir);
    std::string_view rec;
    while ((*r)->Next(&rec)) out.emplace_back((*r)->segment(), (*r)->offset());
    EXPECT_TRUE((*r)->status().ok());
    return out;
  }

  ScratchDir tmp_;
};

TEST_F(WalReaderTest, MissingDirIsNotFound) {
  EXPECT_TRUE(Reader::Open(tmp_.Sub("nope")).status().IsNotFound());
}

TEST_F(WalReaderTest, EmptyDirReadsNothing) {
  auto got = ReadAll(tmp_.path());
  EXPECT_TRUE(got.status.ok());
  EXPECT_TRUE(got.records.empty());
}

TEST_F(WalReaderTest, ReadsFromFirstSegment) {
  std::string dir = tmp_.Sub("wal");
  auto recs = WriteLog(dir, 100);
  auto pos = Positions(dir);
  ASSERT_EQ(pos.size(), recs.size());
  int first = 3;
  size_t skip = 0;
  while (pos[skip].first < first) skip++;
  auto got = ReadAll(dir, first);
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.records, std::vector<std::string>(recs.begin() + static_cast<long>(skip), recs.end()));
}

// The crash case: cut the log at every byte inside its last record. Reading
// must yield exactly the earlier records and point at the cut frame; Repair
// must leave a clean log a new Writer can extend.
TEST_F(WalReaderTest, TruncatedLastRecordAtEveryOffset) {
  std::string golden = tmp_.Sub("golden");
  auto recs = WriteLog(golden, 40);
  auto pos = Positions(golden);
  const auto [last_seg, last_off] = pos.back();
  ASSERT_GT(last_seg, 1);
  const std::string seg_name = internal::SegmentName(last_seg);
  const uint64_t seg_size = internal::kFrameHeaderSize + recs.back().size() + last_off;
  ASSERT_EQ(fs::file_size(golden + "/" + seg_name), seg_size);
  const std::vector<std::string> prefix(recs.begin(), recs.end() - 1);

  std::string dir = tmp_.Sub("work");
  for (uint64_t cut = last_off + 1; cut < seg_size; cut++) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    CopyDir(golden, dir);
    Resize(dir + "/" + seg_name, cut);
    // Half the time a Writer was opened after the crash, adding an empty
    // segment behind the torn one; the tail is still torn.
    if (cut % 2 == 0) {
      ASSERT_TRUE(Writer::Open({.dir = dir}).ok());
    }

    auto got = ReadAll(dir);
    EXPECT_EQ(got.records, prefix);
    ASSERT_TRUE(got.status.IsCorruption()) << got.status.ToString();
    ASSERT_TRUE(got.corruption.has_value());
    EXPECT_EQ(got.corruption->segment, last_seg);
    EXPECT_EQ(got.corruption->offset, last_off);
    EXPECT_TRUE(got.corruption->torn_tail);
    EXPECT_NE(got.status.message().find("wal segment " + seg_name + " offset " + std::to_string(last_off) + ": "),
              std::string::npos)
        << got.status.message();

    ASSERT_TRUE(Repair(dir, *got.corruption).ok());
    got = ReadAll(dir);
    EXPECT_TRUE(got.status.ok()) << got.status.ToString();
    EXPECT_EQ(got.records, prefix);

    auto w = Writer::Open({.dir = dir});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Log("after repair").ok());
    ASSERT_TRUE((*w)->Close().ok());
    got = ReadAll(dir);
    EXPECT_TRUE(got.status.ok()) << got.status.ToString();
    ASSERT_EQ(got.records.size(), recs.size());
    EXPECT_EQ(got.records.back(), "after repair");
  }
}

TEST_F(WalReaderTest, ZeroFilledTailIsTorn) {
  std::string dir = tmp_.Sub("wal");
  auto recs = WriteLog(dir, 30);
  auto pos = Positions(dir);
  const int last_seg = pos.back().first;
  std::string path = internal::SegmentPath(dir, last_seg);
  uint64_t size = fs::file_size(path);
  Resize(path, size + 4096);
  auto got = ReadAll(dir);
  EXPECT_EQ(got.records, recs);
  ASSERT_TRUE(got.corruption.has_value());
  EXPECT_EQ(got.corruption->segment, last_seg);
  EXPECT_EQ(got.corruption->offset, size);
  EXPECT_TRUE(got.corruption->torn_tail);
  EXPECT_NE(got.status.message().find("zero-filled tail"), std::string::npos);
  ASSERT_TRUE(Repair(dir, *got.corruption).ok());
  EXPECT_EQ(fs::file_size(path), size);
  EXPECT_TRUE(ReadAll(dir).status.ok());
}

// The reader goes through a buffer of a few MiB: records that straddle its
// refills, one larger than it, and a zero-filled tail longer than it (torn)
// or ending in one non-zero byte (damage, not torn) read as from the file.
TEST_F(WalReaderTest, RecordsAndTailsAcrossTheReadBuffer) {
  std::string dir = tmp_.Sub("wal");
  std::mt19937_64 rng(11);
  std::vector<std::string> recs;
  {
    auto w = Writer::Open({.dir = dir, .segment_bytes = 64 << 20});
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 400; i++) {
      std::string r(i == 200 ? (9 << 20) : 20000 + rng() % 20000, '\0');
      for (auto& c : r) c = static_cast<char>(rng());
      ASSERT_TRUE((*w)->Log(r).ok());
      recs.push_back(std::move(r));
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto pos = Positions(dir);
  ASSERT_EQ(pos.size(), recs.size());
  ASSERT_EQ(pos.back().first, pos.front().first) << "one segment";
  std::string path = internal::SegmentPath(dir, pos.back().first);
  const uint64_t size = fs::file_size(path);
  ASSERT_GT(size, uint64_t{20} << 20);
  EXPECT_EQ(ReadAll(dir).records, recs);

  Resize(path, size + (uint64_t{11} << 20));
  auto got = ReadAll(dir);
  EXPECT_EQ(got.records, recs);
  ASSERT_TRUE(got.corruption.has_value());
  EXPECT_EQ(got.corruption->offset, size);
  EXPECT_TRUE(got.corruption->torn_tail);
  EXPECT_NE(got.status.message().find("zero-filled tail"), std::string::npos) << got.status.message();

  FlipBit(path, size + (uint64_t{11} << 20) - 1, 0);
  got = ReadAll(dir);
  EXPECT_EQ(got.records, recs);
  ASSERT_TRUE(got.corruption.has_value());
  EXPECT_EQ(got.corruption->offset, size);
  EXPECT_FALSE(got.corruption->torn_tail);
  EXPECT_NE(got.status.message().find("invalid frame type 0"), std::string::npos) << got.status.message();
}

TEST_F(WalReaderTest, PartialRecordThenZerosIsTorn) {
  std::string dir = tmp_.Sub("wal");
  auto recs = WriteLog(dir, 30);
  auto pos = Positions(dir);
  const auto [last_seg, last_off] = pos.back();
  std::string path = internal::SegmentPath(dir, last_seg);
  // The header reached the disk but the payload pages did not.
  uint64_t size = fs::file_size(path);
  Resize(path, last_off + internal::kFrameHeaderSize + 10);
  Resize(path, size);
  auto got = ReadAll(dir);
  EXPECT_EQ(got.records.size(), recs.size() - 1);
  ASSERT_TRUE(got.corruption.has_value());
  EXPECT_EQ(got.corruption->offset, last_off);
  EXPECT_TRUE(got.corruption->torn_tail);
  EXPECT_NE(got.status.message().find("checksum mismatch"), std::string::npos);
}

// A bit flip anywhere in a frame (header or payload) of a middle segment is
// caught and reported at that frame, and is not a torn tail.
TEST_F(WalReaderTest, BitFlipsDetected) {
  std::string golden = tmp_.Sub("golden");
  auto recs = WriteLog(golden, 60);
  auto pos = Positions(golden);
  size_t victim = 0;
  while (pos[victim].first < 2) victim++;
  victim++;  // second record of segment 2
  const auto [seg, off] = pos[victim];
  ASSERT_EQ(pos[victim + 1].first, seg);
  const uint64_t frame_len = internal::kFrameHeaderSize + recs[victim].size();
  std::string dir = tmp_.Sub("work");
  for (uint64_t b = 0; b < frame_len; b++) {
    for (int bit : {0, 5}) {
      SCOPED_TRACE("byte " + std::to_string(b) + " bit " + std::to_string(bit));
      CopyDir(golden, dir);
      FlipBit(internal::SegmentPath(dir, seg), off + b, bit);
      auto got = ReadAll(dir);
      EXPECT_EQ(got.records, std::vector<std::string>(recs.begin(), recs.begin() + static_cast<long>(victim)));
      ASSERT_TRUE(got.corruption.has_value()) << got.status.ToString();
      EXPECT_EQ(got.corruption->segment, seg);
      EXPECT_EQ(got.corruption->offset, off);
      EXPECT_FALSE(got.corruption->torn_tail);
    }
  }
}

TEST_F(WalReaderTest, MissingSegmentStopsReading) {
  std::string dir = tmp_.Sub("wal");
  auto recs = WriteLog(dir, 60);
  auto pos = Positions(dir);
  ASSERT_GT(pos.back().first, 3);
  ASSERT_EQ(::unlink(internal::SegmentPath(dir, 2).c_str()), 0);
  size_t before = 0;
  while (pos[before].first < 2) before++;
  auto got = ReadAll(dir);
  EXPECT_EQ(got.records.size(), before);
  ASSERT_TRUE(got.corruption.has_value());
  EXPECT_EQ(got.corruption->segment, 2);
  EXPECT_EQ(got.corruption->offset, 0u);
  EXPECT_NE(got.status.message().find("missing segment"), std::string::npos) << got.status.message();
  ASSERT_TRUE(Repair(dir, *got.corruption).ok());
  got = ReadAll(dir);
  EXPECT_TRUE(got.status.ok());
  EXPECT_EQ(got.records.size(), before);
  EXPECT_EQ(internal::ListSegments(dir)->back().index, 1);
}

TEST_F(WalReaderTest, UnknownFrameTypeIsCorruption) {
  std::string dir = tmp_.Sub("wal");
  WriteLog(dir, 5);
  std::string path = internal::SegmentPath(dir, 0);
  std::string data;
  ASSERT_TRUE(file::ReadFile(path, &data).ok());
  data[8] = 7;
  ASSERT_TRUE(file::WriteFileAtomic(path, data).ok());
  auto got = ReadAll(dir);
  EXPECT_TRUE(got.records.empty());
  EXPECT_NE(got.status.message().find("wal segment 00000000 offset 0: invalid frame type 7"), std::string::npos)
      << got.status.message();
}

TEST_F(WalReaderTest, RepairRejectsOffsetPastEnd) {
  std::string dir = tmp_.Sub("wal");
  WriteLog(dir, 5);
  EXPECT_TRUE(Repair(dir, 0, 1 << 20).IsInvalidArgument());
}

}  // namespace
}  // namespace trainwatch::wal
