// Scrape loop against a real TSDB (and, for the fetch, a real HTTP server).
#include "scrape/scrape_loop.h"

#include <httplib.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "ingest/proto_enc_test_util.h"
#include "model/sample.h"
#include "scrape/manager.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::scrape {
namespace {

using Data = std::map<model::Labels, std::vector<model::Sample>>;

std::shared_ptr<const ScrapeConfig> Config(const std::string& job_yaml) {
  auto r = ParseScrapeConfigs(YAML::Load("scrape_configs: [" + job_yaml + "]"), GlobalDefaults{15000, 10000});
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return std::make_shared<const ScrapeConfig>((*r)[0]);
}

std::unique_ptr<ScrapeLoop> MakeLoop(const std::shared_ptr<const ScrapeConfig>& c, tsdb::testing::TempDB& db) {
  auto targets = TargetsFromGroup(*c, c->static_configs[0]);
  return std::make_unique<ScrapeLoop>(c, targets[0], db.get());
}

model::Labels L(std::initializer_list<std::pair<std::string_view, std::string_view>> extra) {
  model::LabelsBuilder b(model::Labels{{"instance", "h:1"}, {"job", "j"}});
  for (auto [k, v] : extra) b.Set(k, v);
  return b.Build();
}

double Last(Data& d, const model::Labels& l) {
  auto it = d.find(l);
  if (it == d.end() || it->second.empty()) return -12345;
  return it->second.back().v;
}

constexpr const char* kJob = "{job_name: j, static_configs: [{targets: ['h:1']}]";

TEST(ScrapeLoop, AppendsSamplesAndReport) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + "}"), db);
  loop->ProcessScrape(Status::OK(), "# TYPE a counter\na_total{x=\"1\"} 5\nb 2.5\n", "text/plain; version=0.0.4", 1000, 0.25);
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "a_total"}, {"x", "1"}})), 5);
  EXPECT_EQ(Last(d, L({{"__name__", "b"}})), 2.5);
  EXPECT_EQ(Last(d, L({{"__name__", "up"}})), 1);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_duration_seconds"}})), 0.25);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 2);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_post_metric_relabeling"}})), 2);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_series_added"}})), 2);
  EXPECT_EQ(d[L({{"__name__", "b"}})][0].t, 1000);
  EXPECT_EQ(loop->state().health, Health::kUp);
  // Second scrape: same series (cache hit path), none added.
  loop->ProcessScrape(Status::OK(), "# TYPE a counter\na_total{x=\"1\"} 6\nb 3\n", "text/plain", 2000, 0.1);
  d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "a_total"}, {"x", "1"}})), 6);
  EXPECT_EQ(d[L({{"__name__", "a_total"}, {"x", "1"}})].size(), 2u);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_series_added"}})), 0);
}

// The store in front of a TempDB that records the start timestamp of every
// value appended (0 through Append, AppendByRef and AppendHistogram), by
// the series' labels (known from an earlier append for by-ref ones).
class StRecorder final : public storage::Appendable {
 public:
  explicit StRecorder(storage::Appendable* db) : db_(db) {}
  std::map<model::Labels, std::vector<int64_t>> sts;

  std::unique_ptr<storage::Appender> NewAppender() override { return std::make_unique<App>(this, db_->NewAppender()); }

 private:
  class App final : public storage::Appender {
   public:
    App(StRecorder* r, std::unique_ptr<storage::Appender> in) : r_(r), in_(std::move(in)) {}
    Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& l, int64_t t, double v) override {
      return Record(in_->Append(ref, l, t, v), l, 0);
    }
    bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override {
      if (!in_->AppendByRef(ref, t, v)) return false;
      r_->sts[r_->labels_.at(ref)].push_back(0);
      return true;
    }
    Result<storage::SeriesRef> AppendST(storage::SeriesRef ref, const model::Labels& l, int64_t st, int64_t t,
                                        double v) override {
      return Record(in_->AppendST(ref, l, st, t, v), l, st);
    }
    Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& l, int64_t t,
                                               const model::FloatHistogram& h) override {
      return Record(in_->AppendHistogram(ref, l, t, h), l, 0);
    }
    Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef ref, const model::Labels& l, int64_t st, int64_t t,
                                                 const model::FloatHistogram& h) override {
      return Record(in_->AppendHistogramST(ref, l, st, t, h), l, st);
    }
    Status Commit() override { return in_->Commit(); }
    void Rollback() override { in_->Rollback(); }

   private:
    Result<storage::SeriesRef> Record(Result<storage::SeriesRef> r, const model::Labels& l, int64_t st) {
      if (!r.ok()) return r;
      if (!l.empty()) r_->labels_[*r] = l;
      r_->sts[r_->labels_.at(*r)].push_back(st);
      return r;
    }
    StRecorder* r_;
    std::unique_ptr<storage::Appender> in_;
  };
  storage::Appendable* db_;
  std::map<storage::SeriesRef, model::Labels> labels_;
};

