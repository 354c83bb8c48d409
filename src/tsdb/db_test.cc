#include "tsdb/db.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "base/file.h"
#include "tsdb/db_impl.h"

namespace trainwatch::tsdb {
namespace {

using model::Labels;
using Data = std::map<Labels, std::map<int64_t, uint64_t>>;  // value bits

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

class DBTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tw_db_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(file::RemoveAll(dir_).ok());
  }
  void TearDown() override {
    db_.reset();
    (void)file::RemoveAll(dir_);
  }

  Options Opts() {
    Options o;
    o.dir = dir_;
    o.background = false;
    o.retention_ms = 0;
    return o;
  }

  void Open(Options o) {
    db_.reset();
    auto r = DB::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    db_ = std::move(*r);
  }
  void Open() { Open(Opts()); }

  void Append(const std::vector<std::tuple<Labels, int64_t, double>>& samples, Data* ref = nullptr) {
    auto app = db_->NewAppender();
    for (auto& [l, t, v] : samples) {
      ASSERT_TRUE(app->Append(0, l, t, v).ok());
    }
    ASSERT_TRUE(app->Commit().ok());
    if (ref != nullptr) {
      for (auto& [l, t, v] : samples) (*ref)[l].emplace(t, Bits(v));  // first write wins
    }
  }

  Data ReadAll(int64_t mint = model::kMinTime, int64_t maxt = model::kMaxTime) {
    Data out;
    auto q = db_->NewQuerier(mint, maxt);
    EXPECT_TRUE(q.ok());
    auto m = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".+");
    auto set = (*q)->Select(true, {}, {*m});
    std::optional<Labels> prev;
    while (set->Next()) {
      const auto& s = set->At();
      if (prev) {
        EXPECT_LT(*prev, s.labels());
      }
      prev = s.labels();
      auto it = s.Iterator();
      int64_t last = INT64_MIN;
      while (it->Next()) {
        auto smp = it->At();
        EXPECT_GT(smp.t, last) << s.labels().ToString();
        last = smp.t;
        out[s.labels()][smp.t] = Bits(smp.v);
      }
      EXPECT_TRUE(it->Err().ok()) << it->Err().ToString();
    }
    EXPECT_TRUE(set->Err().ok()) << set->Err().ToString();
    return out;
  }

  DBImpl* Impl() { return static_cast<DBImpl*>(db_.get()); }

  std::string dir_;
  std::unique_ptr<DB> db_;
};

Labels L(const std::string& name, const std::string& job = "a") { return Labels{{"__name__", name}, {"job", job}}; }

TEST_F(DBTest, AppendedSamplesAreQueryableAndSurviveRestart) {
  Open();
  Data ref;
  Append({{L("x"), 1000, 1.5}, {L("x"), 2000, 2.5}, {L("y"), 1000, -0.0}, {L("y"), 2000, model::StaleNaN()}}, &ref);
  EXPECT_EQ(ReadAll(), ref);
  Open();  // replays the WAL
  EXPECT_EQ(ReadAll(), ref);
}

TEST_F(DBTest, OutOfOrderAndDuplicateSamples) {
  Open();
  Data ref;
  Append({{L("x"), 5000, 5}, {L("x"), 6000, 6}}, &ref);
  Append({{L("x"), 1000, 1}, {L("x"), 3000, 3}, {L("x"), 2000, 2}}, &ref);
  Append({{L("x"), 5000, 99}, {L("x"), 3000, 99}, {L("x"), 6000, 99}});  // ignored: stored ones win
  EXPECT_EQ(ReadAll(), ref);
  EXPECT_EQ(db_->GetStats().duplicate_samples_total, 3u);
  ASSERT_TRUE(db_->Flush().ok());
  EXPECT_EQ(ReadAll(), ref);
  // A duplicate of a persisted sample arriving after the flush loses too.
  Append({{L("x"), 2000, 77}, {L("x"), 7000, 7}}, &ref);
  EXPECT_EQ(ReadAll(), ref);
  ASSERT_TRUE(db_->Flush().ok());
  EXPECT_EQ(ReadAll(), ref);
  EXPECT_EQ(db_->GetStats().blocks, 1u);  // overlapping blocks were merged
  Open();
  EXPECT_EQ(ReadAll(), ref);
}

TEST_F(DBTest, FlushWritesBlocksAndEmptiesHead) {
  Open();
  Data ref;
  const int64_t h = 3600 * 1000;
  std::vector<std::tuple<Labels, int64_t, double>> batch;
  for (int s = 0; s < 50; s++) {
    for (int64_t t = 0; t < 5 * h; t += 15000) batch.emplace_back(L("m", std::to_string(s)), t, s * 1000 + t / 15000);
  }
  Append(batch, &ref);
  ASSERT_TRUE(db_->Flush().ok());
  auto st = db_->GetStats();
  EXPECT_EQ(st.head_samples, 0u);
  EXPECT_EQ(st.head_series, 0u);
  EXPECT_EQ(st.blocks, 1u);  // 2 h blocks merged into one 6 h block
  EXPECT_EQ(ReadAll(), ref);
  // Range restriction.
  Data part = ReadAll(h, 2 * h);
  for (auto& [l, samples] : part) {
    EXPECT_EQ(samples.begin()->first, h);
    EXPECT_EQ(samples.rbegin()->first, 2 * h);
  }
  Open();
  EXPECT_EQ(ReadAll(), ref);
}

