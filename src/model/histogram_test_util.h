#pragma once
// Test helpers: native histograms written as in PromQL test files.

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "model/histogram.h"

namespace trainwatch::model::testing {

inline double ParseTestFloat(std::string_view s) {
  if (s == "Inf" || s == "+Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  return std::strtod(std::string(s).c_str(), nullptr);
}

// "schema:0 count:4 sum:5 z_bucket:1 z_bucket_w:0.5 offset:1 buckets:[1 2 1]
// n_offset:0 n_buckets:[..] custom_values:[..] counter_reset_hint:gauge"
// (promqltest's histogram literal without the braces; one span a side).
inline FloatHistogram ParseTestHistogram(std::string_view text) {
  FloatHistogram h;
  int32_t offset = 0, n_offset = 0;
  size_t pos = 0;
  auto list = [&](std::string_view v) {
    std::vector<double> out;
    v = v.substr(1, v.size() - 2);
    size_t p = 0;
    while (p < v.size()) {
      size_t e = v.find(' ', p);
      if (e == std::string_view::npos) e = v.size();
      if (e > p) out.push_back(ParseTestFloat(v.substr(p, e - p)));
      p = e + 1;
    }
    return out;
  };
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') pos++;
    size_t colon = text.find(':', pos);
    if (colon == std::string_view::npos) break;
    std::string_view key = text.substr(pos, colon - pos);
    size_t end = text[colon + 1] == '[' ? text.find(']', colon) + 1 : text.find(' ', colon);
    if (end == std::string_view::npos || end > text.size()) end = text.size();
    std::string_view val = text.substr(colon + 1, end - colon - 1);
    pos = end;
    if (key == "schema") h.schema = static_cast<int32_t>(ParseTestFloat(val));
    if (key == "count") h.count = ParseTestFloat(val);
    if (key == "sum") h.sum = ParseTestFloat(val);
    if (key == "z_bucket") h.zero_count = ParseTestFloat(val);
    if (key == "z_bucket_w") h.zero_threshold = ParseTestFloat(val);
    if (key == "offset") offset = static_cast<int32_t>(ParseTestFloat(val));
    if (key == "n_offset") n_offset = static_cast<int32_t>(ParseTestFloat(val));
    if (key == "buckets") h.positive_buckets = list(val);
    if (key == "n_buckets") h.negative_buckets = list(val);
    if (key == "custom_values") h.custom_values = list(val);
    if (key == "counter_reset_hint") {
      if (val == "reset") h.counter_reset_hint = CounterResetHint::kCounterReset;
      if (val == "not_reset") h.counter_reset_hint = CounterResetHint::kNotCounterReset;
      if (val == "gauge") h.counter_reset_hint = CounterResetHint::kGauge;
    }
  }
  if (!h.positive_buckets.empty()) h.positive_spans = {{offset, static_cast<uint32_t>(h.positive_buckets.size())}};
  if (!h.negative_buckets.empty()) h.negative_spans = {{n_offset, static_cast<uint32_t>(h.negative_buckets.size())}};
  return h;
}

// Prometheus's almost.Equal: relative difference below epsilon, NaN equal
// to NaN.
inline bool AlmostEqual(double a, double b, double epsilon = 1e-6) {
  if (std::isnan(a) && std::isnan(b)) return true;
  if (a == b) return true;
  constexpr double kMinNormal = 2.2250738585072014e-308;
  double abs_sum = std::fabs(a) + std::fabs(b);
  double diff = std::fabs(a - b);
  if (a == 0 || b == 0 || abs_sum < kMinNormal) return diff < epsilon * kMinNormal;
  return diff / std::fmin(abs_sum, std::numeric_limits<double>::max()) < epsilon;
}

}  // namespace trainwatch::model::testing
