#include "app/config.h"

#include <gtest/gtest.h>

namespace trainwatch::app {
namespace {

// A realistic prometheus.yml, as shipped and as people extend it.
constexpr std::string_view kPrometheusYml = R"(# my global config
global:
  scrape_interval: 15s # Set the scrape interval to every 15 seconds. Default is every 1 minute.
  evaluation_interval: 30s
  scrape_timeout: 10s
  external_labels:
    cluster: gpu-a
    replica: "1"

alerting:
  alertmanagers:
    - static_configs:
        - targets: ["alertmanager:9093"]
      timeout: 10s

rule_files:
  - "rules/*.yml"
  - "second_rules.yml"

scrape_configs:
  - job_name: "prometheus"
    static_configs:
      - targets: ["localhost:9090"]
  - job_name: node
    scrape_interval: 5s
    metrics_path: /metrics
    scheme: http
    static_configs:
      - targets: ['node1:9100', 'node2:9100']
        labels:
          rack: r1
    relabel_configs:
      - source_labels: [__address__]
        regex: '(.*):9100'
        target_label: instance
        replacement: '${1}'
      - action: labeldrop
        regex: tmp_.*
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: 'go_.*'
        action: drop
  - job_name: dcgm
    kubernetes_sd_configs:
      - role: pod
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_label_app]
        action: keep
        regex: dcgm-exporter

remote_write:
  - url: http://mimir:9009/api/v1/push
    queue_config:
      max_samples_per_send: 2000
    write_relabel_configs:
      - source_labels: [__name__]
        regex: 'expensive_.*'
        action: drop

storage:
  tsdb:
    out_of_order_time_window: 30m
)";

TEST(ConfigTest, RealPrometheusYmlLoadsUnchanged) {
  auto c = ParseConfig(kPrometheusYml);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->scrape_interval_ms, 15000);
  EXPECT_EQ(c->evaluation_interval_ms, 30000);
  EXPECT_EQ(c->prometheus["scrape_configs"].size(), 3u);
  EXPECT_EQ(c->prometheus["scrape_configs"][1]["relabel_configs"][0]["target_label"].as<std::string>(), "instance");
  EXPECT_FALSE(c->storage.data_dir.has_value());
  EXPECT_FALSE(c->listen.has_value());
}

TEST(ConfigTest, TrainwatchSection) {
  auto c = ParseConfig(std::string(kPrometheusYml) + R"(
trainwatch:
  storage:
    data_dir: /var/lib/trainwatch
    retention_time: 30d
    retention_size: 10GB
    wal_sync: interval
  web:
    listen: 0.0.0.0:9800
)");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(*c->storage.data_dir, "/var/lib/trainwatch");
  EXPECT_EQ(*c->storage.retention_ms, 30LL * 86400000);
  EXPECT_EQ(*c->storage.retention_bytes, 10ull << 30);
  EXPECT_EQ(*c->storage.wal_sync, tsdb::WalSync::kInterval);
  EXPECT_EQ(*c->listen, "0.0.0.0:9800");
  EXPECT_FALSE(c->prometheus["trainwatch"]);
}

TEST(ConfigTest, ErrorsNameTheKeyOrField) {
  auto f = [](std::string_view yaml, std::string_view want) {
    auto c = ParseConfig(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.error().message().find(want), std::string::npos) << c.error().message();
  };
  f("scrape_config:\n  - job_name: x\n", "line 1: top level: unknown field \"scrape_config\" (did you mean \"scrape_configs\"?)");
  f("global:\n  scrape_interval: 15x\n", "global.scrape_interval: invalid duration \"15x\"");
  f("trainwatch:\n  storage:\n    retention_time: forever\n", "trainwatch.storage.retention_time: invalid duration \"forever\"");
  f("trainwatch:\n  storage:\n    retention_size: lots\n", "trainwatch.storage.retention_size: invalid size \"lots\"");
  f("trainwatch:\n  storage:\n    wal_sync: never\n", "trainwatch.storage.wal_sync: invalid WAL sync mode \"never\"");
  f("trainwatch:\n  storage:\n    datadir: x\n", "trainwatch.storage: unknown field \"datadir\"");
  f("trainwatch:\n  webb: {}\n", "trainwatch: unknown field \"webb\"");
  f("scrape_configs:\n  - static_configs: []\n", "scrape_configs[0].job_name: missing or empty");
  f("scrape_configs: {a: 1}\n", "scrape_configs: expected a list");
  f("rule_files: [[a]]\n", "rule_files[0]: expected a string");
  f("global: [\n", "parse yaml");
  f("remote_write:\n  - name: x\n", "remote_write[0].url: missing");
}

// Prometheus 3's `otlp:` section: convert_histograms_to_nhcb applied, its
// other keys accepted (ignored), anything else an error naming the field.
TEST(ConfigTest, OtlpSection) {
  auto off = ParseConfig("global: {}\n");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->otlp.convert_histograms_to_nhcb);
  auto on = ParseConfig("otlp:\n  convert_histograms_to_nhcb: true\n  translation_strategy: UnderscoreEscapingWithSuffixes\n");
  ASSERT_TRUE(on.ok()) << on.error().ToString();
  EXPECT_TRUE(on->otlp.convert_histograms_to_nhcb);
  EXPECT_TRUE(ParseConfig("otlp:\n").ok());
  auto f = [](std::string_view yaml, std::string_view want) {
    auto c = ParseConfig(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.error().message().find(want), std::string::npos) << c.error().message();
  };
  f("otlp:\n  convert_histograms_to_nhcb: maybe\n", "line 2: otlp.convert_histograms_to_nhcb: invalid boolean \"maybe\"");
  f("otlp:\n  convert_histograms_to_nhcb: [true]\n", "line 2: otlp.convert_histograms_to_nhcb: expected true or false");
  f("otlp:\n  convert_classic_histograms_to_nhcb: true\n", "line 2: otlp: unknown field \"convert_classic_histograms_to_nhcb\"");
  f("otlp: [a]\n", "otlp: expected a mapping");
}

TEST(ConfigTest, EmptyConfigIsFine) { EXPECT_TRUE(ParseConfig("").ok()); }

TEST(ConfigTest, DurationsAndSizes) {
  EXPECT_EQ(*ParseConfigDuration("15d"), 15LL * 86400000);
  EXPECT_EQ(*ParseConfigDuration("1h30m"), 5400000);
  EXPECT_EQ(*ParseConfigDuration("1s500ms"), 1500);
  EXPECT_EQ(*ParseConfigDuration("0"), 0);
  EXPECT_FALSE(ParseConfigDuration("1m1h").ok());
  EXPECT_FALSE(ParseConfigDuration("15").ok());
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("512MB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
  EXPECT_FALSE(ParseByteSize("100").ok());
  EXPECT_FALSE(ParseByteSize("GB").ok());
  EXPECT_FALSE(ParseByteSize("1XB").ok());
}

}  // namespace
}  // namespace trainwatch::app
