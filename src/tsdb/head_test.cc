#include "tsdb/head.h"

#include "tsdb/chunk_series.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

#include "base/file.h"
#include "model/matcher.h"
#include "tsdb/chunkenc/histogram_testing.h"
#include "tsdb/temp_db_test_util.h"
#include "tsdb/wal/wal_test_util.h"

namespace trainwatch::tsdb {
namespace {

using model::Labels;

std::vector<model::Sample> Read(Head* head, const model::Matchers& ms, int64_t mint = model::kMinTime,
                                int64_t maxt = model::kMaxTime) {
  auto q = head->NewQuerier(mint, maxt);
  auto set = (*q)->Select(true, {}, ms);
  std::vector<model::Sample> out;
  while (set->Next()) {
    auto it = set->At().Iterator();
    while (it->Next()) out.push_back(it->At());
  }
  return out;
}

model::Matcher Eq(const std::string& n, const std::string& v) {
  return *model::Matcher::Make(model::MatchType::kEqual, n, v);
}

TEST(HeadTest, ChunksAreCutAtSampleCountAndBlockBoundary) {
  HeadOptions o;
  o.block_duration_ms = 100000;
  o.samples_per_chunk = 10;
  Head head(o);
  auto app = head.NewAppender();
  Labels l{{"__name__", "x"}};
  for (int64_t t = 0; t < 250000; t += 1000) ASSERT_TRUE(app->Append(0, l, t, static_cast<double>(t)).ok());
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_EQ(head.NumChunks(), 25u);
  auto set = head.SnapshotForPersist(100000, false);
  ASSERT_EQ(set.series.size(), 1u);
  for (auto& c : set.series[0].second.chunks) EXPECT_LT(c.maxt, 100000);
  EXPECT_EQ(set.series[0].second.chunks.size(), 10u);
  head.Truncate(set);
  auto rest = Read(&head, {Eq("__name__", "x")});
  ASSERT_EQ(rest.size(), 150u);
  EXPECT_EQ(rest.front().t, 100000);
}

TEST(HeadTest, DeferredDenseChunksAreReencodedLater) {
  HeadOptions o;
  o.samples_per_chunk = 100;
  Head head(o);
  head.SetDeferDense(true);
  auto app = head.NewAppender();
  Labels l{{"__name__", "x"}};
  std::vector<model::Sample> want;
  for (int64_t t = 0; t < 250; t++) {
    want.push_back({t * 1000, static_cast<double>(t % 7)});
    ASSERT_TRUE(app->Append(0, l, want.back().t, want.back().v).ok());
  }
  ASSERT_TRUE(app->Commit().ok());
  head.SetDeferDense(false);
  auto encodings = [&] {
    SeriesSnapshot snap;
    EXPECT_TRUE(head.SnapshotByRef(head.SeriesRefs().at(0), model::kMinTime, model::kMaxTime, &snap));
    std::vector<chunkenc::Encoding> out;
    for (const auto& c : snap.chunks) out.push_back(c.enc);
    return out;
  };
  using chunkenc::Encoding;
  EXPECT_EQ(encodings(), (std::vector<Encoding>{Encoding::kDelta, Encoding::kDelta, Encoding::kDelta}));
  EXPECT_EQ(head.DensifyClosed(head.SeriesRefs()), 2u);  // the open chunk stays appendable
  EXPECT_EQ(encodings(), (std::vector<Encoding>{Encoding::kDense, Encoding::kDense, Encoding::kDelta}));
  EXPECT_EQ(head.DensifyClosed(head.SeriesRefs()), 0u);
  auto got = Read(&head, {Eq("__name__", "x")});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].t, want[i].t);
    EXPECT_EQ(got[i].v, want[i].v);
  }
}

// Replay filters what the chunk log holds as records are decoded: samples
// before `from`, and those at or before the end of their series' chunks in
// the base, by index for dense refs and by hash for sparse ones.
TEST(HeadTest, AppendUncoveredLeavesOutWhatTheBaseHolds) {
  for (uint64_t far_ref : {uint64_t{9}, uint64_t{1} << 40}) {
    Head head(HeadOptions{});
    auto chunk = [](int64_t mint, int64_t maxt) {
      HeadChunk c;
      c.mint = mint;
      c.maxt = maxt;
      c.num_samples = 1;
      c.data = ChunkBytes::Copy("xx");
      return c;
    };
    std::unordered_map<uint64_t, std::vector<HeadChunk>> base;
    base[1] = {chunk(0, 100), chunk(101, 200)};
    base[far_ref] = {chunk(0, 50)};
    head.SetReplayBase(std::move(base), {});
    std::vector<wal::RefSample> in = {{1, 150, 1}, {1, 200, 2}, {1, 201, 3}, {far_ref, 50, 4}, {far_ref, 51, 5},
                                      {7, 0, 6},   {7, 10, 7},  {far_ref + 1, 20, 8}};
    Head::ReplayBatch out{{3, 3, 3}};
    EXPECT_EQ(head.AppendUncovered(in, 10, &out), 4u) << far_ref;  // 150, 200, 50 covered; 0 before `from`
    std::vector<double> vs;
    for (const auto& smp : out) vs.push_back(smp.v);
    EXPECT_EQ(vs, (std::vector<double>{3, 3, 5, 7, 8})) << far_ref;
    EXPECT_EQ(head.EndReplayBase(), 3u);  // no series took its chunks
  }
}

