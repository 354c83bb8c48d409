#pragma once
// Estimates from one native histogram, as PromQL's histogram_quantile,
// histogram_fraction, histogram_stdvar and histogram_stddev compute them
// (Prometheus's promql/quantile.go HistogramQuantile / HistogramFraction and
// the per-histogram part of functions.go histogramVariance), bit for bit.

#include "model/histogram.h"

namespace trainwatch::model {

// The info annotations an estimate raises; the caller turns them into
// PromQL annotations.
struct HistogramEstimateNotes {
  bool quantile_nan_result = false;  // NativeHistogramQuantileNaNResultInfo
  bool quantile_nan_skew = false;    // NativeHistogramQuantileNaNSkewInfo
  bool fraction_nans = false;        // NativeHistogramFractionNaNsInfo
};

// The q-quantile of the observations in h: interpolated linearly in custom
// buckets and the zero bucket, on a log scale in exponential buckets.
// -Inf for q < 0, +Inf for q > 1, NaN for NaN q or an empty histogram. NaN
// observations (a NaN sum) count as above every bucket. notes may be null.
double HistogramQuantile(double q, const FloatHistogram& h, HistogramEstimateNotes* notes);

// The estimated fraction of observations in [lower, upper]; NaN for an
// empty histogram or NaN bounds, 0 when lower >= upper. notes may be null.
double HistogramFraction(double lower, double upper, const FloatHistogram& h, HistogramEstimateNotes* notes);

// The estimated variance of the observations in h (what histogram_stdvar
// returns; stddev is its sqrt): each bucket's observations are taken at its
// arithmetic (custom buckets), zero (zero bucket) or geometric mean.
double HistogramVariance(const FloatHistogram& h);

}  // namespace trainwatch::model
