#pragma once
// The reversible key -> metric name rule of docs/training-metrics.md: a key
// logged by a training client (`loss`, `train/loss`, `loss@1k`) becomes a
// Prometheus metric name and back.

#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch::runs {

// The metric name of `key`: the key itself when it is a legacy metric name
// without `:` and not starting with `U__`; else `/` -> `:` when that gives a
// valid name; else Prometheus's "values" escaping (`U__...`). Fails with
// InvalidArgument for an empty key, invalid UTF-8, or a name reserved for
// the run series (`trainwatch_run_*`).
Result<std::string> KeyToMetricName(std::string_view key);

// The key a metric name came from (the inverse of KeyToMetricName): `U__`
// names are unescaped (left as they are when malformed); any other name has
// `:` turned back into `/`.
std::string MetricNameToKey(std::string_view name);

// True for the names the server writes itself (`trainwatch_run_...`).
bool IsRunSeriesName(std::string_view name);

// Keys `step_phase/<phase>` are what the clients' step-phase timers log
// (`with run.timer("data")`): the seconds of one step spent in <phase>, per
// rank. Their time view is one metric with a `phase` label,
// `trainwatch_step_phase_seconds{phase="<phase>"}`, so that
// `sum by (rank) (...)` is a rank's timed step; the step store keeps them
// by key as any other.
inline constexpr std::string_view kStepPhaseKeyPrefix = "step_phase/";
inline constexpr std::string_view kStepPhaseSeries = "trainwatch_step_phase_seconds";

// The time-view series of the step-store metric `metric` (a KeyToMetricName
// result): its name, and the phase label value (empty but for step phases).
struct TimeViewName {
  std::string name;
  std::string phase;
};
TimeViewName TimeViewNameOf(std::string_view metric);

}  // namespace trainwatch::runs
