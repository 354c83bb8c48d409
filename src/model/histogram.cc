// FloatHistogram basics: bucket bounds and iteration, scaling, resolution,
// overflow, and the String / TestExpression forms. Arithmetic lives in
// histogram_arith.cc, checks (Equals, Validate, DetectReset) in
// histogram_check.cc, trimming in histogram_trim.cc.

#include "model/histogram.h"

#include <charconv>
#include <cfloat>
#include <climits>
#include <cmath>
#include <string_view>

#include "model/histogram_internal.h"

namespace trainwatch::model {

using histogram_internal::AppendGoFloat;
using histogram_internal::ForwardBucketIter;
using histogram_internal::ReverseBucketIter;

namespace histogram_internal {

double ExponentialBound(int32_t idx, int32_t schema) {
  // The formula puts the upper bound of the last finite bucket just past
  // DBL_MAX, i.e. at +Inf; Prometheus keeps +Inf for the bucket after it
  // (observations of ±Inf) and ends the last finite one at DBL_MAX.
  if (schema < 0) {
    int64_t exp = static_cast<int64_t>(idx) * (int64_t{1} << -schema);
    if (exp == 1024) return DBL_MAX;
    if (exp > 4096) exp = 4096;  // ldexp takes an int; the result is +Inf or 0 either way
    if (exp < -4096) exp = -4096;
    return std::ldexp(1.0, static_cast<int>(exp));
  }
  if (schema > kExponentialSchemaMax) {
    // Reserved schemas are reduced to 8 on ingest; a bound computed here is
    // close but not bit-exact.
    return std::exp2(static_cast<double>(idx) / static_cast<double>(int64_t{1} << schema));
  }
  int32_t frac_idx = idx & ((1 << schema) - 1);
  double frac = ExponentialBoundFraction(schema, frac_idx);
  int64_t exp = (static_cast<int64_t>(idx) >> schema) + 1;
  if (frac == 0.5 && exp == 1025) return DBL_MAX;
  if (exp > 4096) exp = 4096;
  if (exp < -4096) exp = -4096;
  return std::ldexp(frac, static_cast<int>(exp));
}

Bucket MakeBucket(int32_t idx, double count, int32_t schema, bool positive, const std::vector<double>& custom_values) {
  Bucket b;
  b.count = count;
  b.index = idx;
  if (positive) {
    b.upper = BucketBound(idx, schema, custom_values);
    b.lower = BucketBound(idx - 1, schema, custom_values);
  } else {
    b.lower = -BucketBound(idx, schema, custom_values);
    b.upper = -BucketBound(idx - 1, schema, custom_values);
  }
  if (IsCustomBucketsSchema(schema)) {
    b.lower_inclusive = idx == 0;
    b.upper_inclusive = true;
  } else {
    b.lower_inclusive = b.lower < 0;
    b.upper_inclusive = b.upper > 0;
  }
  return b;
}

static const std::vector<double> kNoCustomValues;

ForwardBucketIter::ForwardBucketIter(const FloatHistogram& h, bool positive, double abs_start, int32_t target_schema)
    : spans_(positive ? &h.positive_spans : &h.negative_spans),
      buckets_(positive ? &h.positive_buckets : &h.negative_buckets),
      custom_values_(positive ? &h.custom_values : &kNoCustomValues),
      schema_(h.schema),
      target_schema_(target_schema),
      positive_(positive),
      abs_start_(abs_start),
      bound_reached_start_(abs_start == 0) {}

bool ForwardBucketIter::Next() {
  const std::vector<Span>& spans = *spans_;
  const std::vector<double>& buckets = *buckets_;
  const int n_spans = static_cast<int>(spans.size());
  for (;;) {
    if (spans_idx_ >= n_spans) return false;
    Span span = spans[spans_idx_];
    if (schema_ == target_schema_) {
      // Index bookkeeping happens before the bounds checks, as in
      // Prometheus, so that zero-length spans are stepped over correctly.
      if (buckets_idx_ == 0) {
        curr_idx_ = span.offset;
      } else {
        curr_idx_++;
      }
      if (buckets_idx_ >= buckets.size()) return false;
      while (idx_in_span_ >= span.length) {
        idx_in_span_ = 0;
        spans_idx_++;
        if (spans_idx_ >= n_spans) return false;
        span = spans[spans_idx_];
        curr_idx_ += span.offset;
      }
      curr_count_ = buckets[buckets_idx_];
      idx_in_span_++;
      buckets_idx_++;
    } else {
      // Merge every origin bucket that falls into one target bucket; the
      // position is committed only for buckets actually merged.
      int32_t orig_idx = orig_idx_;
      int spans_idx = spans_idx_;
      uint32_t idx_in_span = idx_in_span_;
      bool first_pass = true;
      curr_count_ = 0;
      for (;;) {
        if (buckets_idx_ == 0) {
          orig_idx = span.offset;
        } else {
          orig_idx++;
        }
        if (buckets_idx_ >= buckets.size()) {
          if (first_pass) return false;
          break;
        }
        bool exhausted = false;
        while (idx_in_span >= span.length) {
          idx_in_span = 0;
          spans_idx++;
          if (spans_idx >= n_spans) {
            exhausted = true;
            break;
          }
          span = spans[spans_idx];
          orig_idx += span.offset;
        }
        if (exhausted) {
          if (first_pass) return false;
          break;
        }
        int32_t idx = histogram_internal::TargetIdx(orig_idx, schema_, target_schema_);
        if (first_pass) {
          curr_idx_ = idx;
          first_pass = false;
        } else if (idx != curr_idx_) {
          break;
        }
        curr_count_ += buckets[buckets_idx_];
        idx_in_span++;
        buckets_idx_++;
        orig_idx_ = orig_idx;
        spans_idx_ = spans_idx;
        idx_in_span_ = idx_in_span;
      }
    }
    if (!bound_reached_start_ && IsExponentialSchema(target_schema_) &&
        ExponentialBound(curr_idx_, target_schema_) <= abs_start_) {
      continue;
    }
    bound_reached_start_ = true;
    return true;
  }
}

ReverseBucketIter::ReverseBucketIter(const FloatHistogram& h, bool positive)
    : spans_(positive ? &h.positive_spans : &h.negative_spans),
      buckets_(positive ? &h.positive_buckets : &h.negative_buckets),
      custom_values_(positive ? &h.custom_values : &kNoCustomValues),
      schema_(h.schema),
      positive_(positive),
      spans_idx_(static_cast<int>(spans_->size()) - 1),
      buckets_idx_(static_cast<int64_t>(buckets_->size()) - 1) {
  if (spans_idx_ >= 0) idx_in_span_ = static_cast<int32_t>((*spans_)[spans_idx_].length) - 1;
  for (const Span& s : *spans_) curr_idx_ += s.offset + static_cast<int32_t>(s.length);
}

bool ReverseBucketIter::Next() {
  curr_idx_--;
  if (buckets_idx_ < 0) return false;
  while (idx_in_span_ < 0) {
    spans_idx_--;
    if (spans_idx_ < 0) return false;
    idx_in_span_ = static_cast<int32_t>((*spans_)[spans_idx_].length) - 1;
    curr_idx_ -= (*spans_)[spans_idx_ + 1].offset;
  }
  curr_count_ = (*buckets_)[buckets_idx_];
  buckets_idx_--;
  idx_in_span_--;
  return true;
}

void AppendGoFloat(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  // Shortest round-trip digits; exponent form when the decimal exponent is
  // < -4 or >= 6, which is when Go's %g switches for shortest output.
  char buf[400];  // fixed notation of DBL_MAX has 309 digits
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(sci.ptr - buf));
  size_t e = s.find('e');
  int exp = 0;
  const char* p = buf + e + 1;
  if (*p == '+') p++;
  std::from_chars(p, sci.ptr, exp);
  if (exp < -4 || exp >= 6) {
    out->append(s);  // "d.ddde+XX": two exponent digits at least, as in Go
    return;
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out->append(buf, fixed.ptr);
}

std::string GoFloat(double v) {
  std::string s;
  AppendGoFloat(&s, v);
  return s;
}

}  // namespace histogram_internal

double BucketBound(int32_t idx, int32_t schema, const std::vector<double>& custom_values) {
  if (IsCustomBucketsSchema(schema)) {
    int64_t n = static_cast<int64_t>(custom_values.size());
    // Prometheus panics outside [-1, n]; such indexes only come from
    // histograms that fail Validate, so they get the infinite bounds here.
    if (idx >= n) return HUGE_VAL;
    if (idx <= -1) return -HUGE_VAL;
    return custom_values[static_cast<size_t>(idx)];
  }
  return histogram_internal::ExponentialBound(idx, schema);
}

double Bucket::FractionBelow(double v, bool linear) const {
  if (linear) return (v - lower) / (upper - lower);
  // Exponential bounds are evenly spaced on a log scale; negative buckets
  // are mirrored.
  double log_lower = std::log2(std::fabs(lower));
  double log_upper = std::log2(std::fabs(upper));
  double log_v = std::log2(std::fabs(v));
  if (v > 0) return (log_v - log_lower) / (log_upper - log_lower);
  return 1 - ((log_v - log_upper) / (log_lower - log_upper));
}

std::string Bucket::String() const {
  std::string s(1, lower_inclusive ? '[' : '(');
  AppendGoFloat(&s, lower);
  s += ',';
  AppendGoFloat(&s, upper);
  s += upper_inclusive ? ']' : ')';
  s += ':';
  AppendGoFloat(&s, count);
  return s;
}

Bucket FloatHistogram::ZeroBucket() const {
  Bucket b;
  b.lower = -zero_threshold;
  b.upper = zero_threshold;
  b.lower_inclusive = true;
  b.upper_inclusive = true;
  b.count = zero_count;
  return b;
}

FloatHistogram FloatHistogram::CopyToSchema(int32_t target) const {
  if (target == schema || UsesCustomBuckets() || IsCustomBucketsSchema(target) || target > schema) return *this;
  // As in Prometheus, the copy does not keep the counter reset hint.
  FloatHistogram c;
  c.schema = target;
  c.zero_threshold = zero_threshold;
  c.zero_count = zero_count;
  c.count = count;
  c.sum = sum;
  if (!histogram_internal::ReduceResolutionOf(positive_spans, positive_buckets, schema, target, &c.positive_spans,
                                              &c.positive_buckets) ||
      !histogram_internal::ReduceResolutionOf(negative_spans, negative_buckets, schema, target, &c.negative_spans,
                                              &c.negative_buckets)) {
    return *this;
  }
  return c;
}

void FloatHistogram::ReduceResolution(int32_t target) {
  if (UsesCustomBuckets() || IsCustomBucketsSchema(target) || target >= schema) return;
  std::vector<Span> ps, ns;
  std::vector<double> pb, nb;
  if (!histogram_internal::ReduceResolutionOf(positive_spans, positive_buckets, schema, target, &ps, &pb) ||
      !histogram_internal::ReduceResolutionOf(negative_spans, negative_buckets, schema, target, &ns, &nb)) {
    return;
  }
  positive_spans = std::move(ps);
  positive_buckets = std::move(pb);
  negative_spans = std::move(ns);
  negative_buckets = std::move(nb);
  schema = target;
}

FloatHistogram& FloatHistogram::Mul(double factor) {
  zero_count *= factor;
  count *= factor;
  sum *= factor;
  for (double& b : positive_buckets) b *= factor;
  for (double& b : negative_buckets) b *= factor;
  if (factor < 0) counter_reset_hint = CounterResetHint::kGauge;
  return *this;
}

FloatHistogram& FloatHistogram::Div(double divisor) {
  zero_count /= divisor;
  count /= divisor;
  sum /= divisor;
  if (divisor == 0) {
    // Every bucket would be +Inf or NaN: Prometheus drops them instead.
    positive_buckets.clear();
    negative_buckets.clear();
    positive_spans.clear();
    negative_spans.clear();
    return *this;
  }
  for (double& b : positive_buckets) b /= divisor;
  for (double& b : negative_buckets) b /= divisor;
  if (divisor < 0) counter_reset_hint = CounterResetHint::kGauge;
  return *this;
}

bool FloatHistogram::HasOverflow() const {
  if (std::isinf(zero_count) || std::isinf(count) || std::isinf(sum)) return true;
  for (double v : positive_buckets) {
    if (std::isinf(v)) return true;
  }
  for (double v : negative_buckets) {
    if (std::isinf(v)) return true;
  }
  for (double v : custom_values) {
    if (std::isinf(v)) return true;
  }
  return false;
}

std::vector<Bucket> FloatHistogram::PositiveBuckets() const {
  std::vector<Bucket> out;
  ForwardBucketIter it(*this, true);
  while (it.Next()) out.push_back(it.At());
  return out;
}

std::vector<Bucket> FloatHistogram::NegativeBuckets() const {
  std::vector<Bucket> out;
  ForwardBucketIter it(*this, false);
  while (it.Next()) out.push_back(it.At());
  return out;
}

// A bucket next to the zero bucket that reaches into it ends at the zero
// threshold instead.
static Bucket ClampToZeroBucket(Bucket b, double zero_threshold) {
  if (b.upper < 0 && b.upper > -zero_threshold) {
    b.upper = -zero_threshold;
  } else if (b.lower > 0 && b.lower < zero_threshold) {
    b.lower = zero_threshold;
  }
  return b;
}

std::vector<Bucket> FloatHistogram::AllBuckets() const {
  std::vector<Bucket> out;
  ReverseBucketIter left(*this, false);
  while (left.Next()) out.push_back(ClampToZeroBucket(left.At(), zero_threshold));
  if (zero_count > 0 && !UsesCustomBuckets()) out.push_back(ZeroBucket());
  ForwardBucketIter right(*this, true);
  while (right.Next()) out.push_back(ClampToZeroBucket(right.At(), zero_threshold));
  return out;
}

std::vector<Bucket> FloatHistogram::AllBucketsReverse() const {
  std::vector<Bucket> out;
  ReverseBucketIter left(*this, true);
  while (left.Next()) out.push_back(ClampToZeroBucket(left.At(), zero_threshold));
  if (zero_count > 0 && !UsesCustomBuckets()) out.push_back(ZeroBucket());
  ForwardBucketIter right(*this, false);
  while (right.Next()) out.push_back(ClampToZeroBucket(right.At(), zero_threshold));
  return out;
}

std::string FloatHistogram::String() const {
  std::string s = "{count:";
  AppendGoFloat(&s, count);
  s += ", sum:";
  AppendGoFloat(&s, sum);
  std::vector<Bucket> negative = NegativeBuckets();
  for (auto it = negative.rbegin(); it != negative.rend(); ++it) {
    if (it->count != 0) s += ", " + it->String();
  }
  if (zero_count != 0) s += ", " + ZeroBucket().String();
  ForwardBucketIter pos(*this, true);
  while (pos.Next()) {
    if (pos.count() != 0) s += ", " + pos.At().String();
  }
  s += '}';
  return s;
}

static void AppendTestBuckets(std::vector<std::string>* res, const char* buckets_key, const char* offset_key,
                              const std::vector<double>& buckets, const std::vector<Span>& spans) {
  // Compacted with no limit, a side has at most one span (Prometheus
  // refuses more).
  for (const Span& span : spans) {
    if (span.offset != 0) res->push_back(std::string(offset_key) + ":" + std::to_string(span.offset));
  }
  if (buckets.empty()) return;
  std::string s = std::string(buckets_key) + ":[";
  for (size_t i = 0; i < buckets.size(); i++) {
    if (i > 0) s += ' ';
    AppendGoFloat(&s, buckets[i]);
  }
  s += ']';
  res->push_back(std::move(s));
}

std::string FloatHistogram::TestExpression() const {
  FloatHistogram m = *this;
  m.Compact(INT_MAX);
  std::vector<std::string> res;
  if (m.schema != 0) res.push_back("schema:" + std::to_string(m.schema));
  if (m.count != 0) res.push_back("count:" + histogram_internal::GoFloat(m.count));
  if (m.sum != 0) res.push_back("sum:" + histogram_internal::GoFloat(m.sum));
  if (m.zero_count != 0) res.push_back("z_bucket:" + histogram_internal::GoFloat(m.zero_count));
  if (m.zero_threshold != 0) res.push_back("z_bucket_w:" + histogram_internal::GoFloat(m.zero_threshold));
  if (m.UsesCustomBuckets()) {
    std::string s = "custom_values:[";
    for (size_t i = 0; i < m.custom_values.size(); i++) {
      if (i > 0) s += ' ';
      AppendGoFloat(&s, m.custom_values[i]);
    }
    res.push_back(s + "]");
  }
  switch (m.counter_reset_hint) {
    case CounterResetHint::kUnknown:
      break;
    case CounterResetHint::kCounterReset:
      res.push_back("counter_reset_hint:reset");
      break;
    case CounterResetHint::kNotCounterReset:
      res.push_back("counter_reset_hint:not_reset");
      break;
    case CounterResetHint::kGauge:
      res.push_back("counter_reset_hint:gauge");
      break;
  }
  AppendTestBuckets(&res, "buckets", "offset", m.positive_buckets, m.positive_spans);
  AppendTestBuckets(&res, "n_buckets", "n_offset", m.negative_buckets, m.negative_spans);
  std::string out = "{{";
  for (size_t i = 0; i < res.size(); i++) {
    if (i > 0) out += ' ';
    out += res[i];
  }
  return out + "}}";
}

}  // namespace trainwatch::model