// A series record whose labels another ref already has (the series was
// dropped by a head cut and came back): the second ref's chunks from the
// chunk log follow the series' own, whichever comes first, the base or the
// record; its samples go to the series; and neither it nor the ref of
// samples no series claims is handed out again.
TEST(HeadTest, ReplayGivesASecondRefOfASeriesItsChunksAndSamples) {
  HeadOptions o;
  o.samples_per_chunk = 10;
  // The chunks of the second life, as a chunk log holds them.
  Head src(o);
  {
    auto app = src.NewAppender();
    for (int64_t t = 100; t < 125; t++) ASSERT_TRUE(app->Append(0, Labels{{"__name__", "x"}}, t, 1.0 * t).ok());
    ASSERT_TRUE(app->Commit().ok());
  }
  SeriesSnapshot snap;
  ASSERT_TRUE(src.SnapshotByRef(src.SeriesRefs().at(0), model::kMinTime, model::kMaxTime, &snap));
  std::vector<HeadChunk> closed(snap.chunks.begin(), snap.chunks.end() - 1);  // 100..119; 120..124 open
  ASSERT_EQ(closed.size(), 2u);
  for (bool base_first : {false, true}) {
    SCOPED_TRACE(base_first);
    Head head(o);
    const Labels x{{"__name__", "x"}};
    auto base = [&] {
      std::unordered_map<uint64_t, std::vector<HeadChunk>> chunks;
      chunks[9] = closed;
      head.SetReplayBase(std::move(chunks), {});
    };
    head.ReplaySeries({{3, x}});
    if (base_first) base();
    head.ReplaySeries({{9, x}});
    if (!base_first) base();
    // Ref 40: a series whose record is gone (dropped by a cut) while its
    // samples are still in the log.
    std::vector<wal::RefSample> samples = {{3, 1, 1},       {3, 2, 2},       {9, 118, 118},
                                           {9, 119, 119},   {9, 120, 120},   {40, 5, 5}};
    Head::ReplayBatch batch;
    head.ResolveReplayAliases(&samples);
    EXPECT_EQ(head.AppendUncovered(samples, INT64_MIN, &batch), 0u);  // the series' own chunks cover nothing
    Head::ReplayBatch scratch;
    head.ReplaySamples(&batch, &scratch, 1, /*skip_covered=*/true);
    EXPECT_EQ(head.EndReplayBase(), 0u);
    EXPECT_EQ(head.DuplicateTotal(), 2u);  // 118 and 119: the chunks hold them
    auto got = Read(&head, {Eq("__name__", "x")});
    std::vector<int64_t> ts;
    for (const auto& smp : got) ts.push_back(smp.t);
    std::vector<int64_t> want = {1, 2};
    for (int64_t t = 100; t <= 120; t++) want.push_back(t);
    EXPECT_EQ(ts, want);
    EXPECT_EQ(head.NumSeries(), 1u);
    auto app = head.NewAppender();
    auto ref = app->Append(0, Labels{{"__name__", "y"}}, 1, 1);
    ASSERT_TRUE(ref.ok());
    EXPECT_GT(*ref, 40u);  // no new series takes a ref the log holds samples of
    ASSERT_TRUE(app->Commit().ok());
  }
}

// Chunks copied into slabs keep their bytes after the ChunkSlabs is gone
// and while any copy of them lives; a block goes with its last chunk (the
// ASan build checks that nothing is freed early or twice).
TEST(HeadTest, ChunkSlabsKeepBytesUntilTheLastChunkOfABlockGoes) {
  std::vector<ChunkBytes> chunks;
  std::vector<std::string> want;
  {
    ChunkSlabs slabs;
    for (int i = 0; i < 30000; i++) {  // ~4.5 MiB: blocks from 64 KiB up to a huge-page one
      std::string b(20 + i % 200, static_cast<char>('a' + i % 26));
      b += std::to_string(i);
      chunks.push_back(slabs.Copy(b, i % 3 == 0 ? 7 : -2));
      want.push_back(std::move(b));
    }
    std::string big(3 << 20, 'z');  // too large to share a block
    chunks.push_back(slabs.Copy(big, 7));
    want.push_back(big);
    chunks.push_back(slabs.Copy("", 7));
    want.push_back("");
  }
  for (size_t i = 0; i < chunks.size(); i++) ASSERT_EQ(chunks[i].view(), want[i]) << i;
  EXPECT_EQ(chunks[5].MemoryBytes(), 12 + want[5].size());
  std::vector<ChunkBytes> copies(chunks.begin(), chunks.begin() + 100);
  std::mt19937 rng(3);
  std::shuffle(chunks.begin(), chunks.end(), rng);  // release in any order
  chunks.clear();
  for (size_t i = 0; i < copies.size(); i++) EXPECT_EQ(copies[i].view(), want[i]) << i;
}

