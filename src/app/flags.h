#pragma once
// Command line: `trainwatch --version`, `trainwatch serve [flags]`,
// `trainwatch query EXPR [flags]`, `trainwatch check rules FILE...`. Flags
// override the config file, which overrides the defaults.

#include <optional>
#include <string>

#include "app/check_cmd.h"
#include "app/query_cmd.h"
#include "base/log.h"
#include "base/status.h"
#include "tsdb/db.h"

namespace trainwatch::app {

// Everything `serve` needs, after flags and config are merged.
struct ServeOptions {
  std::string data_dir = "data";
  std::string listen = "127.0.0.1:9800";
  std::string config_file;  // empty: none
  int64_t retention_ms = 15LL * 24 * 3600 * 1000;
  uint64_t retention_bytes = 0;
  tsdb::WalSync wal_sync = tsdb::WalSync::kPerRequest;
  log::Level log_level = log::Level::kInfo;
  int64_t runs_heartbeat_timeout_ms = 5 * 60 * 1000;  // --runs.heartbeat-timeout
  bool scrape_self = true;  // --scrape.self / trainwatch.scrape_self
};

struct CommandLine {
  enum class Command { kNone, kExit, kServe, kQuery, kCheckRules };
  Command command = Command::kNone;
  int exit_code = 0;     // kExit: --help, --version or a usage error (already printed)
  ServeOptions serve;    // kServe
  QueryOptions query;    // kQuery
  CheckRulesOptions check_rules;  // kCheckRules
};

// Parses argv, loads the config file when given, and merges. Prints help,
// version and usage errors itself. Config errors come back as a Status.
Result<CommandLine> ParseCommandLine(int argc, const char* const* argv);

std::string VersionString();

}  // namespace trainwatch::app
