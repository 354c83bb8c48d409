#include "notify/notifier.h"

#include <httplib.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "notify/integrations.h"
#include "notify/templates.h"

namespace trainwatch::notify {
namespace {

using Json = nlohmann::json;

class FakeClock : public Clock {
 public:
  int64_t NowMs() override { return now.load(); }
  std::atomic<int64_t> now{1700000000000};
};

// A real HTTP receiver on loopback that records every webhook body.
class Receiver {
 public:
  Receiver() {
    srv_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      if (fail_next_ > 0) {
        fail_next_--;
        res.status = 503;
        return;
      }
      bodies_.push_back(Json::parse(req.body));
      paths_.push_back(req.path);
      auth_.push_back(req.get_header_value("Authorization"));
      res.status = 200;
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<Json> Take() {
    std::lock_guard<std::mutex> l(mu_);
    auto b = std::move(bodies_);
    bodies_.clear();
    return b;
  }
  std::vector<std::string> Auth() {
    std::lock_guard<std::mutex> l(mu_);
    return auth_;
  }
  // (path, Authorization header) of every request taken so far.
  std::vector<std::pair<std::string, std::string>> PathsAndAuth() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < paths_.size(); i++) out.emplace_back(paths_[i], auth_[i]);
    std::sort(out.begin(), out.end());
    return out;
  }
  void FailNext(int n) {
    std::lock_guard<std::mutex> l(mu_);
    fail_next_ = n;
  }

 private:
  httplib::Server srv_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<Json> bodies_;
  std::vector<std::string> paths_, auth_;
  int fail_next_ = 0;
};

std::string ConfigFor(int port, const std::string& extra = "") {
  return "global: {resolve_timeout: 1h}\n"
         "route:\n"
         "  receiver: hook\n"
         "  group_by: [alertname]\n"
         "  group_wait: 30s\n"
         "  group_interval: 5m\n"
         "  repeat_interval: 4h\n"
         "receivers:\n"
         "  - name: hook\n"
         "    webhook_configs:\n"
         "      - url: http://127.0.0.1:" + std::to_string(port) + "/hook\n"
         "        http_config: {authorization: {credentials: tok}}\n" + extra;
}

class NotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("notify_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    n_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(const std::string& yaml) {
    auto cfg = ParseConfig(yaml);
    ASSERT_TRUE(cfg.ok()) << cfg.error().ToString();
    NotifierOptions o;
    o.dir = dir_.string();
    o.clock = &clock_;
    o.background = false;
    o.external_url = "http://tw.example:9800";
    o.retry_initial_ms = 10;
    o.metrics = &metrics_;
    auto n = Notifier::Open(o, *cfg);
    ASSERT_TRUE(n.ok()) << n.error().ToString();
    n_ = std::move(*n);
  }
  void Advance(int64_t ms) {
    clock_.now += ms;
    n_->Tick();
    n_->WaitIdle();
  }
  Alert Firing(const std::string& name, const std::string& instance, const std::string& severity = "warning") {
    Alert a;
    a.labels = model::Labels{{"alertname", name}, {"instance", instance}, {"severity", severity}};
    a.annotations = model::Labels{{"summary", name + " on " + instance}};
    a.starts_at_ms = clock_.now;
    a.generator_url = "http://tw/graph";
    return a;
  }

  FakeClock clock_;
  Receiver recv_;
  std::filesystem::path dir_;
  common::metrics::Registry metrics_;  // outlives n_
  std::unique_ptr<Notifier> n_;
};