// The closed-chunk list grows to 1, 3, 5, ... chunks, keeps its chunks'
// bytes through growth, a cut of the first ones and a replay's assignment
// (the ASan build checks each chunk is released once).
TEST(HeadTest, ChunkListGrowsByTwoAndDropsAPrefix) {
  auto chunk = [](int i) {
    HeadChunk c;
    c.mint = i * 10;
    c.maxt = i * 10 + 9;
    c.num_samples = static_cast<uint32_t>(i);
    c.data = ChunkBytes::Copy("chunk" + std::to_string(i));
    return c;
  };
  ChunkList l;
  EXPECT_TRUE(l.empty());
  std::vector<size_t> caps;
  for (int i = 0; i < 7; i++) {
    l.push_back(chunk(i));
    caps.push_back(l.capacity());
  }
  EXPECT_EQ(caps, (std::vector<size_t>{1, 3, 3, 5, 5, 7, 7}));
  ChunkBytes held = l[2].data;  // a reader's copy
  l.EraseFront(3);
  ASSERT_EQ(l.size(), 4u);
  for (size_t i = 0; i < l.size(); i++) {
    EXPECT_EQ(l[i].mint, static_cast<int64_t>(i + 3) * 10);
    EXPECT_EQ(l[i].data.view(), "chunk" + std::to_string(i + 3));
  }
  EXPECT_EQ(held.view(), "chunk2");
  EXPECT_EQ(l.front().num_samples, 3u);
  EXPECT_EQ(l.back().num_samples, 6u);
  l.EraseFront(10);
  EXPECT_TRUE(l.empty());
  std::vector<HeadChunk> replayed = {chunk(8), chunk(9)};
  l.push_back(chunk(1));
  l = std::move(replayed);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].data.view(), "chunk8");
  EXPECT_EQ(l[1].data.view(), "chunk9");
}

// A group's blocks are carved until DropGroupsUpTo passes it; its chunks
// keep their bytes after that (the ASan build checks that no block is freed
// early, and LeakSanitizer that a dropped one is freed with its last chunk).
TEST(HeadTest, ChunkSlabsStopCarvingGroupsDropped) {
  ChunkSlabs slabs(64 << 10);
  std::vector<ChunkBytes> chunks;
  for (int i = 0; i < 3000; i++) chunks.push_back(slabs.Copy(std::string(50, static_cast<char>('a' + i % 3)), i % 3));
  const size_t unused = slabs.Unused();
  EXPECT_GT(unused, 0u);
  slabs.DropGroupsUpTo(1);
  EXPECT_GT(slabs.Unused(), 0u);
  EXPECT_LT(slabs.Unused(), unused);
  ChunkBytes later = slabs.Copy("again", 0);  // a new block for a dropped group
  EXPECT_EQ(later.view(), "again");
  slabs.DropGroupsUpTo(2);
  EXPECT_EQ(slabs.Unused(), 0u);
  for (size_t i = 0; i < chunks.size(); i++) ASSERT_EQ(chunks[i].view(), std::string(50, static_cast<char>('a' + i % 3))) << i;
}

// The head copies closed chunks into slabs by block range, and a cut that
// persists a range stops carving its blocks (else each range's last block
// stayed for the life of the process).
TEST(HeadTest, TruncateReleasesTheSlabsOfCutRanges) {
  constexpr int64_t hour = 3600 * 1000;
  HeadOptions o;
  o.block_duration_ms = 2 * hour;
  Head head(o);
  auto app = head.NewAppender();
  for (int s = 0; s < 200; s++) {
    Labels ls{{"__name__", "m"}, {"s", std::to_string(s)}};
    for (int64_t t = 0; t < 3 * hour; t += 15000) ASSERT_TRUE(app->Append(0, ls, t, static_cast<double>(t % 7919) * s).ok());
  }
  ASSERT_TRUE(app->Commit().ok());
  const Head::MemoryStats before = head.GetMemoryStats();
  EXPECT_GT(before.closed_bytes, 0u);
  EXPECT_GT(before.closed_slack, 0u);
  head.Truncate(head.SnapshotForPersist(2 * hour, /*close_all=*/false));
  const Head::MemoryStats cut = head.GetMemoryStats();
  EXPECT_LT(cut.closed_slack, before.closed_slack);  // the first range's block went
  EXPECT_GT(cut.closed_slack, 0u);                    // the second's is still carved
  EXPECT_EQ(Read(&head, {Eq("s", "7")}).size(), 240u);
  head.Truncate(head.SnapshotForPersist(INT64_MAX, /*close_all=*/true));
  EXPECT_EQ(head.NumSeries(), 0u);
  EXPECT_EQ(head.GetMemoryStats().closed_slack, 0u);
}

// A fresh directory for spilled chunk blocks, removed with the object.
struct SpillDir : wal::testing::ScratchDir {
  size_t Files() const { return file::ListDir(path()).value().size(); }
  size_t Maps() const { return testing::MappedFilesUnder(path()).maps; }
  size_t ResidentKb() const { return testing::MappedFilesUnder(path()).rss_kb; }
};

std::string SpillChunk(int i) {
  std::string b = "chunk" + std::to_string(i) + ":";
  b.resize(40 + static_cast<size_t>(i * 37 % 300), static_cast<char>('a' + i % 26));
  return b;
}

