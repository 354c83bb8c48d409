#include "promql/parser/functions.h"

#include <unordered_map>

namespace trainwatch::promql::parser {

namespace {

using T = Type;
constexpr T S = T::kScalar;
constexpr T V = T::kVector;
constexpr T M = T::kMatrix;
constexpr T Str = T::kString;

const std::vector<FunctionDef>& Defs() {
  static const std::vector<FunctionDef> defs = {
      {"abs", {V}, 0, V},
      {"absent", {V}, 0, V},
      {"absent_over_time", {M}, 0, V},
      {"acos", {V}, 0, V},
      {"acosh", {V}, 0, V},
      {"asin", {V}, 0, V},
      {"asinh", {V}, 0, V},
      {"atan", {V}, 0, V},
      {"atanh", {V}, 0, V},
      {"avg_over_time", {M}, 0, V},
      {"ceil", {V}, 0, V},
      {"changes", {M}, 0, V},
      {"clamp", {V, S, S}, 0, V},
      {"clamp_max", {V, S}, 0, V},
      {"clamp_min", {V, S}, 0, V},
      {"cos", {V}, 0, V},
      {"cosh", {V}, 0, V},
      {"count_over_time", {M}, 0, V},
      {"days_in_month", {V}, 1, V},
      {"day_of_month", {V}, 1, V},
      {"day_of_week", {V}, 1, V},
      {"day_of_year", {V}, 1, V},
      {"deg", {V}, 0, V},
      {"delta", {M}, 0, V},
      {"deriv", {M}, 0, V},
      {"double_exponential_smoothing", {M, S, S}, 0, V, true},
      {"end", {}, 0, S, true},
      {"exp", {V}, 0, V},
      {"first_over_time", {M}, 0, V, true},
      {"floor", {V}, 0, V},
      {"histogram_avg", {V}, 0, V},
      {"histogram_count", {V}, 0, V},
      {"histogram_fraction", {S, S, V}, 0, V},
      {"histogram_quantile", {S, V}, 0, V},
      {"histogram_quantiles", {V, Str, S}, -1, V, true},
      {"histogram_stddev", {V}, 0, V},
      {"histogram_stdvar", {V}, 0, V},
      {"histogram_sum", {V}, 0, V},
      {"hour", {V}, 1, V},
      {"idelta", {M}, 0, V},
      {"info", {V, V}, 1, V, true},
      {"increase", {M}, 0, V},
      {"irate", {M}, 0, V},
      {"label_join", {V, Str, Str, Str}, -1, V},
      {"label_replace", {V, Str, Str, Str, Str}, 0, V},
      {"last_over_time", {M}, 0, V},
      {"ln", {V}, 0, V},
      {"log10", {V}, 0, V},
      {"log2", {V}, 0, V},
      {"mad_over_time", {M}, 0, V, true},
      {"max_over_time", {M}, 0, V},
      {"min_over_time", {M}, 0, V},
      {"max_of", {S, S}, -1, S, true},
      {"min_of", {S, S}, -1, S, true},
      {"minute", {V}, 1, V},
      {"month", {V}, 1, V},
      {"pi", {}, 0, S},
      {"predict_linear", {M, S}, 0, V},
      {"present_over_time", {M}, 0, V},
      {"quantile_over_time", {S, M}, 0, V},
      {"rad", {V}, 0, V},
      {"range", {}, 0, S, true},
      {"rate", {M}, 0, V},
      {"resets", {M}, 0, V},
      {"round", {V, S}, 1, V},
      {"scalar", {V}, 0, S},
      {"sgn", {V}, 0, V},
      {"sin", {V}, 0, V},
      {"sinh", {V}, 0, V},
      {"sort", {V}, 0, V},
      {"sort_by_label", {V, Str}, -1, V, true},
      {"sort_by_label_desc", {V, Str}, -1, V, true},
      {"sort_desc", {V}, 0, V},
      {"sqrt", {V}, 0, V},
      {"start", {}, 0, S, true},
      {"start_timestamp", {V}, 0, V, true},
      {"step", {}, 0, S, true},
      {"stddev_over_time", {M}, 0, V},
      {"stdvar_over_time", {M}, 0, V},
      {"sum_over_time", {M}, 0, V},
      {"tan", {V}, 0, V},
      {"tanh", {V}, 0, V},
      {"time", {}, 0, S},
      {"timestamp", {V}, 0, V},
      {"ts_of_first_over_time", {M}, 0, V, true},
      {"ts_of_last_over_time", {M}, 0, V, true},
      {"ts_of_max_over_time", {M}, 0, V, true},
      {"ts_of_min_over_time", {M}, 0, V, true},
      {"vector", {S}, 0, V},
      {"year", {V}, 1, V},
  };
  return defs;
}

}  // namespace

const FunctionDef* LookupFunction(std::string_view name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, const FunctionDef*>();
    for (const auto& d : Defs()) (*m)[d.name] = &d;
    return m;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

}  // namespace trainwatch::promql::parser
