#pragma once
// Range functions over series that hold native histogram samples (alone or
// mixed with floats): rate, increase, delta, irate, idelta, resets, changes
// and the *_over_time family, as Prometheus 3.14 evaluates them, with its
// annotations. Series of floats only never come here: they keep the float
// path of functions_range.cc.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "promql/eval.h"
#include "promql/functions_internal.h"

namespace trainwatch::promql {

// One histogram output value of a range function: step index into the
// StepRange.
struct StepHistogram {
  uint32_t step;
  HistogramPtr h;
};

// Like RangeSeriesCallback, with the series' histogram values too (steps of
// `values` and `histograms` never coincide). Called when either is non-empty.
using RangeSeriesHistogramCallback =
    std::function<void(const model::Labels& labels, bool drop_name, std::span<const StepValue> values,
                       std::span<const StepHistogram> histograms)>;
// ForEachRangeFnSeries with histogram results (rate of a histogram series,
// sum_over_time, last_over_time, ...). ForEachRangeFnSeries itself hands on
// only the float values.
void ForEachRangeFnSeriesWithHistograms(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def,
                                        const StepRange& r, const RangeSeriesHistogramCallback& cb);

// The histogram at t between samples a and b (a.t <= t <= b.t), as a
// smoothed selector interpolates it: linearly, or for a counter (counter
// set) from zero when b is a reset. nullopt, with a warning about `at`, when
// the two cannot be combined.
std::optional<model::FloatHistogram> InterpolateHistogramAt(Evaluator& ev, const HPoint& a, const HPoint& b, int64_t t,
                                                            bool counter, std::string_view metric,
                                                            const parser::Expr& at);
// A subquery's histograms as a range function sees them: a reset or
// not-reset hint becomes unknown, since the subquery may skip the sample
// with a reset or repeat it (Prometheus's evalSubquery does the same).
void ForgetCounterResetHints(std::vector<HPoint>* hs);

// functions_range.cc: whether the sample (st, t) started its counter after
// the sample (prev_st, prev_t) before it.
bool StartTimestampReset(int64_t prev_st, int64_t prev_t, int64_t st, int64_t t);

// functions_range.cc: the value of one window holding floats only, as the
// float path computes it (anchored/smoothed included). `lo`/`hi` bound the
// samples in (ctx.range_start, ctx.range_end]; ctx.st, if set, points at
// sample lo's start timestamp.
bool FloatWindowValue(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, parser::RangeMod mod,
                      std::span<const model::Sample> smp, size_t lo, size_t hi, int64_t lookback,
                      const RangeCtx& ctx, double* out);

// The steps of one series that has histogram samples: every window of `r`,
// float-only windows included (through FloatWindowValue). Float results go
// to *vals, histogram results to *hvals, by increasing step. `ctx` arrives
// with range_sec, st_overlap and no_resets (false) set; `st` is null or the
// float samples' start timestamps.
struct HistogramSeriesArgs {
  const parser::Expr* call = nullptr;  // the function call
  const RangeFnDef* def = nullptr;
  parser::RangeMod mod = parser::RangeMod::kNone;
  const StepRange* r = nullptr;
  const Evaluator::WindowSpec* spec = nullptr;
  int64_t lookback = 0;
  const double* p0 = nullptr;  // scalar parameters per step, or null
  const double* p1 = nullptr;
};
void HistogramRangeSeries(Evaluator& ev, const HistogramSeriesArgs& a, const model::Labels& labels,
                          std::span<const model::Sample> smp, const int64_t* st, std::span<const HPoint> hs,
                          RangeCtx& ctx, std::vector<StepValue>* vals, std::vector<StepHistogram>* hvals);

}  // namespace trainwatch::promql
