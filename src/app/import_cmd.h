#pragma once
// `trainwatch import mlflow DIR`: the runs of an MLflow file store (an
// `mlruns` directory) become trainwatch runs through the runs API of a
// server, with their own start and end times, status, params as config,
// tags, and every metric line by step (docs/runs-api.md, "Import").
// Idempotent: run ids and batch ids are derived from the source, so a
// second import of the same store changes nothing.
// `trainwatch import tensorboard LOGDIR`: app/import_tb.h.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trainwatch::app {

struct ApiClient;  // app/api_client.h

struct ImportOptions {
  std::string format;  // "mlflow" or "tensorboard"
  std::string dir;     // the mlruns directory, or the TensorBoard logdir
  std::string url = "http://127.0.0.1:9800";
  std::string project;  // default: the MLflow experiment's name; the logdir's name
};

// One MLflow run as read from the file store.
struct MlflowRun {
  std::string experiment;  // the experiment's name
  std::string run_id;
  std::string name;
  std::string status;       // RUNNING, SCHEDULED, FINISHED, FAILED or KILLED
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;  // 0: none
  std::vector<std::pair<std::string, std::string>> params, tags;  // sorted by key
  struct Point {
    int64_t ts_ms;
    double value;
    int64_t step;
  };
  std::vector<std::pair<std::string, std::vector<Point>>> metrics;  // by key, lines in file order
};

// Reads every active run of every active experiment under `dir`. A file that
// cannot be read or a line that is not "timestamp value [step]" is reported
// in *warnings (path and line) and skipped; a dir that is no MLflow store is
// an error.
Result<std::vector<MlflowRun>> ReadMlflowStore(const std::string& dir, std::vector<std::string>* warnings);

int RunImport(const ImportOptions& o);

// Shared by the importers (import_cmd.cc, import_tb.cc).
// FNV-1a: stable across versions and machines, for run and batch ids
// derived from the source.
uint64_t ImportHash(std::string_view s, uint64_t h = 1469598103934665603ull);
// The server at `url` (credentials as every CLI: app/api_client.h) with the
// importers' long timeouts.
Result<ApiClient> ImportClient(const std::string& url);
// POSTs `body` to the server; a non-2xx answer is an error naming the path,
// status and body; `answer` (when not null) gets the parsed answer.
Status PostJson(ApiClient& c, const std::string& path, const nlohmann::json& body, nlohmann::json* answer);

}  // namespace trainwatch::app
