// The log store under hostile input (issue 25): far-future and extreme
// times, time bounds at ingest, non-UTF-8 stream labels, and a year of
// partitions under a low file descriptor limit.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "base/file.h"
#include "logs/store.h"

namespace trainwatch::logs {
namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kDayMs = 86400000;
constexpr int64_t kT0 = 1700000000LL * kSec;

class LogStoreHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_logs_hostile_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.dir = dir_ + "/logs";
    opts_.sync_full = false;
    opts_.block_lines = 3;
    opts_.now_ms = [this] { return now_ms_; };
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }

  std::unique_ptr<LogStore> Open() {
    auto s = LogStore::Open(opts_);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static Record Rec(int64_t t, std::string msg, std::string run = "a") {
    Record r;
    r.time_ns = t;
    r.labels = model::Labels{{"project", "p"}, {"run", run}};
    r.level = "INFO";
    r.message = std::move(msg);
    return r;
  }
  static std::vector<std::string> All(LogStore* s, size_t limit = 100) {
    SelectOptions o;
    o.limit = limit;
    auto r = s->Select(Query(), o);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    std::vector<std::string> out;
    if (r.ok()) {
      for (const Record& l : r->lines) out.push_back(l.message);
    }
    return out;
  }

  std::string dir_;
  StoreOptions opts_;
  int64_t now_ms_ = kT0 / 1000000;
};

// The reported flaw: retention measured age from the newest line, so one
// line dated in 2262 dropped every other partition.
TEST_F(LogStoreHostileTest, FarFutureLineDoesNotMakeRetentionDropOtherPartitions) {
  opts_.retention_ms = 2 * kDayMs;  // max_future_ms stays 0: the line is accepted
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0 - kDayMs * 1000000, "yesterday"), Rec(kT0, "today")}).ok());
  ASSERT_TRUE(s->Append({Rec(INT64_MAX, "year 2262")}).ok());
  ASSERT_TRUE(s->ApplyRetention().ok());
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"year 2262", "today", "yesterday"}));
  s.reset();
  s = Open();  // Open applies retention too
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"year 2262", "today", "yesterday"}));
  // Age is measured from the clock: three days later only the 2262 line is young enough.
  now_ms_ += 3 * kDayMs;
  ASSERT_TRUE(s->ApplyRetention().ok());
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"year 2262"}));
}

TEST_F(LogStoreHostileTest, LinesOutsideIngestBoundsAreRefusedAndNothingOfTheBatchIsStored) {
  opts_.max_future_ms = 10 * 60 * 1000;
  opts_.retention_ms = kDayMs;
  common::metrics::Registry registry;
  opts_.metrics = &registry;
  auto s = Open();
  int64_t now_ns = now_ms_ * 1000000;
  Status st = s->Append({Rec(now_ns, "fine"), Rec(now_ns + 11 * 60 * kSec, "future")});
  ASSERT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_NE(st.message().find("record 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("more than 10m after the server clock"), std::string::npos) << st.message();
  st = s->Append({Rec(now_ns - kDayMs * 1000000 - 1, "too old")});
  ASSERT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_NE(st.message().find("retention 1d"), std::string::npos) << st.message();
  EXPECT_TRUE(All(s.get()).empty());
  EXPECT_EQ(s->GetStats().partitions, 0u);
  LogStore::Stats stats = s->GetStats();
  EXPECT_EQ(stats.rejected_too_far_in_future, 1u);
  EXPECT_EQ(stats.rejected_too_old, 1u);
  std::string metrics;
  registry.Render(&metrics);
  EXPECT_NE(metrics.find("trainwatch_logs_lines_rejected_total{reason=\"too_far_in_future\"} 1\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("trainwatch_logs_lines_rejected_total{reason=\"too_old\"} 1\n"), std::string::npos);
  // The bounds themselves are accepted.
  ASSERT_TRUE(s->Append({Rec(now_ns + 10 * 60 * kSec, "at max future"), Rec(now_ns - kDayMs * 1000000, "at retention")})
                  .ok());
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"at max future", "at retention"}));
  // Bounds follow the clock.
  TimeBounds b = s->IngestBounds();
  EXPECT_EQ(b.max_ns, now_ns + 10 * 60 * kSec);
  EXPECT_EQ(b.min_ns, now_ns - kDayMs * 1000000);
}