TEST_F(NotifierTest, GroupWaitBatchesAlertsIntoOneNotification) {
  Open(ConfigFor(recv_.port()));
  ASSERT_TRUE(n_->PutAlerts({Firing("HighTemp", "gpu0"), Firing("HighTemp", "gpu1"), Firing("Other", "a")}).ok());
  Advance(29000);
  EXPECT_TRUE(recv_.Take().empty());
  Advance(1000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 2u);  // two groups: HighTemp and Other
  const Json* ht = got[0]["groupLabels"]["alertname"] == "HighTemp" ? &got[0] : &got[1];
  EXPECT_EQ((*ht)["alerts"].size(), 2u);
  EXPECT_EQ((*ht)["status"], "firing");
  EXPECT_EQ((*ht)["groupKey"], "{}:{alertname=\"HighTemp\"}");
  EXPECT_EQ(recv_.Auth()[0], "Bearer tok");
  // Nothing new: no notification at group_interval, one again after repeat_interval.
  Advance(5 * 60000);
  EXPECT_TRUE(recv_.Take().empty());
  // Keep the alerts alive (resolve_timeout is 5m), as Prometheus re-sends them.
  for (int i = 0; i < 48; i++) {
    ASSERT_TRUE(n_->PutAlerts({Firing("HighTemp", "gpu0"), Firing("HighTemp", "gpu1"), Firing("Other", "a")}).ok());
    Advance(5 * 60000);
    if (!recv_.Take().empty()) {
      EXPECT_GE(clock_.now - 1700000000000, 4 * 3600000LL);
      return;
    }
  }
  FAIL() << "no repeat after repeat_interval";
}

TEST_F(NotifierTest, WebhookPayloadShape) {
  Open(ConfigFor(recv_.port()));
  Alert a = Firing("HighTemp", "gpu0");
  a.starts_at_ms = clock_.now - 1000;  // 2023-11-14T22:13:19Z
  ASSERT_TRUE(n_->PutAlerts({a}).ok());
  Advance(30000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  const Json& p = got[0];
  std::vector<std::string> keys;
  for (auto it = p.begin(); it != p.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"alerts", "commonAnnotations", "commonLabels", "externalURL", "groupKey",
                                            "groupLabels", "receiver", "status", "truncatedAlerts", "version"}));
  EXPECT_EQ(p["version"], "4");
  EXPECT_EQ(p["receiver"], "hook");
  EXPECT_EQ(p["externalURL"], "http://tw.example:9800");
  EXPECT_EQ(p["truncatedAlerts"], 0);
  EXPECT_EQ(p["commonLabels"], (Json{{"alertname", "HighTemp"}, {"instance", "gpu0"}, {"severity", "warning"}}));
  EXPECT_EQ(p["commonAnnotations"], (Json{{"summary", "HighTemp on gpu0"}}));
  const Json& al = p["alerts"][0];
  EXPECT_EQ(al["status"], "firing");
  EXPECT_EQ(al["startsAt"], "2023-11-14T22:13:19Z");
  EXPECT_EQ(al["endsAt"], "0001-01-01T00:00:00Z");
  EXPECT_EQ(al["generatorURL"], "http://tw/graph");
  EXPECT_EQ(al["fingerprint"].get<std::string>().size(), 16u);
}

TEST_F(NotifierTest, MaxAlertsTruncates) {
  Open(ConfigFor(recv_.port()) + "        max_alerts: 1\n");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("A", "2"), Firing("A", "3")}).ok());
  Advance(30000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["alerts"].size(), 1u);
  EXPECT_EQ(got[0]["truncatedAlerts"], 2);
}

TEST_F(NotifierTest, ResolvedIsSentOnce) {
  Open(ConfigFor(recv_.port()));
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(30000);
  ASSERT_EQ(recv_.Take().size(), 1u);
  Alert r = Firing("A", "1");
  r.ends_at_ms = clock_.now;
  ASSERT_TRUE(n_->PutAlerts({r}).ok());
  Advance(5 * 60000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["status"], "resolved");
  EXPECT_EQ(got[0]["alerts"][0]["status"], "resolved");
  EXPECT_NE(got[0]["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
  Advance(5 * 60000);
  Advance(5 * 3600000);
  EXPECT_TRUE(recv_.Take().empty());
  EXPECT_TRUE(n_->ListAlerts().empty());
}

TEST_F(NotifierTest, NewAlertInGroupTriggersUpdateAtGroupInterval) {
  Open(ConfigFor(recv_.port()));
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(30000);
  ASSERT_EQ(recv_.Take().size(), 1u);
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("A", "2")}).ok());
  Advance(60000);
  EXPECT_TRUE(recv_.Take().empty());  // waits for group_interval
  Advance(4 * 60000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["alerts"].size(), 2u);
}

