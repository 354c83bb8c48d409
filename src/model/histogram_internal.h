#pragma once
// Internals shared by the histogram_*.cc files: Kahan steps, bucket
// iterators and the span/bucket algorithms that Add, Sub, KahanAdd, Compact
// and ReduceResolution are built from. Each mirrors its counterpart in
// Prometheus's model/histogram package step for step, because PromQL results
// must match Prometheus's to the last bit.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/histogram.h"

namespace trainwatch::model::histogram_internal {

// One Kahan-Babuska (Neumaier) step: *sum += inc, with the lost low-order
// part added to *c. An infinite sum zeroes *c. The model library is built
// with -ffp-contract=off: a fused multiply-add would change the results.
inline void KahanInc(double inc, double* sum, double* c) {
  double t = *sum + inc;
  if (std::isinf(t)) {
    *c = 0;
  } else if (std::fabs(*sum) >= std::fabs(inc)) {
    *c += (*sum - t) + inc;
  } else {
    *c += (inc - t) + *sum;
  }
  *sum = t;
}

// Entry frac_idx of the [0.5, 1) bound table of exponential schema 0..8.
double ExponentialBoundFraction(int32_t schema, int32_t frac_idx);
// Upper bound of bucket idx in an exponential schema; the last finite
// bucket ends at DBL_MAX rather than +Inf.
double ExponentialBound(int32_t idx, int32_t schema);

// Bucket index in target_schema (<= origin_schema) holding bucket idx.
inline int32_t TargetIdx(int32_t idx, int32_t origin_schema, int32_t target_schema) {
  return ((idx - 1) >> (origin_schema - target_schema)) + 1;
}

// The bucket with index idx on one side, with bounds in `schema`.
Bucket MakeBucket(int32_t idx, double count, int32_t schema, bool positive, const std::vector<double>& custom_values);

// Buckets of one side by increasing index. With target_schema below the
// histogram's schema, buckets are merged to that schema first; buckets of
// an exponential target schema whose upper bound is <= abs_start are
// skipped (0 skips nothing).
class ForwardBucketIter {
 public:
  ForwardBucketIter(const FloatHistogram& h, bool positive, double abs_start, int32_t target_schema);
  ForwardBucketIter(const FloatHistogram& h, bool positive) : ForwardBucketIter(h, positive, 0, h.schema) {}
  bool Next();
  Bucket At() const { return MakeBucket(curr_idx_, curr_count_, target_schema_, positive_, *custom_values_); }
  double count() const { return curr_count_; }
  int32_t index() const { return curr_idx_; }

 private:
  const std::vector<Span>* spans_;
  const std::vector<double>* buckets_;
  const std::vector<double>* custom_values_;  // empty for the negative side
  int32_t schema_;
  int32_t target_schema_;
  bool positive_;
  int spans_idx_ = 0;
  uint32_t idx_in_span_ = 0;
  size_t buckets_idx_ = 0;
  double curr_count_ = 0;
  int32_t curr_idx_ = 0;  // in target_schema_
  int32_t orig_idx_ = 0;  // in schema_, when merging
  double abs_start_;
  bool bound_reached_start_;
};

// Buckets of one side by decreasing index.
class ReverseBucketIter {
 public:
  ReverseBucketIter(const FloatHistogram& h, bool positive);
  bool Next();
  Bucket At() const { return MakeBucket(curr_idx_, curr_count_, schema_, positive_, *custom_values_); }

 private:
  const std::vector<Span>* spans_;
  const std::vector<double>* buckets_;
  const std::vector<double>* custom_values_;
  int32_t schema_;
  bool positive_;
  int spans_idx_;
  int64_t buckets_idx_;
  int32_t idx_in_span_ = 0;
  double curr_count_ = 0;
  int32_t curr_idx_ = 0;
};

// Adds (subtract: subtracts) buckets b to buckets a, inserting buckets a
// lacks. Buckets of b whose upper bound is <= threshold (exponential schemas)
// are skipped: they are in the zero bucket. With comp_a, the additions are
// Kahan steps whose compensation lives in *comp_a (same layout as a) and
// comp_b (nullable) is b's compensation, added after b.
void AddBuckets(int32_t schema, double threshold, bool subtract, std::vector<Span>* spans_a,
                std::vector<double>* buckets_a, const std::vector<Span>& spans_b, const std::vector<double>& buckets_b,
                std::vector<double>* comp_a, const std::vector<double>* comp_b);

// Drops empty buckets at the ends of spans and runs of more than
// max_empty_buckets inside them, merges spans at most max_empty_buckets
// apart. A bucket counts as empty only when its compensation (comp,
// nullable, same layout) is zero too.
void CompactBuckets(std::vector<double>* buckets, std::vector<double>* comp, std::vector<Span>* spans,
                    int max_empty_buckets);

// Merges buckets into target_schema. False (outputs unspecified) when the
// spans are inconsistent with the buckets.
bool ReduceResolutionOf(const std::vector<Span>& spans, const std::vector<double>& buckets, int32_t schema,
                        int32_t target_schema, std::vector<Span>* out_spans, std::vector<double>* out_buckets);

// The same with Kahan steps, merging compensations along (comp has the
// buckets' layout).
void KahanReduceResolutionOf(std::vector<Span>* spans, std::vector<double>* buckets, std::vector<double>* comp,
                             int32_t schema, int32_t target_schema);

struct ZeroCountResult {
  double zero_count = 0;
  double threshold = 0;
  double comp_zero_count = 0;  // Kahan compensation of zero_count
};
// What h's zero count would be with its zero threshold raised to `larger`
// (>= h.zero_threshold): the buckets inside move in, summed with Kahan
// steps. A threshold inside a populated bucket grows to that bucket's far
// bound (the result's threshold). With c (h's compensation, same layout),
// c's zero count and buckets are added along.
ZeroCountResult ZeroCountForLargerThreshold(const FloatHistogram& h, double larger, const FloatHistogram* c);

// Go's fmt %g (strconv 'g', shortest): 1e+06, 123456.7, 1e-05, NaN, +Inf.
void AppendGoFloat(std::string* out, double v);
std::string GoFloat(double v);

}  // namespace trainwatch::model::histogram_internal
