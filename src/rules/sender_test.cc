// Forwarding to external Alertmanagers: config parsing, the v2 payload, and
// delivery to a real HTTP server on loopback (queue, relabeling, failures).

#include "rules/sender.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace trainwatch::rules {
namespace {

TEST(AlertingConfigTest, ParsesAlertmanagersAndRelabeling) {
  YAML::Node n = YAML::Load(R"(
alertmanagers:
  - scheme: http
    path_prefix: /am
    timeout: 3s
    api_version: v2
    static_configs:
      - targets: ["127.0.0.1:9093", "127.0.0.1:9094"]
alert_relabel_configs:
  - action: labeldrop
    regex: replica
)");
  auto c = ParseAlertingConfig(n);
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(c->alertmanagers.size(), 2u);
  EXPECT_EQ(c->alertmanagers[1].Url(), "http://127.0.0.1:9094/am/api/v2/alerts");
  EXPECT_EQ(c->alertmanagers[0].timeout_ms, 3000);
  EXPECT_EQ(c->relabel_configs.size(), 1u);
  EXPECT_TRUE(ParseAlertingConfig(YAML::Node()).ok());
}

TEST(AlertingConfigTest, ErrorsNameTheField) {
  auto f = [](const char* yaml, const char* want) {
    auto c = ParseAlertingConfig(YAML::Load(yaml));
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_EQ(c.error().message(), want);
  };
  f("alertmanagers: [{api_version: v1}]",
    "line 1: alerting.alertmanagers[0].api_version: unsupported \"v1\" (Alertmanager 0.25 speaks v2)");
  f("alertmanagers: [{timeout: soon}]", "line 1: alerting.alertmanagers[0].timeout: invalid duration \"soon\"");
  f("alertmanagers: [{scheme: ftp}]", "line 1: alerting.alertmanagers[0].scheme: unsupported \"ftp\"");
  f("foo: 1", "line 1: alerting: unknown field \"foo\"");
  f("alertmanagers: [{basic_auth: {username: u, password: p, password_file: /f}}]",
    "line 1: alerting.alertmanagers[0].basic_auth: at most one of basic_auth password & password_file must be configured");
  f("alertmanagers: [{bearer_token: t, authorization: {credentials: c}}]",
    "line 1: alerting.alertmanagers[0]: authorization is not compatible with bearer_token & bearer_token_file");
  f("alertmanagers: [{basic_auth: {username: u}, bearer_token: t}]",
    "line 1: alerting.alertmanagers[0]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured");
  f("alertmanagers: [{tls_config: {cert_file: /c}}]",
    "line 1: alerting.alertmanagers[0].tls_config: client cert file and client key file must both be specified");
  f("alertmanagers: [{tls_config: {bogus: 1}}]", "line 1: alerting.alertmanagers[0].tls_config: unknown field \"bogus\"");
  f("alertmanagers: [{oauth2: {client_id: x}}]", "line 1: alerting.alertmanagers[0]: unsupported field \"oauth2\"");
}

TEST(AlertsToJsonTest, WritesAlertmanagerV2PostableAlerts) {
  OutgoingAlert a;
  a.labels = model::Labels{{"alertname", "Down"}, {"job", "a\"b"}};
  a.annotations = model::Labels{{"summary", "x"}};
  a.starts_at_ms = 1'700'000'000'123;
  a.ends_at_ms = 1'700'000'240'000;
  a.generator_url = "http://h/graph";
  EXPECT_EQ(AlertsToJson({a}),
            "[{\"labels\":{\"alertname\":\"Down\",\"job\":\"a\\\"b\"},\"annotations\":{\"summary\":\"x\"},"
            "\"startsAt\":\"2023-11-14T22:13:20.123Z\",\"endsAt\":\"2023-11-14T22:17:20.000Z\","
            "\"generatorURL\":\"http://h/graph\"}]");
}

class FakeAlertmanager {
 public:
  FakeAlertmanager() {
    srv_.Post("/api/v2/alerts", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard l(mu_);
      bodies_.push_back(req.body);
      auth_.push_back(req.get_header_value("Authorization"));
      res.status = 200;
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
  }
  ~FakeAlertmanager() {
    srv_.stop();
    thread_.join();
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> bodies() {
    std::lock_guard l(mu_);
    return bodies_;
  }
  std::vector<std::string> auth() {
    std::lock_guard l(mu_);
    return auth_;
  }
  bool WaitFor(size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (bodies().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_, auth_;
};

AlertingConfig ConfigFor(const std::string& target, const char* extra = "") {
  auto c = ParseAlertingConfig(YAML::Load("alertmanagers: [{timeout: 2s, static_configs: [{targets: ['" + target +
                                          "']}]}]\n" + extra));
  EXPECT_TRUE(c.ok());
  return *c;
}

TEST(AlertmanagerNotifierTest, PostsRelabeledAlerts) {
  FakeAlertmanager am;
  common::metrics::Registry registry;
  AlertmanagerNotifier n(AlertmanagerNotifier::kDefaultQueueCapacity, &registry);
  n.ApplyConfig(ConfigFor(am.target(),
                          "alert_relabel_configs: [{action: labeldrop, regex: replica}, "
                          "{source_labels: [severity], regex: none, action: drop}]"));
  OutgoingAlert a;
  a.labels = model::Labels{{"alertname", "A"}, {"replica", "1"}};
  OutgoingAlert dropped;
  dropped.labels = model::Labels{{"alertname", "B"}, {"severity", "none"}};
  n.Send({a, dropped});
  ASSERT_TRUE(am.WaitFor(1));
  EXPECT_EQ(am.bodies()[0], "[{\"labels\":{\"alertname\":\"A\"},\"annotations\":{},\"generatorURL\":\"\"}]");
  n.Stop();
  std::string m;
  registry.Render(&m);
  EXPECT_NE(m.find("trainwatch_alertmanager_alerts_sent_total{alertmanager=\"http://" + am.target() +
                   "/api/v2/alerts\"} 1"),
            std::string::npos)
      << m;
}

TEST(AlertmanagerNotifierTest, SendsTheConfiguredAuthorization) {
  FakeAlertmanager am;
  std::string tok = ::testing::TempDir() + "sender_test_token";
  {
    std::FILE* f = std::fopen(tok.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("  tok-1\n", f);
    std::fclose(f);
  }
  auto send = [&](const std::string& http) {
    AlertmanagerNotifier n;
    auto c = ParseAlertingConfig(YAML::Load("alertmanagers: [{static_configs: [{targets: ['" + am.target() + "']}], " +
                                            http + "}]"));
    ASSERT_TRUE(c.ok()) << c.error().message();
    n.ApplyConfig(*c);
    OutgoingAlert a;
    a.labels = model::Labels{{"alertname", "A"}};
    n.Send({a});
    n.Stop();
  };
  send("basic_auth: {username: tw, password: s3cret}");
  send("authorization: {type: Token, credentials_file: '" + tok + "'}");
  send("bearer_token: abc");
  ASSERT_TRUE(am.WaitFor(3));
  EXPECT_EQ(am.auth(), (std::vector<std::string>{"Basic dHc6czNjcmV0", "Token tok-1", "Bearer abc"}));
  std::remove(tok.c_str());
}

TEST(AlertmanagerNotifierTest, FullQueueDropsTheOldestAndCountsThem) {
  // Nothing listens on this port: every send fails, counted as errors.
  common::metrics::Registry registry;
  AlertmanagerNotifier n(3, &registry);
  n.ApplyConfig(ConfigFor("127.0.0.1:1"));
  std::vector<OutgoingAlert> many(10);
  for (size_t i = 0; i < many.size(); ++i) many[i].labels = model::Labels{{"alertname", "A" + std::to_string(i)}};
  n.Send(many);
  n.Stop();
  std::string m;
  registry.Render(&m);
  EXPECT_NE(m.find("trainwatch_alertmanager_alerts_dropped_total 7"), std::string::npos) << m;
  EXPECT_NE(m.find("trainwatch_alertmanager_alerts_errors_total{alertmanager=\"http://127.0.0.1:1/api/v2/alerts\"} 3"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace trainwatch::rules
