// Issue 17: every writer reaches the TSDB through the head's appender (the
// append seam, tsdb/head_append.cc), which drops empty-valued labels and
// refuses label sets a block cannot hold. Each test below drives one writer
// through the code path `serve` wires for it (app/serve.cc: the TSDB behind
// remote::Manager::Wrap, as `store` there), feeds it a series with an
// empty-valued label (and an invalid one where the writer's own parser lets
// it through), reads the series back through a Querier and then flushes the
// head into blocks the way POST /api/v1/admin/tsdb/flush does: the flush must
// succeed without leaving any series out of a block. A recorder between the
// remote_write wrapper and the DB checks that every stored series was handed
// to an appender (nothing reached the head around the seam).
//
// Who drops an empty value first differs: the collectors hand them to the
// seam (node_disk_info{model=""}, issue 17's series), while the scrape's
// LabelSet, the import and remote_write parsers, PromQL's label_replace,
// LabelsBuilder (rules, log metrics) and runs' RunLabels drop them
// themselves; the tests check the outcome, not who did it. Invalid label sets
// reach the seam from the collectors (udev data that is not UTF-8) and the
// rules (a "\xff" PromQL string); the parsers of scrape, import and
// remote_write refuse them first (checked too).

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/collect_loop.h"
#include "app/wiring.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/utf8.h"
#include "http/api.h"
#include "http/server.h"
#include "logs/metrics.h"
#include "logs/store.h"
#include "model/labels.h"
#include "model/matcher.h"
#include "remote/manager.h"
#include "remote/proto.h"
#include "rules/manager.h"
#include "runs/metric_name.h"
#include "runs/request.h"
#include "runs/store.h"
#include "scrape/config.h"
#include "scrape/scrape_loop.h"
#include "scrape/target.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::model {
// Readable failure messages (gtest finds it by ADL).
void PrintTo(const Labels& l, std::ostream* os) { *os << l.ToString(); }
}  // namespace trainwatch::model

namespace trainwatch::app {
namespace {

using model::Labels;

// Every series the DB answers, with its samples' timestamps.
using Stored = std::map<Labels, std::vector<int64_t>>;

// A scrape target: an HTTP server answering /metrics with a settable text body.
class TextTarget {
 public:
  TextTarget() {
    srv_.set_keep_alive_max_count(1);  // no idle connection holds up stop()
    srv_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard l(mu_);
      res.set_content(body_, "text/plain; version=0.0.4");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TextTarget() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  void Set(std::string body) {
    std::lock_guard l(mu_);
    body_ = std::move(body);
  }

 private:
  httplib::Server srv_;
  std::mutex mu_;
  std::string body_;
  int port_ = 0;
  std::thread thread_;
};

// Sits between serve's `store` (remote::Manager::Wrap) and the DB and records
// every label set handed to an appender, so a test can tell what a writer
// gave the seam from what the seam stored. It forwards everything unchanged.
class SeamRecorder : public storage::Appendable {
 public:
  explicit SeamRecorder(storage::Appendable* db) : db_(db) {}

  class App : public storage::Appender {
   public:
    App(SeamRecorder* r, std::unique_ptr<storage::Appender> in) : r_(r), in_(std::move(in)) {}
    Result<storage::SeriesRef> Append(storage::SeriesRef ref, const Labels& l, int64_t t, double v) override {
      {
        std::lock_guard lk(r_->mu_);
        r_->handed_.insert(l);
      }
      return in_->Append(ref, l, t, v);
    }
    bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override { return in_->AppendByRef(ref, t, v); }
    Status Commit() override { return in_->Commit(); }
    void Rollback() override { in_->Rollback(); }

   private:
    SeamRecorder* r_;
    std::unique_ptr<storage::Appender> in_;
  };

  std::unique_ptr<storage::Appender> NewAppender() override {
    return std::make_unique<App>(this, db_->NewAppender());
  }
  Status CheckTimestamp(int64_t t) override { return db_->CheckTimestamp(t); }

