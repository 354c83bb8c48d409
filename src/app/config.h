#pragma once
// trainwatch's YAML configuration: a prometheus.yml (global, scrape_configs,
// rule_files, alerting, remote_write, ... load unchanged and are kept for the
// modules that use them; `otlp:` is parsed here) plus trainwatch's own
// `trainwatch:` section:
//
//   trainwatch:
//     storage: {data_dir: data, retention_time: 15d, retention_size: 10GB, wal_sync: per-request}
//     web: {listen: "127.0.0.1:9800"}
//     scrape_self: true   # a "trainwatch" job scraping our own /metrics
//     alertmanager: {config_file: alertmanager.yml}  # the embedded notifier
//
// Unknown keys are errors naming the key; bad values are errors naming the
// field ("trainwatch.storage.retention_time: invalid duration \"x\"").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "app/logs_config.h"
#include "base/status.h"
#include "ingest/otlp.h"
#include "tsdb/db.h"

namespace trainwatch::app {

struct StorageConfig {
  std::optional<std::string> data_dir;
  std::optional<int64_t> retention_ms;
  std::optional<uint64_t> retention_bytes;
  std::optional<tsdb::WalSync> wal_sync;
};

struct Config {
  StorageConfig storage;
  std::optional<std::string> listen;
  std::optional<std::string> alertmanager_config_file;  // trainwatch.alertmanager.config_file (relative: to the config file)
  std::optional<bool> scrape_self;  // trainwatch.scrape_self: scrape our own /metrics (default true)
  LogsConfig logs;  // trainwatch.logs (app/logs_config.h): file tailing, log patterns
  // From `global:` (Prometheus defaults when absent).
  int64_t scrape_interval_ms = 60000;
  int64_t scrape_timeout_ms = 10000;
  int64_t evaluation_interval_ms = 60000;
  // From `otlp:` (Prometheus 3's OTLPConfig): what the OTLP receiver applies.
  ingest::OtlpOptions otlp;
  // The Prometheus sections as loaded, for scrape/rules/notify/remote_write.
  YAML::Node prometheus;
};

Result<Config> ParseConfig(std::string_view yaml);
Result<Config> LoadConfigFile(const std::string& path);

// Prometheus duration ("15d", "1h30m", "0"): milliseconds.
Result<int64_t> ParseConfigDuration(std::string_view s);
// Byte size with base-2 units as Prometheus's --storage.tsdb.retention.size:
// "0", "512MB", "10GB", "1TiB", "100B".
Result<uint64_t> ParseByteSize(std::string_view s);
// "per-request" or "interval".
Result<tsdb::WalSync> ParseWalSync(std::string_view s);

}  // namespace trainwatch::app
