// FloatHistogram comparisons and checks: Equals, Validate, DetectReset, as
// Prometheus's float_histogram.go, histogram.go and generic.go define them.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "model/histogram.h"
#include "model/histogram_internal.h"

namespace trainwatch::model {

using histogram_internal::ForwardBucketIter;
using histogram_internal::GoFloat;

namespace {

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool AllEmptySpans(const std::vector<Span>& s, size_t from) {
  for (size_t i = from; i < s.size(); i++) {
    if (s[i].length > 0) return false;
  }
  return true;
}

// Whether two span lists describe the same buckets, zero-length spans
// (whose offsets carry over to the next span) aside.
bool SpansMatch(const std::vector<Span>& s1, const std::vector<Span>& s2) {
  if (s1.empty() && s2.empty()) return true;
  size_t i1 = 0, i2 = 0;
  // Folds zero-length spans at the cursor into the next non-empty one.
  auto next = [](const std::vector<Span>& s, size_t* idx) {
    Span cur = s[(*idx)++];
    if (cur.length == 0) {
      for (; *idx < s.size() && s[*idx].length == 0; (*idx)++) cur.offset += s[*idx].offset;
      if (*idx < s.size()) {
        cur.offset += s[*idx].offset;
        cur.length = s[*idx].length;
        (*idx)++;
      }
    }
    return cur;
  };
  for (;;) {
    if (i1 >= s1.size()) return AllEmptySpans(s2, i2);
    if (i2 >= s2.size()) return AllEmptySpans(s1, i1);
    Span a = next(s1, &i1);
    Span b = next(s2, &i2);
    if (a.length == 0 && b.length == 0) return true;
    if (a.offset != b.offset || a.length != b.length) return false;
  }
}

bool BucketsMatchBits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (Bits(a[i]) != Bits(b[i])) return false;
  }
  return true;
}

bool CustomBoundsMatch(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Go's %f: six decimals, +Inf/-Inf/NaN spelled as Go does.
std::string GoFixed6(double v) {
  if (std::isnan(v) || std::isinf(v)) return GoFloat(v);
  char buf[400];
  std::snprintf(buf, sizeof buf, "%f", v);
  return buf;
}

Status Invalid(std::string msg) { return Status::InvalidArgument(std::move(msg)); }

constexpr const char* kNegativeOffset = "histogram has a span whose offset is negative";
constexpr const char* kSpansBucketsMismatch = "histogram spans specify different number of buckets than provided";

Status CheckSpans(const std::vector<Span>& spans, size_t n_buckets) {
  uint64_t span_buckets = 0;
  for (size_t n = 0; n < spans.size(); n++) {
    if (n > 0 && spans[n].offset < 0) {
      return Invalid("span number " + std::to_string(n + 1) + " with offset " + std::to_string(spans[n].offset) + ": " +
                     kNegativeOffset);
    }
    span_buckets += spans[n].length;
  }
  if (span_buckets != n_buckets) {
    return Invalid("spans need " + std::to_string(span_buckets) + " buckets, have " + std::to_string(n_buckets) +
                   " buckets: " + kSpansBucketsMismatch);
  }
  return Status::OK();
}

Status CheckBuckets(const std::vector<double>& buckets) {
  for (size_t i = 0; i < buckets.size(); i++) {
    if (buckets[i] < 0) {
      return Invalid("bucket number " + std::to_string(i + 1) + " has observation count of " + GoFloat(buckets[i]) +
                     ": histogram has a bucket whose observation count is negative");
    }
  }
  return Status::OK();
}

Status CheckCustomBounds(const std::vector<double>& bounds, const std::vector<Span>& spans, size_t n_buckets) {
  double prev = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < bounds.size(); i++) {
    double curr = bounds[i];
    if (std::isnan(curr)) return Invalid("histogram custom bounds must not be NaN");
    if (i > 0 && curr <= prev) {
      return Invalid("previous bound is " + GoFixed6(prev) + " and current is " + GoFixed6(curr) +
                     ": histogram custom bounds must be in strictly increasing order");
    }
    prev = curr;
  }
  if (prev == std::numeric_limits<double>::infinity()) {
    return Invalid("last +Inf bound must not be explicitly defined: histogram custom bounds must be finite");
  }
  uint64_t span_buckets = 0;
  int64_t total_span_length = 0;
  for (size_t n = 0; n < spans.size(); n++) {
    if (spans[n].offset < 0) {
      return Invalid("span number " + std::to_string(n + 1) + " with offset " + std::to_string(spans[n].offset) + ": " +
                     kNegativeOffset);
    }
    span_buckets += spans[n].length;
    total_span_length += static_cast<int64_t>(spans[n].length) + spans[n].offset;
  }
  if (span_buckets != n_buckets) {
    return Invalid("spans need " + std::to_string(span_buckets) + " buckets, have " + std::to_string(n_buckets) +
                   " buckets: " + kSpansBucketsMismatch);
  }
  if (static_cast<int64_t>(bounds.size()) + 1 < total_span_length) {
    return Invalid("only " + std::to_string(bounds.size()) +
                   " custom bounds defined which is insufficient to cover total span length of " +
                   std::to_string(total_span_length) + ": histogram custom bounds are too few");
  }
  return Status::OK();
}