  // Every label set handed to Append so far (refs only ever come from an
  // earlier Append, so AppendByRef adds no series).
  std::set<Labels> handed() {
    std::lock_guard lk(mu_);
    return handed_;
  }

 private:
  storage::Appendable* db_;
  std::mutex mu_;
  std::set<Labels> handed_;
};

bool HasEmptyValue(const Labels& l) {
  for (const model::Label& x : l) {
    if (x.value.empty()) return true;
  }
  return false;
}

class WritersSeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_writers_seam_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // As serve.cc: remote_write out wraps the TSDB, and every writer appends
    // through the wrapper (no destination configured: serve's default).
    remote_ = std::make_unique<remote::Manager>(remote::ManagerOptions{dir_ + "/remote_write", {}, "trainwatch"});
    recorder_ = std::make_unique<SeamRecorder>(db_.get());
    store_ = remote_->Wrap(recorder_.get());
    http::ApiDeps deps{db_.get(), &engine_, MakeBuildInfo()};
    deps.enable_admin_api = true;  // flushes as POST /api/v1/admin/tsdb/flush
    deps.appendable = store_.get();
    api_ = std::make_unique<http::Api>(std::move(deps));
  }

  void TearDown() override {
    api_.reset();
    if (remote_) remote_->Stop();
    store_.reset();
    remote_.reset();
    recorder_.reset();
    (void)file::RemoveAll(dir_);
  }

  http::Response Post(const std::string& path, std::string_view body,
                      std::vector<std::pair<std::string, std::string>> params = {}) {
    http::Request r;
    r.method = "POST";
    r.path = path;
    r.params = std::move(params);
    r.body = body;
    r.receive_time_ms = NowMillis();
    return api_->Handle(r);
  }

