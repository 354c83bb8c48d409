#include <gtest/gtest.h>

#include <map>
#include <unistd.h>

#include <random>
#include <set>

#include <fstream>

#include "base/file.h"
#include "tsdb/index/index_reader.h"
#include "tsdb/index/index_writer.h"

namespace trainwatch::index {

// Defined in postings_test.cc.
void CheckMatchersAgainstBruteForce(const PostingsProvider& ix, const std::vector<model::Labels>& series,
                                    std::mt19937_64& rng, int iters);

namespace {

// Plain write without fsync: the corruption loops write thousands of files.
void WriteScratch(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string TestPath(const std::string& name) {
  std::string d = ::testing::TempDir() + "/tw_index_test_" + std::to_string(::getpid());
  EXPECT_TRUE(file::MkdirAll(d).ok());
  return d + "/" + name;
}

// Realistic-ish series: 10-15 labels, many shared values.
std::vector<model::Labels> MakeSeries(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<model::Labels> out;
  while (out.size() < n) {
    std::vector<model::Label> ls;
    const uint64_t host = rng() % (n / 50 + 1);
    ls.push_back({"__name__", "metric_" + std::to_string(rng() % 150)});
    ls.push_back({"job", "job" + std::to_string(host % 7)});
    ls.push_back({"instance", "host-" + std::to_string(host) + ".example.com:9100"});
    ls.push_back({"cluster", "c" + std::to_string(host % 3)});
    ls.push_back({"region", "region-" + std::to_string(host % 4)});
    ls.push_back({"env", host % 5 == 0 ? "staging" : "prod"});
    ls.push_back({"namespace", "ns-" + std::to_string(rng() % 20)});
    ls.push_back({"pod", "pod-" + std::to_string(rng() % (n / 20 + 1)) + "-abcde"});
    ls.push_back({"container", "ctr" + std::to_string(rng() % 12)});
    ls.push_back({"gpu", std::to_string(rng() % 8)});
    if (rng() % 2) ls.push_back({"mode", rng() % 2 ? "user" : "system"});
    if (rng() % 3 == 0) ls.push_back({"le", std::to_string(rng() % 12)});
    if (rng() % 4 == 0) ls.push_back({"device", "nvme" + std::to_string(rng() % 4)});
    if (rng() % 4 == 0) ls.push_back({"zone", "z" + std::to_string(rng() % 3)});
    ls.push_back({"team", "t" + std::to_string(host % 9)});
    out.insert(model::Labels(std::move(ls)));
  }
  return {out.begin(), out.end()};
}

std::vector<ChunkMeta> MakeChunks(size_t s, uint64_t* ref) {
  std::vector<ChunkMeta> cs;
  const size_t n = s % 17 == 0 ? 0 : 4;
  for (size_t i = 0; i < n; ++i) {
    ChunkMeta m;
    m.mint = 1700000000000 + static_cast<int64_t>(i) * 1800000 + static_cast<int64_t>(s % 5);
    m.maxt = m.mint + 1785000;
    m.ref = *ref;
    *ref += 150 + (s * 7 + i) % 40;
    cs.push_back(m);
  }
  return cs;
}

struct Written {
  std::vector<model::Labels> series;
  std::vector<std::vector<ChunkMeta>> chunks;
  uint64_t size = 0;
};

Written WriteIndex(const std::string& path, size_t n, uint64_t seed, int zstd_level = 3) {
  Written w;
  w.series = MakeSeries(n, seed);
  auto iw = IndexWriter::Create(path, IndexWriter::Options{.zstd_level = zstd_level});
  EXPECT_TRUE(iw.ok());
  uint64_t ref = MakeChunkRef(1, 8);
  for (size_t s = 0; s < w.series.size(); ++s) {
    w.chunks.push_back(MakeChunks(s, &ref));
    Status st = (*iw)->AddSeries(s, w.series[s], w.chunks.back());
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  Status st = (*iw)->Finish();
  EXPECT_TRUE(st.ok()) << st.ToString();
  w.size = (*iw)->file_size();
  return w;
}

void CheckRoundTrip(const std::string& path, const Written& w) {
  auto r = IndexReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const IndexReader& ix = **r;
  ASSERT_EQ(ix.NumSeries(), w.series.size());
  EXPECT_EQ(ix.FileSize(), w.size);
  MemPostings mp;
  for (size_t s = 0; s < w.series.size(); ++s) mp.Add(s, w.series[s]);
  model::Labels ls;
  std::vector<ChunkMeta> cs;
  for (size_t s = 0; s < w.series.size(); ++s) {
    Status st = ix.Series(s, &ls, &cs);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(ls, w.series[s]);
    ASSERT_EQ(cs, w.chunks[s]);
  }
  // Random access, out of order (cache misses).
  for (size_t s = w.series.size(); s-- > 0;) {
    ASSERT_TRUE(ix.Series(s, &ls, nullptr).ok());
    ASSERT_EQ(ls, w.series[s]);
  }
  EXPECT_TRUE(ix.Series(w.series.size(), &ls, &cs).IsNotFound());
  // Several series of a block at once: a few (only they are decoded where
  // the reader's 64 cache slots are fewer than the index's blocks, as in
  // RoundTrip's), half of it (decoded whole and cached), and from the cache.
  std::mt19937_64 rng(w.series.size());
  auto fresh = IndexReader::Open(path, IndexReader::Options{.max_cached_blocks = 64});
  ASSERT_TRUE(fresh.ok());
  IndexReader::SeriesBatch batch;
  for (const IndexReader* reader : {static_cast<const IndexReader*>(fresh->get()), &ix}) {
    for (uint64_t b = 0; b * kSeriesPerBlock < w.series.size(); b++) {
      const uint64_t lo = b * kSeriesPerBlock, hi = std::min<uint64_t>(w.series.size(), lo + kSeriesPerBlock);
      std::set<SeriesRef> pick;
      const size_t want = b % 3 == 0 ? 3 : b % 3 == 1 ? (hi - lo) / 2 : 1;
      while (pick.size() < want) pick.insert(lo + rng() % (hi - lo));
      const Postings ids(pick.begin(), pick.end());
      ASSERT_TRUE(reader->ReadSeries(ids, &batch).ok());
      ASSERT_EQ(batch.size(), ids.size());
      for (size_t i = 0; i < ids.size(); i++) {
        batch.Get(i, &ls, &cs);
        ASSERT_EQ(ls, w.series[ids[i]]) << ids[i];
        ASSERT_EQ(cs, w.chunks[ids[i]]) << ids[i];
      }
    }
  }
  if (w.series.size() > kSeriesPerBlock) {
    EXPECT_TRUE(ix.ReadSeries(Postings{0, kSeriesPerBlock}, &batch).IsInvalidArgument());
  }
  EXPECT_TRUE(ix.ReadSeries(Postings{w.series.size()}, &batch).IsInvalidArgument());
  EXPECT_EQ(ix.LabelNames(), mp.LabelNames());
  for (const std::string& n : mp.LabelNames()) {
    ASSERT_EQ(*ix.LabelValues(n), mp.SortedLabelValues(n));
    for (const std::string& v : mp.SortedLabelValues(n)) {
      auto p = ix.Postings(n, v);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      ASSERT_EQ(*p, *mp.Postings(n, v)) << n << "=" << v;
    }
  }
  EXPECT_TRUE(ix.Postings("nope", "x")->empty());
  EXPECT_TRUE(ix.Postings("job", "nope")->empty());
  EXPECT_TRUE(ix.LabelValues("nope")->empty());
  EXPECT_EQ(*ix.AllPostings(), *mp.AllPostings());
}

TEST(IndexTest, RoundTrip) {
  const std::string path = TestPath("rt.index");
  Written w = WriteIndex(path, 5000, 1);
  CheckRoundTrip(path, w);
  std::printf("index: %zu series, %llu bytes, %.1f B/series\n", w.series.size(),
              static_cast<unsigned long long>(w.size), static_cast<double>(w.size) / w.series.size());
}

TEST(IndexTest, RoundTripNoZstd) {
  const std::string path = TestPath("rt_raw.index");
  Written w = WriteIndex(path, 3000, 2, /*zstd_level=*/0);
  CheckRoundTrip(path, w);
  std::printf("index (no zstd): %zu series, %.1f B/series\n", w.series.size(),
              static_cast<double>(w.size) / w.series.size());
}

TEST(IndexTest, EmptyAndTiny) {
  const std::string path = TestPath("empty.index");
  {
    auto iw = IndexWriter::Create(path);
    ASSERT_TRUE(iw.ok());
    ASSERT_TRUE((*iw)->Finish().ok());
    auto r = IndexReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->NumSeries(), 0u);
    EXPECT_TRUE((*r)->LabelNames().empty());
    EXPECT_TRUE((*r)->AllPostings()->empty());
  }
  {
    auto iw = IndexWriter::Create(path);
    ASSERT_TRUE((*iw)->AddSeries(0, model::Labels{{"a", "b"}}, {}).ok());
    ASSERT_TRUE((*iw)->Finish().ok());
    auto r = IndexReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*(*r)->Postings("a", "b"), (Postings{0}));
  }
}

TEST(IndexTest, WriterRejectsBadInput) {
  auto iw = IndexWriter::Create(TestPath("bad.index"));
  ASSERT_TRUE(iw.ok());
  IndexWriter& w = **iw;
  EXPECT_TRUE(w.AddSeries(1, model::Labels{{"a", "b"}}, {}).IsInvalidArgument());
  EXPECT_TRUE(w.AddSeries(0, model::Labels{}, {}).IsInvalidArgument());
  EXPECT_TRUE(w.AddSeries(0, model::Labels{{"a", ""}}, {}).IsInvalidArgument());
  ASSERT_TRUE(w.AddSeries(0, model::Labels{{"a", "b"}}, {}).ok());
  EXPECT_TRUE(w.AddSeries(1, model::Labels{{"a", "b"}}, {}).IsInvalidArgument());
  EXPECT_TRUE(w.AddSeries(1, model::Labels{{"a", "a"}}, {}).IsInvalidArgument());
  ASSERT_TRUE(w.AddSeries(1, model::Labels{{"a", "c"}}, {}).ok());
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_TRUE(w.AddSeries(2, model::Labels{{"a", "d"}}, {}).IsInvalidArgument());
  EXPECT_FALSE(w.Finish().ok());
}

TEST(IndexTest, MatchersAgainstBruteForce) {
  // Same random label universe as postings_test.cc, through the file.
  std::mt19937_64 rng(11);
  const char* names[] = {"a", "b", "c", "d"};
  const char* vals[] = {"x", "y", "z", "xy", "foo"};
  std::set<model::Labels> set;
  while (set.size() < 400) {
    std::vector<model::Label> ls{{"__name__", "m" + std::to_string(rng() % 3)}};
    for (const char* nm : names) {
      if (rng() % 3 != 0) ls.push_back({nm, vals[rng() % 5]});
    }
    set.insert(model::Labels(std::move(ls)));
  }
  std::vector<model::Labels> series(set.begin(), set.end());
  const std::string path = TestPath("match.index");
  auto iw = IndexWriter::Create(path);
  for (size_t s = 0; s < series.size(); ++s) ASSERT_TRUE((*iw)->AddSeries(s, series[s], {}).ok());
  ASSERT_TRUE((*iw)->Finish().ok());
  auto r = IndexReader::Open(path);
  ASSERT_TRUE(r.ok());
  CheckMatchersAgainstBruteForce(**r, series, rng, 3000);
}

// Lists of every kind, at the sizes where the writer switches: bitmap,
// delta, and blocked (deltas behind a table of blocks) from
// kPostingsBlockedMin ids. Each reads back whole, counts from its header, and
// intersects with short and long lists as the decoded list does, in the
// index and in the head's MemPostings alike.
TEST(IndexTest, PostingsOfEveryKindIntersectAsDecoded) {
  constexpr size_t kN = 40000;
  const std::vector<size_t> every = {2, 7, 39, 40, 77, 78, 79, 156, 313};  // 20000 ... 128 ids
  std::vector<model::Labels> series;
  for (size_t i = 0; i < kN; i++) {
    std::vector<model::Label> ls{{"__name__", "m"}, {"id", std::to_string(1000000 + i)}};
    for (size_t d : every) {
      if (i % d == 0) ls.push_back({"every" + std::to_string(1000 + d), "yes"});
    }
    series.push_back(model::Labels(std::move(ls)));
  }
  std::sort(series.begin(), series.end());
  const std::string path = TestPath("kinds.index");
  auto iw = IndexWriter::Create(path);
  ASSERT_TRUE(iw.ok());
  MemPostings mp;
  for (size_t s = 0; s < series.size(); ++s) {
    ASSERT_TRUE((*iw)->AddSeries(s, series[s], {}).ok());
    mp.Add(s, series[s]);
  }
  ASSERT_TRUE((*iw)->Finish().ok());
  auto r = IndexReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::mt19937_64 rng(7);
  std::vector<std::pair<std::string, std::string>> lists = {{"__name__", "m"}, {"id", "1000123"}};
  for (size_t d : every) lists.emplace_back("every" + std::to_string(1000 + d), "yes");
  for (const auto& [n, v] : lists) {
    SCOPED_TRACE(n);
    const Postings want = *mp.Postings(n, v);
    ASSERT_EQ(*(*r)->Postings(n, v), want);
    EXPECT_EQ(*(*r)->PostingsCount(n, v), want.size());
    EXPECT_EQ(*mp.PostingsCount(n, v), want.size());
    for (size_t size : {size_t{0}, size_t{1}, size_t{3}, size_t{40}, size_t{700}, kN / 3, kN}) {
      std::set<SeriesRef> pick;
      while (pick.size() < size) pick.insert(rng() % kN);
      if (size > 0 && !want.empty()) pick.insert(want[rng() % want.size()]);  // some hits for sure
      const Postings with(pick.begin(), pick.end());
      const Postings expect = Intersect(want, with);
      auto got = (*r)->PostingsIntersecting(n, v, with);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, expect) << size;
      EXPECT_EQ(*mp.PostingsIntersecting(n, v, with), expect) << size;
    }
  }
  EXPECT_EQ(*(*r)->PostingsCount("every1002", "no"), 0u);
  EXPECT_TRUE((*r)->PostingsIntersecting("nope", "yes", Postings{1, 2})->empty());
  // One host's series of one metric: the short list is read whole, the long
  // one only where the short one's ids fall.
  auto got = (*r)->PostingsForMatchers({*model::Matcher::Make(model::MatchType::kEqual, "every1313", "yes"),
                                        *model::Matcher::Make(model::MatchType::kEqual, "every1039", "yes"),
                                        *model::Matcher::Make(model::MatchType::kNotEqual, "every1002", "yes")});
  ASSERT_TRUE(got.ok());
  Postings want;
  const Postings every313 = *mp.Postings("every1313", "yes");
  for (SeriesRef id : every313) {
    const model::Labels& l = series[id];
    if (l.Has("every1039") && !l.Has("every1002")) want.push_back(id);
  }
  EXPECT_EQ(*got, want);
  EXPECT_FALSE(want.empty());
}

// Opens the file and touches every API; must never crash.
void Exercise(const std::string& path, bool verify, int* opened) {
  auto r = IndexReader::Open(path, IndexReader::Options{.verify_checksums = verify});
  if (!r.ok()) {
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("offset"), std::string::npos);
    return;
  }
  ++*opened;
  const IndexReader& ix = **r;
  for (const std::string& n : ix.LabelNames()) {
    auto vals = ix.LabelValues(n);
    if (!vals.ok()) continue;
    for (const std::string& v : *vals) {
      (void)ix.Postings(n, v);
      (void)ix.PostingsCount(n, v);
      (void)ix.PostingsIntersecting(n, v, Postings{0, 5, ix.NumSeries() / 2, ix.NumSeries() + 3});
    }
    (void)ix.PostingsForMatchers({*model::Matcher::Make(model::MatchType::kRegex, n, ".+")});
  }
  model::Labels ls;
  std::vector<ChunkMeta> cs;
  for (uint64_t s = 0; s < std::min<uint64_t>(ix.NumSeries(), 1000); ++s) (void)ix.Series(s, &ls, &cs);
  // A few series of each block, through a reader whose cache is empty (so
  // only they are decoded).
  auto fresh = IndexReader::Open(path, IndexReader::Options{.verify_checksums = verify, .max_cached_blocks = 64});
  if (!fresh.ok()) return;
  IndexReader::SeriesBatch batch;
  for (uint64_t s = 1; s + 2 < std::min<uint64_t>(ix.NumSeries(), 1000); s += kSeriesPerBlock) {
    if ((*fresh)->ReadSeries(Postings{s, s + 2}, &batch).ok()) {
      for (size_t i = 0; i < batch.size(); i++) batch.Get(i, &ls, &cs);
    }
  }
}

