#include "remote/config.h"

#include <gtest/gtest.h>

namespace trainwatch::remote {
namespace {

Result<std::vector<RemoteWriteConfig>> Parse(const std::string& yaml) {
  return ParseRemoteWriteConfigs(YAML::Load(yaml));
}

TEST(RemoteWriteConfigTest, DefaultsAsPrometheus242) {
  auto c = Parse("remote_write: [{url: 'http://127.0.0.1:8428/api/v1/write?extra_label=a'}]");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  ASSERT_EQ(c->size(), 1u);
  const RemoteWriteConfig& r = (*c)[0];
  EXPECT_EQ(r.base, "http://127.0.0.1:8428");
  EXPECT_EQ(r.path, "/api/v1/write?extra_label=a");
  EXPECT_EQ(r.remote_timeout_ms, 30000);
  EXPECT_EQ(r.queue.capacity, 2500u);
  EXPECT_EQ(r.queue.max_shards, 200u);
  EXPECT_EQ(r.queue.min_shards, 1u);
  EXPECT_EQ(r.queue.max_samples_per_send, 500u);
  EXPECT_EQ(r.queue.batch_send_deadline_ms, 5000);
  EXPECT_EQ(r.queue.min_backoff_ms, 30);
  EXPECT_EQ(r.queue.max_backoff_ms, 5000);
  EXPECT_FALSE(r.queue.retry_on_http_429);
  EXPECT_EQ(r.name.size(), 6u);  // a hash of the entry, as Prometheus names unnamed queues
}

TEST(RemoteWriteConfigTest, ReadsEveryField) {
  auto c = Parse(R"(
remote_write:
  - url: https://mimir.example:443/api/v1/push
    name: mimir
    remote_timeout: 10s
    headers: {X-Scope-OrgID: team-a}
    basic_auth: {username: u, password_file: /etc/pw}
    tls_config: {ca_file: /etc/ca.pem, insecure_skip_verify: true}
    write_relabel_configs:
      - {source_labels: [__name__], regex: 'go_.*', action: drop}
    queue_config: {capacity: 10000, min_shards: 4, max_shards: 8, max_samples_per_send: 2000,
                   batch_send_deadline: 1s, min_backoff: 100ms, max_backoff: 10s, retry_on_http_429: true}
    metadata_config: {send: false}
)");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  const RemoteWriteConfig& r = (*c)[0];
  EXPECT_EQ(r.name, "mimir");
  EXPECT_EQ(r.base, "https://mimir.example:443");
  EXPECT_EQ(r.path, "/api/v1/push");
  EXPECT_EQ(r.remote_timeout_ms, 10000);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "X-Scope-OrgID");
  EXPECT_TRUE(r.http.has_basic_auth);
  EXPECT_EQ(r.http.basic_password_file, "/etc/pw");
  EXPECT_EQ(r.http.tls.ca_file, "/etc/ca.pem");
  EXPECT_TRUE(r.http.tls.insecure_skip_verify);
  ASSERT_EQ(r.write_relabel_configs.size(), 1u);
  EXPECT_EQ(r.queue.capacity, 10000u);
  EXPECT_EQ(r.queue.min_shards, 4u);
  EXPECT_EQ(r.queue.max_samples_per_send, 2000u);
  EXPECT_EQ(r.queue.batch_send_deadline_ms, 1000);
  EXPECT_EQ(r.queue.max_backoff_ms, 10000);
  EXPECT_TRUE(r.queue.retry_on_http_429);
}

TEST(RemoteWriteConfigTest, ExternalLabelsComeFromGlobal) {
  auto c = Parse("global: {external_labels: {cluster: a, dc: x}}\nremote_write: [{url: 'http://h:1/w'}]");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].external_labels.Get("cluster"), "a");
  auto d = Parse("global: {external_labels: {cluster: b}}\nremote_write: [{url: 'http://h:1/w'}]");
  EXPECT_NE((*c)[0].fingerprint, (*d)[0].fingerprint);  // a change restarts the sender
}

TEST(RemoteWriteConfigTest, AbsentOrNullIsEmpty) {
  EXPECT_TRUE(Parse("global: {}")->empty());
  EXPECT_TRUE(Parse("remote_write:")->empty());
}

