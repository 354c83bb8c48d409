#pragma once
// Parsing of API time and duration parameters as Prometheus does (series
// selectors: promql::parser::ParseMetricSelector).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/request.h"

namespace trainwatch::http {

// Unix seconds with an optional fraction ("1700000000.123") or RFC 3339
// ("2023-11-14T22:13:20.123Z", "...+01:00"); returns unix milliseconds.
Result<int64_t> ParseTime(std::string_view s);
// Seconds with an optional fraction ("15", "0.5") or a Prometheus duration
// ("1h30m", "15s", "100ms", units y w d h m s ms); returns milliseconds.
Result<int64_t> ParseDuration(std::string_view s);

// Parameter `name` of `req` as an integer in [min, max]; `def` when absent or
// empty. The error names the parameter and the range.
Result<int64_t> IntParam(const Request& req, std::string_view name, int64_t def, int64_t min, int64_t max);
// The non-empty items of a comma-separated list ("a,b,,c": a, b, c).
std::vector<std::string> SplitList(std::string_view s);

}  // namespace trainwatch::http
