// The span/bucket algorithms under FloatHistogram's arithmetic: adding one
// bucket layout into another, compaction and resolution reduction. Each
// follows Prometheus's generic.go / float_histogram.go step for step, Kahan
// compensation included, since the order of float additions shows in PromQL
// results.

#include <algorithm>
#include <cmath>

#include "model/histogram_internal.h"

namespace trainwatch::model::histogram_internal {

void AddBuckets(int32_t schema, double threshold, bool subtract, std::vector<Span>* spans_a_out,
                std::vector<double>* buckets_a_out, const std::vector<Span>& spans_b, const std::vector<double>& buckets_b,
                std::vector<double>* comp_a, const std::vector<double>* comp_b) {
  std::vector<Span>& spans_a = *spans_a_out;
  std::vector<double>& buckets_a = *buckets_a_out;
  int i_span = -1;  // -1 until the first bucket of b lands at or after a's first span
  int64_t i_bucket = -1;
  int32_t i_in_span = 0;
  int32_t index_a = 0;
  int32_t index_b = 0;
  size_t b_idx = 0;
  bool lower_than_threshold = true;

  auto add_at = [&](int64_t i, double v, double cv) {
    if (i < 0 || static_cast<size_t>(i) >= buckets_a.size()) return;  // only with spans that do not match buckets
    if (comp_a == nullptr) {
      buckets_a[i] += v;
      return;
    }
    KahanInc(v, &buckets_a[i], &(*comp_a)[i]);
    if (cv != 0) KahanInc(cv, &buckets_a[i], &(*comp_a)[i]);
  };
  auto insert_at = [&](int64_t i, double v, double cv) {
    buckets_a.insert(buckets_a.begin() + i, v);
    if (comp_a != nullptr) comp_a->insert(comp_a->begin() + i, cv);
  };
  auto n_spans = [&]() { return static_cast<int>(spans_a.size()); };

  // Adds bucket index_b of b into a.
  auto add_one = [&]() {
    if (lower_than_threshold && IsExponentialSchema(schema) && ExponentialBound(index_b, schema) <= threshold) return;
    lower_than_threshold = false;
    if (b_idx >= buckets_b.size()) return;
    double bucket_b = buckets_b[b_idx];
    double comp_bucket_b = comp_b != nullptr && b_idx < comp_b->size() ? (*comp_b)[b_idx] : 0;
    if (subtract) {
      bucket_b *= -1;
      comp_bucket_b *= -1;
    }
    if (i_span == -1) {
      if (spans_a.empty() || spans_a[0].offset > index_b) {
        // Before every bucket of a.
        insert_at(0, bucket_b, comp_bucket_b);
        if (!spans_a.empty() && spans_a[0].offset == index_b + 1) {
          spans_a[0].length++;
          spans_a[0].offset--;
          return;
        }
        spans_a.insert(spans_a.begin(), Span{index_b, 1});
        if (spans_a.size() > 1) spans_a[1].offset -= index_b + 1;  // absolute offset becomes relative
        return;
      }
      if (spans_a[0].offset == index_b) {
        add_at(0, bucket_b, comp_bucket_b);
        return;
      }
      i_span = 0;
      i_bucket = 0;
      i_in_span = 0;
      index_a = spans_a[0].offset;
    }
    int32_t delta = index_b - index_a;
    for (;;) {
      int32_t remaining = static_cast<int32_t>(spans_a[i_span].length) - i_in_span;
      if (delta < remaining) {
        i_bucket += delta;
        i_in_span += delta;
        add_at(i_bucket, bucket_b, comp_bucket_b);
        return;
      }
      delta -= remaining;
      i_bucket += remaining;
      i_span++;
      if (i_span == n_spans() || delta < spans_a[i_span].offset) {
        // In the gap after span i_span-1 (or after the last span).
        insert_at(i_bucket, bucket_b, comp_bucket_b);
        if (delta == 0) {
          // Right after the previous span: extend it.
          if (i_span < n_spans()) spans_a[i_span].offset--;
          i_span--;
          i_in_span = static_cast<int32_t>(spans_a[i_span].length);
          spans_a[i_span].length++;
          return;
        }
        if (i_span < n_spans() && delta == spans_a[i_span].offset - 1) {
          // Right before the next span: extend that one.
          i_in_span = 0;
          spans_a[i_span].offset--;
          spans_a[i_span].length++;
          return;
        }
        i_in_span = 0;
        if (i_span < n_spans()) spans_a[i_span].offset -= delta + 1;
        spans_a.insert(spans_a.begin() + i_span, Span{delta, 1});
        return;
      }
      delta -= spans_a[i_span].offset;  // try the start of the next span
      i_in_span = 0;
    }
  };

  for (const Span& span_b : spans_b) {
    index_b += span_b.offset;
    for (uint32_t j = 0; j < span_b.length; j++) {
      add_one();
      index_a = index_b;
      index_b++;
      b_idx++;
    }
  }
}

void CompactBuckets(std::vector<double>* buckets_out, std::vector<double>* comp, std::vector<Span>* spans_out,
                    int max_empty_buckets) {
  std::vector<double>& buckets = *buckets_out;
  std::vector<Span>& spans = *spans_out;
  if (comp != nullptr && comp->size() != buckets.size()) comp = nullptr;  // not a compensation of these buckets

  // Fast path: no empty bucket, no span to merge or drop.
  bool nothing_to_do = true;
  for (double b : buckets) {
    if (b == 0) {
      nothing_to_do = false;
      break;
    }
  }
  if (nothing_to_do) {
    for (const Span& s : spans) {
      if (static_cast<int64_t>(s.offset) <= max_empty_buckets || s.length == 0) {
        nothing_to_do = false;
        break;
      }
    }
    if (nothing_to_do) return;
  }

  size_t i_bucket = 0;
  size_t i_span = 0;
  uint32_t pos_in_span = 0;

  // Consecutive empty buckets (compensation included) from i_bucket on,
  // within the current span.
  auto empty_buckets_here = [&]() {
    size_t i = 0;
    double abs = buckets[i_bucket];
    double c = comp != nullptr ? (*comp)[i_bucket] : 0;
    while (static_cast<uint32_t>(i) + pos_in_span < spans[i_span].length && abs == 0 && c == 0) {
      i++;
      if (i + i_bucket >= buckets.size()) break;
      abs = buckets[i + i_bucket];
      if (comp != nullptr) c = (*comp)[i + i_bucket];
    }
    return i;
  };

  // Join spans that follow each other without a gap.
  if (spans.size() > 1) {
    for (size_t i = 1; i < spans.size(); i++) {
      Span span = spans[i];
      if (span.offset == 0) {
        spans[i_span].length += span.length;
        continue;
      }
      i_span++;
      if (i != i_span) spans[i_span] = span;
    }
    spans.resize(i_span + 1);
    i_span = 0;
  }
  // Drop zero-length spans, carrying their offsets over.
  for (size_t i = 0; i < spans.size(); i++) {
    Span span = spans[i];
    if (span.length == 0) {
      if (i + 1 < spans.size()) spans[i + 1].offset += span.offset;
      continue;
    }
    if (i != i_span) spans[i_span] = span;
    i_span++;
  }
  spans.resize(i_span);
  i_span = 0;
  if (spans.empty()) {
    buckets.clear();
    if (comp != nullptr) comp->clear();
    return;
  }

  // Cut empty buckets at the start and end of spans, and runs of more than
  // max_empty_buckets inside them.
  while (i_bucket < buckets.size() && i_span < spans.size()) {
    size_t n_empty = empty_buckets_here();
    if (n_empty > 0) {
      if (pos_in_span > 0 && n_empty < spans[i_span].length - pos_in_span &&
          static_cast<int64_t>(n_empty) <= max_empty_buckets) {
        i_bucket += n_empty;
        pos_in_span += static_cast<uint32_t>(n_empty);
        continue;
      }
      buckets.erase(buckets.begin() + i_bucket, buckets.begin() + i_bucket + n_empty);
      if (comp != nullptr) comp->erase(comp->begin() + i_bucket, comp->begin() + i_bucket + n_empty);
      if (pos_in_span == 0) {
        if (n_empty == spans[i_span].length) {
          int32_t offset = spans[i_span].offset;
          spans.erase(spans.begin() + i_span);
          if (spans.size() > i_span) spans[i_span].offset += offset + static_cast<int32_t>(n_empty);
          continue;
        }
        spans[i_span].length -= static_cast<uint32_t>(n_empty);
        spans[i_span].offset += static_cast<int32_t>(n_empty);
        continue;
      }
      // In the middle or at the end of the span: split it.
      Span new_span{static_cast<int32_t>(n_empty), spans[i_span].length - pos_in_span - static_cast<uint32_t>(n_empty)};
      spans[i_span].length = pos_in_span;
      i_span++;
      pos_in_span = 0;
      if (new_span.length == 0) {
        if (i_span < spans.size()) spans[i_span].offset += static_cast<int32_t>(n_empty);
        continue;
      }
      spans.insert(spans.begin() + i_span, new_span);
      continue;
    }
    i_bucket++;
    pos_in_span++;
    if (pos_in_span >= spans[i_span].length) {
      pos_in_span = 0;
      i_span++;
    }
  }
  if (max_empty_buckets == 0 || buckets.empty() || spans.empty()) return;

  // Merge spans at most max_empty_buckets apart, filling the gap with
  // empty buckets.
  i_bucket = spans[0].length;
  i_span = 1;
  while (i_span < spans.size()) {
    int32_t offset = spans[i_span].offset;
    if (offset < 0 || offset > max_empty_buckets) {
      i_bucket += spans[i_span].length;
      i_span++;
      continue;
    }
    size_t len = spans[i_span].length;
    spans[i_span - 1].length += static_cast<uint32_t>(offset) + spans[i_span].length;
    spans.erase(spans.begin() + i_span);
    size_t at = std::min(i_bucket, buckets.size());
    buckets.insert(buckets.begin() + at, static_cast<size_t>(offset), 0.0);
    if (comp != nullptr) comp->insert(comp->begin() + at, static_cast<size_t>(offset), 0.0);
    i_bucket += static_cast<size_t>(offset) + len;
  }
}

bool ReduceResolutionOf(const std::vector<Span>& spans, const std::vector<double>& buckets, int32_t schema,
                        int32_t target_schema, std::vector<Span>* out_spans, std::vector<double>* out_buckets) {
  out_spans->clear();
  out_buckets->clear();
  int32_t bucket_idx = 0;
  size_t count_idx = 0;
  int32_t last_target_idx = 0;
  for (size_t n = 0; n < spans.size(); n++) {
    const Span& span = spans[n];
    if (n > 0 && span.offset < 0) return false;
    bucket_idx += span.offset;
    for (uint32_t j = 0; j < span.length; j++) {
      if (count_idx >= buckets.size()) return false;
      int32_t target_idx = TargetIdx(bucket_idx, schema, target_schema);
      if (out_spans->empty()) {
        out_spans->push_back(Span{target_idx, 1});
        out_buckets->push_back(buckets[count_idx]);
        last_target_idx = target_idx;
      } else if (last_target_idx == target_idx) {
        out_buckets->back() += buckets[count_idx];
      } else if (last_target_idx + 1 == target_idx) {
        out_spans->back().length++;
        last_target_idx++;
        out_buckets->push_back(buckets[count_idx]);
      } else if (last_target_idx + 1 < target_idx) {
        out_spans->push_back(Span{target_idx - last_target_idx - 1, 1});
        last_target_idx = target_idx;
        out_buckets->push_back(buckets[count_idx]);
      }
      bucket_idx++;
      count_idx++;
    }
  }
  return count_idx == buckets.size();
}

void KahanReduceResolutionOf(std::vector<Span>* spans, std::vector<double>* buckets, std::vector<double>* comp,
                             int32_t schema, int32_t target_schema) {
  std::vector<Span> t_spans;
  std::vector<double> t_buckets, t_comp;
  int32_t bucket_idx = 0;
  size_t count_idx = 0;
  int32_t last_target_idx = 0;
  for (const Span& span : *spans) {
    bucket_idx += span.offset;
    for (uint32_t j = 0; j < span.length; j++) {
      if (count_idx >= buckets->size()) break;
      double b = (*buckets)[count_idx];
      double c = count_idx < comp->size() ? (*comp)[count_idx] : 0;
      int32_t target_idx = TargetIdx(bucket_idx, schema, target_schema);
      if (t_spans.empty()) {
        t_spans.push_back(Span{target_idx, 1});
        t_buckets.push_back(b);
        last_target_idx = target_idx;
        t_comp.push_back(c);
      } else if (last_target_idx == target_idx) {
        KahanInc(b, &t_buckets.back(), &t_comp.back());
        KahanInc(c, &t_buckets.back(), &t_comp.back());
      } else if (last_target_idx + 1 == target_idx) {
        t_spans.back().length++;
        last_target_idx++;
        t_buckets.push_back(b);
        t_comp.push_back(c);
      } else if (last_target_idx + 1 < target_idx) {
        t_spans.push_back(Span{target_idx - last_target_idx - 1, 1});
        last_target_idx = target_idx;
        t_buckets.push_back(b);
        t_comp.push_back(c);
      }
      bucket_idx++;
      count_idx++;
    }
  }
  *spans = std::move(t_spans);
  *buckets = std::move(t_buckets);
  *comp = std::move(t_comp);
}

}  // namespace trainwatch::model::histogram_internal
