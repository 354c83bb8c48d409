// Range functions over series with native histogram samples. Prometheus
// 3.14 (promql/functions.go) is the reference for what each function does
// with histograms, with floats and histograms in one window, and which
// annotations it adds; the arithmetic (and its order) follows it so that
// results match its test corpus.
//
// A window is the samples of both kinds in (from, ref]; anchored and
// smoothed selectors also see the samples within the lookback delta before
// it (and, smoothed, after it). A window with floats only is left to the
// float path (FloatWindowValue), so a series that switches kinds gets the
// same float results as a float series.

#include "promql/functions_range_histogram.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace trainwatch::promql {

namespace {

using model::CounterResetHint;
using model::FloatHistogram;

enum class Fn {
  kRate,
  kIncrease,
  kDelta,
  kIrate,
  kIdelta,
  kResets,
  kChanges,
  kCount,
  kSum,
  kAvg,
  kLast,
  kFirst,
  kTsLast,
  kTsFirst,
  kPresent,
  // Functions of floats that ignore histograms (min/max/quantile/stddev/
  // stdvar/mad/ts_of_min/ts_of_max_over_time, deriv, predict_linear,
  // double_exponential_smoothing).
  kFloatsOnly,
};

Fn Classify(std::string_view name) {
  static constexpr std::pair<std::string_view, Fn> kNames[] = {
      {"rate", Fn::kRate},
      {"increase", Fn::kIncrease},
      {"delta", Fn::kDelta},
      {"irate", Fn::kIrate},
      {"idelta", Fn::kIdelta},
      {"resets", Fn::kResets},
      {"changes", Fn::kChanges},
      {"count_over_time", Fn::kCount},
      {"sum_over_time", Fn::kSum},
      {"avg_over_time", Fn::kAvg},
      {"last_over_time", Fn::kLast},
      {"first_over_time", Fn::kFirst},
      {"ts_of_last_over_time", Fn::kTsLast},
      {"ts_of_first_over_time", Fn::kTsFirst},
      {"present_over_time", Fn::kPresent},
  };
  for (const auto& [n, f] : kNames) {
    if (n == name) return f;
  }
  return Fn::kFloatsOnly;
}

bool IsGauge(const FloatHistogram& h) { return h.counter_reset_hint == CounterResetHint::kGauge; }

// The annotations of one window. Some failures drop what was collected
// before them (Prometheus returns a fresh set there), so they are held until
// the window is done.
class Annos {
 public:
  explicit Annos(std::string_view metric) : metric_(metric) {}

  void MixedFloatsHistograms() { Add("encountered a mix of histograms and floats for metric name " + Quoted(), false); }
  void MixedExponentialCustom() {
    Add("vector contains a mix of histograms with exponential and custom buckets schemas for metric name " + Quoted(),
        false);
  }
  void NotCounter() { Add("this native histogram metric is not a counter: " + Quoted(), false); }
  void NotGauge() { Add("this native histogram metric is not a gauge: " + Quoted(), false); }
  void IgnoredInMixedRange() {
    Add("ignored histograms in a range containing both floats and histograms for metric name " + Quoted(), true);
  }
  // op: "addition", "subtraction" or "aggregation".
  void CounterResetCollision(std::string_view op) {
    Add("conflicting counter resets during histogram " + std::string(op), false);
  }
  void Reconciled(std::string_view op) { Add("mismatched custom buckets were reconciled during " + std::string(op), true); }
  void Clear() { items_.clear(); }

  void Flush(Evaluator& ev, const parser::Expr& at) {
    for (auto& it : items_) {
      if (it.second) {
        ev.Info(std::move(it.first), at);
      } else {
        ev.Warn(std::move(it.first), at);
      }
    }
    items_.clear();
  }

