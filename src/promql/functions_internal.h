#pragma once
// Internal function tables shared between functions*.cc.

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "model/histogram_estimate.h"
#include "promql/eval.h"

namespace trainwatch::promql {

// Where a window's samples leave off: seconds between its first and last
// sample, and the stretches extrapolated over to its edges (each at most half
// the average interval where it is over 1.1 of it, as Prometheus's).
struct ExtrapolationEdges {
  double sampled = 0, to_start = 0, to_end = 0;
};

// The last extrapolation of ExtrapolationFactor: windows of one range query
// whose first and last samples sit at the same distances from the window's
// edges (regular scrapes, steps a multiple of the interval) share it.
struct ExtrapolationMemo {
  bool valid = false;
  int64_t to_start = 0, to_end = 0;  // first_t - range_start, range_end - last_t
  int64_t width = 0;                 // range_end - range_start
  size_t n = 0;
  bool is_rate = false;
  double range_sec = 0;
  ExtrapolationEdges edges;
  // A first value at least change * zero_ratio puts the counter's zero point
  // before the window's left edge by a margin no rounding closes (0: the
  // zero point never changes the factor).
  double zero_ratio = 0;
  double factor = 0;  // with the edges as they are
};

struct RangeCtx {
  int64_t t = 0;            // step timestamp
  int64_t range_start = 0;  // exclusive
  int64_t range_end = 0;    // inclusive
  double range_sec = 0;
  double p0 = 0, p1 = 0;    // scalar parameters at this step
  // The whole series never decreases and has no start timestamps (lets rate
  // skip its reset scan).
  bool no_resets = false;
  // The window's start timestamps, one per sample (0 = unknown); null when
  // the series has none.
  const int64_t* st = nullptr;
  // Set by rate and increase when a sample's start time overlaps the sample
  // before it (a broken producer); the caller warns once per metric.
  bool* st_overlap = nullptr;
  // How many raw samples each sample of the window stands for (points of a
  // downsampled tier: their window's count); null when one each.
  // count_over_time and avg_over_time weigh by it.
  const double* counts = nullptr;
  // Null: ExtrapolationFactor computes every window afresh.
  ExtrapolationMemo* memo = nullptr;
};

struct RangeFnDef {
  std::string_view name;
  // Returns false when the window yields no value.
  bool (*fn)(std::span<const model::Sample> w, const RangeCtx& c, double* out);
  bool keeps_name;
  size_t matrix_arg;  // index of the range-vector argument
};

const RangeFnDef* LookupRangeFn(std::string_view name);

// Prometheus's extrapolatedRate: the factor that stretches the change seen
// between a window's first and last sample (n samples, at first_t and
// last_t) towards the window's edges (c.range_start, c.range_end], divided
// by the range for a rate. zero_st: the first sample's start timestamp when
// the counter started inside the window (its zero point replaces the
// extrapolation to the left), else 0. For a counter, first and change (the
// first sample's value or count, and the increase) keep the extrapolation
// from going below zero.
double ExtrapolationFactor(const RangeCtx& c, int64_t first_t, int64_t last_t, size_t n, int64_t zero_st, bool counter,
                           double first, double change, bool is_rate);
Value EvalRangeFunction(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, const StepRange& r);

// One output value of a range function: step index into the StepRange.
struct StepValue {
  uint32_t step;
  double v;
};
// Calls cb once per input series that yields at least one value, in storage
// order, with the series' labels, whether __name__ is to be dropped, and its
// values by increasing step (valid during the call only). Nothing is
// materialized across series, so aggregations can consume values directly.
using RangeSeriesCallback =
    std::function<void(const model::Labels& labels, bool drop_name, std::span<const StepValue> values)>;
void ForEachRangeFnSeries(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, const StepRange& r,
                          const RangeSeriesCallback& cb);

// functions_info.cc
Value EvalInfo(Evaluator& ev, const parser::Expr& e, const StepRange& r);

// functions_label.cc
Value EvalLabelReplace(Evaluator& ev, const parser::Expr& e, const StepRange& r);
Value EvalLabelJoin(Evaluator& ev, const parser::Expr& e, const StepRange& r);
Value EvalHistogramQuantile(Evaluator& ev, const parser::Expr& e, const StepRange& r);
Value EvalHistogramQuantiles(Evaluator& ev, const parser::Expr& e, const StepRange& r);
Value EvalHistogramFraction(Evaluator& ev, const parser::Expr& e, const StepRange& r);
Value EvalSortByLabel(Evaluator& ev, const parser::Expr& e, const StepRange& r, bool desc);

// functions_histogram.cc
// Prometheus's rule for histogram_quantile(s)/_fraction: a classic histogram
// (bucket series grouped without le) and a native one with the same labels
// at the same step both yield nothing there, with a warning about `arg`.
void DropMixedClassicNative(Evaluator& ev, SeriesList* classic, SeriesList* native, const parser::Expr& arg);
enum class HistogramStat { kCount, kSum, kAvg, kStdDev, kStdVar };
// histogram_count(v) and the like: one float per histogram point of v.
Value EvalHistogramStat(Evaluator& ev, const parser::Expr& e, const StepRange& r, HistogramStat stat);
// One float per histogram point of `in` (the value of `arg`): fn(step index,
// histogram, notes), with the notes turned into infos about `arg`.
SeriesList NativeHistogramEstimates(Evaluator& ev, const Value& in, const StepRange& r, const parser::Expr& arg,
                                    const std::function<double(size_t step, const model::FloatHistogram& h,
                                                               model::HistogramEstimateNotes* notes)>& fn);

}  // namespace trainwatch::promql
