#include "tsdb/downsample.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "base/file.h"
#include "model/matcher.h"
#include "promql/engine.h"
#include "tsdb/db.h"
#include "tsdb/chunk_series.h"
#include "tsdb/chunkenc/parts.h"
#include "tsdb/db_impl.h"

namespace trainwatch::tsdb {
namespace {

constexpr int64_t kMin = 60'000, kHour = 3'600'000;
constexpr int64_t kT0 = 1'700'000'000'000 / (2 * kHour) * (2 * kHour);  // on the 2 h block grid
constexpr int64_t kSpan = 12 * kHour;
// A clock a month past the data.
constexpr int64_t kAged = kT0 + kSpan + 32 * 24 * kHour;

bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

TEST(AggregateWindowsTest, WindowsAreLeftOpenAndStampedAtTheirEnd) {
  // 5 m windows: (0, 300000] holds 300000; (300000, 600000] holds 300001.
  const int64_t ts[] = {1, 150'000, 300'000, 300'001, 600'000, 900'001};
  const double vs[] = {4, 2, 7, 5, model::StaleNaN(), 1};
  std::array<SeriesSamples, kNumAggr> out;
  AggregateWindows(ts, vs, 6, 5 * kMin, &out);
  EXPECT_EQ(out[kAggrMin].ts, (std::vector<int64_t>{300'000, 600'000, 1'200'000}));
  EXPECT_EQ(out[kAggrMin].vs, (std::vector<double>{2, 5, 1}));
  EXPECT_EQ(out[kAggrMax].vs, (std::vector<double>{7, 5, 1}));
  EXPECT_EQ(out[kAggrSum].vs, (std::vector<double>{13, 5, 1}));
  // The stale marker is no sample: count 1, last 5.
  EXPECT_EQ(out[kAggrCount].vs, (std::vector<double>{3, 1, 1}));
  EXPECT_EQ(out[kAggrLast].vs, (std::vector<double>{7, 5, 1}));
}

TEST(AggregateWindowsTest, MinAndMaxAreNaNOnlyWhenEveryValueIs) {
  const int64_t ts[] = {10, 20, 30, 310'000};
  const double vs[] = {NAN, 3, 1, NAN};
  std::array<SeriesSamples, kNumAggr> out;
  AggregateWindows(ts, vs, 4, 5 * kMin, &out);
  ASSERT_EQ(out[kAggrMin].vs.size(), 2u);
  EXPECT_EQ(out[kAggrMin].vs[0], 1);
  EXPECT_EQ(out[kAggrMax].vs[0], 3);
  EXPECT_TRUE(std::isnan(out[kAggrMin].vs[1]));
  EXPECT_TRUE(std::isnan(out[kAggrSum].vs[0]));
  EXPECT_EQ(out[kAggrCount].vs[1], 1);
}

class DownsampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::temp_directory_path() /
            ("tw_ds_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(file::RemoveAll(base_).ok());
  }
  void TearDown() override {
    raw_.reset();
    tiered_.reset();
    (void)file::RemoveAll(base_);
  }

  std::unique_ptr<DB> OpenDB(const std::string& name, bool downsample, int64_t retention_ms,
                             uint64_t retention_bytes = 0) {
    Options o;
    o.dir = base_ + "/" + name;
    o.background = false;
    o.retention_ms = retention_ms;
    o.retention_bytes = retention_bytes;
    o.downsample = downsample;
    o.now_ms = [this] { return now_.load(); };
    auto db = DB::Open(o);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return std::move(*db);
  }

  // 12 h of 3 series every 15 s (or `step`; so samples fall on every 5 m
  // and 1 h boundary), random integers, gaps, a stale marker and NaNs; a
  // second stale marker an hour past the 12 h (in the head, where tier
  // points and raw samples are read together).
  void Fill(DB* db, int64_t from = kT0, int64_t to = kT0 + kSpan, int64_t step = 15'000) {
    std::mt19937_64 rng(7 + static_cast<uint64_t>(from));
    auto app = db->NewAppender();
    for (int s = 0; s < 3; ++s) {
      model::Labels l{{"__name__", "gpu_util"}, {"gpu", std::to_string(s)}, {"job", s < 2 ? "a" : "b"}};
      for (int64_t t = from; t < to; t += step) {
        if (s == 1 && t > kT0 + 3 * kHour && t < kT0 + 4 * kHour) continue;  // a gap
        double v = static_cast<double>(rng() % 1000);
        if (s == 2 && (t - kT0) % (97 * kMin) == 0) v = NAN;
        if (s == 0 && (t == kT0 + 5 * kHour + 30'000 || t == kT0 + kSpan + kHour + 30'000)) v = model::StaleNaN();
        ASSERT_TRUE(app->Append(0, l, t, v).ok());
      }
    }
    ASSERT_TRUE(app->Commit().ok());
  }

  // raw_ (no tiers, no retention) and tiered_ (tiers, `retention_ms`)
  // filled alike and flushed.
  void FillBoth(int64_t retention_ms) {
    raw_ = OpenDB("r", false, 0);
    tiered_ = OpenDB("t", true, retention_ms);
    Fill(raw_.get());
    Fill(tiered_.get());
    ASSERT_TRUE(raw_->Flush().ok());
    ASSERT_TRUE(tiered_->Flush().ok());
  }

  std::string base_;
  std::atomic<int64_t> now_{kT0 + kSpan};
  std::unique_ptr<DB> raw_, tiered_;
};

// Every tier point equals the aggregate computed from the raw samples of its
// window, read back through the tier's blocks.
TEST_F(DownsampleTest, TierPointsEqualAggregatesOfRawSamples) {
  tiered_ = OpenDB("t", true, 0);
  Fill(tiered_.get());
  now_ = kAged;
  ASSERT_TRUE(tiered_->Flush().ok());
  auto* impl = static_cast<DBImpl*>(tiered_.get());
  auto tiers = impl->TiersSnapshot();
  auto q = tiered_->NewQuerier(model::kMinTime, model::kMaxTime);
  ASSERT_TRUE(q.ok());
  auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
  std::map<model::Labels, std::vector<model::Sample>> raw;
  auto set = (*q)->Select(true, {}, {*all});
  while (set->Next()) {
    auto it = set->At().Iterator();
    while (it->Next()) raw[set->At().labels()].push_back(it->At());
  }
  ASSERT_EQ(raw.size(), 3u);
  // Flush compacts the data into one raw block of 12 h from kT0, 4 h past a
  // 6 h mark: whole for 5 m and 1 h, and one 6 h window, (kT0 + 2 h,
  // kT0 + 8 h], for the 6 h tier.
  EXPECT_EQ(tiered_->GetStats().blocks, 1u);
  EXPECT_EQ(TierRange(kT0, kT0 + kSpan, 2), std::make_pair(kT0 + 2 * kHour, kT0 + 8 * kHour));
  for (int tier = 0; tier < kNumTiers; ++tier) {
    ASSERT_EQ(tiers[tier].size(), 1u);
    const int64_t res = kTierResolutions[static_cast<size_t>(tier)];
    const auto [lo, hi] = TierRange(kT0, kT0 + kSpan, tier);
    EXPECT_EQ(tiers[tier][0]->RawMint(), lo);
    EXPECT_EQ(tiers[tier][0]->RawMaxt(), hi);
    for (int a = 0; a < kNumAggr; ++a) {
      std::map<model::Labels, std::vector<model::Sample>> got;
      for (const auto& tb : tiers[tier]) {
        auto s = tb->Select(a, false, model::kMinTime, model::kMaxTime, {*all});
        while (s->Next()) {
          auto it = s->At().Iterator();
          while (it->Next()) got[s->At().labels()].push_back(it->At());
        }
      }
      for (const auto& [labels, samples] : raw) {
        // The expected points, window by window, straight from the definition.
        std::map<int64_t, std::vector<double>> windows;
        for (const auto& smp : samples) {
          // Whole windows of the block only: the one ending at its start
          // would be the tier of the block before it, which there is not;
          // 6 h windows reaching past either end hold other blocks' samples.
          if (model::IsStaleNaN(smp.v) || smp.t <= lo || smp.t > hi) continue;
          windows[(smp.t + res - 1) / res * res].push_back(smp.v);
        }
        const auto& pts = got[labels];
        ASSERT_EQ(pts.size(), windows.size()) << labels.ToString() << " tier " << tier << " aggr " << a;
        size_t i = 0;
        for (const auto& [end, vs] : windows) {
          double mn = vs[0], mx = vs[0], sum = 0;
          for (double v : vs) {
            if (v < mn || std::isnan(mn)) mn = v;
            if (v > mx || std::isnan(mx)) mx = v;
            sum += v;  // integers: exact
          }
          const double want[kNumAggr] = {mn, mx, sum, static_cast<double>(vs.size()), vs.back()};
          EXPECT_EQ(pts[i].t, end);
          EXPECT_TRUE(Same(pts[i].v, want[a])) << labels.ToString() << " t=" << end << " aggr " << AggrName(a)
                                                << ": " << pts[i].v << " != " << want[a];
          i++;
        }
      }
    }
  }
  // Reopening loads the same tiers; a snapshot holds them too.
  const auto before = tiered_->GetStats();
  EXPECT_GT(before.tier_blocks, 0u);
  auto snap = tiered_->Snapshot(/*skip_head=*/true);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  tiered_.reset();
  tiered_ = OpenDB("t", true, 0);
  EXPECT_EQ(tiered_->GetStats().tier_blocks, before.tier_blocks);
  auto from_snap = OpenDB("t/snapshots/" + *snap, true, 0);
  EXPECT_EQ(from_snap->GetStats().tier_blocks, before.tier_blocks);
}

using promql::Engine;

void ExpectSameResults(promql::QueryResult a, promql::QueryResult b, const std::string& what) {
  ASSERT_EQ(a.matrix.size(), b.matrix.size()) << what;
  for (size_t i = 0; i < a.matrix.size(); ++i) {
    EXPECT_EQ(a.matrix[i].labels, b.matrix[i].labels) << what;
    ASSERT_EQ(a.matrix[i].points.size(), b.matrix[i].points.size()) << what << " " << a.matrix[i].labels.ToString();
    for (size_t j = 0; j < a.matrix[i].points.size(); ++j) {
      EXPECT_EQ(a.matrix[i].points[j].t, b.matrix[i].points[j].t) << what;
      EXPECT_TRUE(Same(a.matrix[i].points[j].v, b.matrix[i].points[j].v))
          << what << " " << a.matrix[i].labels.ToString() << " t=" << a.matrix[i].points[j].t << ": "
          << a.matrix[i].points[j].v << " vs " << b.matrix[i].points[j].v;
    }
  }
}

const char* kTierQueries[] = {
    "min_over_time(gpu_util[1h])",   "max_over_time(gpu_util[3h])",  "sum_over_time(gpu_util[1h])",
    "count_over_time(gpu_util[2h])", "avg_over_time(gpu_util[1h])",  "last_over_time(gpu_util[1h])",
    "sum by (job) (count_over_time(gpu_util[1h]))", "max(avg_over_time(gpu_util[6h] offset 1h))",
};

// Each of kTierQueries over [from, to] at `step` answers from `tiered` as
// from `raw`, and not with nothing.
void ExpectTierQueriesAsRaw(DB& raw, DB& tiered, int64_t from, int64_t to, int64_t step) {
  Engine engine{promql::EngineOptions{}};
  for (const char* e : kTierQueries) {
    auto want = engine.Range(raw, e, from, to, step);
    auto got = engine.Range(tiered, e, from, to, step);
    ASSERT_TRUE(want.ok() && got.ok()) << e;
    ASSERT_FALSE(got->matrix.empty()) << e;
    ExpectSameResults(*want, *got, e);
  }
}

// The same data with and without tiers: queries whose windows lie on a
// tier's grid answer alike, and those that do not fall back to raw.
TEST_F(DownsampleTest, QueriesOnTheGridAnswerAsRaw) {
  now_ = kAged;
  FillBoth(0);
  // The querier picks the 1 h tier for a 1 h step on the grid (the
  // coarsest on whose grid it lies; points carry counts), and raw data 1 ms
  // off it.
  auto all = model::Matcher::Make(model::MatchType::kEqual, "gpu", "0");
  for (int64_t off : {0, 1}) {
    auto q = tiered_->NewQuerier(model::kMinTime, model::kMaxTime);
    ASSERT_TRUE(q.ok());
    storage::SelectHints h;
    h.start = kT0 + 2 * kHour + 1 + off;
    h.end = kT0 + 6 * kHour + off;
    h.func = "count_over_time";
    h.range_ms = kHour;
    h.step_ms = kHour;
    auto set = (*q)->Select(true, h, {*all});
    ASSERT_TRUE(set->Next());
    auto it = set->At().Iterator();
    size_t n = 0;
    while (it->Next()) n++;
    EXPECT_EQ(it->HasCounts(), off == 0);
    EXPECT_EQ(n, off == 0 ? 4u : 4u * 240);  // 1 h points, or 15 s samples
    // sum_over_time reads the sum part alone: no counts.
    h.func = "sum_over_time";
    auto sums = (*q)->Select(true, h, {*all});
    ASSERT_TRUE(sums->Next());
    auto sit = sums->At().Iterator();
    n = 0;
    while (sit->Next()) n++;
    EXPECT_FALSE(sit->HasCounts());
    EXPECT_EQ(n, off == 0 ? 4u : 4u * 240);
  }
  // Two more hours in the head only: answers read the tiers up to their
  // last point and raw samples after it.
  Fill(raw_.get(), kT0 + kSpan, kT0 + kSpan + 2 * kHour);
  Fill(tiered_.get(), kT0 + kSpan, kT0 + kSpan + 2 * kHour);
  // A 6 h step from the 6 h tier's one window, (kT0 + 2 h, kT0 + 8 h], to
  // kT0 + 14 h: that window from the 6 h tier, the raw block's last 4 h
  // (no whole 6 h window) from the 1 h tier but its last hour, which the
  // 5 m tier gives but its last 5 minutes (their ends' samples lie in the
  // head), then raw samples.
  {
    auto q = tiered_->NewQuerier(model::kMinTime, model::kMaxTime);
    ASSERT_TRUE(q.ok());
    storage::SelectHints h;
    h.start = kT0 + 2 * kHour + 1;
    h.end = kT0 + 14 * kHour;
    h.func = "count_over_time";
    h.range_ms = 6 * kHour;
    h.step_ms = 6 * kHour;
    auto set = (*q)->Select(true, h, {*all});
    ASSERT_TRUE(set->Next());
    auto it = set->At().Iterator();
    std::vector<int64_t> ts;
    double total = 0;
    while (it->Next()) {
      ts.push_back(it->At().t);
      total += it->HasCounts() ? it->AtCount() : 1;
    }
    ASSERT_GE(ts.size(), 15u);
    const std::vector<int64_t> tiered(ts.begin(), ts.begin() + 15);
    std::vector<int64_t> want = {kT0 + 8 * kHour, kT0 + 9 * kHour, kT0 + 10 * kHour, kT0 + 11 * kHour};
    for (int64_t t = kT0 + 11 * kHour + 5 * kMin; t < kT0 + 12 * kHour; t += 5 * kMin) want.push_back(t);
    EXPECT_EQ(tiered, want);
    EXPECT_EQ(ts[15], kT0 + 11 * kHour + 55 * kMin + 15'000);  // then raw
    // Every 15 s sample of gpu 0 in (kT0 + 2 h, kT0 + 14 h) once, but the
    // stale marker at kT0 + 5 h + 30 s, which tiers do not count.
    EXPECT_EQ(total, 12.0 * 240 - 2);
  }
  Engine engine{promql::EngineOptions{}};
  struct Q {
    int64_t start, end, step;
  };
  for (const char* e : {"avg_over_time(gpu_util[6h])", "sum_over_time(gpu_util[6h])", "min_over_time(gpu_util[6h])",
                        "last_over_time(gpu_util[12h])", "count_over_time(gpu_util[6h])"}) {
    auto want = engine.Range(*raw_, e, kT0 + 8 * kHour, kT0 + 14 * kHour, 6 * kHour);
    auto got = engine.Range(*tiered_, e, kT0 + 8 * kHour, kT0 + 14 * kHour, 6 * kHour);
    ASSERT_TRUE(want.ok() && got.ok()) << e;
    ExpectSameResults(*want, *got, std::string(e) + " step 6h");
  }
  // 1 h and 6 h steps pick the 1 h and 6 h tiers; 7 m and an off-grid start fall back to raw.
  for (Q r : {Q{kT0 + 3 * kHour, kT0 + kSpan, kHour}, Q{kT0 + 6 * kHour, kT0 + kSpan, 6 * kHour},
              Q{kT0 + kHour, kT0 + 9 * kHour, 7 * kMin}, Q{kT0 + kHour + 1000, kT0 + 9 * kHour + 1000, kHour},
              Q{kT0 + 8 * kHour, kT0 + kSpan + 2 * kHour, kHour}}) {
    for (const char* e : kTierQueries) {
      auto want = engine.Range(*raw_, e, r.start, r.end, r.step);
      auto got = engine.Range(*tiered_, e, r.start, r.end, r.step);
      ASSERT_TRUE(want.ok() && got.ok()) << e;
      ExpectSameResults(*want, *got, std::string(e) + " step " + std::to_string(r.step));
    }
    auto want = engine.Range(*raw_, "rate(gpu_util[1h])", r.start, r.end, r.step);
    auto got = engine.Range(*tiered_, "rate(gpu_util[1h])", r.start, r.end, r.step);
    ASSERT_TRUE(want.ok() && got.ok());
    ExpectSameResults(*want, *got, "rate");
  }
}

// Once raw retention deleted the raw blocks, the tiers still answer, as the
// raw data did.
TEST_F(DownsampleTest, TiersAnswerAfterRawRetention) {
  FillBoth(24 * kHour);
  // A 24 h retention keeps blocks at 2 h (a tenth of it). Each has a 5 m
  // and a 1 h tier block (no whole 6 h window), made when it was written,
  // but the newest: its last window waits for the sample at its end.
  // Those of each resolution are merged per window of 6 h, 18 h, ...
  // (CompactTiers) that the tier's data passed: kT0 is 4 h past a 6 h mark
  // and 10 h past an 18 h one, so [kT0 + 2 h, kT0 + 8 h) merge at 6 h, then
  // with [kT0, kT0 + 2 h) at 18 h; [kT0 + 8 h, kT0 + 10 h) waits for its
  // 6 h window: two per tier.
  const auto with_raw = tiered_->GetStats();
  ASSERT_GT(with_raw.blocks, 2u);
  EXPECT_EQ(with_raw.tier_blocks, 4u);
  now_ = kT0 + kSpan + 30 * kHour;  // every raw block is older than the 24 h retention
  ASSERT_TRUE(tiered_->Flush().ok());
  const auto after = tiered_->GetStats();
  EXPECT_EQ(after.blocks, 0u);
  // Tiers were made before retention took the raw blocks, and answer.
  // No raw data is left to land in any window: each tier's blocks merge
  // into one.
  EXPECT_EQ(after.tier_blocks, 2u);
  // From 8 h on: no window reaches back to the sample at kT0 itself, which
  // only a tier of the (absent) block before the first would hold.
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 8 * kHour, kT0 + kSpan, 30 * kMin);
  // The tier's own retention (90 days for 5 m) deletes it in turn.
  now_ = kT0 + 91 * 24 * kHour;
  ASSERT_TRUE(tiered_->Flush().ok());
  EXPECT_LT(tiered_->GetStats().tier_blocks, after.tier_blocks);
}

// A flush writes the whole head: the newest block's tiers wait for data
// from its end on (the window ending there takes the sample at exactly
// its end), so the next hours' sample at that end is in them, and tier
// answers over it stay the raw ones.
TEST_F(DownsampleTest, NewestBlockWaitsForTheSampleAtItsEnd) {
  FillBoth(24 * kHour);
  now_ = kT0 + kSpan + 4 * kHour;
  for (DB* d : {raw_.get(), tiered_.get()}) {
    Fill(d, kT0 + kSpan, kT0 + kSpan + 4 * kHour);
    ASSERT_TRUE(d->Flush().ok());
  }
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 8 * kHour, kT0 + kSpan + 4 * kHour, kHour);
}

// The tier dirs of each resolution, oldest range first.
std::vector<std::vector<std::string>> TierDirs(DB* db) {
  std::vector<std::vector<std::string>> out;
  for (const auto& tier : static_cast<DBImpl*>(db)->TiersSnapshot()) {
    out.emplace_back();
    for (const auto& tb : tier) out.back().push_back(tb->dir());
  }
  return out;
}

// The tiers of blocks compaction is done with are merged into one tier
// block per resolution while their raw blocks are still kept; a raw block
// covered by a merged tier block has its tiers (they are not made again at
// each flush); late data merged into one has them made again and spliced
// into the merged block, whose answers then count it; and a merged block
// left beside the one it was merged into (a crash between writing one and
// deleting the other) is deleted when the DB opens.
TEST_F(DownsampleTest, TiersOfFinalBlocksAreMergedAndLateDataSplicedIn) {
  FillBoth(24 * kHour);
  const auto stats = tiered_->GetStats();
  ASSERT_GT(stats.blocks, 2u);
  // 5 m and 1 h, two blocks each (TiersAnswerAfterRawRetention says why).
  ASSERT_EQ(stats.tier_blocks, 4u);
  const auto merged = TierDirs(tiered_.get());
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 4 * kHour, kT0 + kSpan, 30 * kMin);
  ASSERT_TRUE(tiered_->Flush().ok());
  EXPECT_EQ(TierDirs(tiered_.get()), merged);  // nothing made again
  // Keep a copy of the merged 1 h tier block, as a crash would leave it.
  const std::string left = merged[1][0].substr(0, merged[1][0].size() - 26) + NewUlid();
  std::filesystem::copy(merged[1][0], left, std::filesystem::copy_options::recursive);
  // Late samples, in series 1's gap of (kT0 + 3 h, kT0 + 4 h), to both.
  for (DB* d : {raw_.get(), tiered_.get()}) {
    auto app = d->NewAppender();
    model::Labels l{{"__name__", "gpu_util"}, {"gpu", "1"}, {"job", "a"}};
    for (int64_t t = kT0 + 3 * kHour + 7'000; t < kT0 + 4 * kHour; t += 60'000) {
      ASSERT_TRUE(app->Append(0, l, t, 5000 + static_cast<double>(t % 1000)).ok());
    }
    ASSERT_TRUE(app->Commit().ok());
    ASSERT_TRUE(d->Flush().ok());
  }
  const auto spliced = TierDirs(tiered_.get());
  ASSERT_EQ(spliced[0].size(), 2u);
  ASSERT_EQ(spliced[1].size(), 2u);
  EXPECT_NE(spliced, merged);
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 4 * kHour, kT0 + kSpan, 30 * kMin);
  {
    // The late samples are in the tiers' answer: a 1 h step reads them.
    Engine engine{promql::EngineOptions{}};
    auto got = engine.Range(*tiered_, "max_over_time(gpu_util{gpu=\"1\"}[1h])", kT0 + 4 * kHour, kT0 + 4 * kHour, kHour);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->matrix.size(), 1u);
    EXPECT_GE(got->matrix[0].points[0].v, 5000);
  }
  tiered_.reset();
  tiered_ = OpenDB("t", true, 24 * kHour);
  EXPECT_FALSE(file::Exists(left));
  EXPECT_EQ(TierDirs(tiered_.get()), spliced);
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 4 * kHour, kT0 + kSpan, 30 * kMin);
}

