#include "http/format.h"

#include <charconv>
#include <cmath>

#include "common/metrics.h"

namespace trainwatch::http {

// The same digits as /metrics values: one implementation.
void AppendPromFloat(std::string* out, double v) { common::metrics::AppendValue(out, v); }

void AppendExpositionFloat(std::string* out, double v) {
  if (std::isnan(v) || std::isinf(v)) {
    AppendPromFloat(out, v);
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(end - buf));  // "d.ddde+XX", shortest digits
  size_t e = sci.find('e');
  int exp = 0;  // to_chars writes no NUL: parse within the range ("+06", "-5")
  const char* p = sci.data() + e + 1;
  if (*p == '+') p++;
  std::from_chars(p, end, exp);
  if (exp >= -4 && exp < 6) {
    AppendPromFloat(out, v);  // finite: the shortest fixed digits
    return;
  }
  out->append(sci.substr(0, e));
  out->push_back('e');
  out->push_back(exp < 0 ? '-' : '+');
  int a = exp < 0 ? -exp : exp;
  if (a < 10) out->push_back('0');  // Go writes at least two exponent digits
  out->append(std::to_string(a));
}

void AppendPromTimestamp(std::string* out, int64_t ms) {
  // As Prometheus's jsonutil.MarshalTimestamp: integer seconds, then the
  // millisecond fraction with its leading zeros (and trailing ones) kept.
  uint64_t abs = ms < 0 ? static_cast<uint64_t>(-(ms + 1)) + 1 : static_cast<uint64_t>(ms);
  if (ms < 0) out->push_back('-');
  out->append(std::to_string(abs / 1000));
  uint64_t frac = abs % 1000;
  if (frac != 0) {
    out->push_back('.');
    if (frac < 100) out->push_back('0');
    if (frac < 10) out->push_back('0');
    out->append(std::to_string(frac));
  }
}

void AppendExportValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("null");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    AppendPromFloat(out, v);  // finite: the shortest fixed digits
  }
}

std::string ErrorJson(std::string_view error_type, std::string_view msg) {
  std::string out = "{\"status\":\"error\",\"errorType\":";
  AppendJsonString(&out, error_type);
  out += ",\"error\":";
  AppendJsonString(&out, msg);
  out += '}';
  return out;
}

}  // namespace trainwatch::http
