#pragma once
// Native histograms: Prometheus's sparse histograms with exponential buckets
// (schema -4..8) or custom buckets (schema -53, "NHCB"), as PromQL and the
// TSDB hold them: every count a float, bucket counts absolute (not deltas).
// Integer histograms from the wire are converted to this form on ingest.
//
// Semantics follow Prometheus 3.x model/histogram (FloatHistogram) so that
// PromQL results match its test corpus bit for bit where it matters: the
// order of additions, Kahan compensation, how schemas and zero buckets are
// reconciled, and how custom bounds that differ are intersected.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainwatch::model {

inline constexpr int32_t kExponentialSchemaMax = 8;
inline constexpr int32_t kExponentialSchemaMaxReserved = 52;
inline constexpr int32_t kExponentialSchemaMin = -4;
inline constexpr int32_t kExponentialSchemaMinReserved = -9;
inline constexpr int32_t kCustomBucketsSchema = -53;

inline bool IsCustomBucketsSchema(int32_t s) { return s == kCustomBucketsSchema; }
inline bool IsExponentialSchema(int32_t s) { return s >= kExponentialSchemaMin && s <= kExponentialSchemaMax; }
// Exponential schemas a newer writer may use; readers reduce them to 8 / -4.
inline bool IsExponentialSchemaReserved(int32_t s) {
  return s >= kExponentialSchemaMinReserved && s <= kExponentialSchemaMaxReserved;
}
inline bool IsValidSchema(int32_t s) { return IsCustomBucketsSchema(s) || IsExponentialSchema(s); }

// A run of `length` consecutive buckets starting `offset` indexes after the
// end of the previous span (after index 0 for the first span).
struct Span {
  int32_t offset = 0;
  uint32_t length = 0;
  bool operator==(const Span&) const = default;
};

// What the writer knew about a counter reset at this sample.
enum class CounterResetHint : uint8_t {
  kUnknown = 0,          // compare with the previous sample to find out
  kCounterReset = 1,     // a reset happened here
  kNotCounterReset = 2,  // no reset happened here
  kGauge = 3,            // a gauge histogram: resets do not apply
};

// One bucket with its bounds, as the bucket iterators yield them.
struct Bucket {
  double lower = 0;
  double upper = 0;
  bool lower_inclusive = false;
  bool upper_inclusive = true;
  double count = 0;
  int32_t index = 0;  // within the schema; meaningless for the zero bucket
  // Fraction of the bucket's width at or below v, for lower < v < upper
  // with both bounds finite: linear, or on a log2 scale (exponential
  // buckets; negative buckets mirrored).
  double FractionBelow(double v, bool linear) const;
  // "[lower,upper]:count" with ( ) for exclusive bounds, %g numbers.
  std::string String() const;
};

// Upper bound of the positive bucket with index `idx` (the negative bucket
// with that index mirrors it): 2^(idx * 2^-schema) for exponential schemas,
// from Prometheus's table, with DBL_MAX for the last finite bucket;
// custom_values[idx] for custom buckets, +Inf past the end, -Inf for -1.
double BucketBound(int32_t idx, int32_t schema, const std::vector<double>& custom_values);

struct FloatHistogram {
  CounterResetHint counter_reset_hint = CounterResetHint::kUnknown;
  int32_t schema = 0;
  double zero_threshold = 0;
  double zero_count = 0;
  double count = 0;
  double sum = 0;  // also carries the stale marker (model::StaleNaN)
  std::vector<Span> positive_spans;
  std::vector<Span> negative_spans;
  std::vector<double> positive_buckets;  // absolute counts
  std::vector<double> negative_buckets;
  // Upper bounds of the custom buckets (schema -53 only), strictly
  // increasing; +Inf is implicit after the last one. Zero threshold, zero
  // count and the negative side are unused then.
  std::vector<double> custom_values;

  // Outcome flags of Add/Sub/KahanAdd, which PromQL turns into annotations.
  struct AddResult {
    // One side said kCounterReset and the other kNotCounterReset; the
    // receiver's hint is now kUnknown.
    bool counter_reset_collision = false;
    // Custom bounds differed and were intersected.
    bool nhcb_bounds_reconciled = false;
  };

  bool UsesCustomBuckets() const { return IsCustomBucketsSchema(schema); }

