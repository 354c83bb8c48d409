#pragma once
// `trainwatch gpus [--once] [--url URL] [--interval S]`: an nvidia-smi-like
// table of the GPU fleet a running server knows (one row per GPU: host,
// index, model, utilisation, memory, temperature, power, and the runs and
// ranks whose processes use it), read from its PromQL API; refreshed in
// place until Ctrl-C (on a terminal; elsewhere one table after another), or
// printed once. Errors go to stderr with exit code 1, as does --once on a
// server with no GPU series; credentials as every client (app/api_client.h).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainwatch::app {

struct GpusOptions {
  std::string url = "http://127.0.0.1:9800";
  bool once = false;
  double interval_s = 2;
  double timeout_s = 10;
};

struct GpuRow {
  std::string host, gpu, model;
  std::optional<double> util, mem_used_mib, mem_total_mib, temp_c, power_w;
  std::vector<std::string> users;  // "project/run rank R" by name, then "pid N" of processes of no run
};

// The instant query each column comes from, by metric name.
const std::vector<std::string>& GpuQueryMetrics();

// Joins the `result` arrays of instant queries (by metric name, as
// GpuQueryMetrics lists them) into one row per GPU (host, then index order).
std::vector<GpuRow> JoinGpuRows(const std::map<std::string, nlohmann::json>& results);

// The table, nvidia-smi style, with a header line naming `source` and the time.
std::string FormatGpuTable(const std::vector<GpuRow>& rows, const std::string& source, int64_t at_ms);

// Runs the command; returns the process exit code (0, or 1 after printing
// the error to stderr).
int RunGpus(const GpusOptions& o);

}  // namespace trainwatch::app
