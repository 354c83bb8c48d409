// PromQL vocabulary for the Explore editor's completion.
export const FUNCTIONS = [
  "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
  "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
  "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time",
  "ln", "log10", "log2", "max_over_time", "min_over_time", "minute", "month", "predict_linear", "present_over_time",
  "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time",
  "stdvar_over_time", "sum_over_time", "time", "timestamp", "vector", "year",
];
export const AGGREGATIONS = ["sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group"];
export const KEYWORDS = ["by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless"];