// OpenMetrics `_created`: the start timestamp of its family's samples, on
// the first scrape (labels) and the next (cached refs); the _created series
// are still stored. The text format has none.
TEST(ScrapeLoop, OpenMetricsCreatedAsStartTimestamps) {
  tsdb::testing::TempDB db;
  StRecorder rec(db.get());
  auto c = Config(std::string(kJob) + "}");
  ScrapeLoop loop(c, TargetsFromGroup(*c, c->static_configs[0])[0], &rec);
  const std::string body =
      "# TYPE a counter\n"
      "a_total{x=\"1\"} 5\n"
      "a_created{x=\"1\"} 900.5\n"
      "# TYPE h histogram\n"
      "h_bucket{le=\"1\"} 1\n"
      "h_bucket{le=\"+Inf\"} 2\n"
      "h_count 2\n"
      "h_sum 1.5\n"
      "h_created 800\n"
      "# TYPE g gauge\n"
      "g 3\n"
      "# EOF\n";
  const std::string om = "application/openmetrics-text; version=1.0.0";
  loop.ProcessScrape(Status::OK(), body, om, 1000000, 0);
  loop.ProcessScrape(Status::OK(), body, om, 1015000, 0);
  EXPECT_EQ(loop.state().last_error, "");
  std::map<model::Labels, std::vector<int64_t>> want = {
      {L({{"__name__", "a_total"}, {"x", "1"}}), {900500, 900500}},
      {L({{"__name__", "a_created"}, {"x", "1"}}), {0, 0}},
      {L({{"__name__", "h_bucket"}, {"le", "1"}}), {800000, 800000}},
      {L({{"__name__", "h_bucket"}, {"le", "+Inf"}}), {800000, 800000}},
      {L({{"__name__", "h_count"}}), {800000, 800000}},
      {L({{"__name__", "h_sum"}}), {800000, 800000}},
      {L({{"__name__", "h_created"}}), {0, 0}},
      {L({{"__name__", "g"}}), {0, 0}},
  };
  for (const auto& [labels, sts] : want) EXPECT_EQ(rec.sts[labels], sts) << labels.ToString();
  EXPECT_EQ(rec.sts[L({{"__name__", "up"}})], (std::vector<int64_t>{0, 0}));
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "a_total"}, {"x", "1"}})), 5);
  EXPECT_EQ(Last(d, L({{"__name__", "a_created"}, {"x", "1"}})), 900.5);
  EXPECT_EQ(Last(d, L({{"__name__", "h_created"}})), 800);
  // Gone: its stale marker carries none.
  loop.ProcessScrape(Status::OK(), "# TYPE g gauge\ng 3\n# EOF\n", om, 1030000, 0);
  EXPECT_EQ(rec.sts[L({{"__name__", "a_total"}, {"x", "1"}})], (std::vector<int64_t>{900500, 900500, 0}));

  tsdb::testing::TempDB db2;
  StRecorder rec2(db2.get());
  ScrapeLoop text(c, TargetsFromGroup(*c, c->static_configs[0])[0], &rec2);
  text.ProcessScrape(Status::OK(), "# TYPE a counter\na_total 5\na_created 900\n", "text/plain; version=0.0.4", 1000000, 0);
  EXPECT_EQ(rec2.sts[L({{"__name__", "a_total"}})], (std::vector<int64_t>{0}));
  EXPECT_EQ(rec2.sts[L({{"__name__", "a_created"}})], (std::vector<int64_t>{0}));
}