  // The series named `name`, read through a Querier on the DB.
  std::vector<Labels> SeriesNamed(const std::string& name) {
    std::vector<Labels> out;
    auto q = db_->NewQuerier(model::kMinTime, model::kMaxTime);
    EXPECT_TRUE(q.ok()) << q.error().ToString();
    if (!q.ok()) return out;
    auto m = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), name);
    auto set = (*q)->Select(true, {}, {*m});
    while (set->Next()) out.push_back(set->At().labels());
    return out;
  }

  // Every stored series and its sample timestamps.
  Stored AllStored() {
    Stored out;
    for (const auto& [labels, samples] : db_.Data()) {
      for (const model::Sample& s : samples) out[labels].push_back(s.t);
    }
    return out;
  }

  // The label sets `pred` picks among those the writers handed to the
  // seam (to show what reached it, e.g. an empty-valued label).
  std::vector<Labels> HandedToSeam(const std::function<bool(const Labels&)>& pred) {
    std::vector<Labels> out;
    for (const Labels& l : recorder_->handed()) {
      if (pred(l)) out.push_back(l);
    }
    return out;
  }

  // What a block must be able to hold, for every series in the DB; and each
  // of them came through an appender (none was written around the seam).
  void ExpectEverySeriesStorable() {
    std::set<Labels> through;
    for (const Labels& l : recorder_->handed()) through.insert(model::WithoutEmptyValues(l));
    for (const auto& [labels, ts] : AllStored()) {
      EXPECT_TRUE(through.contains(labels)) << labels.ToString() << " was stored without passing an appender";
      Status s = model::CheckSeriesLabels(labels);
      EXPECT_TRUE(s.ok()) << s.ToString();
      for (const model::Label& l : labels) {
        EXPECT_TRUE(IsValidUtf8(l.name) && IsValidUtf8(l.value)) << "series " << labels.ToString();
      }
    }
  }

  // POST /api/v1/admin/tsdb/flush, then: every series that was in the head is
  // read back from blocks unchanged, and no series was left out of a block.
  void ExpectFlushKeepsEverything() {
    ExpectEverySeriesStorable();
    Stored before = AllStored();
    ASSERT_FALSE(before.empty());
    http::Response r = Post("/api/v1/admin/tsdb/flush", "");
    ASSERT_EQ(r.status, 204) << r.body;
    tsdb::Stats st = db_->GetStats();
    EXPECT_GE(st.blocks, 1u);
    EXPECT_EQ(st.compaction_series_skipped_total, 0u) << "a series in the head that a block cannot hold";
    EXPECT_EQ(AllStored(), before);
  }

  // ---- The writers. Each drives one and checks what it stored. ----

  // Built-in collectors: app::CollectLoop over a /proc and udev fixture. sda
  // has no udev entry, so node_disk_info{model="",path="",...} (issue 17's
  // series); sdb's udev ID_MODEL is not UTF-8, which the collector passes on.
  // The GPU collector (job="dcgm") needs NVML (dlopen of libnvidia-ml), so it
  // is off here; CollectOnce appends its families in the same loop as the
  // host's, through the same appender.
  void DriveCollectors() {
    const std::string root = dir_ + "/host";
    ASSERT_TRUE(file::MkdirAll(root + "/proc").ok());
    ASSERT_TRUE(file::MkdirAll(root + "/udev").ok());
    ASSERT_TRUE(file::WriteFileAtomic(root + "/proc/loadavg", "0.5 0.25 0.125 1/2 3\n").ok());
    ASSERT_TRUE(file::WriteFileAtomic(root + "/proc/diskstats",
                                      "   8       0 sda 10 0 20 3 5 0 40 7 0 9 10 0 0 0 0 0 0\n"
                                      "   8      16 sdb 11 0 21 3 5 0 40 7 0 9 10 0 0 0 0 0 0\n")
                    .ok());
    ASSERT_TRUE(file::WriteFileAtomic(root + "/udev/b8:16", "E:ID_MODEL=Bad\xffModel\nE:ID_SERIAL_SHORT=S16\n").ok());
    CollectOptions o;
    o.gpu = false;
    o.instance = "node7:9800";
    o.hostname = "node7";
    o.host_options.proc = root + "/proc";
    o.host_options.sys = root + "/sys";
    o.host_options.udev_data = root + "/udev";
    o.host_options.uname = false;
    o.host_options.now = [] { return 1700000000.0; };
    CollectLoop c(o, store_.get(), nullptr);
    c.Open();
    c.CollectOnce(NowMillis());

    // The collector hands both disks' node_disk_info to the seam as they
    // are, with their empty values (sdb's path, revision and wwn too) and
    // sdb's model that is not UTF-8.
    EXPECT_EQ(HandedToSeam([](const Labels& l) { return l.MetricName() == "node_disk_info" && HasEmptyValue(l); }).size(), 2u);
    EXPECT_EQ(HandedToSeam([](const Labels& l) { return l.MetricName() == "node_disk_info" && !IsValidUtf8(l.Get("model")); }).size(), 1u);
    std::vector<Labels> info = SeriesNamed("node_disk_info");
    // sda: the empty model, path, revision, serial and wwn are dropped.
    EXPECT_EQ(info, (std::vector<Labels>{Labels{{"__name__", "node_disk_info"},
                                                {"device", "sda"},
                                                {"instance", "node7:9800"},
                                                {"job", "node"},
                                                {"major", "8"},
                                                {"minor", "0"}}}))
        << "sdb's node_disk_info (model not UTF-8) must be refused, sda's stored without its empty labels";
    // The refused series costs only itself: the rest of the cycle is stored.
    EXPECT_EQ(SeriesNamed("node_disk_reads_completed_total").size(), 2u);
    EXPECT_EQ(SeriesNamed("node_load1").size(), 1u);
  }

  // Scrape: a scrape::ScrapeLoop (what scrape::Manager runs per target)
  // fetching a real HTTP target.
  void DriveScrape() {
    TextTarget target;
    const std::string addr = "127.0.0.1:" + std::to_string(target.port());
    auto cfgs = scrape::ParseScrapeConfigs(
        YAML::Load("scrape_configs: [{job_name: seam_scrape, static_configs: [{targets: ['" + addr + "']}]}]"),
        scrape::GlobalDefaults{15000, 10000});
    ASSERT_TRUE(cfgs.ok()) << cfgs.error().ToString();
    auto cfg = std::make_shared<const scrape::ScrapeConfig>((*cfgs)[0]);
    scrape::ScrapeLoop loop(cfg, scrape::TargetsFromGroup(*cfg, cfg->static_configs[0])[0], store_.get());

    target.Set("# TYPE seam_scrape_info gauge\nseam_scrape_info{model=\"\",device=\"sda\"} 1\n"
               "seam_scrape_only_empty{model=\"\"} 2\n");
    loop.ScrapeOnce(NowMillis());
    EXPECT_EQ(loop.state().health, scrape::Health::kUp) << loop.state().last_error;
    // (The scrape's label set, common::LabelSet, already drops empty values.)
    EXPECT_EQ(SeriesNamed("seam_scrape_info"),
              (std::vector<Labels>{Labels{{"__name__", "seam_scrape_info"}, {"device", "sda"}, {"instance", addr},
                                          {"job", "seam_scrape"}}}));
    EXPECT_EQ(SeriesNamed("seam_scrape_only_empty"),
              (std::vector<Labels>{Labels{{"__name__", "seam_scrape_only_empty"}, {"instance", addr},
                                          {"job", "seam_scrape"}}}));
    // The exposition parser refuses a label value that is not UTF-8 (the
    // whole scrape fails, as in Prometheus): the seam is not reached.
    target.Set("seam_scrape_bad{v=\"\xff\"} 1\n");
    loop.ScrapeOnce(NowMillis() + 1);
    EXPECT_EQ(loop.state().health, scrape::Health::kDown);
    EXPECT_NE(loop.state().last_error.find("UTF-8"), std::string::npos) << loop.state().last_error;
    EXPECT_TRUE(SeriesNamed("seam_scrape_bad").empty());
  }

  // Self-scrape: the real HTTP server serving /metrics with the collectors'
  // families (node_disk_info{model=""} among them, as serve's
  // deps.collected), scraped (1) with the "trainwatch" job that
  // app::LoadScrapeConfigs adds, which drops the collectors' families, and
  // (2) with a job of the config file that targets our own address instead,
  // which replaces it and keeps them (docs/architecture.md, Collectors).
  void DriveSelfScrape() {
    const std::string root = dir_ + "/self_host";
    ASSERT_TRUE(file::MkdirAll(root + "/proc").ok());
    ASSERT_TRUE(file::WriteFileAtomic(root + "/proc/diskstats", "   8       0 sda 10 0 20 3 5 0 40 7 0 9 10 0 0 0 0 0 0\n").ok());
    CollectOptions co;
    co.gpu = false;
    co.instance = "node7:9800";
    co.hostname = "node7";
    co.host_options.proc = root + "/proc";
    co.host_options.sys = root + "/sys";
    co.host_options.udev_data = root + "/udev";
    co.host_options.uname = false;
    CollectLoop collector(co, nullptr, nullptr);  // only its snapshot, for /metrics
    collector.Open();
    collector.CollectOnce(NowMillis());

    http::ServerOptions so;
    so.listen = "127.0.0.1:0";
    so.threads = 2;
    so.keep_alive_ms = 100;
    http::ApiDeps deps{db_.get(), &engine_, MakeBuildInfo()};
    deps.enable_admin_api = true;  // flushes as POST /api/v1/admin/tsdb/flush
    deps.appendable = store_.get();
    deps.collected = collector.snapshot();
    auto srv = http::Server::Start(so, std::move(deps));
    ASSERT_TRUE(srv.ok()) << srv.error().ToString();
    const std::string listen = "127.0.0.1:" + std::to_string((*srv)->port());
    auto scrape_once = [&](const scrape::ScrapeConfig& job) {
      auto cfg = std::make_shared<const scrape::ScrapeConfig>(job);
      scrape::ScrapeLoop loop(cfg, scrape::TargetsFromGroup(*cfg, cfg->static_configs[0])[0], store_.get());
      loop.ScrapeOnce(NowMillis());
      EXPECT_EQ(loop.state().health, scrape::Health::kUp) << loop.state().last_error;
    };

    // (1) The default self-scrape.
    auto jobs = LoadScrapeConfigs("", listen, true);
    ASSERT_TRUE(jobs.ok()) << jobs.error().ToString();
    ASSERT_EQ(jobs->size(), 1u);
    ASSERT_EQ((*jobs)[0].job_name, "trainwatch");
    scrape_once((*jobs)[0]);
    const Labels up{{"__name__", "up"}, {"instance", listen}, {"job", "trainwatch"}};
    size_t self = 0;
    bool has_up = false;
    for (const auto& [labels, ts] : AllStored()) {
      if (labels.Get("job") != "trainwatch") continue;
      self++;
      has_up = has_up || labels == up;
      EXPECT_FALSE(labels.MetricName().starts_with("node_")) << labels.ToString();
    }
    EXPECT_TRUE(has_up);
    EXPECT_GT(self, 5u);

    // (2) A config file's job on our own address replaces it.
    const std::string config = dir_ + "/self.yml";
    ASSERT_TRUE(file::WriteFileAtomic(config, "scrape_configs: [{job_name: seam_self, static_configs: [{targets: ['" +
                                                  listen + "']}]}]\n")
                    .ok());
    jobs = LoadScrapeConfigs(config, listen, true);
    ASSERT_TRUE(jobs.ok()) << jobs.error().ToString();
    ASSERT_EQ(jobs->size(), 1u) << "the job on our address replaces the default self-scrape";
    ASSERT_EQ((*jobs)[0].job_name, "seam_self");
    scrape_once((*jobs)[0]);
    bool found = false;
    for (const Labels& l : SeriesNamed("node_disk_info")) {
      if (l.Get("job") != "seam_self") continue;
      found = true;
      EXPECT_EQ(l, (Labels{{"__name__", "node_disk_info"}, {"device", "sda"}, {"instance", listen}, {"job", "seam_self"},
                           {"major", "8"}, {"minor", "0"}}));
    }
    EXPECT_TRUE(found);
    (*srv)->Stop();
  }

  // Text import: POST /api/v1/import/prometheus on the http::Api, as serve
  // routes it (ImportBatch + AppendAndCommit into `store`).
  void DriveImport() {
    const std::string ts = std::to_string(NowMillis());
    http::Response r = Post("/api/v1/import/prometheus",
                            "seam_import{model=\"\",device=\"sda\"} 1 " + ts + "\nseam_import_only_empty{model=\"\"} 2 " + ts + "\n",
                            {{"extra_label", "env="}});
    ASSERT_EQ(r.status, 204) << r.body;
    EXPECT_EQ(SeriesNamed("seam_import"), (std::vector<Labels>{Labels{{"__name__", "seam_import"}, {"device", "sda"}}}));
    EXPECT_EQ(SeriesNamed("seam_import_only_empty"), (std::vector<Labels>{Labels{{"__name__", "seam_import_only_empty"}}}));
    // The parser refuses repeated names and non-UTF-8 values with a 400; nothing of the body is stored.
    r = Post("/api/v1/import/prometheus", "seam_import_bad{a=\"1\",a=\"2\"} 1 " + ts + "\n");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("duplicate label name"), std::string::npos) << r.body;
    r = Post("/api/v1/import/prometheus", "seam_import_ok 1 " + ts + "\nseam_import_bad{a=\"\xff\"} 1 " + ts + "\n");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("UTF-8"), std::string::npos) << r.body;
    EXPECT_TRUE(SeriesNamed("seam_import_bad").empty());
    EXPECT_TRUE(SeriesNamed("seam_import_ok").empty());
  }

  // remote_write in: POST /api/v1/write on the http::Api with a snappy
  // WriteRequest built by remote/'s own encoder (what our sender sends).
  void DriveRemoteWrite() {
    const model::Sample smp{NowMillis(), 1};
    std::string req;
    remote::AppendTimeSeries(Labels{{"__name__", "seam_rw"}, {"model", ""}, {"device", "sda"}}, &smp, 1, &req);
    remote::AppendTimeSeries(Labels{{"__name__", "seam_rw_only_empty"}, {"model", ""}}, &smp, 1, &req);
    std::string body;
    remote::SnappyCompress(req, &body);
    http::Response r = Post("/api/v1/write", body);
    ASSERT_EQ(r.status, 204) << r.body;
    EXPECT_EQ(SeriesNamed("seam_rw"), (std::vector<Labels>{Labels{{"__name__", "seam_rw"}, {"device", "sda"}}}));
    EXPECT_EQ(SeriesNamed("seam_rw_only_empty"), (std::vector<Labels>{Labels{{"__name__", "seam_rw_only_empty"}}}));

    // Invalid label sets: the decoder answers 400 and stores nothing of the request.
    struct Bad {
      const char* what;
      std::string fields;
    };
    std::string name, dup, empty_name, utf8;
    remote::AppendLabelFields(Labels{{"__name__", "seam_rw_bad"}}, &name);
    remote::AppendLabelFields(Labels{{"a", "1"}}, &dup);
    remote::AppendLabelFields(Labels{{"a", "2"}}, &dup);
    remote::AppendLabelFields(Labels{{"", "x"}}, &empty_name);
    remote::AppendLabelFields(Labels{{"a", "\xff"}}, &utf8);
    for (const Bad& b : {Bad{"repeated name", name + dup}, Bad{"empty name", name + empty_name},
                         Bad{"non-UTF-8 value", name + utf8}}) {
      SCOPED_TRACE(b.what);
      std::string bad_req, bad_body;
      remote::AppendTimeSeries(Labels{{"__name__", "seam_rw_ok"}}, &smp, 1, &bad_req);
      remote::AppendTimeSeriesEncoded(b.fields, &smp, 1, &bad_req);
      remote::SnappyCompress(bad_req, &bad_body);
      r = Post("/api/v1/write", bad_body);
      EXPECT_EQ(r.status, 400) << r.body;
    }
    EXPECT_TRUE(SeriesNamed("seam_rw_bad").empty());
    EXPECT_TRUE(SeriesNamed("seam_rw_ok").empty());
  }

  // Rules: a rules::Manager as serve builds it (appendable = store), one
  // group from an embedded rule file, evaluated as Group::Run does it
  // (evaluate, restore for-state, evaluate).
  void DriveRules() {
    rules::ManagerOptions ro;
    ro.appendable = store_.get();
    ro.queryable = db_.get();
    ro.engine = &engine_;
    rules::Manager manager(ro);
    rules::ManagerConfig mc;
    mc.evaluation_interval_ms = 3600 * 1000;  // its own thread stays idle; the test evaluates
    mc.sources.push_back({"seam.rules.yml",
                          "groups:\n"
                          "- name: seam\n"
                          "  rules:\n"
                          "  - record: seam:empty\n"
                          "    expr: label_replace(vector(1), \"empty\", \"\", \"\", \"\")\n"
                          "    labels: {also_empty: \"\"}\n"
                          "  - record: seam:bad_utf8\n"
                          "    expr: label_replace(vector(2), \"bad\", \"\\xff\", \"\", \"\")\n"
                          "  - alert: SeamEmpty\n"
                          "    expr: label_replace(vector(1), \"empty\", \"\", \"\", \"\")\n"
                          "    labels: {severity: \"\"}\n"
                          "  - alert: SeamBadUtf8\n"
                          "    expr: label_replace(vector(1), \"bad\", \"\\xff\", \"\", \"\")\n",
                          true});
    Status us = manager.Update(mc);
    ASSERT_TRUE(us.ok()) << us.ToString();
    manager.Stop();  // no evaluation on the group's thread from here on
    auto groups = manager.Groups();
    ASSERT_EQ(groups.size(), 1u);
    rules::Group& g = *groups[0];
    const int64_t t0 = NowMillis();
    g.Eval(t0);
    g.RestoreForState(NowMillis());
    g.Eval(t0 + 1000);

    EXPECT_EQ(SeriesNamed("seam:empty"), (std::vector<Labels>{Labels{{"__name__", "seam:empty"}}}));
    EXPECT_EQ(SeriesNamed("ALERTS"), (std::vector<Labels>{Labels{{"__name__", "ALERTS"},
                                                                 {"alertname", "SeamEmpty"},
                                                                 {"alertstate", "firing"}}}));
    EXPECT_EQ(SeriesNamed("ALERTS_FOR_STATE"),
              (std::vector<Labels>{Labels{{"__name__", "ALERTS_FOR_STATE"}, {"alertname", "SeamEmpty"}}}));
    // "\xff" in a PromQL string is the byte 0xff: label_replace makes a
    // value that is not UTF-8, which only the seam refuses. The rule (and
    // only it) turns unhealthy, saying why.
    EXPECT_FALSE(HandedToSeam([](const Labels& l) { return l.MetricName() == "seam:bad_utf8"; }).empty());
    EXPECT_TRUE(SeriesNamed("seam:bad_utf8").empty());
    std::map<std::string, rules::RuleStatus> status;
    for (const auto& rule : g.rules()) status[std::string(rule->name())] = rule->status();
    ASSERT_EQ(status.size(), 4u);
    EXPECT_EQ(status["seam:empty"].health, rules::RuleHealth::kGood) << status["seam:empty"].last_error;
    EXPECT_EQ(status["SeamEmpty"].health, rules::RuleHealth::kGood) << status["SeamEmpty"].last_error;
    for (const char* bad : {"seam:bad_utf8", "SeamBadUtf8"}) {
      SCOPED_TRACE(bad);
      EXPECT_EQ(status[bad].health, rules::RuleHealth::kBad);
      EXPECT_NE(status[bad].last_error.find("UTF-8"), std::string::npos) << status[bad].last_error;
    }
  }

  // Runs: runs::RunStore opened on `store` as serve does; a ranked batch
  // from a run registered without a host (the time view's host is empty).
  void DriveRuns() {
    runs::RunStoreOptions o;
    o.path = dir_ + "/runs.db";
    auto rs = runs::RunStore::Open(o, store_.get(), db_.get());
    ASSERT_TRUE(rs.ok()) << rs.error().ToString();
    runs::RunStore& store = **rs;
    auto create = runs::ParseCreateRequest(R"({"id":"seam1","project":"seamproj","name":"seamrun"})");
    ASSERT_TRUE(create.ok()) << create.error().ToString();
    auto run = store.CreateOrResume(*create);
    ASSERT_TRUE(run.ok()) << run.error().ToString();
    const int64_t now = NowMillis();
    auto batch = runs::ParseBatchRequest(R"({"batch_id":"b1","rank":1,"points":[{"step":1,"ts":)" +
                                         std::to_string(now - 1000) + R"(,"values":{"loss":0.5}}]})");
    ASSERT_TRUE(batch.ok()) << batch.error().ToString();
    ASSERT_TRUE(batch->rejected.empty());
    auto res = store.WriteBatch("seam1", *batch);
    ASSERT_TRUE(res.ok()) << res.error().ToString();
    EXPECT_EQ(res->accepted, 1u);
    store.Stop();

    auto loss = runs::KeyToMetricName("loss");
    ASSERT_TRUE(loss.ok());
    EXPECT_EQ(SeriesNamed(*loss),
              (std::vector<Labels>{Labels{{"__name__", *loss}, {"project", "seamproj"}, {"rank", "1"}, {"run", "seamrun"}}}))
        << "no host label: the run has none";
    EXPECT_FALSE(SeriesNamed("trainwatch_run_active").empty());
  }

  // Log-derived metrics: a logs::LogStore with logs::LogMetrics as its
  // observer (serve's SetObserver), writing to `store`. A line without
  // level, project or run makes every key label of its counters empty.
  void DriveLogMetrics() {
    logs::StoreOptions so;
    so.dir = dir_ + "/logs";
    auto ls = logs::LogStore::Open(so);
    ASSERT_TRUE(ls.ok()) << ls.error().ToString();
    auto lm = logs::LogMetrics::Make(logs::DefaultPatterns(), store_.get(), 10000);
    ASSERT_TRUE(lm.ok()) << lm.error().ToString();
    (*ls)->SetObserver(lm->get());
    const int64_t now = NowMillis();
    logs::Record rec;
    rec.time_ns = now * 1000000;
    rec.labels = Labels{{"job", "train"}};
    rec.message = "RuntimeError: CUDA error: an illegal memory access was encountered";
    Status s = (*ls)->Append({rec});
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = (*lm)->Flush(now);
    ASSERT_TRUE(s.ok()) << s.ToString();
    (*ls)->Shutdown();

    EXPECT_EQ(SeriesNamed("trainwatch_log_lines_total"),
              (std::vector<Labels>{Labels{{"__name__", "trainwatch_log_lines_total"}}}));
    EXPECT_EQ(SeriesNamed("trainwatch_log_pattern_matches_total"),
              (std::vector<Labels>{Labels{{"__name__", "trainwatch_log_pattern_matches_total"}, {"pattern", "cuda_error"}}}));
  }

  std::string dir_;
  tsdb::testing::TempDB db_;
  promql::Engine engine_{promql::EngineOptions{}};
  std::unique_ptr<remote::Manager> remote_;
  std::unique_ptr<SeamRecorder> recorder_;      // in front of the DB, behind the remote_write wrapper
  std::unique_ptr<storage::Appendable> store_;  // serve's `store`
  std::unique_ptr<http::Api> api_;
};

