#include "app/flags.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <tuple>

#include "app/build_info.h"
#include "app/config.h"

namespace trainwatch::app {

std::string VersionString() {
  return std::string("trainwatch, version ") + kVersion + " (revision: " + kRevision + ")\n  compiler: " + kCompiler +
         "\n";
}

namespace {

// The built-in collectors' flags, shared by serve and agent.
struct CollectFlags {
  std::optional<bool> host, gpu;
  std::optional<std::string> interval, nvml_path, procfs, sysfs, rootfs, udev;
};

void AddCollectFlags(CLI::App* app, CollectFlags* f) {
  app->add_option("--collect.host", f->host,
                  "Collect node_exporter-compatible host metrics as job \"node\" (true or false; default true)");
  app->add_option("--collect.gpu", f->gpu,
                  "Collect dcgm-exporter-compatible GPU metrics through NVML as job \"dcgm\" (default true)");
  app->add_option("--collect.interval", f->interval, "Interval of the built-in collectors (default 15s)");
  app->add_option("--collect.nvml-path", f->nvml_path, "NVML library to dlopen (default libnvidia-ml.so.1)");
  // node_exporter's names, for a container that mounts the host's at /host/...
  app->add_option("--path.procfs", f->procfs, "procfs mountpoint of the host collector (default /proc)");
  app->add_option("--path.sysfs", f->sysfs, "sysfs mountpoint of the host collector (default /sys)");
  app->add_option("--path.rootfs", f->rootfs, "Root of the host's mount points for filesystem metrics (default /)");
  app->add_option("--path.udev.data", f->udev, "udev data path for disk labels (default /run/udev/data)");
}

Status ApplyCollectFlags(const CollectFlags& f, CollectOptions* o) {
  if (f.host) o->host = *f.host;
  if (f.gpu) o->gpu = *f.gpu;
  if (f.nvml_path) o->nvml_path = *f.nvml_path;
  if (f.procfs) o->host_options.proc = *f.procfs;
  if (f.sysfs) o->host_options.sys = *f.sysfs;
  if (f.rootfs) o->host_options.rootfs = *f.rootfs;
  if (f.udev) o->host_options.udev_data = *f.udev;
  if (f.interval) {
    auto d = ParseConfigDuration(*f.interval);
    if (!d.ok()) return d.error().Annotate("--collect.interval");
    if (*d <= 0) return Status::InvalidArgument("--collect.interval: must be positive");
    o->interval_ms = *d;
  }
  return Status::OK();
}

Status ApplyQueueSize(const std::optional<std::string>& flag, uint64_t* out) {
  if (!flag) return Status::OK();
  auto b = ParseByteSize(*flag);
  if (!b.ok()) return b.error().Annotate("--remote-write.queue-max-size");
  *out = *b;
  return Status::OK();
}

void AddClockFlags(CLI::App* cmd, ClockOptions* c) {
  cmd->add_option("--debug.clock-speed", c->speed,
                  "Run the server's clock this many times faster than real time (soak benchmarks; 0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--debug.clock-start", c->start_s,
                  "With --debug.clock-speed: the clock's reading at --debug.clock-origin, unix seconds");
  cmd->add_option("--debug.clock-origin", c->origin_s,
                  "With --debug.clock-speed: the real time at which the clock reads --debug.clock-start, "
                  "unix seconds (default: now)");
}

}  // namespace

Result<CommandLine> ParseCommandLine(int argc, const char* const* argv) {
  CommandLine out;
  CLI::App cli{"trainwatch: training observability in one binary (metrics, PromQL, alerts)", "trainwatch"};
  cli.require_subcommand(0, 1);
  bool version = false;
  cli.add_flag("--version", version, "Print the version and exit");

  CLI::App* serve = cli.add_subcommand("serve", "Run the server: TSDB, HTTP API and ingest");
  std::optional<std::string> data_dir, listen, config_file, retention_time, retention_size, wal_sync;
  std::string log_level = "info";
  std::optional<bool> scrape_self;
  serve->add_option("--data-dir,--storage.tsdb.path", data_dir, "Directory for the TSDB (default \"data\")");
  serve->add_option("--listen,--web.listen-address", listen, "Address to listen on, host:port (default 127.0.0.1:9800)");
  serve->add_option("--config.file", config_file, "YAML configuration file (prometheus.yml plus a trainwatch: section)");
  std::optional<std::string> am_config_file;
  serve->add_option("--alertmanager.config.file", am_config_file,
                    "alertmanager.yml for the embedded notifier (default: a built-in one that records "
                    "notifications in the history and sends none)");
  serve->add_option("--retention.time,--storage.tsdb.retention.time", retention_time,
                    "How long to keep samples, e.g. 15d; 0 keeps them forever (default 15d)");
  serve->add_option("--retention.size,--storage.tsdb.retention.size", retention_size,
                    "Maximum bytes of blocks (raw and downsampled) and WAL, e.g. 10GB; 0 is unlimited (default 0)");
  std::optional<std::string> retention_5m, retention_1h;
  std::optional<bool> downsample;
  serve->add_option("--storage.tsdb.downsample", downsample,
                    "Write 5m, 1h and 6h downsampled tiers (min, max, sum, count, last) of every block as it is "
                    "written; *_over_time queries on a tier's grid read the coarsest that has their range, and "
                    "raw data only for the head (default true)");
  serve->add_option("--retention.resolution-5m,--storage.tsdb.retention.resolution-5m", retention_5m,
                    "How long to keep the 5m tier, e.g. 90d; 0 keeps it forever (default 90d)");
  serve->add_option("--retention.resolution-1h,--storage.tsdb.retention.resolution-1h", retention_1h,
                    "How long to keep the 1h and 6h tiers, e.g. 1y; 0 keeps them forever (default 365d)");
  std::optional<std::string> max_future;
  serve->add_option("--ingest.max-future", max_future,
                    "Refuse samples and log lines dated more than this after the server's clock, e.g. 10m; "
                    "0 accepts any (default 10m)");
  AddClockFlags(serve, &out.clock);
  serve->add_option("--wal.sync", wal_sync, "WAL fsync policy: per-request or interval (default per-request)");
  serve->add_option("--log.level", log_level, "debug, info, warn or error")->capture_default_str();
  std::optional<std::string> runs_heartbeat_timeout;
  serve->add_option("--runs.heartbeat-timeout", runs_heartbeat_timeout,
                    "Mark a running run crashed after this long without a heartbeat or batch (default 5m)");
  std::optional<std::string> runs_gpu_price;
  serve->add_option("--runs.gpu-hour-price", runs_gpu_price,
                    "Price of a GPU-hour for runs' cost, by model: \"H100=4.5,A100=2.2,1.5\" (a model whose name "
                    "contains the text; a bare number for any other; default none)");
  std::optional<double> runs_gpu_idle;
  serve->add_option("--runs.gpu-idle-utilization", runs_gpu_idle,
                    "A run's GPU below this utilisation (%) counts as idle GPU time (default 20)");
  std::optional<int64_t> artifact_keep;
  serve->add_option("--runs.artifact-keep-versions", artifact_keep,
                    "Keep the uploaded content of only the newest N versions of each artifact (older ones not used by "
                    "a running run are removed when a version is logged); 0 keeps all (default 0)");
  serve->add_option("--scrape.self", scrape_self,
                    "Scrape our own /metrics as job \"trainwatch\" (true or false; default true)");
  std::optional<bool> rules_default_pack;
  std::optional<std::string> rules_outage, rules_grace, rules_resend, external_url, query_timeout, query_lookback;
  serve->add_option("--rules.default-pack", rules_default_pack,
                    "Load the built-in training rule pack (true or false; default true)");
  serve->add_option("--rules.alert.for-outage-tolerance", rules_outage,
                    "Max time to tolerate an outage when restoring the \"for\" state of alerts (default 1h)");
  serve->add_option("--rules.alert.for-grace-period", rules_grace,
                    "Minimum duration between alert and restored \"for\" state, for alerts with a longer \"for\" (default 10m)");
  serve->add_option("--rules.alert.resend-delay", rules_resend,
                    "Minimum wait before resending an alert to Alertmanager (default 1m)");
  serve->add_option("--web.external-url", external_url,
                    "URL under which trainwatch is reached, for alert generator URLs (default http(s)://<listen>)");
  std::optional<std::string> web_config_file;
  serve->add_option("--web.config.file", web_config_file,
                    "Web config file for TLS and basic authentication, in Prometheus's format (docs/security.md); "
                    "reloaded on SIGHUP");
  serve->add_option("--web.tokens.file", out.serve.web_tokens_file,
                    "Bearer tokens with roles (read, write, admin), SHA-256 hashes only (docs/security.md; "
                    "`trainwatch token add` makes one); reloaded on SIGHUP");
  serve->add_option("--query.timeout", query_timeout, "Maximum time a query may take before it is aborted (default 2m)");
  serve->add_option("--query.max-samples", out.serve.query_max_samples,
                    "Maximum number of samples a single query can load into memory")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--query.max-concurrency", out.serve.query_max_concurrency,
                    "Maximum number of queries executed at once; more wait, within their timeout")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--query.lookback-delta", query_lookback,
                    "How far back a sample is looked for at an instant of a query (default 5m)");
  serve->add_option("--storage.max-series", out.serve.series_limits.max_series,
                    "New series beyond this many in the head are refused, counted and alerted on; existing series "
                    "keep flowing (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-labels-per-series", out.serve.series_limits.max_labels_per_series,
                    "A new series with more labels than this (__name__ included) is refused and counted (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-label-name-length", out.serve.series_limits.max_label_name_length,
                    "A new series with a label name longer than this many bytes is refused and counted (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-label-value-length", out.serve.series_limits.max_label_value_length,
                    "A new series with a label value longer than this many bytes is refused and counted (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-series-per-request", out.serve.max_series_per_request,
                    "A remote_write or import request with more series than this is refused whole (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-samples-per-request", out.serve.max_samples_per_request,
                    "A remote_write or import request with more samples than this is refused whole (0: no limit)")
      ->capture_default_str();
  serve->add_option("--ingest.max-memory", out.serve.max_memory,
                    "Pushes (remote_write, import, run batches, logs) answer 503 with Retry-After while the "
                    "process's memory is above this: N% of the machine's or cgroup's memory, a size such as "
                    "8GiB, or 0 for no bound")
      ->capture_default_str();
  serve->add_option("--ingest.max-concurrent-pushes", out.serve.max_concurrent_pushes,
                    "Pushes decoded and stored at once; more wait up to 10 s for a turn, then get 503 with "
                    "Retry-After (0: 2 per core, at least 4)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve->add_option("--web.max-request-body-bytes", out.serve.max_request_body_bytes,
                    "A request body larger than this many bytes, as sent or once decoded (gzip, deflate, snappy), "
                    "is refused before it is buffered")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_flag("--web.enable-admin-api", out.serve.enable_admin_api,
                  "Enable the admin API (/api/v1/admin/tsdb/flush and /snapshot), off by default as in Prometheus");
  CollectFlags serve_collect;
  AddCollectFlags(serve, &serve_collect);
  std::optional<std::string> serve_queue_size;
  serve->add_option("--remote-write.queue-max-size", serve_queue_size,
                    "Most bytes the remote_write queue keeps on disk while destinations lag (default 1GiB)");
  std::optional<std::string> logs_retention_time, logs_retention_size, logs_metrics_interval;
  serve->add_option("--logs.retention.time", logs_retention_time, "How long to keep log lines (default: --retention.time)");
  serve->add_option("--logs.retention.size", logs_retention_size, "Maximum bytes of the log store, e.g. 5GB (default 0: unlimited)");
  serve->add_option("--logs.metrics-interval", logs_metrics_interval,
                    "How often log-derived counters are written to the TSDB (default 10s)");

  CLI::App* agent = cli.add_subcommand(
      "agent", "Collect (host, GPU, scrape jobs) and forward by remote_write through an on-disk queue; store nothing else");
  AgentOptions& ao = out.agent;
  std::string agent_log_level = "info";
  std::optional<std::string> agent_config, agent_queue_size;
  agent->add_option("--data-dir", ao.data_dir, "Directory for the remote_write queue")->capture_default_str();
  agent->add_option("--listen,--web.listen-address", ao.listen, "Address for /metrics and health")->capture_default_str();
  agent->add_option("--config.file", agent_config, "prometheus.yml: scrape_configs, remote_write, global");
  agent->add_option("--remote-write", ao.remote_write_urls,
                    "remote_write URL to forward to (repeatable; adds to the config's remote_write)");
  agent->add_option("--remote-write.queue-max-size", agent_queue_size,
                    "Most bytes the queue keeps on disk while a receiver is down (default 1GiB)");
  agent->add_option("--scrape.self", ao.scrape_self, "Scrape and forward our own /metrics as job \"trainwatch\"")
      ->capture_default_str();
  agent->add_option("--log.level", agent_log_level, "debug, info, warn or error")->capture_default_str();
  agent->add_option("--web.config.file", ao.web_config_file,
                    "Web config file for TLS and basic authentication, in Prometheus's format (docs/security.md)");
  agent->add_option("--web.tokens.file", ao.web_tokens_file, "Bearer tokens with roles, as serve's");
  CollectFlags agent_collect;
  AddCollectFlags(agent, &agent_collect);

  CLI::App* logs_cmd = cli.add_subcommand("logs", "Search logs on a running server (docs/logs.md) and print the lines");
  LogsOptions& lo = out.logs;
  logs_cmd->add_option("query", lo.query, "Log query, e.g. '{run=\"r1\"} level=ERROR CUDA'")->required();
  logs_cmd->add_option("--since", lo.since, "How far back to search, e.g. 1h or 7d; 0 for all time")->capture_default_str();
  logs_cmd->add_option("--limit", lo.limit, "Most lines to print (the newest)")->capture_default_str();
  logs_cmd->add_option("--url", lo.url, "trainwatch base URL")->capture_default_str();
  logs_cmd->add_flag("--json", lo.json, "Print each line as the API's JSON object");

  CLI::App* gpus_cmd =
      cli.add_subcommand("gpus", "An nvidia-smi-like table of a running server's GPU fleet, refreshed in place");
  GpusOptions& go = out.gpus;
  gpus_cmd->add_flag("--once", go.once, "Print the table once and exit (1 when the server has no GPU series)");
  gpus_cmd->add_option("--url", go.url, "trainwatch (or Prometheus) base URL")->capture_default_str();
  gpus_cmd->add_option("--interval", go.interval_s, "Seconds between refreshes until Ctrl-C")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  gpus_cmd->add_option("--timeout", go.timeout_s, "HTTP timeout in seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  CLI::App* query = cli.add_subcommand("query", "Run a PromQL query against a running server and print a table");
  QueryOptions& qo = out.query;
  query->add_option("expr", qo.expr, "PromQL expression")->required();
  query->add_option("--time", qo.time, "Instant query at this time: unix seconds or RFC 3339 (default: now)");
  query->add_option("--start", qo.start, "Range query from this time (unix seconds or RFC 3339)");
  query->add_option("--end", qo.end, "Range query end (default: now)");
  query->add_option("--step", qo.step, "Range query resolution, e.g. 15s or 60 (default: (end - start) / 250)");
  query->add_option("--server", qo.server, "trainwatch (or Prometheus) base URL")->capture_default_str();
  query->add_option("--timeout", qo.timeout_s, "HTTP timeout in seconds")->capture_default_str();

  CLI::App* check = cli.add_subcommand("check", "Check configuration files (like promtool check)");
  check->require_subcommand(1);
  CLI::App* check_rules = check->add_subcommand("rules", "Check Prometheus rule files, like promtool check rules");
  check_rules->add_option("files", out.check_rules.files, "Rule files to check")->required();
  check_rules->add_option("--lint", out.check_rules.lint, "Linting checks: all, duplicate-rules or none")
      ->capture_default_str();
  check_rules->add_flag("--lint-fatal", out.check_rules.lint_fatal, "Make lint errors exit with code 3");
  CLI::App* check_config = check->add_subcommand(
      "config", "Check alertmanager.yml files like amtool check-config (trainwatch/prometheus configs too)");
  check_config->add_option("files", out.check_config_files, "Configuration files to check")->required();

  CLI::App* tmpl = cli.add_subcommand("template", "Notification templates (like amtool template)");
  tmpl->require_subcommand(1);
  CLI::App* tmpl_render = tmpl->add_subcommand(
      "render", "Render a notification template against template data, like amtool template render");
  TemplateRenderOptions& tr = out.template_render;
  tmpl_render->add_option("--template.glob", tr.globs, "Glob of template files to parse after the defaults (repeatable)");
  tmpl_render->add_option("--template.text", tr.text, "The template to render")->required();
  tmpl_render->add_option("--template.type", tr.type, "text or html (html/template escaping)")->capture_default_str();
  tmpl_render->add_option("--template.data", tr.data_file, "JSON file with the template data (template.Data)")->required();

  CLI::App* import = cli.add_subcommand(
      "import", "Import runs from another tracker into a server (MLflow's file store, TensorBoard event files)");
  ImportOptions& im = out.import;
  import->add_option("format", im.format, "Source format: mlflow or tensorboard")
      ->required()
      ->check(CLI::IsMember({"mlflow", "tensorboard"}));
  import->add_option("dir", im.dir, "The source: an MLflow mlruns directory, or a TensorBoard logdir")->required();
  import->add_option("--url", im.url, "trainwatch server base URL")->capture_default_str();
  import->add_option("--project", im.project,
                     "Project of the imported runs (default: each experiment's name; the logdir's name)");
  CLI::App* export_cmd = cli.add_subcommand("export", "Export from a server into files");
  export_cmd->require_subcommand(1);
  CLI::App* export_run = export_cmd->add_subcommand(
      "run", "Write a run as ID.json (run, config, summary, tags, alerts), ID.csv and ID.jsonl (every point) and "
             "ID.media.jsonl (its histograms, images, text and tables; images by URL)");
  ExportOptions& ex = out.export_run;
  export_run->add_option("id", ex.id, "The run's id")->required();
  export_run->add_option("--url", ex.url, "trainwatch server base URL")->capture_default_str();
  export_run->add_option("--out", ex.out_dir, "Directory to write the files into (made when missing)")->capture_default_str();
  CLI::App* token_cmd = cli.add_subcommand("token", "Bearer tokens for --web.tokens.file");
  token_cmd->require_subcommand(1);
  CLI::App* token_add = token_cmd->add_subcommand(
      "add", "Make a token, print it once, and add its SHA-256 to the tokens file (created when missing)");
  TokenAddOptions& ta = out.token_add;
  token_add->add_option("--file", ta.file, "The tokens file (--web.tokens.file)")->required();
  token_add->add_option("--name", ta.name, "The token's name, for logs and errors")->required();
  token_add->add_option("--role", ta.role, "read, write (push metrics, runs, logs) or admin")
      ->required()
      ->check(CLI::IsMember({"read", "write", "admin"}));
  CLI::App* demo = cli.add_subcommand("demo", "Run a simulated training job against a server, through the C++ client");
  DemoOptions& dm = out.demo;
  demo->add_option("--url", dm.url, "trainwatch server base URL")->capture_default_str();
  demo->add_option("--project", dm.project, "Project of the demo runs")->capture_default_str();
  demo->add_option("--steps", dm.steps, "Total steps of each run")->capture_default_str();
  demo->add_option("--rate", dm.rate, "Steps per second")->capture_default_str();
  demo->add_option("--ranks", dm.ranks, "Ranks (distributed workers) per run")->capture_default_str();
  demo->add_option("--runs", dm.runs, "Runs to do, then exit (0: one after another, forever)")->capture_default_str();
  demo->add_option("--pause", dm.pause_s, "Seconds between runs")->capture_default_str();
  demo->add_option("--baseline", dm.baseline, "First a finished run \"baseline\" (once per server; true or false)")
      ->capture_default_str();
  demo->add_option("--spool-dir", dm.spool_dir, "Client spool directory (default ~/.cache/trainwatch/spool)");
  demo->add_option("--fake-gpus", dm.fake_gpus,
                   "Simulate one GPU per rank in this file of the fake NVML library (tests/fake_nvml), for a server "
                   "started with FAKE_NVML_CONFIG=FILE --collect.nvml-path=<libnvidia-ml-fake.so> (make run without a GPU)");
  AddClockFlags(demo, &out.clock);

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.command = CommandLine::Command::kExit;
    out.exit_code = cli.exit(e);
    return out;
  }
  if (version) {
    std::cout << VersionString();
    out.command = CommandLine::Command::kExit;
    return out;
  }
  if (check_rules->parsed()) {
    out.command = CommandLine::Command::kCheckRules;
    return out;
  }
  if (check_config->parsed()) {
    out.command = CommandLine::Command::kCheckConfig;
    return out;
  }
  if (tmpl_render->parsed()) {
    out.command = CommandLine::Command::kTemplateRender;
    return out;
  }
  if (demo->parsed()) {
    out.command = CommandLine::Command::kDemo;
    return out;
  }
  if (import->parsed()) {
    out.command = CommandLine::Command::kImport;
    return out;
  }
  if (export_run->parsed()) {
    out.command = CommandLine::Command::kExport;
    return out;
  }
  if (token_add->parsed()) {
    out.command = CommandLine::Command::kTokenAdd;
    return out;
  }
  if (query->parsed()) {
    out.command = CommandLine::Command::kQuery;
    return out;
  }
  if (logs_cmd->parsed()) {
    out.command = CommandLine::Command::kLogs;
    return out;
  }
  if (gpus_cmd->parsed()) {
    out.command = CommandLine::Command::kGpus;
    return out;
  }
  if (agent->parsed()) {
    out.command = CommandLine::Command::kAgent;
    if (!log::ParseLevel(agent_log_level, &ao.log_level)) {
      return Status::InvalidArgument("--log.level: invalid level \"" + agent_log_level + "\"");
    }
    if (ao.data_dir.empty()) return Status::InvalidArgument("--data-dir: must not be empty");
    if (agent_config) {
      ao.config_file = *agent_config;
      ASSIGN_OR_RETURN(Config c, LoadConfigFile(*agent_config));
      ao.config = std::make_shared<const Config>(std::move(c));
    }
    RETURN_IF_ERROR(ApplyQueueSize(agent_queue_size, &ao.remote_write_queue_max_bytes));
    RETURN_IF_ERROR(ApplyCollectFlags(agent_collect, &ao.collect));
    return out;
  }
  if (!serve->parsed()) {
    std::cout << cli.help();
    out.command = CommandLine::Command::kExit;
    out.exit_code = 2;
    return out;
  }

  ServeOptions& o = out.serve;
  out.command = CommandLine::Command::kServe;
  if (!log::ParseLevel(log_level, &o.log_level)) {
    return Status::InvalidArgument("--log.level: invalid level \"" + log_level + "\"");
  }
  // Config first, then flags on top.
  if (config_file) {
    o.config_file = *config_file;
    ASSIGN_OR_RETURN(Config parsed, LoadConfigFile(*config_file));
    o.config = std::make_shared<const Config>(std::move(parsed));
    const Config& c = *o.config;
    if (c.storage.data_dir) o.data_dir = *c.storage.data_dir;
    if (c.storage.retention_ms) o.retention_ms = *c.storage.retention_ms;
    if (c.storage.retention_bytes) o.retention_bytes = *c.storage.retention_bytes;
    if (c.storage.wal_sync) o.wal_sync = *c.storage.wal_sync;
    if (c.listen) o.listen = *c.listen;
    if (c.scrape_self) o.scrape_self = *c.scrape_self;
    if (c.alertmanager_config_file) {
      o.alertmanager_config_file = *c.alertmanager_config_file;
      size_t slash = config_file->rfind('/');
      if (!o.alertmanager_config_file.starts_with("/") && slash != std::string::npos) {
        o.alertmanager_config_file = config_file->substr(0, slash + 1) + o.alertmanager_config_file;
      }
    }
  }
  if (am_config_file) o.alertmanager_config_file = *am_config_file;
  if (data_dir) {
    if (data_dir->empty()) return Status::InvalidArgument("--data-dir: must not be empty");
    o.data_dir = *data_dir;
  }
  if (listen) o.listen = *listen;
  if (scrape_self) o.scrape_self = *scrape_self;
  if (retention_time) {
    auto d = ParseConfigDuration(*retention_time);
    if (!d.ok()) return d.error().Annotate("--retention.time");
    o.retention_ms = *d;
  }
  if (retention_size) {
    auto b = ParseByteSize(*retention_size);
    if (!b.ok()) return b.error().Annotate("--retention.size");
    o.retention_bytes = *b;
  }
  if (downsample) o.downsample = *downsample;
  for (auto [flag, value, out_ms] : {std::tuple{"--retention.resolution-5m", &retention_5m, &o.retention_5m_ms},
                                     std::tuple{"--retention.resolution-1h", &retention_1h, &o.retention_1h_ms}}) {
    if (!*value) continue;
    auto d = ParseConfigDuration(**value);
    if (!d.ok()) return d.error().Annotate(flag);
    if (*d < 0) return Status::InvalidArgument(std::string(flag) + ": must not be negative");
    *out_ms = *d;
  }
  if (max_future) {
    auto d = ParseConfigDuration(*max_future);
    if (!d.ok()) return d.error().Annotate("--ingest.max-future");
    if (*d < 0) return Status::InvalidArgument("--ingest.max-future: must not be negative");
    o.max_future_ms = *d;
  }
  if (logs_retention_time) {
    auto d = ParseConfigDuration(*logs_retention_time);
    if (!d.ok()) return d.error().Annotate("--logs.retention.time");
    o.logs_retention_ms = *d;
  }
  if (logs_retention_size) {
    auto b = ParseByteSize(*logs_retention_size);
    if (!b.ok()) return b.error().Annotate("--logs.retention.size");
    o.logs_retention_bytes = *b;
  }
  if (logs_metrics_interval) {
    auto d = ParseConfigDuration(*logs_metrics_interval);
    if (!d.ok()) return d.error().Annotate("--logs.metrics-interval");
    if (*d <= 0) return Status::InvalidArgument("--logs.metrics-interval: must be positive");
    o.logs_metrics_interval_ms = *d;
  }
  if (runs_heartbeat_timeout) {
    auto d = ParseConfigDuration(*runs_heartbeat_timeout);
    if (!d.ok()) return d.error().Annotate("--runs.heartbeat-timeout");
    if (*d <= 0) return Status::InvalidArgument("--runs.heartbeat-timeout: must be positive");
    o.runs_heartbeat_timeout_ms = *d;
  }
  if (wal_sync) {
    auto w = ParseWalSync(*wal_sync);
    if (!w.ok()) return w.error().Annotate("--wal.sync");
    o.wal_sync = *w;
  }
  if (rules_default_pack) o.rules_default_pack = *rules_default_pack;
  if (external_url) o.external_url = *external_url;
  if (web_config_file) {
    if (web_config_file->empty()) return Status::InvalidArgument("--web.config.file: must not be empty");
    o.web_config_file = *web_config_file;
  }
  for (auto [flag, val, dst] : {std::tuple{"--rules.alert.for-outage-tolerance", &rules_outage, &o.rules_outage_tolerance_ms},
                                std::tuple{"--rules.alert.for-grace-period", &rules_grace, &o.rules_for_grace_period_ms},
                                std::tuple{"--rules.alert.resend-delay", &rules_resend, &o.rules_resend_delay_ms},
                                std::tuple{"--query.timeout", &query_timeout, &o.query_timeout_ms},
                                std::tuple{"--query.lookback-delta", &query_lookback, &o.query_lookback_delta_ms}}) {
    if (!*val) continue;
    auto d = ParseConfigDuration(**val);
    if (!d.ok()) return d.error().Annotate(flag);
    if (*d < 0) return Status::InvalidArgument(std::string(flag) + ": must not be negative");
    *dst = *d;
  }
  if (o.query_timeout_ms <= 0) return Status::InvalidArgument("--query.timeout: must be positive");
  if (o.query_lookback_delta_ms <= 0) return Status::InvalidArgument("--query.lookback-delta: must be positive");
  RETURN_IF_ERROR(ApplyCollectFlags(serve_collect, &o.collect));
  if (runs_gpu_price) {
    auto t = collect::gpu::PriceTable::Parse(*runs_gpu_price);
    if (!t.ok()) return t.error().Annotate("--runs.gpu-hour-price");
    o.collect.usage.prices = std::move(*t);
  }
  if (runs_gpu_idle) {
    if (!(*runs_gpu_idle >= 0 && *runs_gpu_idle <= 100)) {
      return Status::InvalidArgument("--runs.gpu-idle-utilization: expected a percentage, 0-100");
    }
    o.collect.usage.idle_util_percent = *runs_gpu_idle;
  }
  if (artifact_keep) {
    if (*artifact_keep < 0) return Status::InvalidArgument("--runs.artifact-keep-versions: expected a count >= 0");
    o.runs_artifact_keep_versions = *artifact_keep;
  }
  RETURN_IF_ERROR(ApplyQueueSize(serve_queue_size, &o.remote_write_queue_max_bytes));
  return out;
}

}  // namespace trainwatch::app
