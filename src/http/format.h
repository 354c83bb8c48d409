#pragma once
// JSON and number formatting shared by the API handlers, matching
// Prometheus's and VictoriaMetrics's output byte for byte.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json.h"
#include "model/labels.h"

namespace trainwatch::http {

// A JSON string literal with quotes (base/json.h); label sets as JSON
// objects (model/labels.h). Both live low so that rules/ can use them too.
using ::trainwatch::AppendJsonString;
using ::trainwatch::model::AppendLabelsJson;
// Prometheus sample value: "NaN", "+Inf", "-Inf", else the shortest decimal
// that round-trips, never in exponent form (Go's FormatFloat(v, 'f', -1, 64)).
void AppendPromFloat(std::string* out, double v);
// Prometheus text exposition value, as Go's FormatFloat(v, 'g', -1, 64):
// "NaN", "+Inf", "-Inf", else the shortest round-trip digits, in exponent
// form when the exponent is < -4 or >= 6 (1e+06, 1.5e-05, 123456.7).
void AppendExpositionFloat(std::string* out, double v);
// Prometheus JSON timestamp: unix seconds with up to 3 decimals (1796207149.698).
void AppendPromTimestamp(std::string* out, int64_t ms);
// VictoriaMetrics export value: NaN as null, infinities as "Infinity" /
// "-Infinity", else as AppendPromFloat without quotes.
void AppendExportValue(std::string* out, double v);
// {"status":"error","errorType":"bad_data","error":"..."}
std::string ErrorJson(std::string_view error_type, std::string_view msg);

}  // namespace trainwatch::http