TEST_F(NotifierTest, SilenceSuppressesAndExpires) {
  Open(ConfigFor(recv_.port()));
  Silence s;
  s.matchers = *ParseMatchers("instance=\"1\"");
  s.starts_at_ms = clock_.now;
  s.ends_at_ms = clock_.now + 3600000;
  s.created_by = "me";
  s.comment = "maintenance";
  auto id = n_->PutSilence(s);
  ASSERT_TRUE(id.ok()) << id.error().ToString();
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("B", "2")}).ok());
  auto alerts = n_->ListAlerts();
  ASSERT_EQ(alerts.size(), 2u);
  for (const auto& v : alerts) {
    if (v.alert.alert.labels.Get("instance") == "1") {
      EXPECT_EQ(v.state, "suppressed");
      EXPECT_EQ(v.silenced_by, std::vector<std::string>{*id});
    } else {
      EXPECT_EQ(v.state, "active");
    }
  }
  Advance(30000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["groupLabels"]["alertname"], "B");
  ASSERT_TRUE(n_->ExpireSilence(*id).ok());
  EXPECT_EQ(n_->GetSilence(*id)->State(clock_.now), "expired");
  EXPECT_FALSE(n_->ExpireSilence(*id).ok());
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("B", "2")}).ok());
  Advance(5 * 60000);
  got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["groupLabels"]["alertname"], "A");

  Silence bad = s;
  bad.comment.clear();
  EXPECT_FALSE(n_->PutSilence(bad).ok());
  bad = s;
  bad.matchers = *ParseMatchers("instance=~\".*\"");
  EXPECT_FALSE(n_->PutSilence(bad).ok());
}

TEST_F(NotifierTest, InhibitionSuppressesTargets) {
  Open(ConfigFor(recv_.port(), "inhibit_rules:\n"
                               "  - source_matchers: [severity=critical]\n"
                               "    target_matchers: [severity=warning]\n"
                               "    equal: [instance]\n"));
  ASSERT_TRUE(n_->PutAlerts({Firing("Down", "1", "critical"), Firing("Slow", "1", "warning"),
                             Firing("Slow2", "2", "warning")}).ok());
  Advance(30000);
  auto got = recv_.Take();
  std::set<std::string> names;
  for (const auto& g : got) names.insert(g["groupLabels"]["alertname"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"Down", "Slow2"}));
  for (const auto& v : n_->ListAlerts()) {
    if (v.alert.alert.labels.Get("alertname") == "Slow") {
      EXPECT_EQ(v.state, "suppressed");
      EXPECT_EQ(v.inhibited_by.size(), 1u);
    }
  }
}

