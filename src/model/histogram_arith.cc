// FloatHistogram arithmetic: Add, Sub and KahanAdd with zero-bucket,
// schema and custom-bound reconciliation, and Compact. The order of float
// operations follows Prometheus's float_histogram.go exactly.

#include <cmath>

#include "model/histogram.h"
#include "model/histogram_internal.h"

namespace trainwatch::model {

using histogram_internal::ForwardBucketIter;
using histogram_internal::KahanInc;
using histogram_internal::ZeroCountForLargerThreshold;
using histogram_internal::ZeroCountResult;

namespace histogram_internal {

ZeroCountResult ZeroCountForLargerThreshold(const FloatHistogram& h, double larger, const FloatHistogram* c) {
  ZeroCountResult r;
  r.comp_zero_count = c != nullptr ? c->zero_count : 0;
  if (larger == h.zero_threshold) {
    r.zero_count = h.zero_count;
    r.threshold = larger;
    return r;
  }
  auto comp_at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : 0.0; };
  for (;;) {
    // A restart (the negative side moved the threshold) recounts from the
    // zero count but, as in Prometheus, keeps the compensation so far.
    r.zero_count = h.zero_count;
    bool restart = false;
    ForwardBucketIter pos(h, true);
    for (size_t i = 0; pos.Next(); i++) {
      Bucket b = pos.At();
      if (b.lower >= larger) break;
      KahanInc(b.count, &r.zero_count, &r.comp_zero_count);
      if (c != nullptr) KahanInc(comp_at(c->positive_buckets, i), &r.zero_count, &r.comp_zero_count);
      if (b.upper > larger) {
        if (b.count != 0) larger = b.upper;
        break;
      }
    }
    ForwardBucketIter neg(h, false);
    for (size_t i = 0; neg.Next(); i++) {
      Bucket b = neg.At();
      if (b.upper <= -larger) break;
      KahanInc(b.count, &r.zero_count, &r.comp_zero_count);
      if (c != nullptr) KahanInc(comp_at(c->negative_buckets, i), &r.zero_count, &r.comp_zero_count);
      if (b.lower < -larger) {
        if (b.count != 0) {
          larger = -b.lower;
          restart = true;
        }
        break;
      }
    }
    if (!restart) {
      r.threshold = larger;
      return r;
    }
  }
}

}  // namespace histogram_internal

namespace {

constexpr const char* kIncompatibleSchemas =
    "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas";

void KahanCompact(FloatHistogram* h, FloatHistogram* c, int max_empty_buckets) {
  histogram_internal::CompactBuckets(&h->positive_buckets, &c->positive_buckets, &h->positive_spans, max_empty_buckets);
  histogram_internal::CompactBuckets(&h->negative_buckets, &c->negative_buckets, &h->negative_spans, max_empty_buckets);
}

// Empties the buckets inside h's zero bucket (their counts are already in
// the zero count) and compacts them away.
void TrimBucketsInZeroBucket(FloatHistogram* h, FloatHistogram* c) {
  ForwardBucketIter pos(*h, true);
  for (size_t i = 0; pos.Next(); i++) {
    if (pos.At().lower >= h->zero_threshold) break;
    h->positive_buckets[i] = 0;
    if (c != nullptr && i < c->positive_buckets.size()) c->positive_buckets[i] = 0;
  }
  ForwardBucketIter neg(*h, false);
  for (size_t i = 0; neg.Next(); i++) {
    if (neg.At().upper <= -h->zero_threshold) break;
    h->negative_buckets[i] = 0;
    if (c != nullptr && i < c->negative_buckets.size()) c->negative_buckets[i] = 0;
  }
  if (c != nullptr) {
    KahanCompact(h, c, 0);
  } else {
    h->Compact(0);
  }
}

struct OtherZero {
  double zero_count = 0;
  double comp_zero_count = 0;
};

// Widens h's zero bucket and computes other's zero count until both share
// a threshold that lies in no populated bucket of either. h (and c) change,
// other does not: its would-be zero count (and compensation) is returned.
OtherZero ReconcileZeroBuckets(FloatHistogram* h, const FloatHistogram& other, FloatHistogram* c) {
  OtherZero o;
  o.zero_count = other.zero_count;
  double other_threshold = other.zero_threshold;
  // Prometheus loops forever on a NaN threshold; stop instead.
  while (other_threshold != h->zero_threshold && !std::isnan(other_threshold) && !std::isnan(h->zero_threshold)) {
    if (h->zero_threshold > other_threshold) {
      ZeroCountResult r = ZeroCountForLargerThreshold(other, h->zero_threshold, nullptr);
      o.zero_count = r.zero_count;
      other_threshold = r.threshold;
      o.comp_zero_count = r.comp_zero_count;
    }
    if (other_threshold > h->zero_threshold) {
      ZeroCountResult r = ZeroCountForLargerThreshold(*h, other_threshold, c);
      h->zero_count = r.zero_count;
      h->zero_threshold = r.threshold;
      if (c != nullptr) c->zero_count = r.comp_zero_count;
      TrimBucketsInZeroBucket(h, c);
    }
  }
  return o;
}

bool CustomBoundsMatch(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

std::vector<double> IntersectCustomBounds(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      out.push_back(a[i]);
      i++;
      j++;
    } else if (a[i] < b[j]) {
      i++;
    } else {
      j++;
    }
  }
  return out;
}

