#include "notify/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace trainwatch::notify {
namespace {

constexpr const char* kConfig = R"(
global:
  resolve_timeout: 2m
  smtp_smarthost: 'localhost:25'
  smtp_from: 'am@example.org'
  smtp_require_tls: false
route:
  receiver: default
  group_by: ['alertname', 'cluster']
  group_wait: 10s
  group_interval: 1m
  repeat_interval: 3h
  routes:
    - matchers: ['severity="critical"', 'team=~"ml|infra"']
      receiver: pager
      continue: true
      routes:
        - match: {env: prod}
          receiver: prod-pager
          group_by: ['...']
    - match_re: {service: '^(db|cache)$'}
      receiver: team-db
      group_wait: 1s
      mute_time_intervals: [nights]
    - matchers: ['severity="critical"']
      receiver: mail
inhibit_rules:
  - source_matchers: ['severity="critical"']
    target_matchers: ['severity="warning"']
    equal: ['alertname']
  - source_match: {alertname: NodeDown}
    target_match_re: {alertname: '.+'}
    equal: [instance]
time_intervals:
  - name: nights
    time_intervals:
      - times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}]
        weekdays: ['monday:friday']
        location: 'UTC'
receivers:
  - name: default
    webhook_configs:
      - url: 'http://127.0.0.1:5001/hook'
        max_alerts: 5
        http_config: {authorization: {credentials: secret}}
  - name: pager
    pagerduty_configs: [{routing_key: abc}]
  - name: prod-pager
    slack_configs: [{api_url: 'http://127.0.0.1:1/slack', channel: '#alerts'}]
  - name: team-db
    webhook_configs: [{url: 'http://127.0.0.1:5001/db', send_resolved: false, http_config: {basic_auth: {username: u, password: p}}}]
  - name: mail
    email_configs: [{to: 'oncall@example.org', headers: {subject: 'Alert {{ .GroupLabels.alertname }}'}}]
)";

TEST(NotifyConfigTest, LoadsAlertmanagerYaml) {
  auto c = ParseConfig(kConfig);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  const Config& cfg = **c;
  EXPECT_EQ(cfg.global.resolve_timeout_ms, 120000);
  EXPECT_EQ(cfg.route.key, "{}");
  EXPECT_EQ(cfg.route.routes[0].key, "{}/{severity=\"critical\",team=~\"ml|infra\"}");
  EXPECT_EQ(cfg.route.routes[0].routes[0].key, "{}/{severity=\"critical\",team=~\"ml|infra\"}/{env=\"prod\"}");
  EXPECT_TRUE(cfg.route.routes[0].routes[0].group_by_all);
  EXPECT_EQ(cfg.route.routes[1].group_wait_ms, 1000);
  EXPECT_EQ(cfg.route.routes[1].group_interval_ms, 60000);  // inherited
  EXPECT_EQ(cfg.receivers[0].webhook[0].max_alerts, 5u);
  EXPECT_EQ(cfg.receivers[0].webhook[0].http.auth_type, "Bearer");
  EXPECT_EQ(cfg.receivers[3].webhook[0].http.basic_user, "u");
  EXPECT_FALSE(cfg.receivers[3].webhook[0].send_resolved);
  EXPECT_EQ(cfg.receivers[4].email[0].smarthost, "localhost:25");
  EXPECT_EQ(cfg.receivers[4].email[0].headers.at("Subject"), "Alert {{ .GroupLabels.alertname }}");
  EXPECT_FALSE(cfg.receivers[4].email[0].require_tls);
  EXPECT_EQ(cfg.inhibit_rules.size(), 2u);
  EXPECT_EQ(cfg.time_intervals.at("nights").size(), 1u);
}