TEST(ScrapeLoop, StalenessForDisappearingSeriesAndFailedScrapes) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + "}"), db);
  loop->ProcessScrape(Status::OK(), "a 1\nb 1\nc 7 500\n", "", 1000, 0);
  loop->ProcessScrape(Status::OK(), "a 2\n", "", 2000, 0);
  Data d = db.Data();
  auto& b = d[L({{"__name__", "b"}})];
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].t, 2000);
  EXPECT_TRUE(model::IsStaleNaN(b[1].v));
  // A series with an explicit timestamp is not tracked for staleness.
  EXPECT_EQ(d[L({{"__name__", "c"}})].size(), 1u);
  EXPECT_EQ(d[L({{"__name__", "c"}})][0].t, 500);
  // A failed scrape: nothing from its body, up=0, the last scrape's series go stale.
  loop->ProcessScrape(Status::OK(), "a 3\nd 4\nthis is not valid\n", "", 3000, 0);
  d = db.Data();
  auto& a = d[L({{"__name__", "a"}})];
  ASSERT_EQ(a.size(), 3u);
  EXPECT_TRUE(model::IsStaleNaN(a[2].v));
  EXPECT_EQ(d.count(L({{"__name__", "d"}})), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "up"}})), 0);
  TargetState st = loop->state();
  EXPECT_EQ(st.health, Health::kDown);
  EXPECT_NE(st.last_error.find("line 3"), std::string::npos) << st.last_error;
  // A failed fetch after a failed scrape writes no second marker.
  loop->ProcessScrape(Status::Unavailable("connection refused"), "", "", 4000, 0);
  d = db.Data();
  EXPECT_EQ(d[L({{"__name__", "a"}})].size(), 3u);
  EXPECT_EQ(loop->state().last_error, "connection refused");
  // Recovery, then the loop stops for good (target gone): everything goes stale.
  loop->ProcessScrape(Status::OK(), "a 5\n", "", 5000, 0);
  loop->Stop(true);
  d = db.Data();
  EXPECT_TRUE(model::IsStaleNaN(d[L({{"__name__", "a"}})].back().v));
  EXPECT_TRUE(model::IsStaleNaN(d[L({{"__name__", "up"}})].back().v));
}

// Bodies whose series come and go, change order, repeat, and scrapes that
// fail, against a model of what Prometheus stores: each series' value when
// present, a stale marker when it was in the last successful scrape and is
// not in this one (or this one failed). Exercises the loop's order-predicted
// cache lookups and their fallback.
TEST(ScrapeLoop, SeriesComingGoingAndReorderedMatchModel) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + "}"), db);
  std::mt19937 rng(7);
  constexpr int kPool = 40;
  auto name = [](int i) { return i % 3 == 0 ? "n" + std::to_string(i) : "m{k=\"" + std::to_string(i) + "\"}"; };
  auto labels = [](int i) {
    return i % 3 == 0 ? L({{"__name__", "n" + std::to_string(i)}}) : L({{"__name__", "m"}, {"k", std::to_string(i)}});
  };
  std::map<int, std::vector<std::pair<int64_t, double>>> want;  // NaN: stale marker
  std::vector<int> prev;  // series of the last successful scrape
  std::vector<int> order(kPool);
  std::iota(order.begin(), order.end(), 0);
  for (int scrape = 1; scrape <= 60; scrape++) {
    const int64_t t = scrape * 1000;
    int mode = static_cast<int>(rng() % 10);
    if (mode == 0) {  // a failed fetch
      loop->ProcessScrape(Status::Unavailable("refused"), "", "", t, 0);
      for (int i : prev) want[i].push_back({t, NAN});
      prev.clear();
      continue;
    }
    if (mode == 1) std::shuffle(order.begin(), order.end(), rng);  // else the same order as last time
    std::vector<int> body_series;
    std::string body;
    std::set<int> in;
    for (int i : order) {
      if (rng() % 5 == 0) continue;  // absent this time
      body_series.push_back(i);
      body += name(i) + " " + std::to_string(scrape * 100 + i) + "\n";
      if (rng() % 20 == 0) body += name(i) + " -1\n";  // a repeat: the first one wins
    }
    loop->ProcessScrape(Status::OK(), body, "text/plain; version=0.0.4", t, 0);
    for (int i : body_series) {
      if (in.insert(i).second) want[i].push_back({t, static_cast<double>(scrape * 100 + i)});
    }
    for (int i : prev) {
      if (in.count(i) == 0) want[i].push_back({t, NAN});
    }
    prev = body_series;
  }
  Data d = db.Data();
  for (const auto& [i, samples] : want) {
    const auto& got = d[labels(i)];
    ASSERT_EQ(got.size(), samples.size()) << name(i);
    for (size_t k = 0; k < got.size(); k++) {
      EXPECT_EQ(got[k].t, samples[k].first) << name(i) << " #" << k;
      if (std::isnan(samples[k].second)) {
        EXPECT_TRUE(model::IsStaleNaN(got[k].v)) << name(i) << " at " << got[k].t;
      } else {
        EXPECT_EQ(got[k].v, samples[k].second) << name(i) << " at " << got[k].t;
      }
    }
  }
}

