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

}  // namespace trainwatch::runs
