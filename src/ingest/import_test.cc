#include "ingest/import.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "base/clock.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::ingest {
namespace {

// A real TSDB in a temporary directory. Its appenders are wrapped to count
// commits and, for the rollback test, to fail on one timestamp.
class TestStorage : public storage::Appendable {
 public:
  struct Appender : storage::Appender {
    TestStorage* st;
    std::unique_ptr<storage::Appender> inner;
    Appender(TestStorage* s, std::unique_ptr<storage::Appender> a) : st(s), inner(std::move(a)) {}
    Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& l, int64_t t, double v) override {
      if (st->fail_on_time == t) return Status::InvalidArgument("boom");
      return inner->Append(ref, l, t, v);
    }
    bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override { return inner->AppendByRef(ref, t, v); }
    Status Commit() override {
      st->commits++;
      return inner->Commit();
    }
    void Rollback() override { inner->Rollback(); }
  };
  std::unique_ptr<storage::Appender> NewAppender() override {
    return std::make_unique<Appender>(this, db_->NewAppender());
  }
  std::map<model::Labels, std::vector<model::Sample>> Data() { return db_.Data(); }

  int commits = 0;
  int64_t fail_on_time = -1;

 private:
  tsdb::testing::TempDB db_;
};

TEST(ImportTest, AppendsSortedLabelsWithDefaultTimestamp) {
  TestStorage db;
  ImportOptions opts{.default_timestamp_ms = 5000};
  auto r = ImportText("up{job=\"a\",instance=\"x\"} 1\nup{instance=\"x\",job=\"a\"} 2 6000\nup{job=\"b\",e=\"\"} 3\n", opts, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->samples, 3u);
  EXPECT_EQ(r->series, 3u);  // two texts of the same series count separately
  auto data = db.Data();
  ASSERT_EQ(data.size(), 2u);
  model::Labels a{{"__name__", "up"}, {"instance", "x"}, {"job", "a"}};
  ASSERT_EQ(data[a].size(), 2u);
  EXPECT_EQ(data[a][0].t, 5000);
  EXPECT_EQ(data[a][1].t, 6000);
  model::Labels b{{"__name__", "up"}, {"job", "b"}};  // empty label dropped
  ASSERT_EQ(data[b].size(), 1u);
  EXPECT_EQ(db.commits, 1);
}

// --ingest.max-series-per-request, --ingest.max-samples-per-request: a body
// beyond either is refused whole as it is parsed, naming the flag, and
// counted. Series are the texts the store does not know yet.
TEST(ImportTest, RequestLimitsRefuseTheWholeBody) {
  TestStorage db;
  common::metrics::Counter series_refused, samples_refused;
  ImportOptions opts{.default_timestamp_ms = 5000};
  opts.limits = {.max_series = 2, .max_samples = 3, .series_refused = &series_refused,
                 .samples_refused = &samples_refused};
  ASSERT_TRUE(ImportText("a 1 1000\nb 1 1000\na 2 2000\n", opts, db).ok());
  auto r = ImportText("a 3 3000\nb 2 2000\nc 1 1000\n", opts, db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "request has more than 2 series (--ingest.max-series-per-request); nothing of it was stored");
  r = ImportText("a 3 3000\na 4 4000\na 5 5000\na 6 6000\n", opts, db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "request has more than 3 samples (--ingest.max-samples-per-request); nothing of it was stored");
  auto data = db.Data();
  EXPECT_EQ(data[model::Labels({{"__name__", "a"}})].size(), 2u);
  EXPECT_EQ(data[model::Labels({{"__name__", "b"}})].size(), 1u);
  EXPECT_EQ(data.count(model::Labels({{"__name__", "c"}})), 0u);
  EXPECT_EQ(series_refused.Value(), 1u);
  EXPECT_EQ(samples_refused.Value(), 1u);
}