  // A copy at a lower resolution (target <= schema; exponential only). As in
  // Prometheus, a copy at another schema has an unknown counter reset hint.
  // Any other target yields an unchanged copy.
  FloatHistogram CopyToSchema(int32_t target) const;
  // The zero bucket [-zero_threshold, zero_threshold] with zero_count.
  Bucket ZeroBucket() const;

  // Scales every count and the sum; a negative factor makes it a gauge
  // (hint kGauge). Div(0) drops every bucket (counts become Inf or NaN).
  FloatHistogram& Mul(double factor);
  FloatHistogram& Div(double divisor);

  // this += other. Reconciles zero thresholds (the wider wins, buckets it
  // covers move into the zero bucket) and schemas (the lower wins). Fails
  // when one uses custom buckets and the other does not. With custom
  // buckets whose bounds differ, the result has the intersection of both
  // bound sets (nhcb_bounds_reconciled).
  Result<AddResult> Add(const FloatHistogram& other);
  // this -= other, reconciled like Add.
  Result<AddResult> Sub(const FloatHistogram& other);
  // Add with Kahan-Babuska compensation kept in *c (same layout as *this
  // after the call; start with an empty FloatHistogram, which the first call
  // turns into this histogram's layout with zero buckets and its hint). The
  // final value is this->Add(*c) after the last KahanAdd, done by the
  // caller. *c may be scaled in between (Mul, Div) like the sum itself.
  Result<AddResult> KahanAdd(const FloatHistogram& other, FloatHistogram* c);

  // Data equality as Prometheus's Equals: schema, count, sum, zero count
  // and bucket counts by bit pattern (so NaN equals the same NaN), zero
  // threshold and custom bounds (custom schema only) by value, spans after
  // zero-length spans are folded into the next one (spans joined with
  // offset 0 still differ). The counter reset hint is not compared.
  bool Equals(const FloatHistogram& o) const;

  // Drops empty buckets at the ends of each side, merges spans separated by
  // at most `max_empty_buckets` empty buckets, removes zero-length spans.
  FloatHistogram& Compact(int max_empty_buckets);

  // True when going from `previous` to this one is a counter reset: a lower
  // count or zero count, a bucket that shrank or vanished, a higher schema,
  // a narrower zero bucket, different custom bounds... (Prometheus's
  // DetectReset, which honours kCounterReset/kNotCounterReset/kGauge hints).
  bool DetectReset(const FloatHistogram& previous) const;

  // OK, or an error naming what is wrong (bad schema, spans and buckets of
  // different sizes, negative counts, custom bounds not increasing...).
  Status Validate() const;

  // Lowers the resolution in place (target < schema; exponential only).
  // Does nothing otherwise, or when the spans do not match the buckets.
  void ReduceResolution(int32_t target);

  // True when the count, zero count, sum, a bucket or a custom bound is
  // infinite (Prometheus's HasOverflow, used by PromQL to warn).
  bool HasOverflow() const;

  // The histogram with observations above rhs (is_upper_trim: below) cut
  // off, interpolating inside the bucket that holds rhs; PromQL's </ and >/
  // trim operators.
  FloatHistogram TrimBuckets(double rhs, bool is_upper_trim) const;

  // Buckets in order of increasing bound, empty ones included.
  // Positive/Negative: one side, by increasing index (Negative yields the
  // side's buckets by index, whose bounds go away from zero). All: every
  // negative bucket from -Inf towards zero, the zero bucket (when its count
  // is > 0), every positive bucket; a bucket reaching into the zero bucket
  // ends at the zero threshold. AllReverse: the same, from +Inf down.
  std::vector<Bucket> PositiveBuckets() const;
  std::vector<Bucket> NegativeBuckets() const;
  std::vector<Bucket> AllBuckets() const;
  std::vector<Bucket> AllBucketsReverse() const;

  // Prometheus's String(): {count:N, sum:S, [b1,b2):c, ...}.
  std::string String() const;
  // The promqltest literal that loads this histogram:
  // {{schema:0 count:.. sum:.. z_bucket:.. z_bucket_w:.. offset:.. buckets:[..] ...}}.
  std::string TestExpression() const;
};

}  // namespace trainwatch::model