// Blocks that start and end between 6 h marks (3 h blocks, so 9 h ones
// after compaction, and an outage): the 6 h tier covers their whole windows
// only, with gaps at their edges that the finer tiers cover. Once raw
// retention took the raw blocks, a long query at a 6 h step reads the 6 h
// tier where it can and the 1 h tier in its gaps, as raw data answers; and
// merging old tier blocks keeps the gaps (merged over, a gap would read as
// no data: the query would miss those samples).
TEST_F(DownsampleTest, CoarseTierGapsAreReadFromFinerTiers) {
  raw_ = OpenDB("r", false, 0);
  Options o;
  o.dir = base_ + "/t";
  o.background = false;
  o.retention_ms = 240 * kHour;  // blocks grow to 9 h (27 h is over a tenth); tiers come at 5 days of age
  o.block_duration_ms = 3 * kHour;
  o.now_ms = [this] { return now_.load(); };
  auto db = DB::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  tiered_ = std::move(*db);
  const int64_t end = kT0 + 72 * kHour;
  now_ = end;
  for (DB* d : {raw_.get(), tiered_.get()}) {
    Fill(d, kT0, kT0 + 30 * kHour);
    Fill(d, kT0 + 40 * kHour, end);
  }
  now_ = end + 6 * 24 * kHour;
  ASSERT_TRUE(raw_->Flush().ok());
  ASSERT_TRUE(tiered_->Flush().ok());
  auto* impl = static_cast<DBImpl*>(tiered_.get());
  auto tiers = impl->TiersSnapshot();
  ASSERT_GE(tiers[2].size(), 4u);
  bool gap = false;
  for (size_t i = 1; i < tiers[2].size(); ++i) gap = gap || tiers[2][i]->RawMint() != tiers[2][i - 1]->RawMaxt();
  ASSERT_TRUE(gap);
  // The 1 h tier's contiguous runs are merged, never across the outage.
  const size_t fine_blocks = tiers[1].size();
  EXPECT_LT(fine_blocks, tiered_->GetStats().blocks);
  // Raw retention takes every raw block; the tiers stay, merged into one
  // per run: before the outage and after.
  now_ = end + 11 * 24 * kHour;
  ASSERT_TRUE(tiered_->Flush().ok());
  ASSERT_EQ(tiered_->GetStats().blocks, 0u);
  tiers = impl->TiersSnapshot();
  EXPECT_EQ(tiers[1].size(), 2u);
  Engine engine{promql::EngineOptions{}};
  for (const char* e : {"avg_over_time(gpu_util[6h])", "sum_over_time(gpu_util[6h])", "max_over_time(gpu_util[12h])",
                        "min_over_time(gpu_util[6h])", "count_over_time(gpu_util[6h])", "last_over_time(gpu_util[6h])",
                        "sum by (job) (avg_over_time(gpu_util[6h]))"}) {
    // From the first 6 h mark after kT0 (4 h past one): no window reaches
    // back to the sample at kT0 itself, which only a tier of the (absent)
    // block before the first would hold.
    auto want = engine.Range(*raw_, e, kT0 + 8 * kHour, end + 2 * kHour, 6 * kHour);
    auto got = engine.Range(*tiered_, e, kT0 + 8 * kHour, end + 2 * kHour, 6 * kHour);
    ASSERT_TRUE(want.ok() && got.ok()) << e;
    ASSERT_FALSE(got->matrix.empty()) << e;
    ExpectSameResults(*want, *got, e);
  }
}