TEST(ScrapeLoop, MetadataFollowsTheLastSuccessfulScrape) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + "}"), db);
  using MD = std::map<std::string, MetricMetadata>;
  loop->ProcessScrape(Status::OK(), "# HELP a First.\n# TYPE a gauge\na 1\n# TYPE b counter\nb_total 1\n", "", 1000, 0);
  EXPECT_EQ(loop->metadata(), (MD{{"a", {"gauge", "First.", ""}}, {"b", {"counter", "", ""}}}));
  // HELP gone, b gone: the families and fields of this scrape only.
  loop->ProcessScrape(Status::OK(), "# TYPE a gauge\na 2\n", "", 2000, 0);
  EXPECT_EQ(loop->metadata(), (MD{{"a", {"gauge", "", ""}}}));
  // A failed scrape leaves it; so does a body with a parse error after a TYPE line.
  loop->ProcessScrape(Status::Unavailable("down"), "", "", 3000, 0);
  loop->ProcessScrape(Status::OK(), "# TYPE a counter\n# TYPE c gauge\nnot valid\n", "", 4000, 0);
  EXPECT_EQ(loop->metadata(), (MD{{"a", {"gauge", "", ""}}}));
  loop->ProcessScrape(Status::OK(), "# HELP a Again.\na 3\n", "", 5000, 0);
  EXPECT_EQ(loop->metadata(), (MD{{"a", {"unknown", "Again.", ""}}}));
}

TEST(ScrapeLoop, LimitsFailTheWholeScrape) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + ", sample_limit: 2, label_limit: 4}"), db);
  loop->ProcessScrape(Status::OK(), "a 1\nb 1\nc 1\n", "", 1000, 0);
  Data d = db.Data();
  EXPECT_EQ(d.count(L({{"__name__", "a"}})), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "up"}})), 0);
  EXPECT_EQ(loop->state().last_error, "sample limit exceeded");
  // job, instance, __name__ + 2 labels = 5 > 4.
  loop->ProcessScrape(Status::OK(), "a{x=\"1\",y=\"2\"} 1\n", "", 2000, 0);
  EXPECT_NE(loop->state().last_error.find("label_limit exceeded"), std::string::npos) << loop->state().last_error;
  loop->ProcessScrape(Status::OK(), "a{x=\"1\"} 1\nb 2\n", "", 3000, 0);
  EXPECT_EQ(loop->state().health, Health::kUp);
  d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "a"}, {"x", "1"}})), 1);
}

TEST(ScrapeLoop, HonorLabelsAndMetricRelabeling) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) +
                              ", metric_relabel_configs: [{source_labels: [__name__], regex: 'drop_.*', action: drop},"
                              " {source_labels: [__name__], regex: 'ren', target_label: __name__, replacement: renamed}]}"),
                       db);
  loop->ProcessScrape(Status::OK(),
                      "m{job=\"x\",instance=\"i\",exported_job=\"e\"} 1\ndrop_me 2\nren 3\n", "", 1000, 0);
  Data d = db.Data();
  // Conflicts renamed with exported_, shortest name first, skipping taken names.
  model::Labels want{{"__name__", "m"}, {"job", "j"}, {"instance", "h:1"}, {"exported_exported_job", "x"},
                     {"exported_instance", "i"}, {"exported_job", "e"}};
  EXPECT_EQ(Last(d, want), 1) << "got series: " << [&] {
    std::string s;
    for (auto& [l, v] : d) s += l.ToString() + " ";
    return s;
  }();
  EXPECT_EQ(d.count(L({{"__name__", "drop_me"}})), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "renamed"}})), 3);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 3);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_post_metric_relabeling"}})), 2);

  tsdb::testing::TempDB db2;
  auto honor = MakeLoop(Config(std::string(kJob) + ", honor_labels: true, honor_timestamps: false}"), db2);
  honor->ProcessScrape(Status::OK(), "m{job=\"x\"} 1 123\n", "", 1000, 0);
  Data d2 = db2.Data();
  auto& s = d2[model::Labels{{"__name__", "m"}, {"job", "x"}, {"instance", "h:1"}}];
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].t, 1000);  // honor_timestamps: false
}

