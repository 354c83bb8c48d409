#include "app/flags.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "app/config.h"

// TW_VERSION and TW_REVISION come from src/app/CMakeLists.txt.
namespace trainwatch::app {

std::string VersionString() {
  return std::string("trainwatch, version ") + TW_VERSION + " (revision: " + TW_REVISION + ")\n  compiler: " +
         __VERSION__ + "\n";
}

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
  serve->add_option("--retention.time,--storage.tsdb.retention.time", retention_time,
                    "How long to keep samples, e.g. 15d; 0 keeps them forever (default 15d)");
  serve->add_option("--retention.size,--storage.tsdb.retention.size", retention_size,
                    "Maximum bytes of blocks, e.g. 10GB; 0 is unlimited (default 0)");
  serve->add_option("--wal.sync", wal_sync, "WAL fsync policy: per-request or interval (default per-request)");
  serve->add_option("--log.level", log_level, "debug, info, warn or error")->capture_default_str();
  std::optional<std::string> runs_heartbeat_timeout;
  serve->add_option("--runs.heartbeat-timeout", runs_heartbeat_timeout,
                    "Mark a running run crashed after this long without a heartbeat or batch (default 5m)");
  serve->add_option("--scrape.self", scrape_self,
                    "Scrape our own /metrics as job \"trainwatch\" (true or false; default true)");

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
  if (query->parsed()) {
    out.command = CommandLine::Command::kQuery;
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
    ASSIGN_OR_RETURN(Config c, LoadConfigFile(*config_file));
    if (c.storage.data_dir) o.data_dir = *c.storage.data_dir;
    if (c.storage.retention_ms) o.retention_ms = *c.storage.retention_ms;
    if (c.storage.retention_bytes) o.retention_bytes = *c.storage.retention_bytes;
    if (c.storage.wal_sync) o.wal_sync = *c.storage.wal_sync;
    if (c.listen) o.listen = *c.listen;
    if (c.scrape_self) o.scrape_self = *c.scrape_self;
  }
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
  return out;
}

}  // namespace trainwatch::app