// --retention.size counts the tiers, and a raw block it deletes gets its
// tiers first, though young (--retention.time would not age it yet): its history
// stays at 5 m and 1 h and answers as raw data did.
TEST_F(DownsampleTest, RetentionSizeKeepsTheHistoryOfDeletedBlocksAsTiers) {
  raw_ = OpenDB("r", false, 0);
  // A 24 h --retention.time keeps blocks at 2 h (a tenth of it).
  tiered_ = OpenDB("t", false, 24 * kHour);
  // One sample a second: raw blocks outweigh their tiers, as a real
  // workload's do.
  Fill(raw_.get(), kT0, kT0 + kSpan, 1000);
  Fill(tiered_.get(), kT0, kT0 + kSpan, 1000);
  ASSERT_TRUE(raw_->Flush().ok());
  ASSERT_TRUE(tiered_->Flush().ok());
  const auto before = tiered_->GetStats();
  ASSERT_GE(before.blocks, 3u);
  EXPECT_EQ(before.tier_blocks, 0u);
  ASSERT_EQ(before.blocks, 6u);
  // Room for about one and a half of the six.
  const uint64_t budget = before.block_bytes / 4;
  tiered_.reset();
  // A pass of maintenance makes the tiers of at most four blocks (a data
  // dir from before tiers is caught up a few blocks a pass); the size
  // deletes five: the fifth gets its tiers just before it goes.
  tiered_ = OpenDB("t", true, 0, budget);
  ASSERT_TRUE(static_cast<DBImpl*>(tiered_.get())->Maintain().ok());
  const auto after = tiered_->GetStats();
  EXPECT_EQ(after.blocks, 1u);
  EXPECT_LT(after.blocks, before.blocks);
  EXPECT_GT(after.tier_blocks, 0u);
  EXPECT_LE(after.block_bytes + after.tier_bytes, budget);
  EXPECT_LE(after.tier_bytes, budget / 2);
  Engine engine{promql::EngineOptions{}};
  for (const char* e : kTierQueries) {
    // No window may reach back to the sample at kT0 itself, which only a
    // tier of the (absent) block before the first would hold.
    const int64_t from = kT0 + (std::string_view(e).find("offset") != std::string_view::npos ? 8 : 4) * kHour;
    auto want = engine.Range(*raw_, e, from, kT0 + kSpan, kHour);
    auto got = engine.Range(*tiered_, e, from, kT0 + kSpan, kHour);
    ASSERT_TRUE(want.ok() && got.ok()) << e;
    ASSERT_FALSE(got->matrix.empty()) << e;
    ExpectSameResults(*want, *got, e);
  }
  // A budget the tiers alone exceed, with no raw block left: they go too,
  // oldest first.
  tiered_.reset();
  tiered_ = OpenDB("t", true, 0, after.tier_bytes / 4);
  ASSERT_TRUE(tiered_->Flush().ok());
  const auto tight = tiered_->GetStats();
  EXPECT_LT(tight.tier_bytes, after.tier_bytes);
}