// a (+ or -) b for custom buckets with different bounds: each bucket goes
// into the bucket of `bounds` (the intersection) that covers it, summed with
// Kahan steps; comp_a (nullable) is a's compensation, added after a's value.
// Empty buckets are left out of the result. Returns the compensation.
std::vector<double> AddCustomBucketsWithMismatches(bool subtract, std::vector<Span>* spans_a,
                                                   std::vector<double>* buckets_a, const std::vector<double>& bounds_a,
                                                   const std::vector<Span>& spans_b, const std::vector<double>& buckets_b,
                                                   const std::vector<double>& bounds_b, const std::vector<double>* comp_a,
                                                   const std::vector<double>& bounds) {
  std::vector<double> target(bounds.size() + 1, 0.0);
  std::vector<double> c_target(bounds.size() + 1, 0.0);
  auto map_buckets = [&](const std::vector<Span>& spans, const std::vector<double>& buckets,
                         const std::vector<double>& src_bounds, bool negate, const std::vector<double>* comp) {
    int64_t src_idx = 0;
    size_t bucket_idx = 0;
    size_t intersect_idx = 0;
    for (const Span& span : spans) {
      src_idx += span.offset;
      for (uint32_t k = 0; k < span.length; k++) {
        if (bucket_idx < buckets.size()) {
          double value = buckets[bucket_idx];
          size_t t = target.size() - 1;  // the +Inf bucket unless a bound covers it
          if (src_idx >= 0 && src_idx < static_cast<int64_t>(src_bounds.size())) {
            double src_bound = src_bounds[static_cast<size_t>(src_idx)];
            // Both bound lists are sorted: carry on where the last bucket stopped.
            for (; intersect_idx < bounds.size(); intersect_idx++) {
              if (bounds[intersect_idx] >= src_bound) {
                t = intersect_idx;
                break;
              }
            }
          }
          if (negate) {
            KahanInc(-value, &target[t], &c_target[t]);
          } else {
            KahanInc(value, &target[t], &c_target[t]);
            if (comp != nullptr && bucket_idx < comp->size()) KahanInc((*comp)[bucket_idx], &target[t], &c_target[t]);
          }
        }
        src_idx++;
        bucket_idx++;
      }
    }
  };
  map_buckets(*spans_a, *buckets_a, bounds_a, false, comp_a);
  map_buckets(spans_b, buckets_b, bounds_b, subtract, nullptr);

  spans_a->clear();
  buckets_a->clear();
  std::vector<double> comp_out;
  int32_t last_idx = -1;
  for (size_t i = 0; i < target.size(); i++) {
    if (target[i] == 0 && c_target[i] == 0) continue;
    buckets_a->push_back(target[i]);
    comp_out.push_back(c_target[i]);
    int32_t idx = static_cast<int32_t>(i);
    if (!spans_a->empty() && idx == last_idx + 1) {
      spans_a->back().length++;
    } else {
      spans_a->push_back(Span{spans_a->empty() ? idx : idx - last_idx - 1, 1});
    }
    last_idx = idx;
  }
  return comp_out;
}

