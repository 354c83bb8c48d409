// Per-histogram estimates for PromQL, following Prometheus's quantile.go and
// functions.go statement for statement. log2/exp2 come from libm where Go
// has its own; the two differ by an ulp at most, which PromQL's test
// tolerance (relative 1e-6) absorbs.

#include "model/histogram_estimate.h"

#include <cmath>
#include <limits>
#include <vector>

#include "model/histogram_internal.h"

namespace trainwatch::model {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

double HistogramQuantile(double q, const FloatHistogram& h, HistogramEstimateNotes* notes) {
  if (q < 0) return -kInf;
  if (q > 1) return kInf;
  if (h.count == 0 || std::isnan(q)) return kNaN;

  // NaN observations are in the count but in no bucket, so with a NaN sum
  // the walk must come from below; otherwise from the nearer end.
  const bool forward = std::isnan(h.sum) || q < 0.5;
  const std::vector<Bucket> buckets = forward ? h.AllBuckets() : h.AllBucketsReverse();
  double rank = forward ? q * h.count : (1 - q) * h.count;
  double count = 0;
  Bucket bucket;  // all zero when the histogram has no bucket at all
  bucket.upper_inclusive = false;
  size_t next = 0;
  while (next < buckets.size()) {
    bucket = buckets[next++];
    if (bucket.count == 0) continue;
    count += bucket.count;
    if (count >= rank) break;
  }
  if (!h.UsesCustomBuckets() && bucket.lower < 0 && bucket.upper > 0) {
    // In the zero bucket: with buckets on one side only, 0 is its far bound.
    if (h.negative_buckets.empty() && !h.positive_buckets.empty()) {
      bucket.lower = 0;
    } else if (h.positive_buckets.empty() && !h.negative_buckets.empty()) {
      bucket.upper = 0;
    }
  } else if (h.UsesCustomBuckets()) {
    if (bucket.lower == -kInf) {
      if (bucket.upper <= 0) return bucket.upper;
      bucket.lower = 0;
    } else if (bucket.upper == kInf) {
      return bucket.lower;
    }
  }
  // Rounding can push the running count past the total.
  if (count > h.count) count = h.count;
  if (count < rank) {
    // Past the last bucket: the rank is among NaN observations.
    if (std::isnan(h.sum)) {
      if (notes != nullptr) notes->quantile_nan_result = true;
      return kNaN;
    }
    return bucket.upper;
  }
  if (forward) {
    rank -= count - bucket.count;
  } else {
    rank = count - rank;
  }
  if (std::isnan(h.sum)) {
    // Buckets holding fewer observations than the count means NaN
    // observations, which skew the estimate upwards.
    for (; next < buckets.size(); next++) count += buckets[next].count;
    if (count < h.count && notes != nullptr) notes->quantile_nan_skew = true;
  }
  double fraction = rank / bucket.count;
  if (h.UsesCustomBuckets() || (bucket.lower <= 0 && bucket.upper >= 0)) {
    return bucket.lower + (bucket.upper - bucket.lower) * fraction;
  }
  double log_lower = std::log2(std::fabs(bucket.lower));
  double log_upper = std::log2(std::fabs(bucket.upper));
  if (bucket.lower > 0) return std::exp2(log_lower + (log_upper - log_lower) * fraction);
  return -std::exp2(log_upper + (log_lower - log_upper) * (1 - fraction));
}

double HistogramFraction(double lower, double upper, const FloatHistogram& h, HistogramEstimateNotes* notes) {
  if (h.count == 0 || std::isnan(lower) || std::isnan(upper)) return kNaN;
  if (lower >= upper) return 0;

  const std::vector<Bucket> buckets = h.AllBuckets();
  const bool custom = h.UsesCustomBuckets();
  double count = 0, rank = 0, lower_rank = 0, upper_rank = 0;
  bool lower_set = false, upper_set = false;
  size_t next = 0;
  while (next < buckets.size()) {
    Bucket b = buckets[next++];
    count += b.count;
    bool zero_bucket = false;
    if (b.lower <= 0 && b.upper >= 0) {
      zero_bucket = true;
      if (h.negative_buckets.empty() && !h.positive_buckets.empty()) {
        b.lower = 0;
      } else if (h.positive_buckets.empty() && !h.negative_buckets.empty()) {
        b.upper = 0;
      }
    }
    // Custom buckets and the zero bucket interpolate linearly; a bucket
    // from -Inf contributes nothing of itself (the +Inf bucket, whose
    // fraction below any finite v is 0, neither).
    auto interpolate = [&](double v) {
      if (custom || zero_bucket) {
        if (b.lower == -kInf) return b.count;
        return rank + b.count * b.FractionBelow(v, true);
      }
      return rank + b.count * b.FractionBelow(v, false);
    };
    if (!lower_set && b.lower >= lower) {
      lower_rank = rank;
      lower_set = true;
    }
    if (!upper_set && b.lower >= upper) {
      upper_rank = rank;
      upper_set = true;
    }
    if (lower_set && upper_set) break;
    if (!lower_set && b.lower < lower && b.upper > lower) {
      lower_rank = interpolate(lower);
      lower_set = true;
    }
    if (!upper_set && b.lower < upper && b.upper > upper) {
      upper_rank = interpolate(upper);
      upper_set = true;
    }
    if (lower_set && upper_set) break;
    rank += b.count;
  }
  if (std::isnan(h.sum)) {
    // NaN observations are in the count only; the fraction is of all
    // observations, but ranks cannot exceed what the buckets hold.
    for (; next < buckets.size(); next++) count += buckets[next].count;
    if (count < h.count && notes != nullptr) notes->fraction_nans = true;
  } else {
    count = h.count;
  }
  if (!lower_set || lower_rank > count) lower_rank = count;
  if (!upper_set || upper_rank > count) upper_rank = count;
  return (upper_rank - lower_rank) / h.count;
}

double HistogramVariance(const FloatHistogram& h) {
  double mean = h.sum / h.count;
  double variance = 0, comp = 0;
  for (const Bucket& b : h.AllBuckets()) {
    if (b.count == 0) continue;
    double val;
    if (h.UsesCustomBuckets()) {
      val = (b.upper + b.lower) / 2.0;
    } else if (b.lower <= 0 && b.upper >= 0) {
      val = 0;  // the zero bucket's arithmetic mean
    } else {
      val = std::sqrt(b.upper * b.lower);  // geometric mean
      if (b.upper < 0) val = -val;
    }
    double delta = val - mean;
    histogram_internal::KahanInc(b.count * delta * delta, &variance, &comp);
  }
  variance += comp;
  variance /= h.count;
  return variance;
}

}  // namespace trainwatch::model
