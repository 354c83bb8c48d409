#pragma once
// Parsing of API time and duration parameters as Prometheus does (series
// selectors: promql::parser::ParseMetricSelector).

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace trainwatch::http {

// Unix seconds with an optional fraction ("1700000000.123") or RFC 3339
// ("2023-11-14T22:13:20.123Z", "...+01:00"); returns unix milliseconds.
Result<int64_t> ParseTime(std::string_view s);
// Seconds with an optional fraction ("15", "0.5") or a Prometheus duration
// ("1h30m", "15s", "100ms", units y w d h m s ms); returns milliseconds.
Result<int64_t> ParseDuration(std::string_view s);

}  // namespace trainwatch::http