TEST(RemoteWriteConfigTest, ErrorsNameTheField) {
  auto f = [](const std::string& yaml, const std::string& want) {
    auto c = Parse(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_EQ(c.error().message(), want) << yaml;
  };
  f("remote_write: {url: x}", "line 1: remote_write: expected a list");
  f("remote_write: [{name: a}]", "line 1: remote_write[0].url: missing");
  f("remote_write: [{url: 'ftp://h/x'}]", "line 1: remote_write[0].url: unsupported scheme \"ftp\" (want http or https)");
  f("remote_write: [{url: 'h:1/x'}]",
    "line 1: remote_write[0].url: invalid URL \"h:1/x\": no scheme (want scheme://host[:port][/path])");
  f("remote_write: [{url: 'http://h:x/y'}]", "line 1: remote_write[0].url: invalid URL \"http://h:x/y\": invalid port \":x\" after host");
  f("remote_write: [{url: 'http://h/x', colour: red}]", "line 1: remote_write[0]: unknown field \"colour\"");
  f("remote_write: [{url: 'http://h/x', headers: {Authorization: x}}]",
    "line 1: remote_write[0].headers: \"Authorization\" is a reserved header; it cannot be set");
  f("remote_write: [{url: 'http://h/x', queue_config: {capacity: lots}}]",
    "line 1: remote_write[0].queue_config.capacity: invalid integer \"lots\"");
  f("remote_write: [{url: 'http://h/x', queue_config: {min_shards: 5, max_shards: 2}}]",
    "line 1: remote_write[0].queue_config.min_shards: must not exceed max_shards");
  f("remote_write: [{url: 'http://h/x', remote_timeout: 5x}]", "line 1: remote_write[0].remote_timeout: invalid duration \"5x\"");
  f("remote_write: [{url: 'http://h/x', name: a}, {url: 'http://h/y', name: a}]",
    "line 1: remote_write[1].name: found multiple remote write configs with job name \"a\"");
  f("remote_write: [{url: 'http://h/x', bearer_token: t, basic_auth: {username: u}}]",
    "line 1: remote_write[0]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured");
}

TEST(RemoteWriteConfigTest, UnchangedEntryKeepsItsName) {
  auto a = Parse("remote_write: [{url: 'http://h:1/w'}]");
  auto b = Parse("remote_write: [{url: 'http://h:1/w'}]");
  auto c = Parse("remote_write: [{url: 'http://h:2/w'}]");
  EXPECT_EQ((*a)[0].name, (*b)[0].name);
  EXPECT_EQ((*a)[0].fingerprint, (*b)[0].fingerprint);
  EXPECT_NE((*a)[0].name, (*c)[0].name);
}

// remote_read: Prometheus 2.42's DefaultRemoteReadConfig and every field.
TEST(RemoteReadConfigTest, DefaultsFieldsAndErrors) {
  auto c = ParseRemoteReadConfigs(YAML::Load(R"(
global: {external_labels: {cluster: c1}}
remote_read:
  - url: http://127.0.0.1:9090/api/v1/read
  - url: https://thanos.example/api/v1/read?dedup=true
    name: thanos
    remote_timeout: 10s
    headers: {X-Scope-OrgID: team-a}
    required_matchers: {job: train}
    read_recent: true
    filter_external_labels: false
    authorization: {credentials: tok}
)"));
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  ASSERT_EQ(c->size(), 2u);
  const RemoteReadConfig& d = (*c)[0];
  EXPECT_EQ(d.path, "/api/v1/read");
  EXPECT_EQ(d.base, "http://127.0.0.1:9090");
  EXPECT_EQ(d.remote_timeout_ms, 60000);
  EXPECT_FALSE(d.read_recent);
  EXPECT_TRUE(d.filter_external_labels);
  EXPECT_TRUE(d.required_matchers.empty());
  EXPECT_EQ(d.name.size(), 6u);
  EXPECT_EQ(d.external_labels.ToString(), "{cluster=\"c1\"}");
  const RemoteReadConfig& t = (*c)[1];
  EXPECT_EQ(t.name, "thanos");
  EXPECT_EQ(t.path, "/api/v1/read?dedup=true");
  EXPECT_EQ(t.remote_timeout_ms, 10000);
  EXPECT_EQ(t.headers, (std::vector<std::pair<std::string, std::string>>{{"X-Scope-OrgID", "team-a"}}));
  ASSERT_EQ(t.required_matchers.size(), 1u);
  EXPECT_EQ((t.required_matchers[0].name + "=" + t.required_matchers[0].value), "job=train");
  EXPECT_TRUE(t.read_recent);
  EXPECT_FALSE(t.filter_external_labels);
  EXPECT_EQ(t.http.credentials, "tok");

  EXPECT_TRUE(ParseRemoteReadConfigs(YAML::Load("remote_read:")).ok());
  for (auto [yaml, want] : {
           std::pair{"remote_read: [{name: x}]", "remote_read[0].url: missing"},
           std::pair{"remote_read: [{url: 'ftp://x/'}]", "remote_read[0].url: unsupported scheme \"ftp\""},
           std::pair{"remote_read: [{url: 'http://a/', read_recnt: true}]", "remote_read[0]: unknown field \"read_recnt\""},
           std::pair{"remote_read: [{url: 'http://a/', required_matchers: {'a-b': x}}]",
                     "remote_read[0].required_matchers: invalid label name \"a-b\""},
           std::pair{"remote_read: [{url: 'http://a/', name: x}, {url: 'http://b/', name: x}]",
                     "remote_read[1].name: found multiple remote read configs"},
           std::pair{"remote_read: [{url: 'http://a/', headers: {Authorization: x}}]",
                     "remote_read[0].headers: \"Authorization\" is a reserved header"},
       }) {
    auto r = ParseRemoteReadConfigs(YAML::Load(yaml));
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
  }
}

}  // namespace
}  // namespace trainwatch::remote
