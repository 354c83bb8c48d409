#include "remote/sender.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <bit>
#include <thread>

#include "base/file.h"
#include "ingest/remote_write.h"
#include "remote/manager.h"
#include "remote/proto.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::remote {
namespace {

// A remote_write receiver on loopback that stores into a real TSDB through
// trainwatch's own decoder, and can be told to fail.
class Receiver {
 public:
  Receiver() {
    srv_.Post("/api/v1/write", [this](const httplib::Request& req, httplib::Response& res) {
      requests_++;
      last_auth_ = req.get_header_value("Authorization");
      last_tenant_ = req.get_header_value("X-Scope-OrgID");
      if (req.get_header_value("Content-Encoding") != "snappy" ||
          req.get_header_value("Content-Type") != "application/x-protobuf" ||
          req.get_header_value("X-Prometheus-Remote-Write-Version") != "0.1.0") {
        res.status = 415;
        return;
      }
      if (int ms = delay_ms_.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      if (int s = fail_status_.load(); s != 0 && fail_count_.fetch_sub(1) > 0) {
        res.status = s;
        res.set_content("injected failure", "text/plain");
        return;
      }
      auto st = ingest::RemoteWrite(req.body, nullptr, *db_.get());
      if (!st.ok()) {
        res.status = 400;
        res.set_content(st.error().message(), "text/plain");
        return;
      }
      samples_ += st->samples;
      res.status = 204;
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    srv_.stop();
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/write"; }
  // The next `n` requests are answered `status`.
  void FailNext(int n, int status) {
    fail_count_ = n;
    fail_status_ = status;
  }
  // Every request takes this long (a slow receiver).
  void Delay(int ms) { delay_ms_ = ms; }
  tsdb::testing::TempDB& db() { return db_; }
  uint64_t samples() const { return samples_; }
  int requests() const { return requests_; }
  std::string last_auth() const { return last_auth_; }
  std::string last_tenant() const { return last_tenant_; }

 private:
  tsdb::testing::TempDB db_;
  httplib::Server srv_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> fail_count_{0}, fail_status_{0}, requests_{0}, delay_ms_{0};
  std::atomic<uint64_t> samples_{0};
  std::string last_auth_, last_tenant_;  // read after the sender is idle
};

class SenderTest : public ::testing::Test {
 protected:
  SenderTest() {
    char tmpl[] = "/tmp/tw_sender_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    QueueOptions o;
    o.dir = dir_ + "/queue";
    o.sync_interval_ms = 50;
    q_ = std::move(Queue::Open(o).value());
  }
  ~SenderTest() override {
    q_.reset();
    (void)file::RemoveAll(dir_);
  }

  // `queue`: more queue_config fields; `entry`: more fields of the entry.
  RemoteWriteConfig Config(const std::string& queue = "max_samples_per_send: 100", const std::string& entry = "") {
    auto c = ParseRemoteWriteConfigs(YAML::Load(
        "remote_write: [{url: '" + rx_.Url() + "', name: rx, queue_config: {batch_send_deadline: 50ms, "
        "min_backoff: 10ms, max_backoff: 50ms, " + queue + "}" + entry + "}]"));
    EXPECT_TRUE(c.ok()) << c.error().ToString();
    return (*c)[0];
  }

  // `n` samples of each of `series` series, committed in batches of one timestamp.
  void Write(int series, int n, int64_t t0 = 1000000) {
    auto app = q_->NewAppender();
    for (int t = 0; t < n; t++) {
      for (int i = 0; i < series; i++) {
        model::Labels l{{"__name__", i % 2 ? "loss" : "gpu_util"}, {"rank", std::to_string(i)}};
        ASSERT_TRUE(app->Append(0, l, t0 + t * 1000, t + i * 0.5).ok());
      }
      ASSERT_TRUE(app->Commit().ok());
    }
  }

  // Waits until the receiver stored `want` samples or 20 s passed.
  void WaitFor(uint64_t want) {
    for (int i = 0; i < 400 && rx_.db().NumSamples() < want; i++) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::string dir_;
  Receiver rx_;
  std::unique_ptr<Queue> q_;
};

TEST_F(SenderTest, SendsEverySampleOnce) {
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  Write(10, 50);
  WaitFor(500);
  auto data = rx_.db().Data();
  ASSERT_EQ(data.size(), 10u);
  for (const auto& [labels, samples] : data) {
    ASSERT_EQ(samples.size(), 50u) << labels.ToString();
    for (size_t t = 1; t < samples.size(); t++) EXPECT_EQ(samples[t].t - samples[t - 1].t, 1000);
  }
  for (int i = 0; i < 100 && (*s)->acked() != q_->End(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ((*s)->acked(), q_->End());
  SenderStats st = (*s)->stats();
  EXPECT_EQ(st.samples_sent, 500u);
  EXPECT_EQ(st.samples_failed, 0u);
  EXPECT_EQ(st.samples_pending, 0u);
  EXPECT_GT(st.bytes_sent, 0u);
  EXPECT_EQ(rx_.samples(), 500u);  // none twice
}

model::FloatHistogram TestHistogram(double scale, bool custom) {
  model::FloatHistogram h;
  h.count = 10 * scale;
  h.sum = 12.5 * scale;
  if (custom) {
    h.schema = model::kCustomBucketsSchema;
    h.custom_values = {0.5, 1, 4};
    h.positive_spans = {{0, 2}, {1, 1}};
    h.positive_buckets = {3 * scale, 2 * scale, 5 * scale};
    h.counter_reset_hint = model::CounterResetHint::kNotCounterReset;
  } else {
    h.schema = 2;
    h.zero_threshold = 1e-3;
    h.zero_count = 1 * scale;
    h.positive_spans = {{-2, 2}, {3, 1}};
    h.positive_buckets = {2 * scale, 3 * scale, 1 * scale};
    h.negative_spans = {{1, 2}};
    h.negative_buckets = {1.5 * scale, 1.5 * scale};
    h.counter_reset_hint = model::CounterResetHint::kGauge;
  }
  return h;
}

TEST(RemoteProtoTest, HistogramMessageRoundTripsBitExact) {
  for (bool custom : {false, true}) {
    model::FloatHistogram h = TestHistogram(1.25, custom), got;
    std::string msg;
    AppendHistogramMessage(h, -1234, &msg);
    int64_t t = 0;
    Status s = ingest::DecodeRemoteWriteHistogram(msg, 0, &got, &t);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(t, -1234);
    EXPECT_TRUE(got.Equals(h));
    EXPECT_EQ(got.counter_reset_hint, h.counter_reset_hint);
    EXPECT_EQ(got.custom_values, h.custom_values);
    EXPECT_EQ(got.positive_spans, h.positive_spans);
    EXPECT_EQ(got.negative_spans, h.negative_spans);
  }
  // A stale marker in the sum survives.
  model::FloatHistogram h = TestHistogram(1, false), got;
  h.sum = std::bit_cast<double>(uint64_t{0x7ff0000000000002});
  std::string msg;
  AppendHistogramMessage(h, 5, &msg);
  int64_t t = 0;
  ASSERT_TRUE(ingest::DecodeRemoteWriteHistogram(msg, 0, &got, &t).ok());
  EXPECT_EQ(std::bit_cast<uint64_t>(got.sum), 0x7ff0000000000002u);
}

TEST_F(SenderTest, SendsHistogramsWithFloats) {
  auto s = Sender::Start(Config("max_samples_per_send: 7", ", send_native_histograms: true"), q_.get(),
                         dir_ + "/rx.position", "trainwatch/test");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  model::Labels hl{{"__name__", "lat"}}, cl{{"__name__", "nhcb"}}, fl{{"__name__", "up"}};
  for (int t = 0; t < 20; t++) {
    auto app = q_->NewAppender();
    ASSERT_TRUE(app->AppendHistogram(0, hl, 1000000 + t * 1000, TestHistogram(t + 1, false)).ok());
    ASSERT_TRUE(app->AppendHistogram(0, cl, 1000000 + t * 1000, TestHistogram(t + 1, true)).ok());
    ASSERT_TRUE(app->Append(0, fl, 1000000 + t * 1000, t).ok());
    ASSERT_TRUE(app->Commit().ok());
  }
  WaitFor(60);
  auto q = rx_.db()->NewQuerier(model::kMinTime, model::kMaxTime);
  ASSERT_TRUE(q.ok());
  auto set = (*q)->Select(true, {}, {*model::Matcher::Make(model::MatchType::kRegex, "__name__", ".+")});
  int series = 0;
  while (set->Next()) {
    series++;
    const model::Labels& l = set->At().labels();
    auto it = set->At().Iterator();
    int n = 0;
    while (it->Next()) {
      if (l == fl) {
        EXPECT_FALSE(it->AtIsHistogram());
      } else {
        ASSERT_TRUE(it->AtIsHistogram()) << l.ToString();
        model::FloatHistogram want = TestHistogram(n + 1, l == cl);
        EXPECT_TRUE(it->AtHistogram()->Equals(want)) << l.ToString() << " sample " << n;
        EXPECT_EQ(it->AtHistogram()->custom_values, want.custom_values);
      }
      n++;
    }
    EXPECT_EQ(n, 20) << l.ToString();
  }
  EXPECT_EQ(series, 3);
  for (int i = 0; i < 100 && (*s)->acked() != q_->End(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ((*s)->acked(), q_->End());
  EXPECT_EQ((*s)->stats().samples_sent, 60u);
}

TEST_F(SenderTest, HistogramsOnlyWhenAskedFor) {
  // Prometheus's default: no send_native_histograms, no histograms sent;
  // their records are passed over and acknowledged.
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  for (int t = 0; t < 5; t++) {
    auto app = q_->NewAppender();
    ASSERT_TRUE(app->AppendHistogram(0, model::Labels{{"__name__", "lat"}}, 1000000 + t * 1000, TestHistogram(1, false)).ok());
    ASSERT_TRUE(app->Append(0, model::Labels{{"__name__", "up"}}, 1000000 + t * 1000, t).ok());
    ASSERT_TRUE(app->Commit().ok());
  }
  WaitFor(5);
  for (int i = 0; i < 100 && (*s)->acked() != q_->End(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ((*s)->acked(), q_->End());
  EXPECT_EQ((*s)->stats().samples_sent, 5u);
  EXPECT_EQ(rx_.db().NumSamples(), 5u);
}

TEST_F(SenderTest, RetriesServerErrorsUntilTheyPass) {
  rx_.FailNext(5, 503);
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(3, 20);
  WaitFor(60);
  EXPECT_EQ(rx_.db().NumSamples(), 60u);
  EXPECT_GT((*s)->stats().samples_retried, 0u);
  EXPECT_EQ((*s)->stats().samples_failed, 0u);
}

TEST_F(SenderTest, ClientErrorsDropTheBatchAndGoOn) {
  rx_.FailNext(1, 400);
  auto s = Sender::Start(Config("max_samples_per_send: 10"), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(10, 1);  // one batch, dropped
  for (int i = 0; i < 200 && (*s)->stats().samples_failed == 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Write(10, 1, 5000000);
  WaitFor(10);
  EXPECT_EQ((*s)->stats().samples_failed, 10u);
  EXPECT_EQ(rx_.db().NumSamples(), 10u);
}

TEST_F(SenderTest, TooManyRequestsIsDroppedUnlessConfiguredToRetry) {
  rx_.FailNext(2, 429);
  auto s = Sender::Start(Config("retry_on_http_429: true"), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(2, 10);
  WaitFor(20);
  EXPECT_EQ(rx_.db().NumSamples(), 20u);
  EXPECT_EQ((*s)->stats().samples_failed, 0u);
}

TEST_F(SenderTest, RestartResumesFromTheSavedPositionWithoutLoss) {
  rx_.FailNext(1000000, 503);  // the receiver is down
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(4, 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*s)->Stop();
  s->reset();
  Write(4, 30, 9000000);
  rx_.FailNext(0, 0);  // back up
  auto s2 = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  WaitFor(240);
  EXPECT_EQ(rx_.db().NumSamples(), 240u);
}

TEST_F(SenderTest, NewDestinationStartsAtTheEnd) {
  Write(2, 5);  // before the destination existed
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(2, 5, 7000000);
  WaitFor(10);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(rx_.db().NumSamples(), 10u);
}

TEST_F(SenderTest, WriteRelabelConfigsDropAndRewrite) {
  auto s = Sender::Start(Config("max_samples_per_send: 100",
                                ", write_relabel_configs: [{source_labels: [__name__], regex: gpu_util, action: drop}, "
                                "{target_label: cluster, replacement: c1}]"),
                         q_.get(), dir_ + "/rx.position", "trainwatch/test");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  Write(4, 10);
  WaitFor(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto data = rx_.db().Data();
  ASSERT_EQ(data.size(), 2u);
  for (const auto& [labels, samples] : data) {
    EXPECT_EQ(labels.MetricName(), "loss");
    EXPECT_EQ(labels.Get("cluster"), "c1");
  }
  EXPECT_EQ((*s)->stats().samples_dropped, 20u);
}

TEST_F(SenderTest, ExternalLabelsAreAddedUnlessTheSeriesHasThem) {
  RemoteWriteConfig c = Config();
  c.external_labels = model::Labels{{"cluster", "c9"}, {"rank", "external"}};
  auto s = Sender::Start(c, q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(2, 1);
  WaitFor(2);
  auto data = rx_.db().Data();
  ASSERT_EQ(data.size(), 2u);
  for (const auto& [labels, samples] : data) {
    EXPECT_EQ(labels.Get("cluster"), "c9");
    EXPECT_NE(labels.Get("rank"), "external");
  }
}

TEST_F(SenderTest, SendsAuthAndHeaders) {
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/token", "s3cret\n").ok());
  auto s = Sender::Start(Config("max_samples_per_send: 100",
                                ", authorization: {credentials_file: '" + dir_ + "/token'}, headers: {X-Scope-OrgID: team-a}"),
                         q_.get(), dir_ + "/rx.position", "trainwatch/test");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  Write(1, 1);
  WaitFor(1);
  (*s)->Stop();
  EXPECT_EQ(rx_.last_auth(), "Bearer s3cret");
  EXPECT_EQ(rx_.last_tenant(), "team-a");
}

TEST_F(SenderTest, ShardsGrowForASlowReceiverAndEverySampleArrivesOnce) {
  rx_.Delay(20);
  RemoteWriteConfig c = Config("max_samples_per_send: 50, capacity: 100, max_shards: 8");
  c.queue.reshard_window_ms = 300;
  auto s = Sender::Start(c, q_.get(), dir_ + "/rx.position", "trainwatch/test");
  Write(200, 40);  // 8000 samples: 160 requests of 20 ms on one shard
  WaitFor(8000);
  EXPECT_EQ(rx_.db().NumSamples(), 8000u);
  EXPECT_EQ(rx_.samples(), 8000u);
  EXPECT_GT((*s)->stats().shards, 1);
  for (const auto& [labels, samples] : rx_.db().Data()) ASSERT_EQ(samples.size(), 40u) << labels.ToString();
}

TEST_F(SenderTest, StaleMarkersKeepTheirBits) {
  auto s = Sender::Start(Config(), q_.get(), dir_ + "/rx.position", "trainwatch/test");
  auto app = q_->NewAppender();
  model::Labels l{{"__name__", "up"}, {"job", "x"}};
  ASSERT_TRUE(app->Append(0, l, 1000, 1).ok());
  ASSERT_TRUE(app->Append(0, l, 2000, std::bit_cast<double>(model::kStaleNaNBits)).ok());
  ASSERT_TRUE(app->Commit().ok());
  WaitFor(2);
  auto data = rx_.db().Data();
  ASSERT_EQ(data[l].size(), 2u);
  EXPECT_EQ(std::bit_cast<uint64_t>(data[l][1].v), model::kStaleNaNBits);
}

TEST(ManagerTest, WrapForwardsWhatThePrimaryStores) {
  char tmpl[] = "/tmp/tw_manager_test_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  Receiver rx;
  tsdb::testing::TempDB local;
  {
    common::metrics::Registry registry;
    ManagerOptions mo;
    mo.dir = dir;
    mo.metrics = &registry;
    Manager m(mo);
    auto fan = m.Wrap(local.get());
    {
      // No destination yet: the primary alone.
      auto app = fan->NewAppender();
      ASSERT_TRUE(app->Append(0, model::Labels{{"__name__", "early"}}, 1000, 1).ok());
      ASSERT_TRUE(app->Commit().ok());
    }
    auto cfgs = ParseRemoteWriteConfigs(YAML::Load("remote_write: [{url: '" + rx.Url() +
                                                   "', queue_config: {batch_send_deadline: 20ms}}]"));
    ASSERT_TRUE(m.ApplyConfig(std::move(*cfgs)).ok());
    EXPECT_EQ(m.destinations(), 1u);
    auto app = fan->NewAppender();
    // An empty-valued label is forwarded as the primary stores it: absent.
    ASSERT_TRUE(app->Append(0, model::Labels{{"__name__", "bare"}, {"model", ""}}, 1500, 1).ok());
    ASSERT_TRUE(app->Commit().ok());
    storage::SeriesRef ref = 0;
    for (int t = 0; t < 20; t++) {
      auto r = app->Append(ref, model::Labels{{"__name__", "late"}}, 2000 + t * 1000, t);
      ASSERT_TRUE(r.ok());
      ref = *r;
      ASSERT_TRUE(app->Commit().ok());
      EXPECT_TRUE(app->AppendByRef(ref, 2500 + t * 1000, t));
      ASSERT_TRUE(app->Commit().ok());
    }
    for (int i = 0; i < 200 && rx.db().NumSamples() < 41; i++) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    EXPECT_EQ(rx.db().NumSamples(), 41u);
    EXPECT_EQ(local.NumSamples(), 42u);
    EXPECT_EQ(rx.db().Data().count(model::Labels{{"__name__", "bare"}}), 1u);
    std::string metrics;
    registry.Render(&metrics);
    EXPECT_NE(metrics.find("prometheus_remote_storage_samples_total{remote_name=\""), std::string::npos) << metrics;
    // Removing the destination stops forwarding; the primary goes on.
    ASSERT_TRUE(m.ApplyConfig({}).ok());
    auto app2 = fan->NewAppender();
    ASSERT_TRUE(app2->Append(0, model::Labels{{"__name__", "after"}}, 90000, 1).ok());
    ASSERT_TRUE(app2->Commit().ok());
    m.Stop();
  }
  EXPECT_EQ(local.NumSamples(), 43u);
  EXPECT_EQ(rx.db().NumSamples(), 41u);
  (void)file::RemoveAll(dir);
}

// Records the start timestamps the fan-out hands its primary.
class StRecorder final : public storage::Appendable {
 public:
  struct App final : public storage::Appender {
    explicit App(StRecorder* r) : r_(r) {}
    Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t, double v) override {
      return AppendST(ref, labels, 0, t, v);
    }
    Result<storage::SeriesRef> AppendST(storage::SeriesRef ref, const model::Labels&, int64_t st, int64_t,
                                        double) override {
      r_->sts.push_back(st);
      return ref != 0 ? ref : storage::SeriesRef{7};
    }
    Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef ref, const model::Labels&, int64_t st, int64_t,
                                                 const model::FloatHistogram&) override {
      r_->hist_sts.push_back(st);
      return ref != 0 ? ref : storage::SeriesRef{8};
    }
    Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                               const model::FloatHistogram& h) override {
      return AppendHistogramST(ref, labels, 0, t, h);
    }
    Status Commit() override { return Status::OK(); }
    void Rollback() override {}
    StRecorder* r_;
  };
  std::unique_ptr<storage::Appender> NewAppender() override { return std::make_unique<App>(this); }
  std::vector<int64_t> sts, hist_sts;
};

TEST(ManagerTest, WrapHandsStartTimestampsToThePrimary) {
  char tmpl[] = "/tmp/tw_manager_test_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  Receiver rx;
  StRecorder local;
  {
    ManagerOptions mo;
    mo.dir = dir;
    Manager m(mo);
    auto fan = m.Wrap(&local);
    model::FloatHistogram h;
    h.count = 1;
    h.zero_count = 1;
    {
      auto app = fan->NewAppender();  // no destination: the primary alone
      ASSERT_TRUE(app->AppendST(0, model::Labels{{"__name__", "c_total"}}, 500, 1000, 1).ok());
      ASSERT_TRUE(app->AppendHistogramST(0, model::Labels{{"__name__", "h"}}, 600, 1000, h).ok());
      ASSERT_TRUE(app->Commit().ok());
    }
    auto cfgs = ParseRemoteWriteConfigs(YAML::Load("remote_write: [{url: '" + rx.Url() +
                                                   "', queue_config: {batch_send_deadline: 20ms}}]"));
    ASSERT_TRUE(m.ApplyConfig(std::move(*cfgs)).ok());
    auto app = fan->NewAppender();
    auto ref = app->AppendST(0, model::Labels{{"__name__", "c_total"}}, 500, 2000, 2);
    ASSERT_TRUE(ref.ok());
    // By ref without labels (a scrape's cache): fine once the queue knows
    // the series; refused, with nothing appended, when it does not.
    EXPECT_TRUE(app->AppendST(*ref, model::Labels(), 500, 3000, 3).ok());
    EXPECT_FALSE(app->AppendST(99, model::Labels(), 500, 3000, 3).ok());
    EXPECT_FALSE(app->AppendHistogramST(98, model::Labels(), 600, 3000, h).ok());
    // A histogram series made before the destination, by ref: the queue
    // cannot name it, so it is refused (it was stored and never forwarded),
    // taken with labels, and by ref again once named.
    EXPECT_FALSE(app->AppendHistogram(8, model::Labels(), 3000, h).ok());
    EXPECT_TRUE(app->AppendHistogram(8, model::Labels{{"__name__", "h"}}, 3000, h).ok());
    EXPECT_TRUE(app->AppendHistogram(8, model::Labels(), 4000, h).ok());
    ASSERT_TRUE(app->Commit().ok());
    EXPECT_EQ(local.sts, (std::vector<int64_t>{500, 500, 500}));
    EXPECT_EQ(local.hist_sts, (std::vector<int64_t>{600, 0, 0}));
    // The queue forwards the samples (remote write 1.0 has no start timestamps).
    for (int i = 0; i < 200 && rx.db().NumSamples() < 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    EXPECT_EQ(rx.db().NumSamples(), 2u);
    m.Stop();
  }
  (void)file::RemoveAll(dir);
}

}  // namespace
}  // namespace trainwatch::remote