 private:
  std::string Quoted() const { return "\"" + std::string(metric_) + "\""; }
  void Add(std::string text, bool info) { items_.emplace_back(std::move(text), info); }
  std::string_view metric_;
  std::vector<std::pair<std::string, bool>> items_;
};

// *base += other (or -=); false, with a warning, when the two cannot be
// combined (exponential and custom buckets).
bool Combine(FloatHistogram* base, const FloatHistogram& other, bool sub, Annos* an) {
  auto res = sub ? base->Sub(other) : base->Add(other);
  if (!res.ok()) {
    an->MixedExponentialCustom();
    return false;
  }
  if (res->nhcb_bounds_reconciled) an->Reconciled(sub ? "subtraction" : "addition");
  return true;
}

// Increase (counter) or difference (gauge) from the first to the last
// histogram of the window, counter resets added back; nullopt when the
// histograms cannot be combined. Prometheus's histogramRate, without start
// timestamps (histogram samples carry none here).
std::optional<FloatHistogram> HistogramIncrease(std::span<const HPoint> points, bool counter, Annos* an) {
  const FloatHistogram* prev = points.front().h.get();
  const FloatHistogram& last = *points.back().h;
  bool custom = prev->UsesCustomBuckets();
  if (counter && (IsGauge(*prev) || IsGauge(last))) an->NotCounter();
  // A reset between the first two samples: the first one does not count, so
  // its bucket layout does not matter either.
  FloatHistogram zero;
  auto reset_at = [&](size_t i) {
    return StartTimestampReset(points[i - 1].st, points[i - 1].t, points[i].st, points[i].t) ||
           points[i].h->DetectReset(*points[i - 1].h);
  };
  if (counter && points.size() > 1) {
    const FloatHistogram& second = *points[1].h;
    if (reset_at(1)) {
      zero.schema = second.schema;
      zero.custom_values = second.custom_values;
      prev = &zero;
      custom = second.UsesCustomBuckets();
    }
  }
  if (last.UsesCustomBuckets() != custom) {
    an->MixedExponentialCustom();
    return std::nullopt;
  }
  int32_t min_schema = std::min(last.schema, prev->schema);
  if (counter) {
    for (size_t i = 1; i + 1 < points.size(); ++i) {
      const FloatHistogram& cur = *points[i].h;
      if (IsGauge(cur)) an->NotCounter();
      min_schema = std::min(min_schema, cur.schema);
      if (cur.UsesCustomBuckets() != custom) {
        an->Clear();
        an->MixedExponentialCustom();
        return std::nullopt;
      }
    }
  }
  FloatHistogram h = last.schema == min_schema ? last : last.CopyToSchema(min_schema);
  // Conflicting counter reset hints are expected here: resets are handled
  // below, so that flag is ignored.
  auto res = h.Sub(*prev);
  if (!res.ok()) {
    an->Clear();
    an->MixedExponentialCustom();
    return std::nullopt;
  }
  if (res->nhcb_bounds_reconciled) an->Reconciled("subtraction");
  if (counter) {
    for (size_t i = 1; i < points.size(); ++i) {
      const FloatHistogram& cur = *points[i].h;
      if (StartTimestampReset(points[i - 1].st, points[i - 1].t, points[i].st, points[i].t) ||
          cur.DetectReset(*prev)) {
        auto added = h.Add(*prev);
        if (!added.ok()) {
          an->Clear();
          an->MixedExponentialCustom();
          return std::nullopt;
        }
        if (added->nhcb_bounds_reconciled) an->Reconciled("addition");
      }
      prev = &cur;
    }
  } else if (!IsGauge(*points.front().h) || !IsGauge(last)) {
    an->NotGauge();
  }
  h.counter_reset_hint = CounterResetHint::kGauge;
  h.Compact(0);
  return h;
}

// rate/increase/delta of a window of histograms only, extrapolated to the
// window's edges as for floats.
HistogramPtr HistogramExtrapolatedRate(std::span<const HPoint> w, const RangeCtx& c, bool counter, bool is_rate,
                                       Annos* an) {
  // A single sample needs a start timestamp inside the window.
  const int64_t st0 = w.front().st;
  const bool st_inside = counter && st0 != 0 && st0 > c.range_start && st0 < w.front().t;
  if (w.size() < 2 && !st_inside) return nullptr;
  std::optional<FloatHistogram> result;
  if (w.size() >= 2) {
    result = HistogramIncrease(w, counter, an);
    if (!result) return nullptr;
  }
  if (st_inside) {
    // The counter started at its start timestamp inside the window: it
    // counts from zero there.
    if (!result) {
      result = *w.front().h;
    } else if (!Combine(&*result, *w.front().h, false, an)) {
      return nullptr;
    }
  }
  result->Mul(ExtrapolationFactor(c, w.front().t, w.back().t, w.size(), st_inside ? st0 : 0, counter,
                                  w.front().h->count, result->count, is_rate));
  return std::make_shared<const FloatHistogram>(std::move(*result));
}

// irate/idelta of the last two samples, both histograms.
HistogramPtr HistogramInstantValue(const HPoint& a, const HPoint& b, bool is_rate, Annos* an) {
  if (b.t == a.t) return nullptr;
  if (is_rate && (IsGauge(*a.h) || IsGauge(*b.h))) an->NotCounter();
  if (!is_rate && (!IsGauge(*a.h) || !IsGauge(*b.h))) an->NotGauge();
  FloatHistogram r = *b.h;
  if (!is_rate || (!StartTimestampReset(a.st, a.t, b.st, b.t) && !b.h->DetectReset(*a.h))) {
    // Conflicting counter reset hints are expected here (resets are
    // handled explicitly): that flag is ignored.
    auto res = r.Sub(*a.h);
    if (!res.ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    if (res->nhcb_bounds_reconciled) an->Reconciled("subtraction");
  }
  r.counter_reset_hint = CounterResetHint::kGauge;
  r.Compact(0);
  if (is_rate) r.Div(static_cast<double>(b.t - a.t) / 1000.0);
  return std::make_shared<const FloatHistogram>(std::move(r));
}

// Tracks the counter reset hints of summed histograms: one saying reset and
// another saying not is worth a warning.
struct HintTracker {
  bool reset = false, not_reset = false, reconciled = false;
  void See(const FloatHistogram& h) {
    if (h.counter_reset_hint == CounterResetHint::kCounterReset) reset = true;
    if (h.counter_reset_hint == CounterResetHint::kNotCounterReset) not_reset = true;
  }
  void Report(Annos* an) const {
    if (reset && not_reset) an->CounterResetCollision("aggregation");
    if (reconciled) an->Reconciled("aggregation");
  }
};

HistogramPtr SumHistograms(std::span<const HPoint> w, Annos* an) {
  HintTracker tr;
  FloatHistogram sum = *w.front().h;
  tr.See(sum);
  FloatHistogram comp;
  for (size_t i = 1; i < w.size(); ++i) {
    tr.See(*w[i].h);
    auto res = sum.KahanAdd(*w[i].h, &comp);
    if (!res.ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    tr.reconciled |= res->nhcb_bounds_reconciled;
  }
  if (w.size() > 1) {
    auto res = sum.Add(comp);
    if (!res.ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    tr.reconciled |= res->nhcb_bounds_reconciled;
  }
  tr.Report(an);
  return std::make_shared<const FloatHistogram>(std::move(sum));
}

// The mean of the window's histograms: a Kahan sum divided by the count
// while the sum does not overflow, an incremental mean from then on (as
// avg_over_time of floats).
HistogramPtr AvgHistograms(std::span<const HPoint> w, Annos* an) {
  HintTracker tr;
  FloatHistogram sum = *w.front().h;
  tr.See(sum);
  FloatHistogram mean, comp;
  bool have_comp = false, incremental = false;
  double count = 1;
  for (size_t i = 1; i < w.size(); ++i) {
    const FloatHistogram& h = *w[i].h;
    tr.See(h);
    count = static_cast<double>(i + 1);
    if (!incremental) {
      FloatHistogram sum_copy = sum;
      FloatHistogram comp_copy = have_comp ? comp : FloatHistogram();
      auto res = sum_copy.KahanAdd(h, &comp_copy);
      if (!res.ok()) {
        an->MixedExponentialCustom();
        return nullptr;
      }
      tr.reconciled |= res->nhcb_bounds_reconciled;
      if (!sum_copy.HasOverflow()) {
        sum = std::move(sum_copy);
        comp = std::move(comp_copy);
        have_comp = true;
        continue;
      }
      incremental = true;
      mean = sum;
      mean.Div(count - 1);
      if (have_comp) comp.Div(count - 1);
    }
    double q = (count - 1) / count;
    if (have_comp) {
      comp.Mul(q);
    } else {
      comp = FloatHistogram();
    }
    FloatHistogram to_add = h;
    to_add.Div(count);
    mean.Mul(q);
    auto res = mean.KahanAdd(to_add, &comp);
    if (!res.ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    have_comp = true;
    tr.reconciled |= res->nhcb_bounds_reconciled;
  }
  FloatHistogram* out = &sum;
  if (incremental) {
    if (have_comp && !mean.Add(comp).ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    out = &mean;
  } else if (have_comp) {
    sum.Div(count);
    comp.Div(count);
    if (!sum.Add(comp).ok()) {
      an->MixedExponentialCustom();
      return nullptr;
    }
  } else {
    sum.Div(count);
  }
  tr.Report(an);
  return std::make_shared<const FloatHistogram>(std::move(*out));
}

// resets() or changes() over the floats and histograms of a window, merged
// by time. A switch between a float and a histogram counts as one. `st`:
// the floats' start timestamps, or null.
double Transitions(bool resets, std::span<const model::Sample> f, const int64_t* st, std::span<const HPoint> h) {
  struct Cur {
    int64_t t = 0;
    int64_t st = 0;
    double v = 0;
    const FloatHistogram* h = nullptr;
  };
  Cur prev, cur;
  bool first = true;
  double n = 0;
  size_t i = 0, j = 0;
  while (i < f.size() || j < h.size()) {
    if (j >= h.size() || (i < f.size() && f[i].t < h[j].t)) {
      cur = {f[i].t, st != nullptr ? st[i] : 0, f[i].v, nullptr};
      ++i;
    } else {
      cur = {h[j].t, h[j].st, 0, h[j].h.get()};
      ++j;
    }
    if (first) {
      first = false;
      prev = cur;
      continue;
    }
    if (prev.h == nullptr && cur.h == nullptr) {
      if (resets) {
        if (cur.v < prev.v || StartTimestampReset(prev.st, prev.t, cur.st, cur.t)) ++n;
      } else if (cur.v != prev.v && !(std::isnan(cur.v) && std::isnan(prev.v))) {
        ++n;
      }
    } else if ((prev.h == nullptr) != (cur.h == nullptr)) {
      ++n;
    } else if (resets ? StartTimestampReset(prev.st, prev.t, cur.st, cur.t) || cur.h->DetectReset(*prev.h)
                      : !cur.h->Equals(*prev.h)) {
      ++n;
    }
    prev = cur;
  }
  return n;
}

// The histogram at time t between two samples, linearly; for a counter a
// reset between them means rising from zero. nullopt when they cannot be
// combined.
std::optional<FloatHistogram> Interpolate(const HPoint& p1, const HPoint& p2, int64_t t, bool counter, Annos* an) {
  if (t == p1.t) return *p1.h;
  if (t == p2.t) return *p2.h;
  double fraction = static_cast<double>(t - p1.t) / static_cast<double>(p2.t - p1.t);
  FloatHistogram r = *p2.h;
  if (counter && p2.h->DetectReset(*p1.h)) {
    r.Mul(fraction);
    return r;
  }
  auto res = r.Sub(*p1.h);
  if (!res.ok()) return std::nullopt;
  if (res->nhcb_bounds_reconciled) an->Reconciled("subtraction");
  r.Mul(fraction);
  res = r.Add(*p1.h);
  if (!res.ok()) return std::nullopt;
  if (res->nhcb_bounds_reconciled) an->Reconciled("addition");
  return r;
}

// Index of the first of h[0, n) for which pred holds, n if none.
template <typename Pred>
size_t FirstWhere(std::span<const HPoint> h, size_t n, Pred pred) {
  size_t i = 0;
  while (i < n && !pred(h[i])) ++i;
  return i;
}

// rate/increase/delta with the anchored or smoothed modifier over the
// histograms of the extended window `h` (no floats in it): the value at the
// window's start is the last sample at or before it (anchored) or
// interpolated there (smoothed), likewise at its end; no extrapolation.
HistogramPtr ExtendedHistogramRate(std::span<const HPoint> h, const RangeCtx& c, bool smoothed, bool counter,
                                   bool is_rate, Annos* an) {
  const int64_t range_start = c.range_start, range_end = c.range_end;
  size_t last = h.size() - 1;
  size_t first = FirstWhere(h, last, [&](const HPoint& p) { return p.t > range_start; });
  first = first > 0 ? first - 1 : 0;
  if (smoothed) last = FirstWhere(h, last, [&](const HPoint& p) { return p.t >= range_end; });
  if (h[last].t <= range_start) return nullptr;
  if (smoothed && h[first].t > range_end) return nullptr;

  const bool custom = h[first].h->UsesCustomBuckets();
  for (size_t i = first; i <= last; ++i) {
    if (h[i].h->UsesCustomBuckets() != custom) {
      an->MixedExponentialCustom();
      return nullptr;
    }
    if (counter && IsGauge(*h[i].h)) an->NotCounter();
  }
  std::optional<FloatHistogram> left = smoothed && h[first].t < range_start
                                           ? Interpolate(h[first], h[first + 1], range_start, counter, an)
                                           : std::optional<FloatHistogram>(*h[first].h);
  if (!left) {
    an->MixedExponentialCustom();
    return nullptr;
  }
  std::optional<FloatHistogram> right = smoothed && last > 0 && h[last].t > range_end
                                            ? Interpolate(h[last - 1], h[last], range_end, counter, an)
                                            : std::optional<FloatHistogram>(*h[last].h);
  if (!right) {
    an->MixedExponentialCustom();
    return nullptr;
  }
  if (!counter && (!IsGauge(*left) || !IsGauge(*right))) an->NotGauge();
  FloatHistogram result = *right;
  if (!Combine(&result, *left, true, an)) return nullptr;
  if (counter) {
    // Resets strictly between the two edge samples; a reset the left
    // interpolation spanned is already in `left`. The last sample is left
    // out: `right` stands for it (or is interpolated from it).
    size_t from = first + 1;
    const FloatHistogram* prev = &*left;
    if (smoothed && h[first].t < range_start && h[first + 1].h->DetectReset(*h[first].h)) {
      prev = h[first + 1].h.get();
      ++from;
    }
    if (from <= last) {
      std::optional<FloatHistogram> correction;
      auto add = [&](const FloatHistogram& x) {
        if (!correction) {
          correction = x;
          return true;
        }
        return Combine(&*correction, x, false, an);
      };
      for (size_t i = from; i < last; ++i) {
        if (h[i].h->DetectReset(*prev) && !add(*prev)) return nullptr;
        prev = h[i].h.get();
      }
      if (right->DetectReset(*prev) && !add(*prev)) return nullptr;
      if (correction && !Combine(&result, *correction, false, an)) return nullptr;
    }
  }
  if (is_rate) result.Div(c.range_sec);
  result.counter_reset_hint = CounterResetHint::kGauge;
  result.Compact(0);
  return std::make_shared<const FloatHistogram>(std::move(result));
}

// Index of the first sample after time t (samples in increasing time).
size_t FloatsUpTo(std::span<const model::Sample> s, size_t from, int64_t t) {
  while (from < s.size() && s[from].t <= t) ++from;
  return from;
}
size_t HistsUpTo(std::span<const HPoint> s, size_t from, int64_t t) {
  while (from < s.size() && s[from].t <= t) ++from;
  return from;
}

}  // namespace

void ForgetCounterResetHints(std::vector<HPoint>* hs) {
  // A subquery repeats one sample over many steps: copy it once.
  HistogramPtr orig, copy;
  for (HPoint& p : *hs) {
    CounterResetHint hint = p.h->counter_reset_hint;
    if (hint != CounterResetHint::kCounterReset && hint != CounterResetHint::kNotCounterReset) continue;
    if (p.h != orig) {
      auto h = std::make_shared<FloatHistogram>(*p.h);
      h->counter_reset_hint = CounterResetHint::kUnknown;
      orig = p.h;
      copy = std::move(h);
    }
    p.h = copy;
  }
}

void HistogramRangeSeries(Evaluator& ev, const HistogramSeriesArgs& a, const model::Labels& labels,
                          std::span<const model::Sample> smp, const int64_t* st, std::span<const HPoint> hs,
                          RangeCtx& ctx, std::vector<StepValue>* vals, std::vector<StepHistogram>* hvals) {
  const Fn fn = Classify(a.def->name);
  const parser::Expr& at = *a.call->args[a.def->matrix_arg];
  const std::string_view name = labels.MetricName();
  const bool counter = fn == Fn::kRate || fn == Fn::kIncrease;
  const bool extended = a.mod != parser::RangeMod::kNone;
  const bool smoothed = a.mod == parser::RangeMod::kSmoothed;
  const bool quantile = a.def->name == "quantile_over_time";
  const size_t steps = a.r->Steps();
  // (from, ref] for floats and histograms; anchored/smoothed also
  // (from - lookback, ref] or (from - lookback, ref + lookback).
  size_t lo = 0, hi = 0, hlo = 0, hhi = 0;
  size_t elo = 0, ehi = 0, ehlo = 0, ehhi = 0;
  Annos an(name);
  for (size_t i = 0; i < steps; ++i) {
    const int64_t t = a.r->At(i);
    const int64_t ref = a.spec->Ref(t);
    const int64_t from = ref - a.spec->range_ms;
    lo = FloatsUpTo(smp, lo, from);
    hi = FloatsUpTo(smp, std::max(hi, lo), ref);
    hlo = HistsUpTo(hs, hlo, from);
    hhi = HistsUpTo(hs, std::max(hhi, hlo), ref);
    ctx.t = t;
    ctx.range_start = from;
    ctx.range_end = ref;
    ctx.p0 = a.p0 != nullptr ? a.p0[i] : 0;
    ctx.p1 = a.p1 != nullptr ? a.p1[i] : 0;
    ctx.st = st != nullptr ? st + lo : nullptr;
    std::span<const model::Sample> f = smp.subspan(lo, hi - lo);
    std::span<const HPoint> h = hs.subspan(hlo, hhi - hlo);
    double v = 0;
    bool have_v = false;
    HistogramPtr hv;

    if (extended) {
      const int64_t before = from - a.lookback;
      elo = FloatsUpTo(smp, elo, before);
      ehlo = HistsUpTo(hs, ehlo, before);
      // Smoothed: up to (not including) ref + lookback.
      const int64_t until = smoothed ? ref + a.lookback - 1 : ref;
      ehi = FloatsUpTo(smp, std::max(ehi, elo), until);
      ehhi = HistsUpTo(hs, std::max(ehhi, ehlo), until);
      std::span<const model::Sample> ef = smp.subspan(elo, ehi - elo);
      std::span<const HPoint> eh = hs.subspan(ehlo, ehhi - ehlo);
      if (eh.empty()) {
        have_v = FloatWindowValue(ev, *a.call, *a.def, a.mod, smp, lo, hi, a.lookback, ctx, &v);
      } else if (fn == Fn::kResets || fn == Fn::kChanges) {
        // Anchored: from the last sample (of either kind) at or before the
        // window's start, if there is one after it.
        size_t f_at = FloatsUpTo(ef, 0, from), h_at = HistsUpTo(eh, 0, from);
        if (f_at < ef.size() || h_at < eh.size()) {
          size_t f0 = 0, h0 = 0;
          if (f_at > 0 || h_at > 0) {
            if (h_at == 0 || (f_at > 0 && ef[f_at - 1].t >= eh[h_at - 1].t)) {
              f0 = f_at - 1;
              h0 = h_at;
            } else {
              f0 = f_at;
              h0 = h_at - 1;
            }
          }
          v = Transitions(fn == Fn::kResets, ef.subspan(f0), nullptr, eh.subspan(h0));
          have_v = true;
        }
      } else if (!ef.empty()) {
        an.MixedFloatsHistograms();
      } else {
        hv = ExtendedHistogramRate(eh, ctx, smoothed, fn != Fn::kDelta, fn == Fn::kRate, &an);
      }
    } else if (h.empty()) {
      if (f.empty()) continue;
      have_v = FloatWindowValue(ev, *a.call, *a.def, a.mod, smp, lo, hi, a.lookback, ctx, &v);
    } else {
      switch (fn) {
        case Fn::kRate:
        case Fn::kIncrease:
        case Fn::kDelta:
          if (!f.empty()) {
            an.MixedFloatsHistograms();
          } else {
            hv = HistogramExtrapolatedRate(h, ctx, counter, fn == Fn::kRate, &an);
          }
          break;
        case Fn::kIrate:
        case Fn::kIdelta: {
          if (f.size() + h.size() < 2) break;
          // The last two samples of either kind (a time holds one sample).
          bool last_is_h = f.empty() || h.back().t > f.back().t;
          bool prev_is_h;
          if (last_is_h) {
            prev_is_h = h.size() >= 2 && (f.empty() || h[h.size() - 2].t > f.back().t);
          } else {
            prev_is_h = f.size() < 2 || h.back().t > f[f.size() - 2].t;
          }
          if (!last_is_h && !prev_is_h) {
            have_v = FloatWindowValue(ev, *a.call, *a.def, a.mod, smp, lo, hi, a.lookback, ctx, &v);
          } else if (last_is_h && prev_is_h) {
            hv = HistogramInstantValue(h[h.size() - 2], h.back(), fn == Fn::kIrate, &an);
          } else {
            an.MixedFloatsHistograms();
          }
          break;
        }
        case Fn::kResets:
        case Fn::kChanges:
          v = Transitions(fn == Fn::kResets, f, ctx.st, h);
          have_v = true;
          break;
        case Fn::kCount:
          v = static_cast<double>(f.size() + h.size());
          have_v = true;
          break;
        case Fn::kPresent:
          v = 1;
          have_v = true;
          break;
        case Fn::kSum:
        case Fn::kAvg:
          if (!f.empty()) {
            an.MixedFloatsHistograms();
          } else {
            hv = fn == Fn::kSum ? SumHistograms(h, &an) : AvgHistograms(h, &an);
          }
          break;
        case Fn::kLast:
          if (f.empty() || h.back().t > f.back().t) {
            hv = h.back().h;
          } else {
            v = f.back().v;
            have_v = true;
          }
          break;
        case Fn::kFirst:
          if (f.empty() || h.front().t < f.front().t) {
            hv = h.front().h;
          } else {
            v = f.front().v;
            have_v = true;
          }
          break;
        case Fn::kTsLast:
          v = static_cast<double>(f.empty() ? h.back().t : std::max(f.back().t, h.back().t)) / 1000.0;
          have_v = true;
          break;
        case Fn::kTsFirst:
          v = static_cast<double>(f.empty() ? h.front().t : std::min(f.front().t, h.front().t)) / 1000.0;
          have_v = true;
          break;
        case Fn::kFloatsOnly:
          // Histograms are ignored, with an info when floats are there to
          // use; without floats there is no value (but a bad parameter of
          // double_exponential_smoothing still fails).
          if (!f.empty()) an.IgnoredInMixedRange();
          have_v = a.def->fn(f, ctx, &v);
          if (have_v && quantile) {
            WarnIfInvalidQuantile(ev, ctx.p0, *a.call->args[0]);
          }
          break;
      }
    }
    an.Flush(ev, at);
    if (have_v) {
      vals->push_back({static_cast<uint32_t>(i), v});
    } else if (hv != nullptr) {
      hvals->push_back({static_cast<uint32_t>(i), std::move(hv)});
    }
  }
}

std::optional<model::FloatHistogram> InterpolateHistogramAt(Evaluator& ev, const HPoint& a, const HPoint& b, int64_t t,
                                                            bool counter, std::string_view metric,
                                                            const parser::Expr& at) {
  Annos an(metric);
  std::optional<FloatHistogram> r = Interpolate(a, b, t, counter, &an);
  if (!r.has_value()) an.MixedExponentialCustom();
  an.Flush(ev, at);
  return r;
}

}  // namespace trainwatch::promql