// A real HTTP target: checks what the scrape sends and gets.
class HttpTarget {
 public:
  HttpTarget() {
    srv_.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      accept_ = req.get_header_value("Accept");
      accept_encoding_ = req.get_header_value("Accept-Encoding");
      timeout_header_ = req.get_header_value("X-Prometheus-Scrape-Timeout-Seconds");
      auth_ = req.get_header_value("Authorization");
      query_ = req.get_param_value("module");
      if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_.load()));
      if (status_ != 200) {
        res.status = status_;
        res.set_content("nope", "text/plain");
        return;
      }
      std::string body = body_;
      if (gzip_) {
        uLongf n = compressBound(body.size()) + 64;
        std::string out(n, '\0');
        z_stream zs{};
        deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
        zs.next_in = reinterpret_cast<Bytef*>(body.data());
        zs.avail_in = static_cast<uInt>(body.size());
        zs.next_out = reinterpret_cast<Bytef*>(out.data());
        zs.avail_out = static_cast<uInt>(out.size());
        deflate(&zs, Z_FINISH);
        out.resize(zs.total_out);
        deflateEnd(&zs);
        res.set_header("Content-Encoding", "gzip");
        // A content type httplib's server does not compress again by itself.
        res.set_content(out, "application/octet-stream");
        return;
      }
      res.set_content(body, "text/plain; version=0.0.4");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttpTarget() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
  std::string body_ = "m 1\n";
  bool gzip_ = false;
  int status_ = 200;
  std::atomic<int> sleep_ms_{0};
  std::string accept_, accept_encoding_, timeout_header_, auth_, query_;
};

TEST(ScrapeLoop, FetchesOverHttp) {
  HttpTarget t;
  tsdb::testing::TempDB db;
  std::string addr = "127.0.0.1:" + std::to_string(t.port());
  auto c = Config("{job_name: j, scrape_timeout: 2s, params: {module: [m1]}, basic_auth: {username: u, password: p},"
                  " static_configs: [{targets: ['" + addr + "']}]}");
  auto loop = std::make_unique<ScrapeLoop>(c, TargetsFromGroup(*c, c->static_configs[0])[0], db.get());
  t.gzip_ = true;
  t.body_ = "# HELP m A metric.\n# TYPE m gauge\nm 42\n";
  loop->ScrapeOnce(1000);
  ASSERT_EQ(loop->state().health, Health::kUp) << loop->state().last_error;
  EXPECT_EQ(t.accept_, std::string(kAcceptHeader));
  EXPECT_EQ(t.accept_encoding_, "gzip");
  EXPECT_EQ(t.timeout_header_, "2");
  EXPECT_EQ(t.auth_, "Basic dTpw");
  EXPECT_EQ(t.query_, "m1");
  Data d = db.Data();
  model::Labels m{{"__name__", "m"}, {"instance", addr}, {"job", "j"}};
  EXPECT_EQ(Last(d, m), 42);

  t.status_ = 500;
  loop->ScrapeOnce(2000);
  EXPECT_EQ(loop->state().last_error, "server returned HTTP status 500 Internal Server Error");
  t.status_ = 200;
  t.gzip_ = false;
  t.sleep_ms_ = 3000;
  loop->ScrapeOnce(3000);
  EXPECT_NE(loop->state().last_error.find("context deadline exceeded"), std::string::npos) << loop->state().last_error;
  t.sleep_ms_ = 0;
  loop->ScrapeOnce(4000);
  EXPECT_EQ(loop->state().health, Health::kUp) << loop->state().last_error;

  // Body size limit.
  auto c2 = Config("{job_name: j, body_size_limit: 10B, static_configs: [{targets: ['" + addr + "']}]}");
  ScrapeLoop small(c2, TargetsFromGroup(*c2, c2->static_configs[0])[0], db.get());
  t.body_ = "a_long_metric_name 1\n";
  small.ScrapeOnce(5000);
  EXPECT_EQ(small.state().last_error, "body size limit exceeded");
}

TEST(ScrapeLoop, ClosedPortIsDown) {
  tsdb::testing::TempDB db;
  // A port that was free a moment ago and has no listener.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  int port = ntohs(a.sin_port);
  ::close(fd);
  auto c = Config("{job_name: j, static_configs: [{targets: ['127.0.0.1:" + std::to_string(port) + "']}]}");
  ScrapeLoop loop(c, TargetsFromGroup(*c, c->static_configs[0])[0], db.get());
  loop.ScrapeOnce(1000);
  EXPECT_EQ(loop.state().health, Health::kDown);
  EXPECT_NE(loop.state().last_error.find("connection refused"), std::string::npos) << loop.state().last_error;
}

