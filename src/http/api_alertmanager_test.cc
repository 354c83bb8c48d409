// Hostile inputs to the JSON endpoints (issue 25): deeply nested bodies on
// the Alertmanager and runs APIs, values that are not UTF-8, secrets in
// /api/v2/status, silences that can't be persisted. Real notifier, run
// store and TSDB behind the real Api.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "http/api.h"
#include "notify/notifier.h"
#include "runs/store.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

using nlohmann::json;

constexpr const char* kAmConfig = R"(
global:
  resolve_timeout: 1h
  smtp_auth_password: S1-smtp-password
  slack_api_url: 'https://hooks.slack.com/services/S2-global-slack'
route: {receiver: hook, group_by: [alertname], group_wait: 30s}
receivers:
  - name: hook
    webhook_configs:
      - url: 'http://127.0.0.1:1/S3-webhook-token'
        http_config: {authorization: {credentials: S4-credentials}}
  - name: pager
    pagerduty_configs: [{routing_key: S5-routing-key}]
    slack_configs: [{api_url: 'https://hooks.slack.com/services/S6-slack', channel: '#ml-alerts'}]
    email_configs: [{to: oncall@example.org, smarthost: 'smtp.example.org:25', from: am@example.org,
                     auth_username: mail-user, auth_password: S7-email-password}]
)";

class AlertmanagerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_am_api_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto cfg = notify::ParseConfig(kAmConfig);
    ASSERT_TRUE(cfg.ok()) << cfg.error().ToString();
    notify::NotifierOptions o;
    o.dir = dir_ + "/alertmanager";
    o.background = false;
    o.sender_threads = 1;
    auto n = notify::Notifier::Open(o, *cfg);
    ASSERT_TRUE(n.ok()) << n.error().ToString();
    notifier_ = std::move(*n);
    runs::RunStoreOptions ro;
    ro.path = dir_ + "/runs.db";
    ro.heartbeat_timeout_ms = 3600000;
    auto rs = runs::RunStore::Open(ro, db_.get(), db_.get());
    ASSERT_TRUE(rs.ok()) << rs.error().ToString();
    runs_ = std::move(*rs);
    ApiDeps deps{db_.get(), nullptr, BuildInfo{"0.1.0", "abc", "main", "me", "today", "gcc"}};
    deps.notifier = notifier_.get();
    deps.runs = runs_.get();
    api_ = std::make_unique<Api>(std::move(deps));
  }
  void TearDown() override {
    api_.reset();
    runs_.reset();
    notifier_.reset();
    std::filesystem::remove_all(dir_);
  }
  Response Do(std::string method, std::string path, std::string_view body = {}) {
    Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.body = body;
    r.receive_time_ms = 1700000000000;
    return api_->Handle(r);
  }
  static std::string Silence(const std::string& name) {
    return R"({"matchers":[{"name":"alertname","value":")" + name +
           R"(","isRegex":false}],"startsAt":"2020-01-01T00:00:00Z","endsAt":"2999-01-01T00:00:00Z",)"
           R"("createdBy":"me","comment":"maintenance"})";
  }

  std::string dir_;
  tsdb::testing::TempDB db_;
  std::unique_ptr<notify::Notifier> notifier_;
  std::unique_ptr<runs::RunStore> runs_;
  std::unique_ptr<Api> api_;
};

std::string Nested(size_t n, const std::string& open) {
  std::string s;
  s.reserve(n * open.size());
  for (size_t i = 0; i < n; i++) s += open;
  return s;
}

// A million levels of '[' or '{' answer 400 naming the depth limit, on every
// endpoint that parses a JSON body: no stack overflow (run under ASan).
TEST_F(AlertmanagerApiTest, DeeplyNestedBodiesAre400) {
  auto rejected = [&](const std::string& path, const std::string& body) {
    Response r = Do("POST", path, body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 200);
    EXPECT_NE(r.body.find("nesting deeper than 128 levels at byte offset"), std::string::npos)
        << path << ": " << r.body.substr(0, 200);
  };
  const std::string arrays = Nested(1000000, "[");
  const std::string objects = Nested(1000000, "{\"a\":");
  for (const std::string* deep : {&arrays, &objects}) {
    rejected("/api/v2/alerts", *deep);
    rejected("/api/v2/alerts", R"([{"labels":{"alertname":"A"},"annotations":)" + *deep);
    rejected("/api/v2/silences", *deep);
    rejected("/api/v2/silences", R"({"comment":"c","matchers":)" + *deep);
    rejected("/api/v1/runs", *deep);
    rejected("/api/v1/runs", R"({"id":"r1","project":"p","name":"n","config":)" + *deep);
  }
  ASSERT_EQ(Do("POST", "/api/v1/runs", R"({"id":"r1","project":"p","name":"n"})").status, 200);
  for (const std::string* deep : {&arrays, &objects}) {
    rejected("/api/v1/runs/r1/batches", R"({"batch_id":"b","points":)" + *deep);
    rejected("/api/v1/runs/r1/finish", R"({"status":"finished","summary":)" + *deep);
    rejected("/api/v1/runs/r1/alerts", *deep);
  }
  EXPECT_TRUE(notifier_->ListAlerts().empty());
  EXPECT_TRUE(notifier_->ListSilences().empty());
  // Real payloads nest far less than the limit and still pass.
  std::string config = Nested(100, "{\"a\":") + "1" + std::string(100, '}');
  Response ok = Do("POST", "/api/v1/runs", R"({"id":"r2","project":"p","name":"n","config":)" + config + "}");
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 200);
  ok = Do("GET", "/api/v1/runs/r2");
  ASSERT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find(Nested(100, "{\"a\":") + "1"), std::string::npos);
}

