#include "logs/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/file.h"

namespace trainwatch::logs {
namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1700000000LL * kSec;

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_logs_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.dir = dir_ + "/logs";
    opts_.sync_full = false;
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }

  std::unique_ptr<LogStore> Open() {
    auto s = LogStore::Open(opts_);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return std::move(*s);
  }
  static Record Rec(int64_t t, std::string run, std::string level, std::string msg, std::string fields = "") {
    Record r;
    r.time_ns = t;
    r.labels = model::Labels{{"project", "p"}, {"run", run}};
    r.level = std::move(level);
    r.message = std::move(msg);
    r.fields = std::move(fields);
    return r;
  }
  static std::vector<std::string> Messages(const SelectResult& r) {
    std::vector<std::string> out;
    for (const Record& l : r.lines) out.push_back(l.message);
    return out;
  }
  Query Q(std::string_view q) {
    auto p = Query::Parse(q);
    EXPECT_TRUE(p.ok()) << p.error().message();
    return *p;
  }

  std::string dir_;
  StoreOptions opts_;
};

TEST_F(LogStoreTest, SelectNewestFirstWithFiltersAndPaging) {
  auto s = Open();
  std::vector<Record> recs;
  for (int i = 0; i < 10; ++i) {
    recs.push_back(Rec(kT0 + i * kSec, i % 2 ? "a" : "b", i % 3 == 0 ? "ERROR" : "INFO",
                       "step " + std::to_string(i) + (i % 3 == 0 ? " CUDA error: out of memory" : " ok"),
                       "{\"step\":" + std::to_string(i) + "}"));
  }
  ASSERT_TRUE(s->Append(recs).ok());
  auto all = s->Select(Q(""), {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->lines.size(), 10u);
  EXPECT_EQ(all->lines.front().message, "step 9 CUDA error: out of memory");
  EXPECT_EQ(all->lines.back().message, "step 0 CUDA error: out of memory");
  EXPECT_TRUE(all->next_cursor.empty());

  auto err = s->Select(Q("level=ERROR CUDA"), {});
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(Messages(*err), (std::vector<std::string>{"step 9 CUDA error: out of memory", "step 6 CUDA error: out of memory",
                                                      "step 3 CUDA error: out of memory", "step 0 CUDA error: out of memory"}));
  auto fields = s->Select(Q(R"({run="a"} step>=5 -cuda)"), {});
  ASSERT_TRUE(fields.ok());
  EXPECT_EQ(Messages(*fields), (std::vector<std::string>{"step 7 ok", "step 5 ok"}));
  auto re = s->Select(Q(R"(|~ "step [12] ")"), {});
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(Messages(*re), (std::vector<std::string>{"step 2 ok", "step 1 ok"}));

  SelectOptions o;
  o.limit = 4;
  std::vector<std::string> paged;
  for (int page = 0; page < 5; ++page) {
    auto r = s->Select(Q(""), o);
    ASSERT_TRUE(r.ok());
    for (auto& m : Messages(*r)) paged.push_back(m);
    if (r->next_cursor.empty()) break;
    o.cursor = r->next_cursor;
  }
  EXPECT_EQ(paged, Messages(*all));

  o = SelectOptions{};
  o.start_ns = kT0 + 2 * kSec;
  o.end_ns = kT0 + 4 * kSec;
  auto range = s->Select(Q(""), o);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->lines.size(), 3u);
}

TEST_F(LogStoreTest, HistogramCountsPerStep) {
  auto s = Open();
  std::vector<Record> recs;
  for (int i = 0; i < 6; ++i) recs.push_back(Rec(kT0 + i * kSec, "a", i < 4 ? "ERROR" : "INFO", "m"));
  ASSERT_TRUE(s->Append(recs).ok());
  auto h = s->Histogram(Q("level=ERROR"), kT0, kT0 + 5 * kSec, 2 * kSec);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].second, 2u);
  EXPECT_EQ((*h)[1].second, 2u);
  EXPECT_EQ((*h)[2].second, 0u);
  auto post = s->Histogram(Q(R"(|= "m")"), kT0, kT0 + 5 * kSec, 2 * kSec);
  ASSERT_TRUE(post.ok());
  EXPECT_EQ((*post)[2].second, 2u);
}

TEST_F(LogStoreTest, ReopenKeepsLinesAcrossPartitionsAndLongMessagesRoundTrip) {
  std::string long_msg = "Traceback (most recent call last):\n";
  for (int i = 0; i < 50; ++i) long_msg += "  File \"train.py\", line " + std::to_string(i) + ", in step\n";
  {
    auto s = Open();
    ASSERT_TRUE(s->Append({Rec(kT0, "a", "ERROR", long_msg), Rec(kT0 + 3 * 86400 * kSec, "b", "INFO", "later")}).ok());
  }
  auto s = Open();
  EXPECT_EQ(s->GetStats().partitions, 2u);
  auto r = s->Select(Q("traceback"), {});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].message, long_msg);
  auto names = s->LabelNames(INT64_MIN, INT64_MAX);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"project", "run"}));
  auto runs = s->LabelValues("run", INT64_MIN, INT64_MAX);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(*runs, (std::vector<std::string>{"a", "b"}));
}

TEST_F(LogStoreTest, RetentionByTimeDropsOldPartitions) {
  opts_.retention_ms = 2 * 86400000LL;
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "old")}).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 5 * 86400 * kSec, "a", "INFO", "new")}).ok());
  ASSERT_TRUE(s->ApplyRetention().ok());
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"new"}));
  EXPECT_EQ(s->GetStats().partitions, 1u);
}

TEST_F(LogStoreTest, RetentionBySizeDropsOldestButKeepsNewest) {
  opts_.retention_bytes = 1;  // below any partition: only the newest survives
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "day 0")}).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 86400 * kSec, "a", "INFO", "day 1")}).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 2 * 86400 * kSec, "a", "INFO", "day 2")}).ok());
  ASSERT_TRUE(s->ApplyRetention().ok());
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"day 2"}));
}

TEST_F(LogStoreTest, TailSeesNewRecords) {
  auto s = Open();
  uint64_t seq = s->LastSeq();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "one"), Rec(kT0, "a", "INFO", "two")}).ok());
  auto got = s->WaitNew(&seq, 1000);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].message, "two");
  EXPECT_TRUE(s->WaitNew(&seq, 10).empty());
  s->Shutdown();
  EXPECT_TRUE(s->WaitNew(&seq, 100000).empty());  // returns at once
}

}  // namespace
}  // namespace trainwatch::logs