TEST_F(WritersSeamTest, Collectors) {
  DriveCollectors();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, Scrape) {
  DriveScrape();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, SelfScrape) {
  DriveSelfScrape();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, TextImport) {
  DriveImport();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, RemoteWrite) {
  DriveRemoteWrite();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, Rules) {
  DriveRules();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, Runs) {
  DriveRuns();
  ExpectFlushKeepsEverything();
}

TEST_F(WritersSeamTest, LogMetrics) {
  DriveLogMetrics();
  ExpectFlushKeepsEverything();
}

// Every writer into one TSDB, then one flush: a block holds all of it.
TEST_F(WritersSeamTest, EveryWriterThenOneFlush) {
  {
    SCOPED_TRACE("collectors");
    DriveCollectors();
  }
  {
    SCOPED_TRACE("scrape");
    DriveScrape();
  }
  {
    SCOPED_TRACE("text import");
    DriveImport();
  }
  {
    SCOPED_TRACE("remote_write");
    DriveRemoteWrite();
  }
  {
    SCOPED_TRACE("rules");
    DriveRules();
  }
  {
    SCOPED_TRACE("runs");
    DriveRuns();
  }
  {
    SCOPED_TRACE("log metrics");
    DriveLogMetrics();
  }
  {
    SCOPED_TRACE("self-scrape");  // last: /metrics then reports what the others did
    DriveSelfScrape();
  }
  ExpectFlushKeepsEverything();
}

}  // namespace
}  // namespace trainwatch::app