TEST(Manager, ApplyConfigKeepsUnchangedLoopsAndStalesRemovedTargets) {
  HttpTarget t;
  tsdb::testing::TempDB db;
  std::string addr = "127.0.0.1:" + std::to_string(t.port());
  Manager m(db.get(), ManagerOptions{50});
  auto parse = [](const std::string& y) {
    return *ParseScrapeConfigs(YAML::Load(y), GlobalDefaults{3600000, 10000});
  };
  m.ApplyConfig(parse("scrape_configs: [{job_name: a, static_configs: [{targets: ['" + addr + "']}]},"
                      " {job_name: b, static_configs: [{targets: ['" + addr + "', 'x:1']}],"
                      "  relabel_configs: [{source_labels: [__address__], regex: 'x:1', action: drop}]}]"));
  PoolsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.active.size(), 2u);
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0].discovered.Get("__address__"), "x:1");
  // Job b removed: its loop stops with staleness markers (for a target
  // never scraped there is nothing to mark but the report series).
  m.ApplyConfig(parse("scrape_configs: [{job_name: a, static_configs: [{targets: ['" + addr + "']}]}]"));
  s = m.Snapshot();
  ASSERT_EQ(s.active.size(), 1u);
  EXPECT_EQ(s.active[0].pool, "a");
  EXPECT_EQ(s.active[0].url, "http://" + addr + "/metrics");
  m.Stop();
}

// target_limit: more targets than the limit after relabeling fail every
// target of the job, unscraped, with Prometheus's message; within it they
// scrape.
TEST(Manager, TargetLimitFailsEveryTargetOfTheJob) {
  HttpTarget t;
  t.body_ = "m 1\n";
  tsdb::testing::TempDB db;
  std::string port = std::to_string(t.port());
  Manager m(db.get(), ManagerOptions{50});
  auto apply = [&](int limit) {
    m.ApplyConfig(*ParseScrapeConfigs(
        YAML::Load("scrape_configs: [{job_name: a, scrape_interval: 200ms, scrape_timeout: 100ms, target_limit: " +
                   std::to_string(limit) + ", static_configs: [{targets: ['127.0.0.1:" + port + "', 'localhost:" +
                   port + "']}]}]"),
        GlobalDefaults{}));
  };
  auto wait_for = [&](const std::string& error) {
    for (int i = 0; i < 500; i++) {
      PoolsSnapshot s = m.Snapshot();
      if (s.active.size() == 2 &&
          std::all_of(s.active.begin(), s.active.end(), [&](const TargetInfo& ti) {
            return ti.state.health != Health::kUnknown && ti.state.last_error == error;
          })) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  apply(1);
  ASSERT_TRUE(wait_for("target_limit exceeded (number of targets: 2, limit: 1)"));
  for (const TargetInfo& ti : m.Snapshot().active) EXPECT_EQ(ti.state.health, Health::kDown);
  EXPECT_EQ(db.Data().count(model::Labels{{"__name__", "m"}, {"instance", "localhost:" + port}, {"job", "a"}}), 0u);
  apply(2);
  ASSERT_TRUE(wait_for(""));
  for (const TargetInfo& ti : m.Snapshot().active) EXPECT_EQ(ti.state.health, Health::kUp);
  m.Stop();
}

TEST(Manager, FileSdChangesArePickedUp) {
  tsdb::testing::TempDB db;
  char tmpl[] = "/tmp/tw_scrape_sd_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string path = dir + "/t.json";
  ASSERT_TRUE(file::WriteFileAtomic(path, R"([{"targets": ["h1:1"], "labels": {"team": "a"}}])").ok());
  Manager m(db.get(), ManagerOptions{20});
  m.ApplyConfig(*ParseScrapeConfigs(
      YAML::Load("scrape_configs: [{job_name: f, scrape_interval: 1h, file_sd_configs: [{files: ['" + dir + "/*.json']}]}]"),
      GlobalDefaults{}));
  PoolsSnapshot s = m.Snapshot();
  ASSERT_EQ(s.active.size(), 1u);
  EXPECT_EQ(s.active[0].labels, (model::Labels{{"instance", "h1:1"}, {"job", "f"}, {"team", "a"}}));
  EXPECT_EQ(s.active[0].discovered.Get("__meta_filepath"), path);
  ASSERT_TRUE(file::WriteFileAtomic(path, "- targets: ['h1:1', 'h2:2']\n  labels: {team: a}\n").ok());
  for (int i = 0; i < 3000 && m.Snapshot().active.size() != 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(m.Snapshot().active.size(), 2u);
  // A broken file keeps the targets last read from it.
  ASSERT_TRUE(file::WriteFileAtomic(path, "[{").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(m.Snapshot().active.size(), 2u);
  m.Stop();
  (void)file::RemoveAll(dir);
}


namespace proto_test {

using ingest::Enc;

std::string Delimited(const std::string& m) { return Enc().Varint(m.size()).b + m; }

// A gauge "g" and, when `hist`, a native histogram "h" (schema 0, one
// positive bucket of 3 at index 1, zero bucket 1) with classic buckets.
std::string Body(bool hist) {
  std::string body = Delimited(Enc().Len(1, "g").Tag(3, 0).Varint(1).Len(4, Enc().Len(2, Enc().Double(1, 4).b).b).b);
  if (hist) {
    std::string h = Enc()
                        .Tag(1, 0).Varint(4).Double(2, 6).Tag(5, 0).Varint(0).Double(6, 1e-3).Tag(7, 0).Varint(1)
                        .Len(12, Enc().Tag(1, 0).Varint(2).Tag(2, 0).Varint(1).b)  // offset 1, length 1
                        .Len(13, Enc().Varint(6).b)                                 // delta 3 (zigzag 6)
                        .Len(3, Enc().Tag(1, 0).Varint(1).Double(2, 1).b)
                        .b;
    body += Delimited(Enc().Len(1, "h").Tag(3, 0).Varint(4).Len(4, Enc().Len(7, h).b).b);
  }
  return body;
}

constexpr const char* kProtoType = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

// (t, histogram) samples of series `l`.
std::vector<std::pair<int64_t, model::FloatHistogram>> Hists(tsdb::testing::TempDB& db, const model::Labels& l) {
  std::vector<std::pair<int64_t, model::FloatHistogram>> out;
  auto q = db->NewQuerier(model::kMinTime, model::kMaxTime);
  auto m = model::Matcher::Make(model::MatchType::kEqual, "__name__", std::string(l.Get("__name__")));
  auto set = (*q)->Select(true, {}, {*m});
  while (set->Next()) {
    if (set->At().labels() != l) continue;
    auto it = set->At().Iterator();
    while (it->Next()) {
      if (it->AtIsHistogram()) out.emplace_back(it->At().t, *it->AtHistogram());
    }
  }
  return out;
}

TEST(ScrapeLoop, ProtobufNativeHistogramsAndTheirStaleMarkers) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(Config(std::string(kJob) + ", scrape_native_histograms: true}"), db);
  loop->ProcessScrape(Status::OK(), Body(true), kProtoType, 1000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "g"}})), 4);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 2);
  EXPECT_EQ(d.count(L({{"__name__", "h_count"}})), 0u);  // classic series not kept by default
  auto h = Hists(db, L({{"__name__", "h"}}));
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].second.count, 4);
  EXPECT_EQ(h[0].second.zero_count, 1);
  EXPECT_EQ(h[0].second.positive_buckets, (std::vector<double>{3}));
  EXPECT_EQ(loop->metadata().at("h").type, "histogram");
  loop->ProcessScrape(Status::OK(), Body(true), kProtoType, 2000, 0);
  // The histogram goes away: its stale marker is a histogram with a stale sum.
  loop->ProcessScrape(Status::OK(), Body(false), kProtoType, 3000, 0);
  h = Hists(db, L({{"__name__", "h"}}));
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[2].first, 3000);
  EXPECT_TRUE(model::IsStaleNaN(h[2].second.sum));
  // A malformed body fails the scrape with the parser's error.
  loop->ProcessScrape(Status::OK(), "\x05\x0a", kProtoType, 4000, 0);
  EXPECT_NE(loop->state().last_error.find("offset 0"), std::string::npos) << loop->state().last_error;
}