// Writes tier block `tb` again in the first layout (before parts chunks:
// <dir>/{min,max,sum,count,last}/, a block of single chunks each).
void WriteFirstLayout(const TierBlock& tb, const std::string& dir) {
  ASSERT_TRUE(file::MkdirAll(dir).ok());
  auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
  for (int a = 0; a < kNumAggr; ++a) {
    index::BlockMeta meta;
    meta.id = std::string(AggrName(a));
    meta.mint = tb.RawMint() + 1;
    meta.maxt = tb.RawMaxt() + 1;
    meta.sources = tb.Sources();
    auto w = BlockWriter::Create(dir, meta);
    ASSERT_TRUE(w.ok());
    auto set = tb.Select(a, false, model::kMinTime, model::kMaxTime, {*all});
    while (set->Next()) {
      SeriesSamples s;
      auto it = set->At().Iterator();
      while (it->Next()) {
        s.ts.push_back(it->At().t);
        s.vs.push_back(it->At().v);
      }
      ASSERT_TRUE((*w)->AddSeries(set->At().labels(), s).ok());
    }
    ASSERT_TRUE(set->Err().ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
}

// Tier blocks of the first layout (five indexes each) are rewritten with
// one index when the DB opens, and answer as before; one whose rewrite was
// written before a crash kept it from being deleted is deleted, not
// rewritten twice.
TEST_F(DownsampleTest, FirstLayoutTierBlocksAreRewrittenOnOpen) {
  FillBoth(24 * kHour);
  now_ = kT0 + kSpan + 30 * kHour;  // raw retention takes every raw block: tiers alone answer
  ASSERT_TRUE(tiered_->Flush().ok());
  const Stats before = tiered_->GetStats();
  ASSERT_EQ(before.blocks, 0u);
  ASSERT_GE(before.tier_blocks, 2u);
  auto tiers = static_cast<DBImpl*>(tiered_.get())->TiersSnapshot();
  std::vector<std::string> first_layout;
  for (int t = 0; t < kNumTiers; ++t) {
    for (size_t i = 0; i < tiers[t].size(); ++i) {
      const std::string dir = tiers[t][i]->dir();
      const std::string old_dir = dir.substr(0, dir.size() - 26) + NewUlid();
      WriteFirstLayout(*tiers[t][i], old_dir);
      first_layout.push_back(old_dir);
      // The first tier's first block stays beside its first-layout copy
      // (a crash after the rewrite was written, before the old one went).
      if (t > 0 || i > 0) {
        ASSERT_TRUE(file::RemoveAll(dir).ok());
      }
    }
  }
  tiers = {};
  tiered_.reset();
  tiered_ = OpenDB("t", true, 24 * kHour);
  const Stats after = tiered_->GetStats();
  EXPECT_EQ(after.tier_blocks, before.tier_blocks);
  for (const auto& d : first_layout) EXPECT_FALSE(file::Exists(d)) << d;
  for (const auto& tier : static_cast<DBImpl*>(tiered_.get())->TiersSnapshot()) {
    for (const auto& tb : tier) {
      EXPECT_FALSE(IsFirstLayoutTierBlock(tb->dir())) << tb->dir();
    }
  }
  ExpectTierQueriesAsRaw(*raw_, *tiered_, kT0 + 8 * kHour, kT0 + kSpan, 30 * kMin);
}

// A tier block read as a block of single chunks is an error naming the
// problem, never one part's values taken for samples; read with counts,
// each sum point carries its window's count.
TEST_F(DownsampleTest, TierBlocksReadOnlyByPart) {
  tiered_ = OpenDB("t", true, 0);
  Fill(tiered_.get());
  now_ = kAged;
  ASSERT_TRUE(tiered_->Flush().ok());
  auto tiers = static_cast<DBImpl*>(tiered_.get())->TiersSnapshot();
  ASSERT_FALSE(tiers[0].empty());
  auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
  auto block = Block::Open(tiers[0][0]->dir());
  ASSERT_TRUE(block.ok());
  auto plain = (*block)->NewQuerier(model::kMinTime, model::kMaxTime)->Select(true, {}, {*all});
  EXPECT_FALSE(plain->Next());
  EXPECT_TRUE(plain->Err().IsCorruption()) << plain->Err().ToString();
  EXPECT_NE(plain->Err().message().find("parts chunk"), std::string::npos) << plain->Err().message();
  auto sums = tiers[0][0]->Select(kAggrSum, true, model::kMinTime, model::kMaxTime, {*all});
  auto counts = tiers[0][0]->Select(kAggrCount, false, model::kMinTime, model::kMaxTime, {*all});
  size_t points = 0;
  while (sums->Next()) {
    ASSERT_TRUE(counts->Next());
    auto it = sums->At().Iterator();
    auto c = counts->At().Iterator();
    EXPECT_TRUE(it->HasCounts());
    while (it->Next()) {
      ASSERT_TRUE(c->Next());
      EXPECT_EQ(it->At().t, c->At().t);
      EXPECT_EQ(it->AtCount(), c->At().v);
      EXPECT_GE(it->AtCount(), 1);
      points++;
    }
    EXPECT_FALSE(c->Next());
  }
  EXPECT_TRUE(sums->Err().ok());
  EXPECT_GT(points, 100u);
}

// Merging tier blocks copies chunks that are full as they are and encodes
// runs of smaller ones again into one: a merged block of many points plus
// one raw block's few windows re-encodes its last chunk and those, not all
// of it. The merged block's points are every block's, in order, each
// part's own.
TEST_F(DownsampleTest, MergingTierBlocksCopiesFullChunks) {
  const std::string dir = base_ + "/5m";
  ASSERT_TRUE(file::MkdirAll(dir).ok());
  const model::Labels l{{"__name__", "m"}};
  const model::Labels n{{"__name__", "n"}};
  constexpr int64_t kRes = 5 * kMin;
  auto stamp = [](int64_t i) { return kT0 + (i + 1) * kRes; };
  auto value = [](int64_t i, int a) { return static_cast<double>(i * 10 + a); };
  // A tier block of (mint, maxt] = (stamp(from) - 5 m, stamp(to) - 5 m]
  // whose series `ls` hold points `is`, values sign · value(i, a).
  auto write = [&](int64_t from, int64_t to, std::vector<std::string> sources, const std::vector<model::Labels>& ls,
                   const std::vector<int64_t>& is, double sign) -> std::shared_ptr<TierBlock> {
    index::BlockMeta meta;
    meta.id = NewUlid();
    meta.mint = kT0 + from * kRes + 1;  // points in (mint, maxt]: stamps one later
    meta.maxt = kT0 + to * kRes + 1;
    meta.sources = std::move(sources);
    auto w = BlockWriter::Create(dir, meta, 240);
    EXPECT_TRUE(w.ok());
    std::vector<int64_t> ts;
    std::array<std::vector<double>, kNumAggr> cols;
    for (int64_t i : is) {
      ts.push_back(stamp(i));
      for (int a = 0; a < kNumAggr; ++a) cols[a].push_back(sign * value(i, a));
    }
    std::array<const double*, kNumAggr> ptrs{};
    for (int a = 0; a < kNumAggr; ++a) ptrs[a] = cols[a].data();
    for (const auto& x : ls) EXPECT_TRUE((*w)->AddSeriesParts(x, ts, ptrs).ok());
    EXPECT_TRUE((*w)->Finish().ok());
    auto tb = TierBlock::Open(dir + "/" + meta.id);
    EXPECT_TRUE(tb.ok()) << tb.status().ToString();
    return *tb;
  };
  auto range = [](int64_t from, int64_t to) {
    std::vector<int64_t> out;
    for (int64_t i = from; i < to; ++i) out.push_back(i);
    return out;
  };
  auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
  // Each part of series m in `tb` holds points [0, 560), those in `over`
  // negated; then come the series `after`, and no other.
  auto expect_points = [&](const TierBlock& tb, const std::vector<int64_t>& over,
                           const std::vector<model::Labels>& after) {
    for (int a = 0; a < kNumAggr; ++a) {
      auto set = tb.Select(a, false, model::kMinTime, model::kMaxTime, {*all});
      ASSERT_TRUE(set->Next());
      auto it = set->At().Iterator();
      int64_t i = 0;
      while (it->Next()) {
        const bool overlaid = std::find(over.begin(), over.end(), i) != over.end();
        ASSERT_EQ(it->At().t, stamp(i)) << "part " << a;
        ASSERT_EQ(it->At().v, (overlaid ? -1 : 1) * value(i, a)) << "part " << a << " point " << i;
        i++;
      }
      EXPECT_TRUE(it->Err().ok()) << it->Err().ToString();
      EXPECT_EQ(i, 560);
      for (const auto& x : after) {
        ASSERT_TRUE(set->Next());
        EXPECT_EQ(set->At().labels(), x);
      }
      EXPECT_FALSE(set->Next());
    }
  };
  // Points [0, 300), [300, 310), [310, 560) of the 5 m tier (240 a chunk):
  // chunks of 240 + 60, 10, and 240 + 10.
  const std::vector<std::shared_ptr<TierBlock>> group = {write(0, 300, {"s0"}, {l}, range(0, 300), 1),
                                                         write(300, 310, {"s1"}, {l}, range(300, 310), 1),
                                                         write(310, 560, {"s2"}, {l}, range(310, 560), 1)};
  auto merged = MergeTierBlocks(dir, 0, group, nullptr, {*all});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ((*merged)->RawMint(), kT0);
  EXPECT_EQ((*merged)->RawMaxt(), kT0 + 560 * kRes);
  EXPECT_EQ((*merged)->Sources(), (std::vector<std::string>{"s0", "s1", "s2"}));
  // 240 copied; 60 + 10 encoded as one; 240 copied; 10.
  EXPECT_EQ((*merged)->block()->meta().num_chunks, 4u);
  EXPECT_EQ((*merged)->block()->meta().num_samples, 560u);
  expect_points(**merged, {}, {});
  // Part encodings, chunk by chunk: the 10 points XOR in the block made
  // from raw data (kDenseMinSamples), dense in the merged one, which long
  // ranges read for days (kMergedDenseMinSamples).
  auto encodings = [&](const TierBlock& tb, std::vector<chunkenc::Encoding>* out) {
    auto set = Block::SelectAcross({tb.block()}, model::kMinTime, model::kMaxTime,
                                   Block::Parts{.value = -1, .whole = true}, {*all});
    EXPECT_TRUE(set->Next());
    for (const ChunkRefData& c : static_cast<const ChunkSeries&>(set->At()).chunks()) {
      for (size_t a = 0; a < kNumAggr; ++a) {
        auto p = chunkenc::UnwrapPart(c.data, a);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        if (a == 0) out->push_back(p->enc);
        EXPECT_EQ(p->enc, out->back()) << "part " << a;
      }
    }
  };
  using chunkenc::Encoding;
  std::vector<Encoding> young, old;
  encodings(*group[1], &young);
  encodings(**merged, &old);
  EXPECT_EQ(young, std::vector<Encoding>{Encoding::kXor});
  EXPECT_EQ(old, std::vector<Encoding>(4, Encoding::kDense));
  // An overlay (a raw block's tiers made again with late data) over points
  // 5, 6 and 250-254, and a series of its own: its points replace those.
  const std::vector<int64_t> over = {5, 6, 250, 251, 252, 253, 254};
  auto overlay = write(5, 255, {"s1", "s3"}, {l, n}, over, -1);
  auto spliced = MergeTierBlocks(dir, 0, {*merged}, overlay, {*all});
  ASSERT_TRUE(spliced.ok()) << spliced.status().ToString();
  EXPECT_EQ((*spliced)->Sources(), (std::vector<std::string>{"s0", "s1", "s2", "s3"}));
  // m: [0, 310) encoded again (240 + 70: its first chunk is overlaid), 240
  // copied, 10; n: 7.
  EXPECT_EQ((*spliced)->block()->meta().num_chunks, 5u);
  EXPECT_EQ((*spliced)->block()->meta().num_samples, 567u);
  expect_points(**spliced, over, {n});
}

// Blocks of parts chunks read as one (Block::SelectAcross): each series
// once, in label order, with the points of every block it is in, in time
// order; values and counts from the parts asked for; clipped to [mint, maxt].
TEST_F(DownsampleTest, BlocksOfPartsReadAcrossAsOne) {
  ASSERT_TRUE(file::MkdirAll(base_).ok());
  const model::Labels a{{"__name__", "m"}, {"s", "a"}}, b{{"__name__", "m"}, {"s", "b"}}, c{{"__name__", "m"}, {"s", "c"}};
  // Three blocks of 10 points each (at 100 ms steps); a is in all, c in the
  // first and last, b in the middle one (so a later block is at a series
  // before an earlier block's). Part 0: t, part 1: 2t.
  const std::vector<std::vector<model::Labels>> in = {{a, c}, {a, b}, {a, c}};
  std::vector<std::shared_ptr<Block>> blocks;
  for (size_t k = 0; k < in.size(); ++k) {
    index::BlockMeta meta;
    meta.id = NewUlid();
    meta.mint = static_cast<int64_t>(k) * 1000;
    meta.maxt = meta.mint + 1000;
    auto w = BlockWriter::Create(base_, meta, 4);  // 3 chunks per series
    ASSERT_TRUE(w.ok());
    for (const auto& l : in[k]) {
      std::vector<int64_t> ts;
      std::vector<double> v0, v1;
      for (int64_t t = meta.mint; t < meta.maxt; t += 100) {
        ts.push_back(t);
        v0.push_back(static_cast<double>(t));
        v1.push_back(static_cast<double>(2 * t));
      }
      const std::array<const double*, 2> parts = {v0.data(), v1.data()};
      ASSERT_TRUE((*w)->AddSeriesParts(l, ts, parts).ok());
    }
    auto m = (*w)->Finish();
    ASSERT_TRUE(m.ok());
    auto blk = Block::Open(base_ + "/" + meta.id);
    ASSERT_TRUE(blk.ok());
    blocks.push_back(*blk);
  }
  auto all = model::Matcher::Make(model::MatchType::kEqual, "__name__", "m");
  auto set = Block::SelectAcross(blocks, 250, 2650, Block::Parts{.value = 0, .count = 1}, {*all});
  std::vector<std::pair<model::Labels, std::vector<int64_t>>> got;
  while (set->Next()) {
    got.emplace_back(set->At().labels(), std::vector<int64_t>{});
    auto it = set->At().Iterator();
    while (it->Next()) {
      EXPECT_EQ(it->At().v, static_cast<double>(it->At().t));
      EXPECT_EQ(it->AtCount(), static_cast<double>(2 * it->At().t));
      got.back().second.push_back(it->At().t);
    }
    ASSERT_TRUE(it->Err().ok()) << it->Err().ToString();
  }
  ASSERT_TRUE(set->Err().ok()) << set->Err().ToString();
  auto range = [](std::vector<std::pair<int64_t, int64_t>> spans) {
    std::vector<int64_t> out;
    for (auto [from, to] : spans) {
      for (int64_t t = from; t <= to; t += 100) out.push_back(t);
    }
    return out;
  };
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, a);
  EXPECT_EQ(got[0].second, range({{300, 2600}}));
  EXPECT_EQ(got[1].first, b);
  EXPECT_EQ(got[1].second, range({{1000, 1900}}));
  EXPECT_EQ(got[2].first, c);
  EXPECT_EQ(got[2].second, range({{300, 900}, {2000, 2600}}));
}

}  // namespace
}  // namespace trainwatch::tsdb