TEST_F(DBTest, MaintainCutsOldHeadDataIntoBlocks) {
  Open();
  Data ref;
  const int64_t h = 3600 * 1000;
  std::vector<std::tuple<Labels, int64_t, double>> batch;
  for (int64_t t = 0; t < 4 * h; t += 60000) batch.emplace_back(L("m"), t, static_cast<double>(t));
  Append(batch, &ref);
  ASSERT_TRUE(Impl()->Maintain().ok());
  auto st = db_->GetStats();
  EXPECT_GE(st.blocks, 1u);
  EXPECT_GT(st.head_samples, 0u);  // the newest part stays in memory
  EXPECT_LT(st.head_samples, batch.size());
  EXPECT_EQ(ReadAll(), ref);
  Open();  // replays checkpoint + WAL
  EXPECT_EQ(ReadAll(), ref);
  EXPECT_EQ(db_->GetStats().head_samples, st.head_samples);
}

TEST_F(DBTest, RetentionByTimeDropsOldBlocks) {
  Options o = Opts();
  const int64_t h = 3600 * 1000;
  o.retention_ms = 10 * h;
  Open(o);
  Append({{L("old"), 0, 1}, {L("new"), 30 * h, 2}});
  ASSERT_TRUE(db_->Flush().ok());
  Data got = ReadAll();
  EXPECT_EQ(got.count(L("old")), 0u);
  EXPECT_EQ(got.count(L("new")), 1u);
}

TEST_F(DBTest, RetentionBySizeKeepsNewestBlocks) {
  Options o = Opts();
  const int64_t d = 24 * 3600 * 1000LL;
  Open(o);
  for (int day = 0; day < 4; day++) {
    std::vector<std::tuple<Labels, int64_t, double>> batch;
    for (int s = 0; s < 200; s++) batch.emplace_back(L("m", std::to_string(s)), day * 40 * d, s);
    Append(batch);
    ASSERT_TRUE(db_->Flush().ok());
  }
  auto st = db_->GetStats();
  ASSERT_EQ(st.blocks, 4u);
  o.retention_bytes = st.block_bytes / 2 + 1;
  Open(o);
  ASSERT_TRUE(db_->Flush().ok());
  st = db_->GetStats();
  EXPECT_LT(st.blocks, 4u);
  Data got = ReadAll();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.begin()->second.rbegin()->first, 3 * 40 * d);  // the newest data is kept
}

TEST_F(DBTest, TornWalTailIsTruncatedNotFatal) {
  Open();
  Data ref;
  for (int i = 0; i < 20; i++) Append({{L("x"), i * 1000, static_cast<double>(i)}}, &ref);
  db_.reset();
  // Cut the last segment in the middle of its last record.
  std::string wal = dir_ + "/wal";
  auto names = file::ListDir(wal);
  ASSERT_TRUE(names.ok());
  std::string last;
  for (auto& n : *names) {
    if (std::filesystem::file_size(wal + "/" + n) > 0) last = wal + "/" + n;
  }
  ASSERT_FALSE(last.empty());
  std::filesystem::resize_file(last, std::filesystem::file_size(last) - 3);
  Open();
  ref[L("x")].erase(19000);
  EXPECT_EQ(ReadAll(), ref);
  EXPECT_EQ(db_->GetStats().wal_corruptions_total, 1u);
  Append({{L("x"), 19000, 19}}, &ref);
  ref[L("x")][19000] = Bits(19);
  Open();
  EXPECT_EQ(ReadAll(), ref);
}

// Random appends (in order, late, duplicate) interleaved with flushes,
// maintenance and restarts always read back exactly the reference.
TEST_F(DBTest, RandomOperationsMatchReference) {
  std::mt19937_64 rng(7);
  Open();
  Data ref;
  const int64_t h = 3600 * 1000;
  int64_t now = 10 * h;
  for (int round = 0; round < 30; round++) {
    std::vector<std::tuple<Labels, int64_t, double>> batch;
    int n = 1 + rng() % 200;
    for (int i = 0; i < n; i++) {
      Labels l = L("m" + std::to_string(rng() % 5), std::to_string(rng() % 7));
      int64_t t;
      switch (rng() % 4) {
        case 0: t = now - static_cast<int64_t>(rng() % (8 * h)); break;  // late
        default: t = now + static_cast<int64_t>(rng() % 60000); break;
      }
      t -= t % 1000;
      double v = static_cast<double>(rng() % 1000) / 7.0;
      if (rng() % 50 == 0) v = model::StaleNaN();
      batch.emplace_back(l, t, v);
    }
    // Within one batch the first sample for a timestamp wins too.
    Append(batch, &ref);
    now += 10 * 60000;
    switch (rng() % 6) {
      case 0: ASSERT_TRUE(db_->Flush().ok()); break;
      case 1: ASSERT_TRUE(Impl()->Maintain().ok()); break;
      case 2: Open(); break;
      default: break;
    }
    ASSERT_EQ(ReadAll(), ref) << "round " << round;
  }
}

}  // namespace
}  // namespace trainwatch::tsdb