TEST_F(NotifierTest, GroupByAllAndContinue) {
  Open("route:\n  receiver: a\n  group_wait: 1s\n  routes:\n"
       "    - {matchers: [team=ml], receiver: a, group_by: ['...'], continue: true}\n"
       "    - {matchers: [team=ml], receiver: b}\n"
       "receivers:\n"
       "  - {name: a, webhook_configs: [{url: 'http://127.0.0.1:" + std::to_string(recv_.port()) + "/a'}]}\n"
       "  - {name: b, webhook_configs: [{url: 'http://127.0.0.1:" + std::to_string(recv_.port()) + "/b'}]}\n");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("A", "2")}).ok());
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "3")}).ok());
  Alert ml1 = Firing("M", "1"), ml2 = Firing("M", "2");
  ml1.labels = [&] { model::LabelsBuilder b(ml1.labels); b.Set("team", "ml"); return b.Build(); }();
  ml2.labels = [&] { model::LabelsBuilder b(ml2.labels); b.Set("team", "ml"); return b.Build(); }();
  ASSERT_TRUE(n_->PutAlerts({ml1, ml2}).ok());
  Advance(1000);
  auto got = recv_.Take();
  // Root: one group (no group_by) of 3 alerts; route 1: one group per alert (`...`); route 2: one group of 2.
  size_t a_groups = 0, b_groups = 0, root_alerts = 0;
  for (const auto& g : got) {
    if (g["receiver"] == "b") {
      b_groups++;
      EXPECT_EQ(g["alerts"].size(), 2u);
    } else if (g["groupKey"].get<std::string>().starts_with("{}:")) {
      root_alerts = g["alerts"].size();
    } else {
      a_groups++;
      EXPECT_EQ(g["groupLabels"].size(), 4u);
    }
  }
  EXPECT_EQ(root_alerts, 3u);
  EXPECT_EQ(a_groups, 2u);
  EXPECT_EQ(b_groups, 1u);
  EXPECT_EQ(n_->ListGroups().size(), 4u);
}

TEST_F(NotifierTest, RetriesWithBackoffAndCountsFailures) {
  Open(ConfigFor(recv_.port()));
  recv_.FailNext(2);
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(30000);
  EXPECT_EQ(recv_.Take().size(), 1u);
  auto h = n_->History(10);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_TRUE(h[0].success);
  EXPECT_EQ(h[0].attempt, 3);
  EXPECT_FALSE(h[1].success);
  EXPECT_NE(h[1].error.find("503"), std::string::npos) << h[1].error;
  std::string m;
  metrics_.Render(&m);
  EXPECT_NE(m.find("trainwatch_notifications_total{integration=\"webhook\"} 3"), std::string::npos) << m;
  EXPECT_NE(m.find("trainwatch_notifications_failed_total{integration=\"webhook\"} 2"), std::string::npos) << m;
}

// Issue 19: serve's built-in configuration (no --alertmanager.config.file):
// a receiver without integrations records each notification in the history,
// on Alertmanager's schedule, and sends nothing; resolved ones too.
TEST_F(NotifierTest, BuiltInConfigRecordsNotificationsAndSendsNone) {
  Open(std::string(kDefaultConfigYaml));
  Alert a = Firing("TrainingStalled", "node-1");
  a.labels = model::Labels{{"alertname", "TrainingStalled"}, {"project", "p"}, {"run", "r1"}};
  ASSERT_TRUE(n_->PutAlerts({a}).ok());
  Advance(29000);
  EXPECT_TRUE(n_->History(10).empty());  // group_wait: 30 s, as Alertmanager's default
  Advance(1000);
  auto h = n_->History(10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].receiver, "record-only");
  EXPECT_EQ(h[0].integration, kRecordOnly);
  EXPECT_EQ(h[0].group_key, "{}:{alertname=\"TrainingStalled\", project=\"p\", run=\"r1\"}");
  EXPECT_EQ(h[0].status, "firing");
  EXPECT_TRUE(h[0].success);
  // Nothing new before group_interval (5 m): nothing more recorded.
  Advance(4 * 60000);
  EXPECT_EQ(n_->History(10).size(), 1u);
  a.ends_at_ms = clock_.now;
  ASSERT_TRUE(n_->PutAlerts({a}).ok());
  Advance(2 * 60000);
  h = n_->History(10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].status, "resolved");
  EXPECT_TRUE(recv_.Take().empty());
}