// A compensation histogram nobody has used yet: what callers start with.
bool IsPristine(const FloatHistogram& c) {
  return c.counter_reset_hint == CounterResetHint::kUnknown && c.schema == 0 && c.zero_threshold == 0 &&
         c.zero_count == 0 && c.count == 0 && c.sum == 0 && c.positive_spans.empty() && c.negative_spans.empty() &&
         c.positive_buckets.empty() && c.negative_buckets.empty() && c.custom_values.empty();
}

}  // namespace

// Sets the receiver's hint for a sum or difference; true on a direct
// collision of kCounterReset and kNotCounterReset.
static bool AdjustCounterReset(FloatHistogram* h, const FloatHistogram& other) {
  CounterResetHint a = h->counter_reset_hint, b = other.counter_reset_hint;
  if (a == b || a == CounterResetHint::kGauge) return false;
  if (b == CounterResetHint::kGauge) {
    h->counter_reset_hint = CounterResetHint::kGauge;
    return false;
  }
  if (a == CounterResetHint::kUnknown) return false;
  h->counter_reset_hint = CounterResetHint::kUnknown;
  return b != CounterResetHint::kUnknown;
}

static Result<FloatHistogram::AddResult> AddOrSub(FloatHistogram* h, const FloatHistogram& other, bool subtract) {
  if (h->UsesCustomBuckets() != other.UsesCustomBuckets()) return Status::InvalidArgument(kIncompatibleSchemas);
  FloatHistogram::AddResult res;
  res.counter_reset_collision = AdjustCounterReset(h, other);
  if (!h->UsesCustomBuckets()) {
    double other_zero = ReconcileZeroBuckets(h, other, nullptr).zero_count;
    if (subtract) {
      h->zero_count -= other_zero;
    } else {
      h->zero_count += other_zero;
    }
  }
  if (subtract) {
    h->count -= other.count;
    h->sum -= other.sum;
  } else {
    h->count += other.count;
    h->sum += other.sum;
  }

  if (h->UsesCustomBuckets()) {
    if (CustomBoundsMatch(h->custom_values, other.custom_values)) {
      histogram_internal::AddBuckets(h->schema, h->zero_threshold, subtract, &h->positive_spans, &h->positive_buckets,
                                     other.positive_spans, other.positive_buckets, nullptr, nullptr);
    } else {
      res.nhcb_bounds_reconciled = true;
      std::vector<double> bounds = IntersectCustomBounds(h->custom_values, other.custom_values);
      AddCustomBucketsWithMismatches(subtract, &h->positive_spans, &h->positive_buckets, h->custom_values,
                                     other.positive_spans, other.positive_buckets, other.custom_values, nullptr,
                                     bounds);
      h->custom_values = std::move(bounds);
    }
    return res;
  }

  const std::vector<Span>* o_pos_spans = &other.positive_spans;
  const std::vector<double>* o_pos_buckets = &other.positive_buckets;
  const std::vector<Span>* o_neg_spans = &other.negative_spans;
  const std::vector<double>* o_neg_buckets = &other.negative_buckets;
  std::vector<Span> ps, ns;
  std::vector<double> pb, nb;
  bool ok = true;
  if (other.schema < h->schema) {
    ok = histogram_internal::ReduceResolutionOf(h->positive_spans, h->positive_buckets, h->schema, other.schema, &ps,
                                                &pb) &&
         histogram_internal::ReduceResolutionOf(h->negative_spans, h->negative_buckets, h->schema, other.schema, &ns,
                                                &nb);
    if (ok) {
      h->positive_spans = std::move(ps);
      h->positive_buckets = std::move(pb);
      h->negative_spans = std::move(ns);
      h->negative_buckets = std::move(nb);
      h->schema = other.schema;
    }
  } else if (other.schema > h->schema) {
    ok = histogram_internal::ReduceResolutionOf(other.positive_spans, other.positive_buckets, other.schema, h->schema,
                                                &ps, &pb) &&
         histogram_internal::ReduceResolutionOf(other.negative_spans, other.negative_buckets, other.schema, h->schema,
                                                &ns, &nb);
    o_pos_spans = &ps;
    o_pos_buckets = &pb;
    o_neg_spans = &ns;
    o_neg_buckets = &nb;
  }
  if (!ok) return Status::InvalidArgument("histogram spans specify different number of buckets than provided");
  histogram_internal::AddBuckets(h->schema, h->zero_threshold, subtract, &h->positive_spans, &h->positive_buckets,
                                 *o_pos_spans, *o_pos_buckets, nullptr, nullptr);
  histogram_internal::AddBuckets(h->schema, h->zero_threshold, subtract, &h->negative_spans, &h->negative_buckets,
                                 *o_neg_spans, *o_neg_buckets, nullptr, nullptr);
  return res;
}

