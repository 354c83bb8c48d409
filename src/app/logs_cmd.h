#pragma once
// `trainwatch logs QUERY`: runs a log query (docs/logs.md) against a running
// server's /api/v1/logs/query and prints the newest matching lines, oldest
// first: time, level, stream labels, message and fields. Errors go to stderr
// with exit code 1.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace trainwatch::app {

struct LogsOptions {
  std::string query;
  std::string url = "http://127.0.0.1:9800";
  std::string since = "1h";  // a Prometheus duration; "0": all time
  int64_t limit = 100;
  bool json = false;          // print the API's line objects, one per line
  double timeout_s = 60;
};

// Renders the data of a /api/v1/logs/query response, oldest first.
Result<std::string> FormatLogsResponse(const std::string& body, bool json);

int RunLogs(const LogsOptions& o);

}  // namespace trainwatch::app