// With a spill directory, full data blocks go to files mapped in place:
// the chunks keep their bytes, their memory is the header alone, and each
// file goes with the last chunk of its block.
TEST(HeadTest, ChunkSlabsSpillFullBlocksToFilesMappedInPlace) {
  SpillDir dir;
  std::vector<ChunkBytes> chunks;
  {
    ChunkSlabs slabs(64 << 10, SpillOptions{dir.path(), 64 << 10, 8 << 10});
    for (int i = 0; i < 3000; i++) chunks.push_back(slabs.Copy(SpillChunk(i), i % 2));
    chunks.push_back(slabs.Copy(std::string(20 << 10, 'z'), 0));  // over a quarter of a data block: its own
    EXPECT_GT(slabs.SpilledBlocks(), 4u);
    EXPECT_EQ(slabs.SpillFailures(), 0u);
    EXPECT_EQ(dir.Files(), slabs.SpilledBlocks());
    EXPECT_EQ(dir.Maps(), slabs.SpilledBlocks());  // each file is mapped (over its block)
    slabs.DropGroupsUpTo(0);
  }
  size_t mapped = 0;
  for (int i = 0; i < 3000; i++) {
    ASSERT_EQ(chunks[i].view(), SpillChunk(i)) << i;
    if (chunks[i].MappedBytes() > 0) {
      mapped++;
      EXPECT_EQ(chunks[i].MappedBytes(), SpillChunk(i).size());
      EXPECT_EQ(chunks[i].MemoryBytes(), 20u);  // the header and a pointer
    } else {
      EXPECT_EQ(chunks[i].MemoryBytes(), 20 + SpillChunk(i).size());
    }
  }
  EXPECT_GT(mapped, 2000u);  // all but each group's last block
  // Reading them mapped their pages in; DropMappedPages takes them out of
  // the process again, and a read maps them back.
  EXPECT_GT(dir.ResidentKb(), 100u);
  EXPECT_GT(ChunkSlabs::DropMappedPages(), 100u << 10);
  EXPECT_EQ(dir.ResidentKb(), 0u);
  for (int i = 0; i < 3000; i++) ASSERT_EQ(chunks[i].view(), SpillChunk(i)) << i;
  EXPECT_GT(dir.ResidentKb(), 100u);
  EXPECT_EQ(chunks.back().view(), std::string(20 << 10, 'z'));
  EXPECT_EQ(chunks.back().MappedBytes(), 0u);
  const size_t files = dir.Files();
  std::vector<ChunkBytes> odd;  // a reader's copies of group 1
  for (int i = 1; i < 3000; i += 2) odd.push_back(chunks[i]);
  chunks.clear();
  EXPECT_LT(dir.Files(), files);  // group 0's blocks went with their chunks
  EXPECT_GT(dir.Files(), 0u);
  for (size_t j = 0; j < odd.size(); j++) ASSERT_EQ(odd[j].view(), SpillChunk(static_cast<int>(2 * j + 1))) << j;
  odd.clear();
  EXPECT_EQ(dir.Files(), 0u);
  EXPECT_EQ(dir.Maps(), 0u);
}

// A block that cannot be written out stays in memory, counted; its chunks
// keep their bytes.
TEST(HeadTest, ChunkSlabsSpillFailureKeepsBlocksInMemory) {
  const uint64_t failures = ChunkSlabs::SpillFailuresTotal();
  std::vector<ChunkBytes> chunks;
  {
    ChunkSlabs slabs(64 << 10, SpillOptions{"/nonexistent/tw_spill", 64 << 10, 8 << 10});
    for (int i = 0; i < 1000; i++) chunks.push_back(slabs.Copy(SpillChunk(i), 0));
    EXPECT_EQ(slabs.SpilledBlocks(), 0u);
    EXPECT_GT(slabs.SpillFailures(), 0u);
    EXPECT_EQ(ChunkSlabs::SpillFailuresTotal(), failures + slabs.SpillFailures());
  }
  for (int i = 0; i < 1000; i++) {
    ASSERT_EQ(chunks[i].view(), SpillChunk(i)) << i;
    EXPECT_EQ(chunks[i].MappedBytes(), 0u);
  }
}

// Readers hold and read chunks while later ones fill blocks that are
// mapped over: each reads the bytes it was given, before, during and after
// its block's map (the ASan build checks every access).
TEST(HeadTest, ChunkSlabsSpillKeepsBytesUnderConcurrentReaders) {
  SpillDir dir;
  constexpr int kChunks = 20000;
  std::vector<ChunkBytes> chunks(kChunks);
  std::atomic<int> published{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; r++) {
    readers.emplace_back([&] {
      while (published.load(std::memory_order_acquire) < kChunks) {
        const int n = published.load(std::memory_order_acquire);
        for (int i = std::max(0, n - 2000); i < n; i++) {
          if (chunks[i].view() != SpillChunk(i)) bad = true;
        }
      }
    });
  }
  {
    ChunkSlabs slabs(64 << 10, SpillOptions{dir.path(), 64 << 10, 8 << 10});
    for (int i = 0; i < kChunks; i++) {
      chunks[i] = slabs.Copy(SpillChunk(i), 0);
      published.store(i + 1, std::memory_order_release);
    }
    EXPECT_GT(slabs.SpilledBlocks(), 30u);
  }
  for (auto& t : readers) t.join();
  EXPECT_FALSE(bad.load());
  chunks.clear();
  EXPECT_EQ(dir.Files(), 0u);
}