Result<FloatHistogram::AddResult> FloatHistogram::Add(const FloatHistogram& other) {
  if (&other == this) return AddOrSub(this, FloatHistogram(other), false);
  return AddOrSub(this, other, false);
}

Result<FloatHistogram::AddResult> FloatHistogram::Sub(const FloatHistogram& other) {
  if (&other == this) return AddOrSub(this, FloatHistogram(other), true);
  return AddOrSub(this, other, true);
}

Result<FloatHistogram::AddResult> FloatHistogram::KahanAdd(const FloatHistogram& other, FloatHistogram* c) {
  if (&other == this || &other == c) {
    FloatHistogram copy = other;
    return KahanAdd(copy, c);
  }
  if (UsesCustomBuckets() != other.UsesCustomBuckets()) return Status::InvalidArgument(kIncompatibleSchemas);
  AddResult res;
  res.counter_reset_collision = AdjustCounterReset(this, other);

  if (IsPristine(*c)) {
    // A fresh compensation: this histogram's layout with zero buckets, and
    // its hint as it stands after the adjustment above.
    c->counter_reset_hint = counter_reset_hint;
    c->schema = schema;
    c->zero_threshold = zero_threshold;
    c->custom_values = custom_values;
    c->positive_spans = positive_spans;
    c->negative_spans = negative_spans;
    c->positive_buckets.assign(positive_buckets.size(), 0.0);
    c->negative_buckets.assign(UsesCustomBuckets() ? 0 : negative_buckets.size(), 0.0);
  } else if (c->positive_buckets.size() != positive_buckets.size() ||
             (!UsesCustomBuckets() && c->negative_buckets.size() != negative_buckets.size())) {
    // Not this histogram's compensation any more (e.g. Div(0) dropped its
    // buckets): restart the per-bucket compensation.
    c->positive_buckets.assign(positive_buckets.size(), 0.0);
    c->negative_buckets.assign(UsesCustomBuckets() ? 0 : negative_buckets.size(), 0.0);
  }

  if (!UsesCustomBuckets()) {
    OtherZero o = ReconcileZeroBuckets(this, other, c);
    KahanInc(o.zero_count, &zero_count, &c->zero_count);
    KahanInc(o.comp_zero_count, &zero_count, &c->zero_count);
  }
  KahanInc(other.count, &count, &c->count);
  KahanInc(other.sum, &sum, &c->sum);

  if (UsesCustomBuckets()) {
    if (CustomBoundsMatch(custom_values, other.custom_values)) {
      histogram_internal::AddBuckets(schema, zero_threshold, false, &positive_spans, &positive_buckets,
                                     other.positive_spans, other.positive_buckets, &c->positive_buckets, nullptr);
    } else {
      res.nhcb_bounds_reconciled = true;
      std::vector<double> bounds = IntersectCustomBounds(custom_values, other.custom_values);
      c->positive_buckets = AddCustomBucketsWithMismatches(false, &positive_spans, &positive_buckets, custom_values,
                                                           other.positive_spans, other.positive_buckets,
                                                           other.custom_values, &c->positive_buckets, bounds);
      custom_values = bounds;
      c->custom_values = std::move(bounds);
    }
    c->positive_spans = positive_spans;
    return res;
  }

  std::vector<Span> o_ps, o_ns;
  std::vector<double> o_pb, o_nb, o_pc, o_nc;
  const std::vector<Span>* o_pos_spans = &other.positive_spans;
  const std::vector<double>* o_pos_buckets = &other.positive_buckets;
  const std::vector<Span>* o_neg_spans = &other.negative_spans;
  const std::vector<double>* o_neg_buckets = &other.negative_buckets;
  const std::vector<double>* o_pos_comp = nullptr;
  const std::vector<double>* o_neg_comp = nullptr;
  if (other.schema < schema) {
    histogram_internal::KahanReduceResolutionOf(&positive_spans, &positive_buckets, &c->positive_buckets, schema,
                                                other.schema);
    histogram_internal::KahanReduceResolutionOf(&negative_spans, &negative_buckets, &c->negative_buckets, schema,
                                                other.schema);
    schema = other.schema;
  } else if (other.schema > schema) {
    // Merging other's buckets is itself a Kahan sum, whose compensation is
    // added along with them.
    if (!other.positive_buckets.empty()) {
      o_ps = other.positive_spans;
      o_pb = other.positive_buckets;
      o_pc.assign(o_pb.size(), 0.0);
      histogram_internal::KahanReduceResolutionOf(&o_ps, &o_pb, &o_pc, other.schema, schema);
      o_pos_spans = &o_ps;
      o_pos_buckets = &o_pb;
      o_pos_comp = &o_pc;
    }
    if (!other.negative_buckets.empty()) {
      o_ns = other.negative_spans;
      o_nb = other.negative_buckets;
      o_nc.assign(o_nb.size(), 0.0);
      histogram_internal::KahanReduceResolutionOf(&o_ns, &o_nb, &o_nc, other.schema, schema);
      o_neg_spans = &o_ns;
      o_neg_buckets = &o_nb;
      o_neg_comp = &o_nc;
    }
  }
  histogram_internal::AddBuckets(schema, zero_threshold, false, &positive_spans, &positive_buckets, *o_pos_spans,
                                 *o_pos_buckets, &c->positive_buckets, o_pos_comp);
  histogram_internal::AddBuckets(schema, zero_threshold, false, &negative_spans, &negative_buckets, *o_neg_spans,
                                 *o_neg_buckets, &c->negative_buckets, o_neg_comp);
  c->schema = schema;
  c->zero_threshold = zero_threshold;
  c->positive_spans = positive_spans;
  c->negative_spans = negative_spans;
  return res;
}

FloatHistogram& FloatHistogram::Compact(int max_empty_buckets) {
  histogram_internal::CompactBuckets(&positive_buckets, nullptr, &positive_spans, max_empty_buckets);
  histogram_internal::CompactBuckets(&negative_buckets, nullptr, &negative_spans, max_empty_buckets);
  return *this;
}

}  // namespace trainwatch::model