TEST(ImportTest, ExtraLabelsOverrideAndRemove) {
  TestStorage db;
  ImportOptions opts;
  opts.extra_labels = {{"job", "forced"}, {"drop", ""}, {"env", "prod"}};
  ASSERT_TRUE(ImportText("m{job=\"a\",drop=\"x\"} 1 10\n", opts, db).ok());
  model::Labels want{{"__name__", "m"}, {"env", "prod"}, {"job", "forced"}};
  ASSERT_EQ(db.Data().count(want), 1u);
}

TEST(ImportTest, BadBodyStoresNothing) {
  TestStorage db;
  auto r = ImportText("a 1 1\nb 2 2\nc{x=\"1\"} zz 3\n", {}, db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "line 3: invalid value \"zz\" for metric \"c\"");
  EXPECT_TRUE(db.Data().empty());
  EXPECT_EQ(db.commits, 0);
}

TEST(ImportTest, AppendErrorRollsBack) {
  TestStorage db;
  db.fail_on_time = 3;
  auto r = ImportText("a 1 1\nb 2 2\nc 3 3\n", {}, db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "line 3: boom");
  EXPECT_TRUE(db.Data().empty());
}

// Issue 25: a sample dated far ahead of the server's clock is refused with
// the line that holds it, and nothing of the body is stored.
TEST(ImportTest, FarFutureSampleIsRefusedWithItsLine) {
  TestStorage db;
  const int64_t now = NowMillis();
  std::string body = "keep_me 1 " + std::to_string(now - 60000) + "\n";
  body += "evil 1 " + std::to_string(now + 400LL * 86400 * 1000) + "\n";
  auto r = ImportText(body, {}, db);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().IsOutOfRange());
  EXPECT_EQ(r.error().message().rfind("line 2: sample timestamp ", 0), 0u) << r.error().message();
  EXPECT_NE(r.error().message().find("too far in the future"), std::string::npos) << r.error().message();
  EXPECT_TRUE(db.Data().empty());
}

// With a series cache, known series are appended by ref; refs that went
// stale (the series was persisted and dropped from the head) are re-resolved
// from the text, and the same text under other extra labels is another series.
TEST(ImportTest, SeriesCacheAppendsByRefAndRecoversStaleRefs) {
  tsdb::testing::TempDB db;
  SeriesCache cache;
  ImportOptions opts;
  opts.cache = &cache;
  ASSERT_TRUE(ImportText("m{a=\"x\"} 1 1000\nm{a=\"y\\\"q\"} 2 1000\n", opts, *db.get()).ok());
  EXPECT_EQ(cache.size(), 2u);
  ASSERT_TRUE(ImportText("m{a=\"x\"} 3 2000\nm{a=\"y\\\"q\"} 4 2000\n", opts, *db.get()).ok());
  ASSERT_TRUE(db->Flush().ok());  // the head drops both series: cached refs are stale
  ASSERT_TRUE(ImportText("m{a=\"x\"} 5 3000\nm{a=\"y\\\"q\"} 6 3000\n", opts, *db.get()).ok());
  opts.extra_labels = {{"env", "prod"}};
  ASSERT_TRUE(ImportText("m{a=\"x\"} 7 3000\n", opts, *db.get()).ok());
  std::map<std::string, std::vector<double>> got;
  for (const auto& [labels, samples] : db.Data()) {
    for (const auto& smp : samples) got[labels.ToString()].push_back(smp.v);
  }
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(got["m{a=\"x\"}"], (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(got["m{a=\"y\\\"q\"}"], (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(got["m{a=\"x\", env=\"prod\"}"], (std::vector<double>{7}));
}

TEST(ImportTest, ParsesExtraLabelArgument) {
  auto l = ParseExtraLabel("foo=bar=baz");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->name, "foo");
  EXPECT_EQ(l->value, "bar=baz");
  EXPECT_FALSE(ParseExtraLabel("nolabel").ok());
  EXPECT_FALSE(ParseExtraLabel("1x=y").ok());
}

}  // namespace
}  // namespace trainwatch::ingest