TEST(IndexTest, TruncationAndBitFlips) {
  const std::string path = TestPath("small.index");
  const std::string scratch = TestPath("scratch.index");
  WriteIndex(path, 80, 5);
  std::string data;
  ASSERT_TRUE(file::ReadFile(path, &data).ok());
  int opened = 0;
  for (size_t n = 0; n < data.size(); ++n) {
    WriteScratch(scratch, std::string_view(data).substr(0, n));
    auto r = IndexReader::Open(scratch, IndexReader::Options{.verify_checksums = false});
    EXPECT_FALSE(r.ok()) << "truncated to " << n;
  }
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < data.size(); ++i) {
    std::string bad = data;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (rng() % 8)));
    WriteScratch(scratch, bad);
    Exercise(scratch, /*verify=*/false, &opened);
    int opened_verified = 0;
    Exercise(scratch, /*verify=*/true, &opened_verified);
    EXPECT_EQ(opened_verified, 0) << "flip at " << i << " not detected by checksums";
  }
  // Random multi-byte garbage.
  for (int it = 0; it < 300; ++it) {
    std::string bad = data;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    WriteScratch(scratch, bad);
    Exercise(scratch, /*verify=*/false, &opened);
  }
  std::printf("flipped files that still opened without checksums: %d\n", opened);
}