TEST_F(NotifierTest, RestartRepeatsNothingAndKeepsSilences) {
  Open(ConfigFor(recv_.port()));
  Silence s;
  s.matchers = *ParseMatchers("alertname=Silenced");
  s.starts_at_ms = clock_.now;
  s.ends_at_ms = clock_.now + 24 * 3600000LL;
  s.created_by = "me";
  s.comment = "c";
  ASSERT_TRUE(n_->PutSilence(s).ok());
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(30000);
  ASSERT_EQ(recv_.Take().size(), 1u);
  n_.reset();
  Open(ConfigFor(recv_.port()));
  EXPECT_EQ(n_->ListSilences().size(), 1u);
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("Silenced", "1")}).ok());
  Advance(30000);
  Advance(5 * 60000);
  EXPECT_TRUE(recv_.Take().empty());
  // A change is still sent after the restart.
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("A", "2")}).ok());
  Advance(5 * 60000);
  EXPECT_EQ(recv_.Take().size(), 1u);
}

TEST_F(NotifierTest, MuteTimeIntervalHoldsNotifications) {
  // 1700000000000 is Tuesday 2023-11-14 22:13:20 UTC.
  Open("global: {resolve_timeout: 1h}\nroute:\n  receiver: hook\n  group_wait: 1s\n  routes: [{receiver: hook, matchers: [alertname=A], "
       "group_wait: 1s, mute_time_intervals: [late]}]\n"
       "time_intervals: [{name: late, time_intervals: [{times: [{start_time: '22:00', end_time: '23:00'}]}]}]\n"
       "receivers: [{name: hook, webhook_configs: [{url: 'http://127.0.0.1:" + std::to_string(recv_.port()) + "/'}]}]\n");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(1000);
  EXPECT_TRUE(recv_.Take().empty());
  for (int i = 0; i < 10; i++) {
    ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
    Advance(5 * 60000);  // group_interval: 5m
  }
  EXPECT_EQ(recv_.Take().size(), 1u);  // once 23:00 has passed
}

TEST_F(NotifierTest, SlackAndPagerdutyPayloads) {
  std::string base = "http://127.0.0.1:" + std::to_string(recv_.port());
  Open("global: {resolve_timeout: 1h}\nroute: {receiver: r, group_by: [alertname], group_wait: 1s}\nreceivers:\n"
       "  - name: r\n"
       "    slack_configs: [{api_url: '" + base + "/slack', channel: '#ml', text: 'plain text'}]\n"
       "    pagerduty_configs: [{routing_key: rk, url: '" + base + "/pd', severity: critical}]\n");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(1000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 2u);
  const Json& slack = got[0].contains("attachments") ? got[0] : got[1];
  const Json& pd = got[0].contains("attachments") ? got[1] : got[0];
  EXPECT_EQ(slack["channel"], "#ml");
  EXPECT_EQ(slack["username"], "Alertmanager");
  const Json& att = slack["attachments"][0];
  EXPECT_EQ(att["title"], "[FIRING:1] A (1 warning)");
  EXPECT_EQ(att["text"], "plain text");
  EXPECT_EQ(att["color"], "danger");
  EXPECT_EQ(att["title_link"], "http://tw.example:9800/#/alerts?receiver=r");
  EXPECT_EQ(pd["routing_key"], "rk");
  EXPECT_EQ(pd["event_action"], "trigger");
  EXPECT_EQ(pd["dedup_key"].get<std::string>().size(), 64u);
  EXPECT_EQ(pd["payload"]["summary"], "[FIRING:1] A (1 warning)");
  EXPECT_EQ(pd["payload"]["severity"], "critical");
  EXPECT_EQ(pd["payload"]["source"], "Alertmanager");
  EXPECT_EQ(pd["payload"]["custom_details"]["num_firing"], "1");
  EXPECT_NE(pd["payload"]["custom_details"]["firing"].get<std::string>().find(" - instance = 1\n"), std::string::npos);
  std::string dedup = pd["dedup_key"];
  Alert r = Firing("A", "1");
  r.ends_at_ms = clock_.now;
  ASSERT_TRUE(n_->PutAlerts({r}).ok());
  Advance(5 * 60000);
  got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);  // Slack's send_resolved defaults to false, PagerDuty's to true
  EXPECT_EQ(got[0]["event_action"], "resolve");
  EXPECT_EQ(got[0]["dedup_key"], dedup);
  EXPECT_FALSE(got[0].contains("payload"));
}

