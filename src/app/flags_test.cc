#include "app/flags.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "app/wiring.h"

namespace trainwatch::app {
namespace {

Result<CommandLine> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "trainwatch");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(FlagsTest, ServeDefaults) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kServe);
  EXPECT_EQ(c->serve.listen, "127.0.0.1:9800");
  EXPECT_EQ(c->serve.data_dir, "data");
  EXPECT_EQ(c->serve.retention_ms, 15LL * 86400000);
  EXPECT_EQ(c->serve.retention_bytes, 0u);
  EXPECT_EQ(c->serve.wal_sync, tsdb::WalSync::kPerRequest);
  EXPECT_FALSE(c->serve.enable_admin_api);  // as Prometheus
  EXPECT_EQ(c->serve.series_limits.max_series, 0u);
  EXPECT_TRUE(IsLoopbackListen(c->serve.listen));
}

TEST(FlagsTest, QueryLimits) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->serve.query_timeout_ms, 120000);
  EXPECT_EQ(c->serve.query_max_samples, 50000000);
  EXPECT_EQ(c->serve.query_max_concurrency, 20);
  EXPECT_EQ(c->serve.query_lookback_delta_ms, 300000);
  c = Parse({"serve", "--query.timeout", "30s", "--query.max-samples", "1000", "--query.max-concurrency", "2",
             "--query.lookback-delta", "1m", "--storage.max-series", "5000000"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.query_timeout_ms, 30000);
  EXPECT_EQ(c->serve.query_max_samples, 1000);
  EXPECT_EQ(c->serve.query_max_concurrency, 2);
  EXPECT_EQ(c->serve.query_lookback_delta_ms, 60000);
  EXPECT_EQ(c->serve.series_limits.max_series, 5000000u);
  auto bad = Parse({"serve", "--query.timeout", "0s"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("--query.timeout"), std::string::npos);
  EXPECT_FALSE(Parse({"serve", "--query.timeout", "soon"}).ok());
}

TEST(FlagsTest, IngestLimits) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->serve.series_limits.max_labels_per_series, 128u);
  EXPECT_EQ(c->serve.series_limits.max_label_name_length, 1024u);
  EXPECT_EQ(c->serve.series_limits.max_label_value_length, 4096u);
  EXPECT_EQ(c->serve.max_series_per_request, 1000000u);
  EXPECT_EQ(c->serve.max_samples_per_request, 10000000u);
  EXPECT_EQ(c->serve.max_request_body_bytes, 256u << 20);
  EXPECT_EQ(c->serve.max_memory, "80%");
  EXPECT_EQ(c->serve.max_concurrent_pushes, 0);
  c = Parse({"serve", "--ingest.max-labels-per-series", "10", "--ingest.max-label-name-length", "20",
             "--ingest.max-label-value-length", "0", "--ingest.max-series-per-request", "5",
             "--ingest.max-samples-per-request", "6", "--web.max-request-body-bytes", "4096", "--ingest.max-memory", "2GiB",
             "--ingest.max-concurrent-pushes", "3"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.series_limits.max_labels_per_series, 10u);
  EXPECT_EQ(c->serve.series_limits.max_label_name_length, 20u);
  EXPECT_EQ(c->serve.series_limits.max_label_value_length, 0u);
  EXPECT_EQ(c->serve.max_series_per_request, 5u);
  EXPECT_EQ(c->serve.max_samples_per_request, 6u);
  EXPECT_EQ(c->serve.max_request_body_bytes, 4096u);
  EXPECT_EQ(c->serve.max_memory, "2GiB");
  EXPECT_EQ(c->serve.max_concurrent_pushes, 3);
  auto bad = Parse({"serve", "--ingest.max-labels-per-series", "-1"});  // CLI11: "Could not convert"
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->command, CommandLine::Command::kExit);
  EXPECT_NE(bad->exit_code, 0);
}

