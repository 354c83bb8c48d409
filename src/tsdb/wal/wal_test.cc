#include "tsdb/wal/wal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "tsdb/wal/reader.h"
#include "tsdb/wal/segment.h"
#include "tsdb/wal/wal_test_util.h"

namespace trainwatch::wal {
namespace {

using testing::ReadAll;
using testing::ScratchDir;

class WalWriterTest : public ::testing::Test {
 protected:
  std::unique_ptr<Writer> OpenWriter(uint64_t segment_bytes = 4096) {
    auto w = Writer::Open({.dir = dir_.path(), .segment_bytes = segment_bytes});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return std::move(*w);
  }
  std::vector<internal::SegmentRef> Segments() { return *internal::ListSegments(dir_.path()); }

  ScratchDir dir_;
};

std::string RandomRecord(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST_F(WalWriterTest, ManyRecordsAcrossSegmentsReadBackInOrder) {
  std::mt19937_64 rng(1);
  std::vector<std::string> want;
  auto w = OpenWriter(4096);
  for (int i = 0; i < 2000; i++) {
    want.push_back(RandomRecord(rng, 700));
    ASSERT_TRUE(w->Log(want.back()).ok());
  }
  ASSERT_TRUE(w->Close().ok());
  auto segs = Segments();
  ASSERT_GT(segs.size(), 50u);
  uint64_t total = 0;
  for (size_t i = 0; i < segs.size(); i++) {
    EXPECT_EQ(segs[i].index, static_cast<int>(i));
    EXPECT_LE(segs[i].size, 4096u);
    total += segs[i].size;
  }
  EXPECT_EQ(w->SizeBytes(), total);
  auto got = ReadAll(dir_.path());
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.records, want);
}

TEST_F(WalWriterTest, BatchLogSpansSegmentsInOrder) {
  std::mt19937_64 rng(2);
  std::vector<std::string> want;
  auto w = OpenWriter(4096);
  for (int b = 0; b < 20; b++) {
    std::vector<std::string> batch;
    for (int i = 0; i < 37; i++) batch.push_back(RandomRecord(rng, 300));
    ASSERT_TRUE(w->Log(batch).ok());
    want.insert(want.end(), batch.begin(), batch.end());
  }
  ASSERT_TRUE(w->Log(std::vector<std::string>{}).ok());
  ASSERT_TRUE(w->Close().ok());
  EXPECT_GT(Segments().size(), 10u);
  auto got = ReadAll(dir_.path());
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.records, want);
}

TEST_F(WalWriterTest, RecordLargerThanSegmentGetsOwnSegment) {
  auto w = OpenWriter(4096);
  std::string big(10000, 'x');
  ASSERT_TRUE(w->Log("a").ok());
  ASSERT_TRUE(w->Log(big).ok());
  ASSERT_TRUE(w->Log("b").ok());
  ASSERT_TRUE(w->Close().ok());
  auto segs = Segments();
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[1].size, big.size() + internal::kFrameHeaderSize);
  EXPECT_EQ(ReadAll(dir_.path()).records, (std::vector<std::string>{"a", big, "b"}));
}

TEST_F(WalWriterTest, EmptyRecordRoundTrips) {
  auto w = OpenWriter();
  ASSERT_TRUE(w->Log("").ok());
  ASSERT_TRUE(w->Log("x").ok());
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(ReadAll(dir_.path()).records, (std::vector<std::string>{"", "x"}));
}

TEST_F(WalWriterTest, ReopenStartsNewSegmentAfterLast) {
  auto w = OpenWriter();
  EXPECT_EQ(w->CurrentSegment(), 0);
  ASSERT_TRUE(w->Log("one").ok());
  ASSERT_TRUE(w->Close().ok());
  w = OpenWriter();
  EXPECT_EQ(w->CurrentSegment(), 1);
  ASSERT_TRUE(w->Log("two").ok());
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(Segments().size(), 2u);
  EXPECT_EQ(ReadAll(dir_.path()).records, (std::vector<std::string>{"one", "two"}));
}

TEST_F(WalWriterTest, NextSegmentAndTruncateBefore) {
  auto w = OpenWriter(1 << 20);
  ASSERT_TRUE(w->Log("s0").ok());
  auto n = w->NextSegment();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(w->Log("s1").ok());
  ASSERT_EQ(*w->NextSegment(), 2);
  ASSERT_TRUE(w->Log("s2").ok());
  EXPECT_EQ(w->CurrentSegment(), 2);
  EXPECT_EQ(w->SizeBytes(), 3 * (internal::kFrameHeaderSize + 2));

  EXPECT_TRUE(w->TruncateBefore(3).IsInvalidArgument());
  ASSERT_TRUE(w->TruncateBefore(2).ok());
  EXPECT_EQ(w->SizeBytes(), internal::kFrameHeaderSize + 2);
  ASSERT_TRUE(w->Sync().ok());
  auto segs = Segments();
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].index, 2);
  EXPECT_EQ(ReadAll(dir_.path()).records, (std::vector<std::string>{"s2"}));
  ASSERT_TRUE(w->Close().ok());
}