// A label value that is not UTF-8 (e.g. `run=` from a query parameter) is
// delivered with U+FFFD to every integration instead of dump() throwing
// (type_error 316) on a sender thread and aborting the process; the state
// files and the history are written too.
TEST_F(NotifierTest, InvalidUtf8IsDeliveredAsReplacementCharacter) {
  std::string base = "http://127.0.0.1:" + std::to_string(recv_.port());
  Open("global: {resolve_timeout: 1h}\nroute: {receiver: r, group_by: [alertname, run], group_wait: 1s}\nreceivers:\n"
       "  - name: r\n"
       "    webhook_configs: [{url: '" + base + "/hook'}]\n"
       "    slack_configs: [{api_url: '" + base + "/slack', channel: '#ml'}]\n"
       "    pagerduty_configs: [{routing_key: rk, url: '" + base + "/pd'}]\n");
  const std::string bad = "\xff\xfe";
  const std::string fffd = "\xEF\xBF\xBD";
  Alert a = Firing("A", "1");
  a.labels = model::Labels{{"alertname", "A"}, {"run", bad}};
  a.annotations = model::Labels{{"summary", "x" + bad}};
  ASSERT_TRUE(n_->PutAlerts({a}).ok());
  Silence s;
  s.matchers = *ParseMatchers("alertname=Other");
  s.starts_at_ms = clock_.now;
  s.ends_at_ms = clock_.now + 3600000;
  s.created_by = bad;
  s.comment = "c" + bad;
  ASSERT_TRUE(n_->PutSilence(s).ok());
  Advance(1000);
  auto got = recv_.Take();  // the receiver's strict parser would throw on invalid UTF-8
  ASSERT_EQ(got.size(), 3u);
  for (const Json& p : got) {
    std::string text = p.dump();
    EXPECT_EQ(text.find(bad), std::string::npos) << text;
    if (p.contains("alerts")) {
      EXPECT_EQ(p["alerts"][0]["labels"]["run"], fffd + fffd);
      EXPECT_EQ(p["alerts"][0]["annotations"]["summary"], "x" + fffd + fffd);
      EXPECT_EQ(p["groupLabels"]["run"], fffd + fffd);
    } else {
      EXPECT_NE(text.find(fffd + fffd), std::string::npos) << text;  // Slack's title, PagerDuty's details
    }
  }
  auto h = n_->History(10);
  ASSERT_EQ(h.size(), 3u);
  for (const auto& r : h) EXPECT_TRUE(r.success) << r.integration << ": " << r.error;
  // Both state files were written and read back after a restart.
  n_.reset();
  Open(ConfigFor(recv_.port()));
  auto sil = n_->ListSilences();
  ASSERT_EQ(sil.size(), 1u);
  EXPECT_EQ(sil[0].created_by, fffd + fffd);
  std::string nflog;
  ASSERT_TRUE(file::ReadFile((dir_ / "nflog.json").string(), &nflog).ok());
  EXPECT_EQ(Json::parse(nflog)["entries"].size(), 3u);
}

