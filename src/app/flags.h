#pragma once
// Command line: `trainwatch --version`, `trainwatch serve [flags]`, `trainwatch agent [flags]`,
// `trainwatch query EXPR [flags]`, `trainwatch check rules FILE...`. Flags
// override the config file, which overrides the defaults.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/check_cmd.h"
#include "app/collect_loop.h"
#include "app/demo_cmd.h"
#include "app/export_cmd.h"
#include "app/gpus_cmd.h"
#include "app/import_cmd.h"
#include "app/logs_cmd.h"
#include "app/query_cmd.h"
#include "app/template_cmd.h"
#include "app/token_cmd.h"
#include "base/log.h"
#include "base/status.h"
#include "ingest/refusals.h"
#include "tsdb/db.h"

namespace trainwatch::app {

struct Config;  // app/config.h

// Everything `serve` needs, after flags and config are merged.
struct ServeOptions {
  std::string data_dir = "data";
  std::string listen = "127.0.0.1:9800";
  std::string config_file;  // empty: none
  // The config file as ParseCommandLine read and parsed it (null: none):
  // start-up's snapshot derives from it, so start-up reads the file once;
  // reloads read the file again.
  std::shared_ptr<const Config> config;
  std::string alertmanager_config_file;  // --alertmanager.config.file; empty: the embedded notifier is off
  int64_t retention_ms = 15LL * 24 * 3600 * 1000;
  // --ingest.max-future: samples and log lines dated later than the server's
  // clock plus this are refused (0: no bound).
  int64_t max_future_ms = 10 * 60 * 1000;
  uint64_t retention_bytes = 0;
  // Downsampled tiers (tsdb/downsample.h): --storage.tsdb.downsample and
  // each tier's own retention, as Thanos's --retention.resolution-5m/-1h
  // (0 keeps them forever).
  bool downsample = true;
  int64_t retention_5m_ms = 90LL * 24 * 3600 * 1000;
  int64_t retention_1h_ms = 365LL * 24 * 3600 * 1000;
  tsdb::WalSync wal_sync = tsdb::WalSync::kPerRequest;
  log::Level log_level = log::Level::kInfo;
  int64_t runs_heartbeat_timeout_ms = 5 * 60 * 1000;  // --runs.heartbeat-timeout
  int64_t runs_artifact_keep_versions = 0;            // --runs.artifact-keep-versions
  bool scrape_self = true;  // --scrape.self / trainwatch.scrape_self
  // Rules (src/rules): the built-in training pack and Prometheus's for-state flags.
  bool rules_default_pack = true;                       // --rules.default-pack
  int64_t rules_outage_tolerance_ms = 3600 * 1000;      // --rules.alert.for-outage-tolerance
  int64_t rules_for_grace_period_ms = 600 * 1000;       // --rules.alert.for-grace-period
  int64_t rules_resend_delay_ms = 60 * 1000;            // --rules.alert.resend-delay
  std::string external_url;                             // --web.external-url; empty: http(s)://<listen>
  // --web.config.file: exporter-toolkit web config (TLS, basic auth, headers); empty: plain HTTP, open to all.
  std::string web_config_file;
  // --web.tokens.file: bearer tokens with roles (http/tokens.h); empty: none.
  std::string web_tokens_file;
  bool enable_admin_api = false;  // --web.enable-admin-api: /api/v1/admin/* (flush, snapshot)
  // Bounds on new series, checked at the append seam for every writer:
  // --storage.max-series (0: none), --ingest.max-labels-per-series,
  // --ingest.max-label-name-length, --ingest.max-label-value-length.
  // Existing series flow on; pushes answer 400 naming the refused ones.
  tsdb::SeriesLimits series_limits{.max_series = 0,
                                   .max_labels_per_series = 128,
                                   .max_label_name_length = 1024,
                                   .max_label_value_length = 4096};
  // --ingest.max-series-per-request, --ingest.max-samples-per-request: a
  // remote_write or import body beyond either is refused whole (400).
  uint64_t max_series_per_request = 1'000'000;
  uint64_t max_samples_per_request = 10'000'000;
  // --web.max-request-body-bytes: a body larger than this, as sent or once
  // decoded (gzip, deflate, snappy), is refused (413, or 400 for a snappy
  // header) before it is buffered.
  uint64_t max_request_body_bytes = ingest::kDefaultMaxBodyBytes;
  // --ingest.max-memory: pushes answer 503 with Retry-After while the
  // process's anonymous memory is above this: "N%" of the machine's (or its
  // cgroup's) memory, a size, or "0" for no bound (http/ingest_gate.h).
  std::string max_memory = "80%";
  // --ingest.max-concurrent-pushes: pushes decoded and stored at once; the
  // rest wait up to 10 s, then 503 (0: 2 per core, at least 4).
  int max_concurrent_pushes = 0;
  // PromQL limits, with Prometheus's flags and defaults.
  int64_t query_timeout_ms = 2 * 60 * 1000;        // --query.timeout
  int64_t query_max_samples = 50'000'000;          // --query.max-samples
  int query_max_concurrency = 20;                  // --query.max-concurrency
  int64_t query_lookback_delta_ms = 5 * 60 * 1000;  // --query.lookback-delta
  CollectOptions collect;  // --collect.*, --path.* (instance and hostname are set by serve)
  // Log store (src/logs) under <data-dir>/logs: retention (time: -1 = as --retention.time) and metrics interval.
  int64_t logs_retention_ms = -1;        // --logs.retention.time
  uint64_t logs_retention_bytes = 0;     // --logs.retention.size
  int64_t logs_metrics_interval_ms = 10000;  // --logs.metrics-interval
  uint64_t remote_write_queue_max_bytes = 1ull << 30;  // --remote-write.queue-max-size
};

// `trainwatch agent`: collectors and scrape jobs forwarded by remote_write,
// nothing stored but the send queue.
struct AgentOptions {
  std::string data_dir = "data-agent";  // the remote_write queue and send positions
  std::string listen = "127.0.0.1:9801";
  std::string config_file;              // scrape_configs, remote_write, global (prometheus.yml)
  std::shared_ptr<const Config> config;  // config_file as ParseCommandLine parsed it (null: none), as serve's
  std::vector<std::string> remote_write_urls;  // --remote-write (repeatable)
  uint64_t remote_write_queue_max_bytes = 1ull << 30;
  log::Level log_level = log::Level::kInfo;
  bool scrape_self = true;
  std::string web_config_file;  // --web.config.file, as serve's
  std::string web_tokens_file;  // --web.tokens.file, as serve's
  CollectOptions collect;
};

// --debug.clock-*: serve and demo on a warped clock (base/clock.h), for the
// soak benchmark and long-run tests. Both processes given the same values agree.
struct ClockOptions {
  double speed = 0;                 // 0: the system clock
  std::optional<double> start_s;    // server time at the origin, unix seconds (default: the origin)
  std::optional<double> origin_s;   // the real time at which it reads start, unix seconds (default: now)
};

struct CommandLine {
  enum class Command { kNone, kExit, kServe, kAgent, kQuery, kCheckRules, kDemo, kCheckConfig, kLogs, kTemplateRender, kImport, kExport, kTokenAdd, kGpus };
  Command command = Command::kNone;
  int exit_code = 0;     // kExit: --help, --version or a usage error (already printed)
  ServeOptions serve;    // kServe
  AgentOptions agent;    // kAgent
  QueryOptions query;    // kQuery
  CheckRulesOptions check_rules;  // kCheckRules
  std::vector<std::string> check_config_files;  // kCheckConfig
  DemoOptions demo;      // kDemo
  ImportOptions import;  // kImport
  ExportOptions export_run;  // kExport
  TokenAddOptions token_add;  // kTokenAdd
  LogsOptions logs;      // kLogs
  GpusOptions gpus;      // kGpus
  TemplateRenderOptions template_render;  // kTemplateRender
  ClockOptions clock;    // kServe, kDemo
};

// Parses argv, loads the config file when given, and merges. Prints help,
// version and usage errors itself. Config errors come back as a Status.
Result<CommandLine> ParseCommandLine(int argc, const char* const* argv);

std::string VersionString();

}  // namespace trainwatch::app