TEST_F(WalWriterTest, CallsAfterCloseFail) {
  auto w = OpenWriter();
  ASSERT_TRUE(w->Close().ok());
  ASSERT_TRUE(w->Close().ok());
  EXPECT_FALSE(w->Log("x").ok());
  EXPECT_FALSE(w->Sync().ok());
  EXPECT_FALSE(w->NextSegment().ok());
  EXPECT_EQ(w->CurrentSegment(), 0);
}

TEST_F(WalWriterTest, OpenRejectsBadOptions) {
  EXPECT_TRUE(Writer::Open({.dir = ""}).status().IsInvalidArgument());
  EXPECT_TRUE(Writer::Open({.dir = dir_.path(), .segment_bytes = 10}).status().IsInvalidArgument());
}

TEST_F(WalWriterTest, OpenCreatesMissingDirAndIgnoresOtherFiles) {
  std::string sub = dir_.Sub("a/b/wal");
  {
    auto w = Writer::Open({.dir = sub});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Log("r").ok());
  }
  ASSERT_TRUE(file::MkdirAll(sub + "/checkpoint.00000000").ok());
  ASSERT_TRUE(file::WriteFileAtomic(sub + "/00000001.tmp", "junk").ok());
  auto w = Writer::Open({.dir = sub});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->CurrentSegment(), 1);
  EXPECT_EQ(ReadAll(sub).records, (std::vector<std::string>{"r"}));
}

TEST_F(WalWriterTest, SyncWithNothingLoggedDoesNotFsync) {
  auto w = OpenWriter();
  ASSERT_TRUE(w->Sync().ok());
  EXPECT_EQ(w->SyncRounds(), 0u);
  ASSERT_TRUE(w->Log("x").ok());
  ASSERT_TRUE(w->Sync().ok());
  ASSERT_TRUE(w->Sync().ok());
  EXPECT_EQ(w->SyncRounds(), 1u);
}

// 4 threads log and sync concurrently while segments roll; every record of
// every thread must come back, each thread's in its own order.
TEST_F(WalWriterTest, ConcurrentLogAndSyncLosesNothing) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  auto w = OpenWriter(64 << 10);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) {
        std::string rec = std::to_string(t) + ":" + std::to_string(i) + ":" + std::string(i % 97, 'p');
        if (i % 10 == 9) {
          if (!w->Log(std::vector<std::string>{rec, rec + "b"}).ok()) failures++;
        } else if (!w->Log(rec).ok()) {
          failures++;
        }
        if (i % 5 == 0 && !w->Sync().ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  uint64_t rounds = w->SyncRounds();
  ASSERT_TRUE(w->Close().ok());
  EXPECT_LE(rounds, uint64_t{kThreads * kPerThread / 5 + 1});

  auto got = ReadAll(dir_.path());
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  std::vector<int> next(kThreads, 0);
  std::vector<bool> expect_b(kThreads, false);
  for (const auto& rec : got.records) {
    int t = rec[0] - '0';
    ASSERT_TRUE(t >= 0 && t < kThreads) << rec;
    int i = next[t];
    std::string want = std::to_string(t) + ":" + std::to_string(i) + ":" + std::string(i % 97, 'p');
    if (expect_b[t]) {
      ASSERT_EQ(rec, want + "b");
      expect_b[t] = false;
      next[t]++;
    } else {
      ASSERT_EQ(rec, want);
      if (i % 10 == 9) {
        expect_b[t] = true;
      } else {
        next[t]++;
      }
    }
  }
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(next[t], kPerThread);
  EXPECT_GT(Segments().size(), 2u);
}

// Group commit: a Sync whose records a round already covers costs no round
// of its own. With every record logged before any Sync starts, whichever
// caller leads covers all of them, so eight concurrent Syncs take exactly one
// round (a follower either finds them durable or waits for the leader), and a
// Sync with nothing new logged takes none.
TEST_F(WalWriterTest, ConcurrentSyncsShareRounds) {
  constexpr int kThreads = 8;
  auto w = OpenWriter(1 << 20);
  for (int i = 0; i < kThreads * 10; i++) ASSERT_TRUE(w->Log(std::string(100, 'x')).ok());
  const uint64_t before = w->SyncRounds();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      EXPECT_TRUE(w->Sync().ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(w->SyncRounds(), before + 1);
  ASSERT_TRUE(w->Sync().ok());
  EXPECT_EQ(w->SyncRounds(), before + 1);  // nothing new: no round
  ASSERT_TRUE(w->Log("y").ok());
  ASSERT_TRUE(w->Sync().ok());
  EXPECT_EQ(w->SyncRounds(), before + 2);
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(ReadAll(dir_.path()).records.size(), size_t{kThreads * 10 + 1});
}

// Committers logging and syncing at once lose nothing.
TEST_F(WalWriterTest, ConcurrentLogAndSyncKeepEveryRecord) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  auto w = OpenWriter(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; i++) {
        EXPECT_TRUE(w->Log(std::string(100, 'x')).ok());
        EXPECT_TRUE(w->Sync().ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GE(w->SyncRounds(), 1u);
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(ReadAll(dir_.path()).records.size(), size_t{kThreads * kPerThread});
}

}  // namespace
}  // namespace trainwatch::wal