TEST(NotifyConfigTest, RoutingFollowsContinue) {
  auto c = ParseConfig(kConfig);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  auto receivers = [&](model::Labels ls) {
    std::vector<std::string> out;
    for (const Route* r : MatchRoutes((*c)->route, ls)) out.push_back(r->receiver);
    return out;
  };
  EXPECT_EQ(receivers({{"alertname", "X"}}), std::vector<std::string>{"default"});
  // continue: true on the first route lets the third one match too.
  EXPECT_EQ(receivers({{"severity", "critical"}, {"team", "ml"}}), (std::vector<std::string>{"pager", "mail"}));
  EXPECT_EQ(receivers({{"severity", "critical"}, {"team", "ml"}, {"env", "prod"}}),
            (std::vector<std::string>{"prod-pager", "mail"}));
  EXPECT_EQ(receivers({{"service", "db"}}), std::vector<std::string>{"team-db"});
  EXPECT_EQ(receivers({{"service", "dbx"}}), std::vector<std::string>{"default"});
  EXPECT_EQ(receivers({{"severity", "critical"}}), std::vector<std::string>{"mail"});
}

TEST(NotifyConfigTest, ErrorsNameFieldAndLine) {
  auto c = ParseConfig("route:\n  receiver: a\n  group_wait: 5x\nreceivers: [{name: a}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("line 3"), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find("route.group_wait"), std::string::npos) << c.error().message();

  c = ParseConfig("route:\n  receiver: nope\nreceivers: [{name: a}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("undefined receiver \"nope\""), std::string::npos) << c.error().message();

  c = ParseConfig("route: {receiver: a}\nreceivers:\n  - name: a\n    webhook_configs: [{url: 'x', bogus: 1}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("line 4"), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find("bogus"), std::string::npos) << c.error().message();

  c = ParseConfig("route: {receiver: a, routes: [{matchers: ['foo=~\"(\"'] }]}\nreceivers: [{name: a}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("route.routes[0].matchers[0]"), std::string::npos) << c.error().message();

  c = ParseConfig("route: {receiver: a, routes: [{receiver: a, mute_time_intervals: [x]}]}\nreceivers: [{name: a}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("undefined time interval \"x\""), std::string::npos) << c.error().message();

  c = ParseConfig("route: {receiver: a}\nreceivers: [{name: a, email_configs: [{to: x@y}]}]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("smarthost"), std::string::npos) << c.error().message();

  c = ParseConfig("route: {receiver: a\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("yaml"), std::string::npos) << c.error().message();
}

TEST(NotifyConfigTest, SecretFileKeysAsAlertmanager025) {
  auto err = [](const std::string& receiver_or_global) {
    auto c = ParseConfig("route: {receiver: a}\n" + receiver_or_global + "\n");
    return c.ok() ? std::string("ok") : c.error().message();
  };
  const std::string hook = "receivers: [{name: a, webhook_configs: [{url: 'http://x', http_config: ";
  EXPECT_EQ(err(hook + "{basic_auth: {username: u, password_file: /p}}}]}]"), "ok");
  EXPECT_EQ(err(hook + "{bearer_token_file: /p}}]}]"), "ok");
  EXPECT_EQ(err(hook + "{authorization: {credentials_file: /p}}}]}]"), "ok");
  EXPECT_EQ(err(hook + "{basic_auth: {username: u, password: x, password_file: /p}}}]}]"),
            "line 2: receivers[0].webhook_configs[0].http_config.basic_auth: at most one of basic_auth password & "
            "password_file must be configured");
  EXPECT_EQ(err(hook + "{bearer_token: t, bearer_token_file: /p}}]}]"),
            "line 2: receivers[0].webhook_configs[0].http_config: at most one of bearer_token & bearer_token_file "
            "must be configured");
  EXPECT_EQ(err(hook + "{bearer_token_file: /p, authorization: {credentials: c}}}]}]"),
            "line 2: receivers[0].webhook_configs[0].http_config: authorization is not compatible with bearer_token & "
            "bearer_token_file");
  EXPECT_EQ(err(hook + "{basic_auth: {username: u}, bearer_token_file: /p}}]}]"),
            "line 2: receivers[0].webhook_configs[0].http_config: at most one of basic_auth, oauth2, bearer_token & "
            "bearer_token_file must be configured");
  EXPECT_EQ(err(hook + "{authorization: {type: Basic, credentials: c}}}]}]"),
            "line 2: receivers[0].webhook_configs[0].http_config.authorization: authorization type cannot be set to "
            "\"basic\", use \"basic_auth\" instead");
  // 0.25 has no webhook url_file.
  EXPECT_EQ(err("receivers: [{name: a, webhook_configs: [{url_file: /p}]}]"),
            "line 2: receivers[0].webhook_configs[0]: unknown field \"url_file\"");
  EXPECT_EQ(err("receivers: [{name: a, slack_configs: [{api_url_file: /p}]}]"), "ok");
  EXPECT_EQ(err("receivers: [{name: a, slack_configs: [{api_url: 'http://x', api_url_file: /p}]}]"),
            "line 2: receivers[0].slack_configs[0]: at most one of api_url & api_url_file must be configured");
  EXPECT_EQ(err("global: {slack_api_url_file: /p}\nreceivers: [{name: a, slack_configs: [{channel: x}]}]"), "ok");
  EXPECT_EQ(err("global: {slack_api_url: 'http://x', slack_api_url_file: /p}\nreceivers: [{name: a}]"),
            "line 2: global: at most one of slack_api_url & slack_api_url_file must be configured");
  EXPECT_EQ(err("receivers: [{name: a, slack_configs: [{channel: x}]}]"),
            "line 2: receivers[0].slack_configs[0]: no global Slack API URL set either inline or in a file");
  EXPECT_EQ(err("receivers: [{name: a, pagerduty_configs: [{routing_key_file: /p}]}]"), "ok");
  EXPECT_EQ(err("receivers: [{name: a, pagerduty_configs: [{routing_key: k, routing_key_file: /p}]}]"),
            "line 2: receivers[0].pagerduty_configs[0]: at most one of routing_key & routing_key_file must be configured");
  EXPECT_EQ(err("receivers: [{name: a, email_configs: [{to: a@b, from: c@d, smarthost: 'h:25', auth_password_file: /p}]}]"),
            "ok");
  EXPECT_EQ(err("global: {smtp_auth_password: x, smtp_auth_password_file: /p}\nreceivers: [{name: a}]"),
            "line 2: global: at most one of smtp_auth_password & smtp_auth_password_file must be configured");
  EXPECT_EQ(err("receivers: [{name: a, email_configs: [{to: a@b, from: c@d, smarthost: 'h:25', tls_config: {cert_file: /c}}]}]"),
            "line 2: receivers[0].email_configs[0].tls_config: exactly one of cert_file and key_file is set; both are "
            "needed for a client certificate");
  auto c = ParseConfig("global: {smtp_auth_password_file: /p, smtp_smarthost: 'h:25', smtp_from: a@b}\n"
                       "route: {receiver: a}\nreceivers: [{name: a, email_configs: [{to: x@y}]}]\n");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ((*c)->receivers[0].email[0].auth_password_file, "/p");
}

TEST(NotifyConfigTest, HttpConfigFilesAreRelativeToTheConfigFile) {
  auto dir = std::filesystem::temp_directory_path() / ("notify_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "am.yml") << "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{url: 'http://x', "
                                   "http_config: {basic_auth: {username: u, password_file: pw}, tls_config: "
                                   "{ca_file: /etc/ca.pem, server_name: am.internal}}}], slack_configs: [{api_url_file: url}]}]\n";
  auto c = LoadConfigFile((dir / "am.yml").string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ((*c)->receivers[0].webhook[0].http.basic_password_file, (dir / "pw").string());
  EXPECT_EQ((*c)->receivers[0].webhook[0].http.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ((*c)->receivers[0].webhook[0].http.tls.server_name, "am.internal");  // was accepted, then dropped
  EXPECT_EQ((*c)->receivers[0].slack[0].api_url_file, "url");  // as Alertmanager: only http_config files move
}

// Alertmanager's `if c.HTTPConfig == nil { c.HTTPConfig = global.HTTPConfig }`:
// a receiver's http_config replaces the global one whole, so a receiver may
// use a bearer token where the global one has basic auth.
TEST(NotifyConfigTest, ReceiverHttpConfigReplacesTheGlobalOne) {
  auto c = ParseConfig(
      "global: {http_config: {basic_auth: {username: g, password: gp}, follow_redirects: false}}\n"
      "route: {receiver: a}\n"
      "receivers: [{name: a, webhook_configs: [{url: 'http://x', http_config: {bearer_token: t}}, {url: 'http://y'}]}]\n");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  const auto& own = (*c)->receivers[0].webhook[0].http;
  EXPECT_FALSE(own.has_basic_auth);
  EXPECT_EQ(own.credentials, "t");
  EXPECT_TRUE(own.follow_redirects);
  const auto& inherited = (*c)->receivers[0].webhook[1].http;
  EXPECT_TRUE(inherited.has_basic_auth);
  EXPECT_EQ(inherited.basic_user, "g");
  EXPECT_FALSE(inherited.follow_redirects);
  EXPECT_EQ(ParseConfig("route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{url: 'http://x', "
                        "http_config: {oauth2: {client_id: c}}}]}]\n")
                .error()
                .message(),
            "line 2: receivers[0].webhook_configs[0].http_config.oauth2: not supported by trainwatch; remove it");
}

TEST(NotifyConfigTest, ParsesMatcherSyntax) {
  auto ms = ParseMatchers("{alertname=\"Foo\", env!=prod, team !~ \"a|b\", msg=\"a, \\\"b\\\"\"}");
  ASSERT_TRUE(ms.ok()) << ms.error().ToString();
  ASSERT_EQ(ms->size(), 4u);
  EXPECT_EQ((*ms)[1].type(), model::MatchType::kNotEqual);
  EXPECT_EQ((*ms)[1].value(), "prod");
  EXPECT_EQ((*ms)[2].type(), model::MatchType::kNotRegex);
  EXPECT_EQ((*ms)[3].value(), "a, \"b\"");
  EXPECT_TRUE(MatchAll(*ms, model::Labels{{"alertname", "Foo"}, {"env", "dev"}, {"team", "c"}, {"msg", "a, \"b\""}}));
  EXPECT_FALSE(MatchAll(*ms, model::Labels{{"alertname", "Foo"}, {"env", "prod"}, {"team", "c"}, {"msg", "a, \"b\""}}));
  EXPECT_FALSE(ParseMatchers("foo").ok());
  EXPECT_FALSE(ParseMatchers("foo=\"bar").ok());
}

TEST(NotifyConfigTest, TimeIntervals) {
  auto c = ParseConfig(R"(
route: {receiver: a}
receivers: [{name: a}]
time_intervals:
  - name: weekday-nights
    time_intervals:
      - times: [{start_time: '22:00', end_time: '24:00'}]
        weekdays: ['monday:friday']
  - name: last-days
    time_intervals: [{days_of_month: ['-2:-1'], months: ['february'], years: ['2024']}]
  - name: berlin-morning
    time_intervals: [{times: [{start_time: '08:00', end_time: '09:00'}], location: 'Europe/Berlin'}]
)");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  const auto& nights = (*c)->time_intervals.at("weekday-nights")[0];
  // 2024-01-01 was a Monday.
  int64_t mon = 1704067200000;
  EXPECT_FALSE(nights.Contains(mon + 21 * 3600000LL));
  EXPECT_TRUE(nights.Contains(mon + 22 * 3600000LL + 60000));
  EXPECT_FALSE(nights.Contains(mon + 5 * 86400000LL + 23 * 3600000LL));  // Saturday
  const auto& last = (*c)->time_intervals.at("last-days")[0];
  int64_t feb28_2024 = 1709078400000, feb27_2024 = feb28_2024 - 86400000;
  EXPECT_TRUE(last.Contains(feb28_2024 + 1000));   // leap year: 28th is the second to last day
  EXPECT_FALSE(last.Contains(feb27_2024 + 1000));
  const auto& berlin = (*c)->time_intervals.at("berlin-morning")[0];
  int64_t jan1_0730utc = mon + 7 * 3600000LL + 30 * 60000;  // 08:30 in Berlin (CET, +1)
  EXPECT_TRUE(berlin.Contains(jan1_0730utc));
  int64_t jul1_0630utc = 1719792000000 + 6 * 3600000LL + 30 * 60000;  // 08:30 CEST (+2)
  EXPECT_TRUE(berlin.Contains(jul1_0630utc));
  EXPECT_FALSE(berlin.Contains(jul1_0630utc + 3600000));

  auto bad = ParseConfig("route: {receiver: a}\nreceivers: [{name: a}]\ntime_intervals: [{name: x, time_intervals: [{location: Mars/Base}]}]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("location"), std::string::npos) << bad.error().message();
}

// Every secret a trainwatch alertmanager.yml can hold; GET /api/v2/status
// shows the config through RedactSecrets.
constexpr const char* kSecretConfig = R"(
global:
  smtp_smarthost: 'smtp.example.org:587'
  smtp_from: 'am@example.org'
  smtp_auth_username: am-user
  smtp_auth_password: S1-smtp-password
  smtp_auth_secret: S2-smtp-secret
  slack_api_url: 'https://hooks.slack.com/services/S3-global-slack'
  http_config:
    proxy_url: 'http://proxy-user:S5-proxy-pass@proxy.example.org:3128'
route: {receiver: hook}
receivers:
  - name: hook
    webhook_configs:
      - url: 'https://hooks.example.org/S6-webhook-token'
        http_config: {authorization: {type: Bearer, credentials: S7-credentials}}
      - url: 'https://hooks.example.org/plain'
        http_config: {basic_auth: {username: global-user, password: S4-basic-password}}
  - name: chat
    slack_configs:
      - api_url: 'https://hooks.slack.com/services/S9-slack'
        channel: '#ml-alerts'
        http_config: {basic_auth: {username: slack-user, password_file: /etc/tw/slack-password}}
  - name: pager
    pagerduty_configs:
      - routing_key: S10-routing-key
        url: 'https://events.pagerduty.com/v2/enqueue'
        http_config: {bearer_token: S8-bearer-token}
      - service_key: S11-service-key
  - name: mail
    email_configs:
      - to: 'oncall@example.org'
        auth_password: S12-email-password
        auth_secret: S13-email-secret
        auth_username: mail-user
)";

TEST(RedactSecretsTest, HidesEverySecretAndKeepsTheRest) {
  ASSERT_TRUE(ParseConfig(kSecretConfig).ok()) << ParseConfig(kSecretConfig).error().ToString();
  std::string out = RedactSecrets(kSecretConfig);
  ASSERT_FALSE(out.empty());
  for (int i = 1; i <= 13; i++) {
    std::string secret = "S" + std::to_string(i) + "-";
    EXPECT_EQ(out.find(secret), std::string::npos) << secret << " in\n" << out;
  }
  for (const char* kept : {"smtp.example.org:587", "am-user", "global-user", "proxy-user:xxxxx@proxy.example.org:3128",
                           "slack-user", "/etc/tw/slack-password", "#ml-alerts", "Bearer",
                           "https://events.pagerduty.com/v2/enqueue", "oncall@example.org", "mail-user", "pager"}) {
    EXPECT_NE(out.find(kept), std::string::npos) << kept << " missing in\n" << out;
  }
  // 12 secrets plus the second webhook URL (a SecretURL even without a token in it), each
  // shown as Alertmanager shows a Secret; the proxy URL's password is Go's "xxxxx".
  size_t n = 0;
  for (size_t p = out.find("<secret>"); p != std::string::npos; p = out.find("<secret>", p + 1)) n++;
  EXPECT_EQ(n, 13u) << out;
}

TEST(RedactSecretsTest, AliasesCommentsAndBrokenTextNeverLeak) {
  // A secret behind an anchor is hidden at the anchor too; comments are dropped.
  std::string out = RedactSecrets("templates: [&pw S1-anchored]\n"
                                  "# S2-in-a-comment\n"
                                  "receivers: [{name: a, email_configs: [{auth_password: *pw}]}]\n");
  EXPECT_EQ(out.find("S1-"), std::string::npos) << out;
  EXPECT_EQ(out.find("S2-"), std::string::npos) << out;
  EXPECT_NE(out.find("<secret>"), std::string::npos) << out;
  // An empty secret stays empty, as Alertmanager marshals it.
  out = RedactSecrets("receivers: [{name: a, pagerduty_configs: [{routing_key: '', service_key: k}]}]\n");
  size_t first = out.find("<secret>");
  EXPECT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find("<secret>", first + 1), std::string::npos) << out;
  EXPECT_GT(first, out.find("service_key")) << out;
  // Text that is not YAML is never echoed.
  EXPECT_EQ(RedactSecrets("password: [S3-unclosed"), "");
  // An alias bomb is given up on, not walked for ever.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'k'; c++) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
  }
  EXPECT_EQ(RedactSecrets(bomb + "password: S4-bomb\n"), "");
}

}  // namespace
}  // namespace trainwatch::notify
