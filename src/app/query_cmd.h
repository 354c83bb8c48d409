#pragma once
// `trainwatch query EXPR`: sends a PromQL query to a running server's HTTP
// API (/api/v1/query or /api/v1/query_range) and prints the result as a
// table. Errors go to stderr with exit code 1.

#include <string>

#include "base/status.h"

namespace trainwatch::app {

struct QueryOptions {
  std::string expr;
  std::string server = "http://127.0.0.1:9800";
  // Instant query at `time` (empty: the server's now), unless `start` is set:
  // then a range query from `start` to `end` (empty: now) every `step`
  // (empty: (end - start) / 250, at least 1s). Times are unix seconds or
  // RFC 3339, durations Prometheus durations or seconds, as in the HTTP API.
  std::string time;
  std::string start;
  std::string end;
  std::string step;
  double timeout_s = 120;  // HTTP client timeout
};

// Checks the options' times and durations; InvalidArgument naming the flag.
Status ValidateQueryOptions(const QueryOptions& o);

// Renders a /api/v1/query or /api/v1/query_range response body (status
// "success") as text: a value/series table for instant results, one block
// of points per series for matrices. The response's warnings and then its
// infos are returned in *annotations, one per line. InvalidArgument when the
// body is not a Prometheus API response.
Result<std::string> FormatQueryResponse(const std::string& body, std::string* annotations);

// Runs the query; returns the process exit code (0, or 1 after printing
// the error to stderr).
int RunQuery(const QueryOptions& o);

}  // namespace trainwatch::app