TEST_F(LogStoreHostileTest, ExtremeTimesDoNotOverflow) {
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(INT64_MIN, "min"), Rec(0, "epoch"), Rec(INT64_MAX, "max")}).ok());
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"max", "epoch", "min"}));
  SelectOptions o;
  o.start_ns = INT64_MAX;  // the last partition alone
  auto r = s->Select(Query(), o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].message, "max");
  auto h = s->Histogram(Query(), INT64_MIN, INT64_MAX, INT64_MAX / 4000);
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  uint64_t total = 0;
  for (auto& [t, n] : *h) total += n;
  EXPECT_EQ(total, 3u);
  EXPECT_EQ(h->front().first, INT64_MIN);
  EXPECT_FALSE(s->Histogram(Query(), INT64_MIN, INT64_MAX, 1).ok());  // too many buckets, not a wrap to 0
  auto names = s->LabelNames(INT64_MIN, INT64_MAX);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"project", "run"}));
  std::map<int64_t, int64_t> pos;
  auto fwd = s->ReadAfter(&pos, 10);
  ASSERT_TRUE(fwd.ok());
  EXPECT_EQ(fwd->size(), 3u);
  s.reset();
  s = Open();  // the partitions of both ends are found again
  EXPECT_EQ(All(s.get()), (std::vector<std::string>{"max", "epoch", "min"}));
  EXPECT_EQ(s->GetStats().partitions, 3u);
}

TEST_F(LogStoreHostileTest, NonUtf8StreamLabelIsRefused) {
  auto s = Open();
  Record r = Rec(kT0, "m", "\xff\xfe");
  Status st = s->Append({Rec(kT0, "ok"), r});
  ASSERT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_NE(st.message().find("record 1: label \"run\""), std::string::npos) << st.message();
  EXPECT_TRUE(All(s.get()).empty());
}

// A year of daily partitions (each SQLite database holds db, -wal and -shm
// descriptors) under a descriptor limit far below 3 per partition: opening,
// appending, querying all of them, forwarding and retention still work.
TEST_F(LogStoreHostileTest, YearOfPartitionsUnderLowDescriptorLimit) {
  constexpr int kDays = 400;
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 160;  // 32 open partitions x 3 + the test's own
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  struct Restore {
    struct rlimit lim;
    ~Restore() { setrlimit(RLIMIT_NOFILE, &lim); }
  } restore{old};

  now_ms_ = kT0 / 1000000 + kDays * kDayMs;
  auto s = Open();
  ASSERT_NE(s, nullptr);
  for (int d = 0; d < kDays; ++d) {
    ASSERT_TRUE(s->Append({Rec(kT0 + d * kDayMs * 1000000, "day " + std::to_string(d))}).ok()) << d;
  }
  EXPECT_EQ(s->GetStats().partitions, static_cast<uint64_t>(kDays));
  EXPECT_LE(s->GetStats().open_partitions, opts_.max_open_partitions);
  std::vector<std::string> all = All(s.get(), 1000);
  ASSERT_EQ(all.size(), static_cast<size_t>(kDays));
  EXPECT_EQ(all.front(), "day 399");
  EXPECT_EQ(all.back(), "day 0");
  auto h = s->Histogram(Query(), kT0, kT0 + kDays * kDayMs * 1000000, kDayMs * 1000000);
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  uint64_t total = 0;
  for (auto& [t, n] : *h) total += n;
  EXPECT_EQ(total, static_cast<uint64_t>(kDays));
  std::map<int64_t, int64_t> pos;
  size_t forwarded = 0;
  for (int i = 0; i < 10; ++i) {
    auto r = s->ReadAfter(&pos, 100);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    forwarded += r->size();
  }
  EXPECT_EQ(forwarded, static_cast<size_t>(kDays));
  // An append to an old partition (reopened) and to a new one.
  ASSERT_TRUE(s->Append({Rec(kT0, "day 0 again"), Rec(kT0 + kDays * kDayMs * 1000000, "today")}).ok());
  s.reset();

  // Reopen (every partition is checked at startup) with retention of 100 days.
  opts_.retention_ms = 100 * kDayMs;
  s = Open();
  ASSERT_NE(s, nullptr);
  all = All(s.get(), 1000);
  ASSERT_EQ(all.size(), 101u);  // days 300..399 and today
  EXPECT_EQ(all.front(), "today");
  EXPECT_EQ(all.back(), "day 300");
  EXPECT_EQ(s->GetStats().partitions, 101u);
  EXPECT_LE(s->GetStats().open_partitions, opts_.max_open_partitions);
}

}  // namespace
}  // namespace trainwatch::logs