// created_timestamp: the start timestamp of every sample of its metric
// (counter, classic histogram series, native histogram), scrape after scrape.
TEST(ScrapeLoop, ProtobufCreatedTimestampsAsStartTimestamps) {
  tsdb::testing::TempDB db;
  StRecorder rec(db.get());
  auto c = Config(std::string(kJob) + ", scrape_native_histograms: true, always_scrape_classic_histograms: true}");
  ScrapeLoop loop(c, TargetsFromGroup(*c, c->static_configs[0])[0], &rec);
  const std::string created = Enc().Tag(1, 0).Varint(900).Tag(2, 0).Varint(500'000'000).b;  // 900.5 s
  std::string body = Body(true);
  // Body's histogram again as "h2", with a created_timestamp of 800 s; and a counter with one.
  std::string h = Enc()
                      .Tag(1, 0).Varint(4).Double(2, 6).Tag(5, 0).Varint(0).Double(6, 1e-3).Tag(7, 0).Varint(1)
                      .Len(12, Enc().Tag(1, 0).Varint(2).Tag(2, 0).Varint(1).b)
                      .Len(13, Enc().Varint(6).b)
                      .Len(3, Enc().Tag(1, 0).Varint(1).Double(2, 1).b)
                      .Len(15, Enc().Tag(1, 0).Varint(800).b)
                      .b;
  body += Delimited(Enc().Len(1, "h2").Tag(3, 0).Varint(4).Len(4, Enc().Len(7, h).b).b);
  body += Delimited(Enc().Len(1, "c_total").Tag(3, 0).Varint(0).Len(4, Enc().Len(3, Enc().Double(1, 7).Len(3, created).b).b).b);
  loop.ProcessScrape(Status::OK(), body, kProtoType, 1000000, 0);
  loop.ProcessScrape(Status::OK(), body, kProtoType, 1015000, 0);
  EXPECT_EQ(loop.state().last_error, "");
  std::map<model::Labels, std::vector<int64_t>> want = {
      {L({{"__name__", "c_total"}}), {900500, 900500}},
      {L({{"__name__", "h2"}}), {800000, 800000}},
      {L({{"__name__", "h2_count"}}), {800000, 800000}},
      {L({{"__name__", "h2_bucket"}, {"le", "1.0"}}), {800000, 800000}},
      {L({{"__name__", "h2_bucket"}, {"le", "+Inf"}}), {800000, 800000}},
      {L({{"__name__", "h"}}), {0, 0}},  // Body's: no created_timestamp
      {L({{"__name__", "g"}}), {0, 0}},
  };
  for (const auto& [labels, sts] : want) EXPECT_EQ(rec.sts[labels], sts) << labels.ToString();
  EXPECT_EQ(Hists(db, L({{"__name__", "h2"}})).size(), 2u);
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "c_total"}})), 7);
}