TEST(FlagsTest, AdminApiAndLoopback) {
  auto c = Parse({"serve", "--web.enable-admin-api"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->serve.enable_admin_api);
  c = Parse({"serve", "--web.enable-admin-api=false"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->serve.enable_admin_api);
  for (const char* l : {"127.0.0.1:9800", "127.1.2.3:1", "localhost:9800", "[::1]:9800"}) EXPECT_TRUE(IsLoopbackListen(l)) << l;
  for (const char* l : {":9800", "0.0.0.0:9800", "[::]:9800", "10.0.0.5:9800", "gpu-node-1:9800", "9800"}) {
    EXPECT_FALSE(IsLoopbackListen(l)) << l;
  }
  EXPECT_EQ(OpenToTheNetworkWarning("127.0.0.1:9800", nullptr), "");
  EXPECT_NE(OpenToTheNetworkWarning("0.0.0.0:9800", nullptr).find("listening on 0.0.0.0:9800 with no authentication"),
            std::string::npos);
}

TEST(FlagsTest, FlagsOverrideConfig) {
  std::string path = ::testing::TempDir() + "/tw_flags_test.yml";
  std::ofstream(path) << "global:\n  scrape_interval: 15s\ntrainwatch:\n  storage:\n    data_dir: /from/config\n"
                         "    retention_time: 30d\n  web:\n    listen: 0.0.0.0:1\n";
  auto c = Parse({"serve", "--config.file", path.c_str(), "--listen", "127.0.0.1:2", "--retention.size", "10GB",
                  "--wal.sync", "interval", "--log.level", "debug"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.data_dir, "/from/config");
  EXPECT_EQ(c->serve.retention_ms, 30LL * 86400000);
  EXPECT_EQ(c->serve.listen, "127.0.0.1:2");
  EXPECT_EQ(c->serve.retention_bytes, 10ull << 30);
  EXPECT_EQ(c->serve.wal_sync, tsdb::WalSync::kInterval);
  EXPECT_EQ(c->serve.log_level, log::Level::kDebug);
  c = Parse({"serve", "--config.file", path.c_str(), "--data-dir", "/flag", "--retention.time", "1d"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->serve.data_dir, "/flag");
  EXPECT_EQ(c->serve.retention_ms, 86400000);
  std::remove(path.c_str());
}

TEST(FlagsTest, AlertmanagerConfigFile) {
  std::string path = ::testing::TempDir() + "/tw_flags_am_test.yml";
  std::ofstream(path) << "trainwatch:\n  alertmanager:\n    config_file: am.yml\n";
  auto c = Parse({"serve", "--config.file", path.c_str()});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  // Relative to the config file's directory.
  EXPECT_EQ(c->serve.alertmanager_config_file, path.substr(0, path.rfind('/') + 1) + "am.yml");
  c = Parse({"serve", "--config.file", path.c_str(), "--alertmanager.config.file", "/etc/am.yml"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.alertmanager_config_file, "/etc/am.yml");
  c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->serve.alertmanager_config_file, "");
  c = Parse({"check", "config", "a.yml", "b.yml"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kCheckConfig);
  EXPECT_EQ(c->check_config_files, (std::vector<std::string>{"a.yml", "b.yml"}));
  std::remove(path.c_str());
}

TEST(FlagsTest, DownsampledTiersHaveTheirOwnRetention) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->serve.downsample);
  EXPECT_EQ(c->serve.retention_5m_ms, 90LL * 86400000);
  EXPECT_EQ(c->serve.retention_1h_ms, 365LL * 86400000);
  c = Parse({"serve", "--retention.time", "2d", "--storage.tsdb.retention.resolution-5m", "30d",
             "--retention.resolution-1h", "0", "--storage.tsdb.downsample=false"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->serve.retention_ms, 2LL * 86400000);
  EXPECT_EQ(c->serve.retention_5m_ms, 30LL * 86400000);
  EXPECT_EQ(c->serve.retention_1h_ms, 0);
  EXPECT_FALSE(c->serve.downsample);
  c = Parse({"serve", "--retention.resolution-5m", "later"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--retention.resolution-5m: invalid duration \"later\"");
}

TEST(FlagsTest, BadValuesNameTheFlag) {
  auto c = Parse({"serve", "--retention.time", "soon"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--retention.time: invalid duration \"soon\"");
  c = Parse({"serve", "--wal.sync", "never"});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.error().message().starts_with("--wal.sync: "));
  c = Parse({"serve", "--log.level", "loud"});
  ASSERT_FALSE(c.ok());
  c = Parse({"serve", "--config.file", "/nonexistent/x.yml"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("/nonexistent/x.yml"), std::string::npos);
}

TEST(FlagsTest, VersionAndUsageErrorsExit) {
  auto c = Parse({"--version"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExit);
  EXPECT_EQ(c->exit_code, 0);
  c = Parse({"serve", "--bogus"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExit);
  EXPECT_NE(c->exit_code, 0);
}

TEST(FlagsTest, RulesFlags) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->serve.rules_default_pack);
  EXPECT_EQ(c->serve.rules_outage_tolerance_ms, 3600000);
  EXPECT_EQ(c->serve.rules_for_grace_period_ms, 600000);
  EXPECT_EQ(c->serve.rules_resend_delay_ms, 60000);
  c = Parse({"serve", "--rules.default-pack=false", "--rules.alert.for-outage-tolerance", "2h",
             "--rules.alert.for-grace-period", "1s", "--rules.alert.resend-delay", "30s", "--web.external-url",
             "https://tw.example/"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(c->serve.rules_default_pack);
  EXPECT_EQ(c->serve.rules_outage_tolerance_ms, 7200000);
  EXPECT_EQ(c->serve.rules_for_grace_period_ms, 1000);
  EXPECT_EQ(c->serve.rules_resend_delay_ms, 30000);
  EXPECT_EQ(c->serve.external_url, "https://tw.example/");
  c = Parse({"serve", "--rules.alert.resend-delay", "soon"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--rules.alert.resend-delay: invalid duration \"soon\"");
}

TEST(FlagsTest, CollectFlags) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->serve.collect.host);
  EXPECT_TRUE(c->serve.collect.gpu);
  EXPECT_EQ(c->serve.collect.interval_ms, 15000);
  EXPECT_EQ(c->serve.collect.nvml_path, "libnvidia-ml.so.1");
  c = Parse({"serve", "--collect.host=false", "--collect.gpu", "false", "--collect.interval", "1s",
             "--collect.nvml-path", "/opt/nvml.so"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_FALSE(c->serve.collect.host);
  EXPECT_FALSE(c->serve.collect.gpu);
  EXPECT_EQ(c->serve.collect.interval_ms, 1000);
  EXPECT_EQ(c->serve.collect.nvml_path, "/opt/nvml.so");
  c = Parse({"serve", "--collect.interval", "0s"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("--collect.interval"), std::string::npos);
}

TEST(FlagsTest, RunGpuPriceAndIdleThreshold) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->serve.collect.usage.prices.empty());
  EXPECT_EQ(c->serve.collect.usage.idle_util_percent, 20);
  c = Parse({"serve", "--runs.gpu-hour-price", "H100=4.5,2", "--runs.gpu-idle-utilization", "10"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.collect.usage.prices.For("NVIDIA H100 80GB HBM3"), 4.5);
  EXPECT_EQ(c->serve.collect.usage.prices.For("Tesla T4"), 2);
  EXPECT_EQ(c->serve.collect.usage.idle_util_percent, 10);
  c = Parse({"serve", "--runs.gpu-hour-price", "H100=lots"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--runs.gpu-hour-price: price of \"H100\": expected a number >= 0, got \"lots\"");
  c = Parse({"serve", "--runs.gpu-idle-utilization", "120"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--runs.gpu-idle-utilization: expected a percentage, 0-100");
}

TEST(FlagsTest, AgentFlags) {
  auto c = Parse({"agent", "--remote-write", "http://a:9800/api/v1/write", "--remote-write", "http://b/api/v1/write"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->command, CommandLine::Command::kAgent);
  EXPECT_EQ(c->agent.remote_write_urls.size(), 2u);
  EXPECT_EQ(c->agent.data_dir, "data-agent");
  EXPECT_EQ(c->agent.listen, "127.0.0.1:9801");
  EXPECT_EQ(c->agent.remote_write_queue_max_bytes, 1ull << 30);
  EXPECT_TRUE(c->agent.collect.host);
  c = Parse({"agent", "--remote-write", "http://a/w", "--path.procfs", "/host/proc", "--path.sysfs", "/host/sys",
             "--path.rootfs", "/host/root", "--remote-write.queue-max-size", "64MB", "--collect.gpu=false"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->agent.collect.host_options.proc, "/host/proc");
  EXPECT_EQ(c->agent.collect.host_options.sys, "/host/sys");
  EXPECT_EQ(c->agent.collect.host_options.rootfs, "/host/root");
  EXPECT_EQ(c->agent.remote_write_queue_max_bytes, 64ull << 20);
  EXPECT_FALSE(c->agent.collect.gpu);
  c = Parse({"agent", "--remote-write.queue-max-size", "lots"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("--remote-write.queue-max-size"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::app
