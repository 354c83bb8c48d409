#pragma once
// A training run as the runs API describes it (docs/runs-api.md), and its
// JSON form. Plain values; RunStore owns the stored copies.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainwatch::runs {

using Json = nlohmann::json;

inline constexpr std::string_view kRunning = "running";
inline constexpr std::string_view kFinished = "finished";
inline constexpr std::string_view kFailed = "failed";
inline constexpr std::string_view kCrashed = "crashed";

struct Run {
  std::string id;       // chosen by the client: 1-64 of [A-Za-z0-9_.-]
  std::string project;
  std::string name;     // unique within the project; the series' `run` label
  std::string status = std::string(kRunning);
  Json config = Json::object();
  Json tags = Json::array();     // array of strings
  Json summary = Json::object();
  std::optional<int64_t> total_steps;
  std::optional<int64_t> step;   // last step logged by rank 0 (or a rankless batch)
  int64_t start_time_ms = 0;
  std::optional<int64_t> end_time_ms;
  int64_t heartbeat_time_ms = 0;
  std::string host, command, git_commit;  // empty: unknown
  std::optional<int64_t> pid, world_size;
  std::optional<double> eta_seconds;
  // GPU use of the run's processes on this server's host (issue 19;
  // collect/gpu/usage.h): GPU time, the energy it took, the part of that
  // time at low utilisation, and its cost at --runs.gpu-hour-price.
  struct GpuUsage {
    double seconds = 0, energy_joules = 0, idle_seconds = 0, cost = 0;
  } gpu;

  std::optional<double> progress() const;
};

struct RunAlert {
  int64_t time_ms = 0;
  std::string title, text, level;  // level: info, warning or error
  std::string alert_id;            // the client's idempotency key; empty: none (not stored)
};

// An action sent to a run because an alert fired (issue 19, docs/runs-api.md
// "Actions"): the rule's `action` annotation names it; every rank of the run
// receives it with its batches' and heartbeats' answers until it acknowledges.
struct RunAction {
  int64_t id = 0;                 // the server's sequence number
  std::string action;             // "checkpoint", "stop", any name
  std::string alert;              // the alert's alertname
  Json labels = Json::object();   // the alert's labels
  int64_t time_ms = 0;            // when it was queued
  Json acks = Json::object();     // rank -> {"status", "result", "time"}
};
Json RunActionJson(const RunAction& a);

// The run object of the API (alerts and actions included when given).
Json RunToJson(const Run& r, const std::vector<RunAlert>* alerts = nullptr,
               const std::vector<RunAction>* actions = nullptr);

// j.dump(), with invalid UTF-8 replaced by U+FFFD rather than throwing.
std::string DumpJson(const Json& j);

// A JSON number, or "NaN" / "Inf" / "-Inf" for values JSON cannot hold.
Json NumberJson(double v);

// The value a filter or sort field names for `r`: `config.a.b`,
// `summary.k` (alias `metrics.k`), `status`, `name`, `project`, `host`,
// `id`, `tags`, `step`, `total_steps`, `start_time`, `end_time`,
// `heartbeat_time` (unix seconds), `progress`, `gpu_hours`, `gpu_kwh`,
// `gpu_idle_hours`, `gpu_cost`. Null when absent.
Json FieldValue(const Run& r, std::string_view field);
// True when `field` is a name FieldValue knows (for error messages).
bool IsKnownField(std::string_view field);

// 1-64 characters of [A-Za-z0-9_.-].
bool IsValidRunId(std::string_view id);

}  // namespace trainwatch::runs