// A silence is acknowledged only once silences.json is written and fsynced:
// when the state dir is gone (here a regular file stands in its place) the
// silence is refused with an IOError and silences nothing.
TEST_F(NotifierTest, SilenceIsAcknowledgedOnlyOncePersisted) {
  Open(ConfigFor(recv_.port()));
  Silence s;
  s.matchers = *ParseMatchers("alertname=A");
  s.starts_at_ms = clock_.now;
  s.ends_at_ms = clock_.now + 3600000;
  s.created_by = "me";
  s.comment = "maintenance";
  auto kept = n_->PutSilence(s);
  ASSERT_TRUE(kept.ok()) << kept.error().ToString();

  std::filesystem::remove_all(dir_);
  { std::ofstream(dir_.string()) << "not a directory"; }
  Silence s2 = s;
  s2.matchers = *ParseMatchers("alertname=B");
  auto id = n_->PutSilence(s2);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code(), StatusCode::kIOError) << id.error().ToString();
  EXPECT_NE(id.error().message().find("silence not saved"), std::string::npos) << id.error().message();
  ASSERT_EQ(n_->ListSilences().size(), 1u);
  // An update of the existing silence is taken back too, and so is an expiry.
  Silence upd = s;
  upd.id = *kept;
  upd.comment = "changed";
  EXPECT_FALSE(n_->PutSilence(upd).ok());
  EXPECT_EQ(n_->GetSilence(*kept)->comment, "maintenance");
  EXPECT_FALSE(n_->ExpireSilence(*kept).ok());
  EXPECT_EQ(n_->GetSilence(*kept)->State(clock_.now), "active");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1"), Firing("B", "1")}).ok());
  for (const auto& v : n_->ListAlerts()) {
    EXPECT_EQ(v.state, v.alert.alert.labels.Get("alertname") == "A" ? "suppressed" : "active");
  }
  // The delivery still happens (the notification log is only a cache of what was sent).
  Advance(30000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["groupLabels"]["alertname"], "B");

  std::filesystem::remove(dir_);
  std::filesystem::create_directories(dir_);
  id = n_->PutSilence(s2);
  ASSERT_TRUE(id.ok()) << id.error().ToString();
  std::string text;
  ASSERT_TRUE(file::ReadFile((dir_ / "silences.json").string(), &text).ok());
  EXPECT_NE(text.find(*id), std::string::npos);
}

// A state file nested deeper than kMaxJsonDepth is refused at open with its
// path, never parsed into a tree that a later copy would recurse through.
TEST_F(NotifierTest, DeeplyNestedStateFileIsCorruption) {
  std::filesystem::create_directories(dir_);
  { std::ofstream(dir_ / "silences.json") << "{\"silences\": " << std::string(1000000, '[') << "}"; }
  auto cfg = ParseConfig(ConfigFor(recv_.port()));
  ASSERT_TRUE(cfg.ok());
  NotifierOptions o;
  o.dir = dir_.string();
  o.background = false;
  auto n = Notifier::Open(o, *cfg);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error().message().find("silences.json: json: nesting deeper than 128 levels at byte offset"),
            std::string::npos)
      << n.error().message();
}