// A head with a spill directory answers as one without, holds its closed
// chunks' bytes in files, and a cut removes the files of what it persisted.
TEST(HeadTest, SpilledClosedChunksReadBackAndGoWithTheirRange) {
  constexpr int64_t hour = 3600 * 1000;
  SpillDir dir;
  HeadOptions plain, spilling;
  spilling.spill = SpillOptions{dir.path(), 64 << 10, 8 << 10};
  Head a(plain), b(spilling);
  for (Head* h : {&a, &b}) {
    auto app = h->NewAppender();
    for (int s = 0; s < 300; s++) {
      Labels ls{{"__name__", "m"}, {"s", std::to_string(s)}};
      for (int64_t t = 0; t < 3 * hour; t += 15000) {
        ASSERT_TRUE(app->Append(0, ls, t, std::sin(static_cast<double>(t / 15000 * (s + 1)))).ok());  // ~1 KiB a chunk
      }
    }
    ASSERT_TRUE(app->Commit().ok());
  }
  const Head::MemoryStats ma = a.GetMemoryStats(), mb = b.GetMemoryStats();
  EXPECT_EQ(ma.closed_mapped, 0u);
  EXPECT_GT(mb.closed_mapped, ma.closed_bytes / 2);
  EXPECT_LT(mb.closed_bytes, ma.closed_bytes / 2);
  EXPECT_GT(dir.Files(), 0u);
  for (int s : {0, 7, 299}) {
    auto want = Read(&a, {Eq("s", std::to_string(s))});
    ASSERT_EQ(want.size(), 720u);
    auto got = Read(&b, {Eq("s", std::to_string(s))});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      ASSERT_EQ(got[i].t, want[i].t) << s << " " << i;
      ASSERT_EQ(got[i].v, want[i].v) << s << " " << i;
    }
  }
  const size_t files = dir.Files();
  b.Truncate(b.SnapshotForPersist(2 * hour, /*close_all=*/false));
  EXPECT_LT(dir.Files(), files);
  EXPECT_EQ(Read(&b, {Eq("s", "7")}).size(), 240u);
  b.Truncate(b.SnapshotForPersist(INT64_MAX, /*close_all=*/true));
  EXPECT_EQ(b.NumSeries(), 0u);
  EXPECT_EQ(dir.Files(), 0u);
}

