// FloatHistogram::TrimBuckets, PromQL's </ and >/ operators on native
// histograms, as Prometheus's float_histogram.go computes them: the counts
// kept, and a sum re-estimated from bucket midpoints when anything was cut.

#include <cmath>

#include "model/histogram.h"

namespace trainwatch::model {
namespace {

struct KeptPart {
  double count = 0;
  double midpoint = 0;
};

double ZeroIfInf(double x) { return std::isinf(x) ? 0 : x; }

// The kept part of a bucket with an infinite bound, where interpolation
// means nothing: kept whole, cut whole, or (NHCB's first bucket, treated as
// starting at 0) cut linearly.
KeptPart HandleInfinityBucket(bool upper_trim, const Bucket& b, double rhs) {
  if (std::isinf(b.lower) && b.lower < 0) {
    if (upper_trim) {
      if (rhs >= b.upper) return {b.count, 0};
      if (rhs > 0 && b.upper > 0 && !std::isinf(b.upper)) return {b.count * rhs / b.upper, rhs / 2};
      if (b.upper <= 0) return {b.count, rhs};
      return {0, ZeroIfInf(b.upper)};
    }
    if (rhs <= b.lower) return {b.count, 0};
    if (rhs >= 0 && b.upper > rhs && !std::isinf(b.upper)) return {b.count * (1 - rhs / b.upper), (rhs + b.upper) / 2};
    return {0, ZeroIfInf(b.upper)};
  }
  // Upper bound +Inf.
  if (upper_trim) return {0, ZeroIfInf(b.lower)};
  if (rhs >= b.lower) return {b.count, rhs};
  return {0, ZeroIfInf(b.lower)};
}

// Midpoint of the surviving interval: arithmetic for linear buckets,
// geometric (signed) for exponential ones.
double Midpoint(double lower, double upper, bool positive, bool linear) {
  if (std::isinf(lower)) {
    if (std::isinf(upper)) return 0;
    if (upper > 0) return upper / 2;
    return upper;
  }
  if (std::isinf(upper)) return lower;
  if (linear) return (lower + upper) / 2;
  double geo_mean = std::sqrt(std::fabs(lower * upper));
  return positive ? geo_mean : -geo_mean;
}

double CountBelow(const Bucket& b, double rhs, bool linear) {
  if (rhs <= b.lower) return 0;
  if (rhs >= b.upper) return b.count;
  return b.count * b.FractionBelow(rhs, linear);
}

KeptPart BucketTrim(const Bucket& b, double rhs, bool upper_trim, bool positive, bool custom) {
  if ((std::isinf(b.lower) && b.lower < 0) || (std::isinf(b.upper) && b.upper > 0)) {
    return HandleInfinityBucket(upper_trim, b, rhs);
  }
  double under = CountBelow(b, rhs, custom);
  if (upper_trim) return {under, Midpoint(b.lower, rhs, positive, custom)};
  return {b.count - under, Midpoint(rhs, b.upper, positive, custom)};
}

// The zero bucket, linear, starting (ending) at 0 when the histogram has
// only positive (negative) buckets.
KeptPart ZeroBucketTrim(const Bucket& zero, double rhs, bool has_negative, bool has_positive, bool upper_trim) {
  double lower = zero.lower, upper = zero.upper;
  if (has_negative && !has_positive) upper = 0;
  if (has_positive && !has_negative) lower = 0;
  double fraction, midpoint;
  if (upper_trim) {
    if (rhs <= lower) return {0, 0};
    if (rhs >= upper) return {zero.count, (lower + upper) / 2};
    fraction = (rhs - lower) / (upper - lower);
    midpoint = (lower + rhs) / 2;
  } else {
    if (rhs <= lower) return {zero.count, (lower + upper) / 2};
    if (rhs >= upper) return {0, 0};
    fraction = (upper - rhs) / (upper - lower);
    midpoint = (rhs + upper) / 2;
  }
  return {zero.count * fraction, midpoint};
}

}  // namespace

FloatHistogram FloatHistogram::TrimBuckets(double rhs, bool is_upper_trim) const {
  FloatHistogram h = *this;
  const bool custom = h.UsesCustomBuckets();
  double updated_count = 0, updated_sum = 0;
  bool trimmed = false, has_positive = false, has_negative = false;

  auto trim_side = [&](const std::vector<Bucket>& side, std::vector<double>* counts, bool positive, bool* has) {
    for (size_t i = 0; i < side.size(); i++) {
      const Bucket& b = side[i];
      if (b.count == 0) continue;
      *has = true;
      bool keep_all = is_upper_trim ? b.upper <= rhs : b.lower >= rhs;
      bool straddles = is_upper_trim ? b.lower < rhs : b.upper > rhs;
      if (keep_all) {
        updated_count += b.count;
        updated_sum += Midpoint(b.lower, b.upper, positive, custom) * b.count;
      } else if (straddles) {
        KeptPart k = BucketTrim(b, rhs, is_upper_trim, positive, custom);
        updated_count += k.count;
        updated_sum += k.midpoint * k.count;
        if ((*counts)[i] != k.count) {
          (*counts)[i] = k.count;
          trimmed = true;
        }
      } else {
        (*counts)[i] = 0;
        trimmed = true;
      }
    }
  };
  trim_side(h.PositiveBuckets(), &h.positive_buckets, true, &has_positive);
  trim_side(h.NegativeBuckets(), &h.negative_buckets, false, &has_negative);

  if (h.zero_count > 0) {
    KeptPart k = ZeroBucketTrim(h.ZeroBucket(), rhs, has_negative, has_positive, is_upper_trim);
    if (h.zero_count != k.count) {
      h.zero_count = k.count;
      trimmed = true;
    }
    updated_sum += k.midpoint * k.count;
    updated_count += k.count;
  }
  if (trimmed) {
    // Totals are re-estimated only when something was actually cut.
    h.count = updated_count;
    h.sum = updated_sum;
    h.Compact(0);
  }
  return h;
}

}  // namespace trainwatch::model