// Whether going from the buckets of prev to those of curr (same schema,
// same order) loses observations: a bucket shrank, or a populated one went.
bool DetectResetIn(ForwardBucketIter* curr, ForwardBucketIter* prev) {
  if (!prev->Next()) return false;
  // Any populated bucket left in prev means a reset.
  auto rest_of_prev_populated = [&]() {
    for (;;) {
      if (prev->count() != 0) return true;
      if (!prev->Next()) return false;
    }
  };
  if (!curr->Next()) return rest_of_prev_populated();
  for (;;) {
    while (curr->index() < prev->index()) {
      if (!curr->Next()) return rest_of_prev_populated();
    }
    if (curr->index() > prev->index()) {
      if (prev->count() != 0) return true;
    } else if (curr->count() < prev->count()) {
      return true;
    }
    if (!prev->Next()) return false;
  }
}

// Sum of the buckets of `it` up to `bound`, from `*bucket` on (the first
// bucket if not started). *has_more says whether a bucket is left in
// *bucket.
double RollupSumForBound(ForwardBucketIter* it, bool started, Bucket* bucket, double bound, bool* has_more) {
  if (!started) {
    if (!it->Next()) {
      *has_more = false;
      return 0;
    }
    *bucket = it->At();
  }
  double sum = 0;
  while (bucket->upper <= bound) {
    sum += bucket->count;
    if (!it->Next()) {
      *has_more = false;
      return sum;
    }
    *bucket = it->At();
  }
  *has_more = true;
  return sum;
}

// DetectReset for custom buckets with different bounds: compares the
// cumulative counts at every bound both have.
bool DetectResetWithMismatchedCustomBounds(const FloatHistogram& h, const FloatHistogram& previous) {
  const std::vector<double>& cb = h.custom_values;
  const std::vector<double>& pb = previous.custom_values;
  ForwardBucketIter curr_it(h, true, 0, kCustomBucketsSchema);
  ForwardBucketIter prev_it(previous, true, 0, kCustomBucketsSchema);
  Bucket curr_bucket, prev_bucket;
  bool curr_started = false, curr_has_more = false, prev_started = false, prev_has_more = false;
  size_t ci = 0, pi = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (ci <= cb.size() && pi <= pb.size()) {
    double curr_bound = ci < cb.size() ? cb[ci] : kInf;
    double prev_bound = pi < pb.size() ? pb[pi] : kInf;
    if (curr_bound == prev_bound) {
      double curr_sum = 0;
      if (!curr_started || curr_has_more) {
        curr_sum = RollupSumForBound(&curr_it, curr_started, &curr_bucket, curr_bound, &curr_has_more);
        curr_started = true;
      }
      double prev_sum = 0;
      if (!prev_started || prev_has_more) {
        prev_sum = RollupSumForBound(&prev_it, prev_started, &prev_bucket, curr_bound, &prev_has_more);
        prev_started = true;
      }
      if (curr_sum < prev_sum) return true;
      ci++;
      pi++;
    } else if (curr_bound < prev_bound) {
      ci++;
    } else {
      pi++;
    }
  }
  return false;
}

}  // namespace