TEST(HeadTest, PersistSetIsSortedByLabels) {
  // Label sets that are prefixes of one another, share prefixes, differ in
  // names before values, and were created in an unrelated order.
  std::vector<Labels> want = {
      Labels{{"Hostname", "b"}},
      Labels{{"__name__", "m"}, {"a", "1"}},
      Labels{{"__name__", "m"}, {"a", "1"}, {"b", "2"}},
      Labels{{"__name__", "m"}, {"a", "10"}},
      Labels{{"__name__", "m"}, {"b", "0"}},
      Labels{{"__name__", "n"}},
      Labels{{"a", "x"}, {"z", "z"}},
  };
  Head head(HeadOptions{});
  auto app = head.NewAppender();
  for (size_t i : {4u, 2u, 6u, 0u, 5u, 1u, 3u}) ASSERT_TRUE(app->Append(0, want[i], 1000, 1).ok());
  ASSERT_TRUE(app->Commit().ok());
  std::sort(want.begin(), want.end());
  auto set = head.SnapshotForPersist(INT64_MAX, true);
  ASSERT_EQ(set.series.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(head.LabelsOf(set.series[i].first), want[i]) << i;
}

TEST(HeadTest, MatchersSelectSeries) {
  Head head(HeadOptions{});
  auto app = head.NewAppender();
  for (int i = 0; i < 10; i++) {
    Labels l{{"__name__", "x"}, {"i", std::to_string(i)}, {"even", i % 2 ? "" : "yes"}};
    ASSERT_TRUE(app->Append(0, l, 1000, i).ok());
  }
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_EQ(Read(&head, {Eq("__name__", "x")}).size(), 10u);
  EXPECT_EQ(Read(&head, {Eq("even", "yes")}).size(), 5u);
  EXPECT_EQ(Read(&head, {Eq("__name__", "x"), Eq("even", "")}).size(), 5u);
  auto re = *model::Matcher::Make(model::MatchType::kRegex, "i", "1|3|5");
  EXPECT_EQ(Read(&head, {re}).size(), 3u);
  auto nre = *model::Matcher::Make(model::MatchType::kNotRegex, "i", "[0-4]");
  EXPECT_EQ(Read(&head, {Eq("__name__", "x"), nre}).size(), 5u);
}

TEST(HeadTest, ConcurrentAppendersLoseNothing) {
  Head head(HeadOptions{});
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; th++) {
    threads.emplace_back([&, th] {
      for (int batch = 0; batch < 50; batch++) {
        auto app = head.NewAppender();
        for (int s = 0; s < 20; s++) {
          Labels l{{"__name__", "x"}, {"s", std::to_string(s)}};
          ASSERT_TRUE(app->Append(0, l, (batch * 4 + th) * 1000, 1).ok());
        }
        ASSERT_TRUE(app->Commit().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(head.NumSeries(), 20u);
  EXPECT_EQ(Read(&head, {Eq("__name__", "x")}).size(), 20u * 200);
}

}  // namespace
}  // namespace trainwatch::tsdb

namespace trainwatch::tsdb {
namespace {

// AppendUntil over a chunk list (mixed encodings, clipped to [mint, maxt])
// reads exactly what Seek and Next read, and resumes where it stopped; both
// read the samples in [max(mint, seek), maxt], chunks that start before
// mint entered by a seek into them.
TEST(ChunkListIteratorTest, AppendUntilMatchesNext) {
  std::vector<std::string> bytes;
  std::vector<ChunkRefData> chunks;
  int64_t t = 1000;
  for (int c = 0; c < 3; ++c) {
    std::vector<int64_t> ts;
    std::vector<double> vs;
    for (int i = 0; i < 50; ++i, t += 10) {
      ts.push_back(t);
      vs.push_back(c * 100 + i);
    }
    std::string b;
    if (c == 1) {
      chunkenc::EncodeXor(ts.data(), vs.data(), ts.size(), &b);
    } else {
      chunkenc::EncodeDense(ts.data(), vs.data(), ts.size(), &b);
    }
    bytes.push_back(std::move(b));
    chunks.push_back({ts.front(), ts.back(), c == 1 ? chunkenc::Encoding::kXor : chunkenc::Encoding::kDense, {}});
  }
  for (size_t c = 0; c < chunks.size(); ++c) chunks[c].data = bytes[c];
  for (auto [mint, maxt] : {std::pair<int64_t, int64_t>{0, 9000}, {1205, 2195}, {1500, 1500}, {2495, 2505}}) {
    for (int64_t seek : {int64_t{0}, int64_t{1495}, int64_t{2000}}) {
      SCOPED_TRACE(::testing::Message() << "[" << mint << ", " << maxt << "] seek " << seek);
      std::vector<model::Sample> want;
      ChunkListIterator a(chunks, mint, maxt, nullptr);
      if (a.Seek(seek)) {
        do want.push_back(a.At());
        while (a.Next());
      }
      ASSERT_TRUE(a.Err().ok());
      std::vector<int64_t> expect;
      for (int64_t x = 1000; x < 2500; x += 10) {
        if (x >= std::max(mint, seek) && x <= maxt) expect.push_back(x);
      }
      ASSERT_EQ(want.size(), expect.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(want[i].t, expect[i]);
      for (int64_t cut : {int64_t{1499}, int64_t{1500}, int64_t{2000}, int64_t{9000}}) {
        ChunkListIterator b(chunks, mint, maxt, nullptr);
        std::vector<model::Sample> got;
        if (b.Seek(seek)) {
          if (b.AppendUntil(cut, &got)) {
            EXPECT_GT(b.At().t, cut);
            b.AppendUntil(9000, &got);
          }
        }
        ASSERT_TRUE(b.Err().ok());
        ASSERT_EQ(got.size(), want.size()) << "cut " << cut;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].t, want[i].t);
          EXPECT_EQ(got[i].v, want[i].v);
        }
      }
    }
  }
}

TEST(HeadTest, HistogramChunksAndFloatFastPath) {
  HeadOptions o;
  o.samples_per_chunk = 10;
  Head head(o);
  auto app = head.NewAppender();
  Labels f{{"__name__", "f"}}, h{{"__name__", "h"}};
  for (int64_t t = 0; t < 30; t++) ASSERT_TRUE(app->Append(0, f, t, static_cast<double>(t)).ok());
  // 25 histograms, a layout change at 12: chunks of 10, 2, 10, 3.
  for (int64_t t = 0; t < 25; t++) {
    model::FloatHistogram x = testing_hist::ExpHistogram(static_cast<int>(t));
    if (t >= 12) x.zero_threshold = 0.5;
    ASSERT_TRUE(app->AppendHistogram(0, h, t, x).ok());
  }
  ASSERT_TRUE(app->Commit().ok());
  // Then a float, then a histogram again in the same series (a commit
  // applies its floats before its histograms, so they go in their own).
  ASSERT_TRUE(app->Append(0, h, 25, 2.5).ok());
  ASSERT_TRUE(app->Commit().ok());
  ASSERT_TRUE(app->AppendHistogram(0, h, 26, testing_hist::CustomHistogram(1)).ok());
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_EQ(head.NumChunks(), 3u + 4u + 1u + 1u);
  EXPECT_EQ(head.NumSamples(), 30u + 27u);

  auto q = head.NewQuerier(model::kMinTime, model::kMaxTime);
  auto set = (*q)->Select(true, {}, {Eq("__name__", "f")});
  ASSERT_TRUE(set->Next());
  auto it = set->At().Iterator();
  EXPECT_FALSE(it->HasHistograms());
  ASSERT_TRUE(it->Seek(0));
  std::vector<model::Sample> buf;
  EXPECT_FALSE(it->AppendUntil(model::kMaxTime, &buf));
  EXPECT_EQ(buf.size(), 30u);

  set = (*q)->Select(true, {}, {Eq("__name__", "h")});
  ASSERT_TRUE(set->Next());
  it = set->At().Iterator();
  EXPECT_TRUE(it->HasHistograms());
  ASSERT_TRUE(it->Seek(11));
  ASSERT_TRUE(it->AtIsHistogram());
  EXPECT_EQ(it->At().t, 11);
  testing_hist::ExpectSameHistogram(testing_hist::ExpHistogram(11), *it->AtHistogram());
  ASSERT_TRUE(it->Next());
  model::FloatHistogram want12 = testing_hist::ExpHistogram(12);
  want12.zero_threshold = 0.5;
  testing_hist::ExpectSameHistogram(want12, *it->AtHistogram());
  ASSERT_TRUE(it->Seek(25));
  EXPECT_FALSE(it->AtIsHistogram());
  EXPECT_EQ(it->At().v, 2.5);
  // AppendUntil takes the float and stops on the histogram after it.
  buf.clear();
  EXPECT_TRUE(it->AppendUntil(100, &buf));
  ASSERT_EQ(buf.size(), 1u);
  EXPECT_EQ(buf[0].t, 25);
  ASSERT_TRUE(it->AtIsHistogram());
  EXPECT_EQ(it->At().t, 26);
  testing_hist::ExpectSameHistogram(testing_hist::CustomHistogram(1), *it->AtHistogram());
  EXPECT_FALSE(it->Next());
  EXPECT_TRUE(it->Err().ok());

  // Persisting keeps every chunk, of either kind, and the memory stats see them.
  auto ps = head.SnapshotForPersist(INT64_MAX, true);
  size_t hist_chunks = 0;
  for (const auto& [s, snap] : ps.series) {
    for (const auto& c : snap.chunks) hist_chunks += chunkenc::IsHistogramEncoding(c.enc) ? 1 : 0;
  }
  EXPECT_EQ(hist_chunks, 5u);
  EXPECT_GT(head.GetMemoryStats().closed_bytes, 0u);
  head.Truncate(ps);
  EXPECT_EQ(head.NumSeries(), 0u);
}

// (t, st) of every sample of the series.
std::vector<std::pair<int64_t, int64_t>> ReadST(Head* head, const model::Matchers& ms) {
  auto q = head->NewQuerier(model::kMinTime, model::kMaxTime);
  auto set = (*q)->Select(true, {}, ms);
  std::vector<std::pair<int64_t, int64_t>> out;
  while (set->Next()) {
    auto it = set->At().Iterator();
    while (it->Next()) out.emplace_back(it->At().t, it->AtST());
  }
  return out;
}

TEST(HeadTest, StartTimestampRunsStayShortAndOutOfOrderSamplesKeepTheirs) {
  HeadOptions o;
  o.samples_per_chunk = 10;
  Head head(o);
  Labels c{{"__name__", "c_total"}}, d{{"__name__", "d"}}, p{{"__name__", "plain"}};
  std::vector<std::pair<int64_t, int64_t>> want_c, want_d;
  {
    auto app = head.NewAppender();
    for (int64_t i = 0; i < 100; i++) {
      const int64_t t = 1000 + i * 1000;
      const int64_t st = i < 50 ? 500 : 50 * 1000 + 1000 - 1;  // one restart
      ASSERT_TRUE(app->AppendST(0, c, st, t, static_cast<double>(i)).ok());
      want_c.emplace_back(t, st);
      ASSERT_TRUE(app->AppendST(0, d, t - 999, t, 1).ok());  // a new start each time
      want_d.emplace_back(t, t - 999);
      ASSERT_TRUE(app->Append(0, p, t, 1).ok());
    }
    ASSERT_TRUE(app->Commit().ok());
  }
  MemSeries* cs = head.Lookup(c, c.Hash());
  MemSeries* ds = head.Lookup(d, d.Hash());
  ASSERT_NE(cs, nullptr);
  ASSERT_NE(ds, nullptr);
  // Closed chunks carry theirs: the runs kept cover the open chunk only.
  {
    SpinGuard lc(cs->mu);
    ASSERT_TRUE(cs->extra != nullptr);
    EXPECT_EQ(cs->extra->st.size(), 1u);
  }
  {
    SpinGuard ld(ds->mu);
    EXPECT_LE(ds->extra->st.size(), 11u);
  }
  {
    MemSeries* ps = head.Lookup(p, p.Hash());
    SpinGuard lp(ps->mu);
    EXPECT_EQ(ps->extra, nullptr);
  }
  EXPECT_EQ(ReadST(&head, {Eq("__name__", "c_total")}), want_c);
  EXPECT_EQ(ReadST(&head, {Eq("__name__", "d")}), want_d);
  for (const auto& [t, st] : ReadST(&head, {Eq("__name__", "plain")})) EXPECT_EQ(st, 0) << t;

  // Out of order, into closed and open chunks' ranges, with other starts
  // than their neighbours, and one without a start among samples that have one.
  {
    auto app = head.NewAppender();
    ASSERT_TRUE(app->AppendST(0, c, 10, 5500, 1).ok());
    ASSERT_TRUE(app->AppendST(0, c, 0, 98500, 1).ok());
    ASSERT_TRUE(app->AppendST(0, c, 99000, 99500, 1).ok());
    ASSERT_TRUE(app->AppendST(0, c, 200000, 97500, 1).ok());  // after its sample: dropped
    ASSERT_TRUE(app->Commit().ok());
  }
  want_c.emplace_back(5500, 10);
  want_c.emplace_back(98500, 0);
  want_c.emplace_back(99500, 99000);
  want_c.emplace_back(97500, 0);
  std::sort(want_c.begin(), want_c.end());
  EXPECT_EQ(ReadST(&head, {Eq("__name__", "c_total")}), want_c);
  // And in order again after them.
  {
    auto app = head.NewAppender();
    ASSERT_TRUE(app->AppendST(0, c, 50 * 1000 + 1000 - 1, 101000, 1).ok());
    ASSERT_TRUE(app->Commit().ok());
  }
  want_c.emplace_back(101000, 50 * 1000 + 1000 - 1);
  EXPECT_EQ(ReadST(&head, {Eq("__name__", "c_total")}), want_c);

  // Persisting everything drops the runs the head no longer needs.
  auto set = head.SnapshotForPersist(INT64_MAX, /*close_all=*/true);
  head.Truncate(set);
  EXPECT_TRUE(ReadST(&head, {Eq("__name__", "c_total")}).empty());
}

// Pods and runs come and go: every "hour" a tenth of the series is replaced
// by new ones with new label values, and what is older than the hour is
// persisted (a head cut). The head keeps the strings, postings and ref
// pages of the live series only: its memory does not grow with the series
// it once had.
TEST(HeadTest, SeriesChurnKeepsMemoryToTheLiveSeries) {
  HeadOptions o;
  const int64_t hour = 3600 * 1000;
  o.block_duration_ms = hour;
  Head head(o);
  constexpr int kSeries = 20000, kCycles = 40;
  std::vector<int> gen(kSeries, 0);  // slot -> generation of its pod name
  auto labels = [](int slot, int g) {
    return Labels{{"__name__", "gpu_util"}, {"job", "train"}, {"pod", "pod-" + std::to_string(slot) + "-gen-" + std::to_string(g) + "-0123456789abcdef"}};
  };
  Head::MemoryStats steady;
  size_t steady_symbols = 0;
  for (int c = 0; c < kCycles; c++) {
    for (int slot = c % 10; slot < kSeries; slot += 10) gen[slot] = c;  // a tenth replaced
    auto app = head.NewAppender();
    for (int slot = 0; slot < kSeries; slot++) {
      ASSERT_TRUE(app->Append(0, labels(slot, gen[slot]), c * hour + slot, 1.0 * c).ok());
    }
    ASSERT_TRUE(app->Commit().ok());
    head.Truncate(head.SnapshotForPersist(c * hour, /*close_all=*/false));
    ASSERT_EQ(head.NumSeries(), static_cast<uint64_t>(kSeries)) << "cycle " << c;
    if (c == 12) {
      steady = head.GetMemoryStats();
      steady_symbols = steady.symbols;
    }
  }
  const Head::MemoryStats end = head.GetMemoryStats();
  // 400,000 series were made over the run, 20,000 are live.
  EXPECT_LE(end.symbols, steady_symbols + steady_symbols / 4 + (64 << 10)) << steady_symbols;
  EXPECT_LE(end.series_maps, steady.series_maps + steady.series_maps / 4) << steady.series_maps;
  EXPECT_LE(end.postings, steady.postings + steady.postings / 4 + (64 << 10)) << steady.postings;
  // Every label of the live series is still right, and found.
  for (int slot = 0; slot < kSeries; slot += 997) {
    auto got = Read(&head, {Eq("pod", std::string(labels(slot, gen[slot]).Get("pod")))});
    ASSERT_EQ(got.size(), 1u) << slot;
    EXPECT_EQ(got[0].t, (kCycles - 1) * hour + slot);
  }
  auto q = head.NewQuerier(model::kMinTime, model::kMaxTime);
  auto pods = (*q)->LabelValues("pod", {});
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(pods->size(), static_cast<size_t>(kSeries));
}

TEST(SymbolTableTest, DroppedStringsFreeTheirIdsAndCompactionKeepsTheRest) {
  SymbolTable t;
  const uint32_t a = t.Intern("a"), b = t.Intern("bb"), a2 = t.Intern("a");
  EXPECT_EQ(a, a2);
  EXPECT_EQ(t.size(), 2u);
  t.Release(&a, 1);
  EXPECT_EQ(t.Get(a), "a");  // one reference left
  t.Release(&a, 1);
  EXPECT_EQ(t.size(), 1u);
  const uint32_t c = t.Intern("ccc");
  EXPECT_EQ(c, a);  // the freed id is reused
  EXPECT_EQ(t.Get(c), "ccc");
  EXPECT_EQ(t.Get(b), "bb");
  // Enough dropped strings to compact: the live ones keep their ids and text.
  std::vector<uint32_t> many;
  for (int i = 0; i < 20000; i++) many.push_back(t.Intern("value-" + std::to_string(i) + "-with-some-length"));
  const size_t before = t.MemoryBytes();
  t.Release(many.data(), many.size() - 10);
  t.Compact();
  EXPECT_LT(t.MemoryBytes(), before);
  for (size_t i = many.size() - 10; i < many.size(); i++) {
    EXPECT_EQ(t.Get(many[i]), "value-" + std::to_string(i) + "-with-some-length");
    EXPECT_EQ(t.Intern(t.Get(many[i])), many[i]);
  }
  EXPECT_EQ(t.Get(b), "bb");
  EXPECT_EQ(t.size(), 2u + 10u);
}

}  // namespace
}  // namespace trainwatch::tsdb