TEST_F(NotifierTest, SecretFilesAreReadAtEachDelivery) {
  std::filesystem::path secrets = dir_ / "secrets";
  std::filesystem::create_directories(secrets);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(secrets / name) << text;
    return (secrets / name).string();
  };
  std::string base = "http://127.0.0.1:" + std::to_string(recv_.port());
  std::string pw = write("pw", "s3cret\n");
  std::string tok = write("tok", "  tok-1 \n");
  std::string url = write("slack_url", base + "/slack-from-file\n");
  std::string rk = write("rk", "rk-from-file\n");
  Open("global: {resolve_timeout: 1h}\nroute: {receiver: r, group_by: [alertname], group_wait: 1s}\nreceivers:\n"
       "  - name: r\n"
       "    webhook_configs:\n"
       "      - {url: '" + base + "/basic', http_config: {basic_auth: {username: tw, password_file: '" + pw + "'}}}\n"
       "      - {url: '" + base + "/bearer', http_config: {bearer_token_file: '" + tok + "'}}\n"
       "    slack_configs: [{api_url_file: '" + url + "'}]\n"
       "    pagerduty_configs: [{routing_key_file: '" + rk + "', url: '" + base + "/pd'}]\n");
  ASSERT_TRUE(n_->PutAlerts({Firing("A", "1")}).ok());
  Advance(1000);
  auto got = recv_.Take();
  ASSERT_EQ(got.size(), 4u);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(recv_.PathsAndAuth(), (std::vector<P>{{"/basic", "Basic dHc6czNjcmV0"}, {"/bearer", "Bearer tok-1"},
                                                  {"/pd", ""}, {"/slack-from-file", ""}}));
  for (const Json& b : got) {
    if (b.contains("routing_key")) {
      EXPECT_EQ(b["routing_key"], "rk-from-file");
    }
  }
  // A rotated password is used by the next delivery.
  write("pw", "n3w");
  ASSERT_TRUE(n_->PutAlerts({Firing("B", "1")}).ok());
  Advance(1000);
  EXPECT_EQ(recv_.Take().size(), 4u);
  auto seen = recv_.PathsAndAuth();
  EXPECT_NE(std::find(seen.begin(), seen.end(), P{"/basic", "Basic dHc6bjN3"}), seen.end());
  // A missing file fails the attempt with the file named (and is retried:
  // the first failed attempt is enough here; the notifier's stop ends the retries).
  std::filesystem::remove(secrets / "tok");
  ASSERT_TRUE(n_->PutAlerts({Firing("C", "1")}).ok());
  clock_.now += 1000;
  n_->Tick();
  bool named = false;
  for (int i = 0; i < 500 && !named; i++) {
    for (const auto& h : n_->History(100)) {
      if (!h.success && h.error.find("unable to read authorization credentials file") != std::string::npos) named = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(named);
}

TEST(NotifyIntegrationsTest, CramMd5AsRfc2195) {
  // RFC 2195 section 2's example.
  EXPECT_EQ(CramMd5Response("tim", "tanstaaftanstaaf", "<1896.697170952@postoffice.reston.mci.net>"),
            "tim b913a602c7eda7a495b4e6e7334d3890");
}

TEST(NotifyIntegrationsTest, DefaultSubjectAndEmail) {
  StoredAlert a;
  a.alert.labels = model::Labels{{"alertname", "HighTemp"}, {"gpu", "0"}, {"severity", "critical"}};
  a.alert.annotations = model::Labels{{"summary", "GPU 0 is hot"}};
  a.alert.starts_at_ms = 1000;
  StoredAlert b = a;
  b.alert.labels = model::Labels{{"alertname", "HighTemp"}, {"gpu", "1"}, {"severity", "critical"}};
  auto d = MakeNotificationData("mail", "{}:{alertname=\"HighTemp\"}", model::Labels{{"alertname", "HighTemp"}},
                                {a, b}, "http://tw", 5000);
  auto templates = Templates::Parse({});
  ASSERT_TRUE(templates.ok()) << templates.error().ToString();
  EXPECT_EQ(*(*templates)->ExecuteText("{{ template \"__subject\" . }}", d), "[FIRING:2] HighTemp (critical)");
  EmailConfig c;
  c.to = "x@y";
  c.from = "am@y";
  c.html = "{{ template \"email.default.html\" . }}";
  c.text = "{{ .CommonAnnotations.summary }} / {{ .Status }}";
  c.headers["X-Team"] = "{{ .GroupLabels.alertname }}";
  auto m = BuildEmailMessage(c, d, SendOptions{10000, templates->get()});
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_NE(m->find("Subject: [FIRING:2] HighTemp (critical)\r\n"), std::string::npos) << *m;
  EXPECT_NE(m->find("X-Team: HighTemp\r\n"), std::string::npos) << *m;
  EXPECT_NE(m->find("GPU 0 is hot / firing"), std::string::npos) << *m;  // the common annotation
  EXPECT_NE(m->find("gpu = 1<br />"), std::string::npos) << *m;
}

}  // namespace
}  // namespace trainwatch::notify