bool FloatHistogram::Equals(const FloatHistogram& o) const {
  if (schema != o.schema || Bits(count) != Bits(o.count) || Bits(sum) != Bits(o.sum)) return false;
  if (UsesCustomBuckets() && !CustomBoundsMatch(custom_values, o.custom_values)) return false;
  if (zero_threshold != o.zero_threshold || Bits(zero_count) != Bits(o.zero_count)) return false;
  return SpansMatch(negative_spans, o.negative_spans) && BucketsMatchBits(negative_buckets, o.negative_buckets) &&
         SpansMatch(positive_spans, o.positive_spans) && BucketsMatchBits(positive_buckets, o.positive_buckets);
}

Status FloatHistogram::Validate() const {
  if (IsCustomBucketsSchema(schema)) {
    Status st = CheckCustomBounds(custom_values, positive_spans, positive_buckets.size());
    if (!st.ok()) return st.Annotate("custom buckets");
    if (zero_count != 0) return Invalid("custom buckets: must have zero count of 0");
    if (zero_threshold != 0) return Invalid("custom buckets: must have zero threshold of 0");
    if (!negative_spans.empty()) return Invalid("custom buckets: must not have negative spans");
    if (!negative_buckets.empty()) return Invalid("custom buckets: must not have negative buckets");
  } else if (IsExponentialSchema(schema)) {
    Status st = CheckSpans(positive_spans, positive_buckets.size());
    if (!st.ok()) return st.Annotate("positive side");
    st = CheckSpans(negative_spans, negative_buckets.size());
    if (!st.ok()) return st.Annotate("negative side");
    st = CheckBuckets(negative_buckets);
    if (!st.ok()) return st.Annotate("negative side");
    if (zero_count < 0) {
      return Invalid("zero bucket has observation count of " + GoFloat(zero_count) +
                     ": histogram has a bucket whose observation count is negative");
    }
    if (!custom_values.empty()) return Invalid("histogram with exponential schema must not have custom bounds");
  } else {
    return Invalid(
        "histogram has an invalid schema, which must be between -4 and 8 for exponential buckets, or -53 for custom "
        "buckets, got schema " +
        std::to_string(schema));
  }
  if (count < 0) {
    // Two spaces, as in Prometheus's message.
    return Invalid("observation count is  " + GoFloat(count) + ": histogram's observation count is negative");
  }
  Status st = CheckBuckets(positive_buckets);
  if (!st.ok()) return st.Annotate("positive side");
  return Status::OK();
}

bool FloatHistogram::DetectReset(const FloatHistogram& previous) const {
  if (counter_reset_hint == CounterResetHint::kCounterReset) return true;
  if (counter_reset_hint == CounterResetHint::kNotCounterReset) return false;
  // Unknown and gauge hints (PromQL lets counter functions run on gauges)
  // are both checked in full.
  if (count < previous.count) return true;
  if (UsesCustomBuckets()) {
    if (!previous.UsesCustomBuckets()) return true;
    if (!CustomBoundsMatch(custom_values, previous.custom_values)) {
      return DetectResetWithMismatchedCustomBounds(*this, previous);
    }
  }
  if (schema > previous.schema) return true;
  if (zero_threshold < previous.zero_threshold) return true;
  histogram_internal::ZeroCountResult prev_zero =
      histogram_internal::ZeroCountForLargerThreshold(previous, zero_threshold, nullptr);
  // A populated bucket of previous straddles the new threshold.
  if (prev_zero.threshold != zero_threshold) return true;
  if (zero_count < prev_zero.zero_count) return true;
  ForwardBucketIter curr_pos(*this, true, zero_threshold, schema);
  ForwardBucketIter prev_pos(previous, true, zero_threshold, schema);
  if (DetectResetIn(&curr_pos, &prev_pos)) return true;
  ForwardBucketIter curr_neg(*this, false, zero_threshold, schema);
  ForwardBucketIter prev_neg(previous, false, zero_threshold, schema);
  return DetectResetIn(&curr_neg, &prev_neg);
}

}  // namespace trainwatch::model