// Values that are not UTF-8 reach the notifier from rule alerts (labels from
// query parameters); every Alertmanager API answer carries them as U+FFFD.
TEST_F(AlertmanagerApiTest, InvalidUtf8IsAnsweredAsReplacementCharacter) {
  notify::Alert a;
  a.labels = model::Labels{{"alertname", "A"}, {"run", "\xff\xfe"}};
  a.annotations = model::Labels{{"summary", "bad \xc3"}};
  ASSERT_TRUE(notifier_->PutAlerts({a}).ok());
  const std::string fffd = "\xEF\xBF\xBD";
  for (const char* path : {"/api/v2/alerts", "/api/v2/alerts/groups"}) {
    Response r = Do("GET", path);
    ASSERT_EQ(r.status, 200) << path;
    json j = json::parse(r.body);  // strict: throws on invalid UTF-8
    const json& alert = std::string(path) == "/api/v2/alerts" ? j[0] : j[0]["alerts"][0];
    EXPECT_EQ(alert["labels"]["run"], fffd + fffd) << r.body;
    EXPECT_EQ(alert["annotations"]["summary"], "bad " + fffd) << r.body;
  }
}

// GET /api/v2/status shows the config with every secret as "<secret>", as
// Alertmanager 0.25 does; the other fields are still there.
TEST_F(AlertmanagerApiTest, StatusRedactsSecrets) {
  Response r = Do("GET", "/api/v2/status");
  ASSERT_EQ(r.status, 200);
  for (int i = 1; i <= 7; i++) {
    std::string secret = "S" + std::to_string(i) + "-";
    EXPECT_EQ(r.body.find(secret), std::string::npos) << secret << " in " << r.body;
  }
  json j = json::parse(r.body);
  std::string original = j["config"]["original"];
  for (const char* kept : {"#ml-alerts", "oncall@example.org", "smtp.example.org:25", "mail-user", "pager", "1h"}) {
    EXPECT_NE(original.find(kept), std::string::npos) << kept << " missing in " << original;
  }
  EXPECT_NE(original.find("<secret>"), std::string::npos) << original;
  EXPECT_EQ(j["cluster"]["status"], "disabled");
}

// A silence is acknowledged only once silences.json is written and fsynced.
// The state dir replaced by a regular file makes the write fail (root
// ignores permissions): 500, and the silence is not active.
TEST_F(AlertmanagerApiTest, SilenceThatCannotBePersistedIs500AndInactive) {
  Response ok = Do("POST", "/api/v2/silences", Silence("Kept"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  std::string state = dir_ + "/alertmanager";
  std::filesystem::remove_all(state);
  { std::ofstream(state) << "not a directory"; }

  Response r = Do("POST", "/api/v2/silences", Silence("A"));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("silence not saved"), std::string::npos) << r.body;
  ASSERT_EQ(notifier_->ListSilences().size(), 1u);
  ASSERT_TRUE(notifier_->PutAlerts({notify::Alert{model::Labels{{"alertname", "A"}}, {}, 0, 0, ""}}).ok());
  Response alerts = Do("GET", "/api/v2/alerts");
  ASSERT_EQ(alerts.status, 200);
  json j = json::parse(alerts.body);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["status"]["state"], "active");
  EXPECT_TRUE(j[0]["status"]["silencedBy"].empty());
  // Expiring is refused the same way and leaves the silence in force.
  std::string kept_id = json::parse(ok.body)["silenceID"];
  r = Do("DELETE", "/api/v2/silence/" + kept_id);
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(json::parse(Do("GET", "/api/v2/silence/" + kept_id).body)["status"]["state"], "active");

  std::filesystem::remove(state);
  std::filesystem::create_directories(state);
  r = Do("POST", "/api/v2/silences", Silence("A"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(std::filesystem::exists(state + "/silences.json"));
}

}  // namespace
}  // namespace trainwatch::http