// Blocked postings lists (too large for TruncationAndBitFlips's every-byte
// loop): random flips in a file of 5,000 series whose sparse lists are
// blocked; reading them must report corruption, never crash.
TEST(IndexTest, BitFlipsInBlockedPostings) {
  std::vector<model::Labels> series;
  for (size_t i = 0; i < 5000; i++) {
    series.push_back(model::Labels{{"__name__", "m"}, {"id", std::to_string(100000 + i)},
                                   {"sparse", i % 9 == 0 ? "a" : "b"}});
  }
  std::sort(series.begin(), series.end());
  const std::string path = TestPath("blocked.index"), scratch = TestPath("blocked_scratch.index");
  {
    auto iw = IndexWriter::Create(path);
    for (size_t s = 0; s < series.size(); ++s) ASSERT_TRUE((*iw)->AddSeries(s, series[s], {}).ok());
    ASSERT_TRUE((*iw)->Finish().ok());
  }
  std::string data;
  ASSERT_TRUE(file::ReadFile(path, &data).ok());
  std::mt19937_64 rng(5);
  int opened = 0;
  for (int it = 0; it < 1500; ++it) {
    std::string bad = data;
    bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
    WriteScratch(scratch, bad);
    Exercise(scratch, /*verify=*/false, &opened);
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace trainwatch::index