TEST(ScrapeLoop, ProtobufClassicSeriesByConfig) {
  tsdb::testing::TempDB db;
  auto both = MakeLoop(Config(std::string(kJob) + ", scrape_native_histograms: true, always_scrape_classic_histograms: true}"), db);
  both->ProcessScrape(Status::OK(), Body(true), kProtoType, 1000, 0);
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "h_count"}})), 4);
  EXPECT_EQ(Last(d, L({{"__name__", "h_bucket"}, {"le", "1.0"}})), 1);
  EXPECT_EQ(Last(d, L({{"__name__", "h_bucket"}, {"le", "+Inf"}})), 4);
  EXPECT_EQ(Hists(db, L({{"__name__", "h"}})).size(), 1u);

  tsdb::testing::TempDB db2;
  auto classic = MakeLoop(Config(std::string(kJob) + "}"), db2);  // native histograms off: classic only
  classic->ProcessScrape(Status::OK(), Body(true), kProtoType, 1000, 0);
  d = db2.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "h_sum"}})), 6);
  EXPECT_EQ(Hists(db2, L({{"__name__", "h"}})).size(), 0u);
}

// fallback_scrape_protocol picks the parser when the Content-Type is
// missing or unknown; a recognised Content-Type still wins.
TEST(ScrapeLoop, FallbackScrapeProtocolPicksTheParser) {
  tsdb::testing::TempDB db;
  auto proto = MakeLoop(Config(std::string(kJob) + ", scrape_native_histograms: true, fallback_scrape_protocol: PrometheusProto}"), db);
  proto->ProcessScrape(Status::OK(), Body(true), "", 1000, 0);
  EXPECT_EQ(proto->state().last_error, "");
  Data d0 = db.Data();
  EXPECT_EQ(Last(d0, L({{"__name__", "g"}})), 4);
  EXPECT_EQ(Hists(db, L({{"__name__", "h"}})).size(), 1u);
  proto->ProcessScrape(Status::OK(), "g 5\n", "text/plain; version=0.0.4", 2000, 0);
  EXPECT_EQ(proto->state().last_error, "");
  d0 = db.Data();
  EXPECT_EQ(Last(d0, L({{"__name__", "g"}})), 5);

  // OpenMetrics as the fallback: `# EOF` is required.
  tsdb::testing::TempDB db2;
  auto om = MakeLoop(Config(std::string(kJob) + ", fallback_scrape_protocol: OpenMetricsText1.0.0}"), db2);
  om->ProcessScrape(Status::OK(), "# TYPE c counter\nc_total 3\nc_created 1\n# EOF\n", "application/json", 3000, 0);
  EXPECT_EQ(om->state().last_error, "");
  Data d = db2.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "c_total"}})), 3);
  om->ProcessScrape(Status::OK(), "c_total 4\n", "", 4000, 0);
  EXPECT_NE(om->state().last_error, "");  // no # EOF: not OpenMetrics

  // Without it a missing Content-Type is read as the text format, as before.
  tsdb::testing::TempDB db3;
  auto text = MakeLoop(Config(std::string(kJob) + "}"), db3);
  text->ProcessScrape(Status::OK(), "g 6\n", "", 5000, 0);
  EXPECT_EQ(text->state().last_error, "");
  d = db3.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "g"}})), 6);
}

}  // namespace proto_test

}  // namespace
}  // namespace trainwatch::scrape
