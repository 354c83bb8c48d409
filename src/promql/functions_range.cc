// Range-vector functions (rate, *_over_time, ...): per series, windows slide
// over the in-memory samples with two cursors, never re-reading storage.

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "promql/eval.h"
#include "promql/functions_internal.h"
#include "promql/functions_range_histogram.h"

namespace trainwatch::promql {

// Whether the sample (st, t) started its counter after the sample before it
// (prev_st, prev_t): its start time is after the previous sample, or equal to
// it while the previous sample's own start time was known and before it
// (a delta series). A start time equal to the previous sample's time after an
// unknown one (or one equal to that sample's time) is OTel's "cumulative with
// unknown start": no reset. A start time at or after the sample itself is
// invalid and ignored.
bool StartTimestampReset(int64_t prev_st, int64_t prev_t, int64_t st, int64_t t) {
  if (st == 0 || st >= t || st < prev_t) return false;
  if (st > prev_t) return true;
  return prev_st != 0 && prev_st < prev_t;
}

namespace {

using W = std::span<const model::Sample>;

// Calls fn(i, t, from, ref, lo, hi) for each step i of `r`: the window
// (from, ref] of step time t holds samples [lo, hi) of `w`. Two cursors
// that only move forward; a window that does not overlap the one before
// (range <= step) starts where that one ended instead of stepping over its
// samples again.
template <typename Fn>
inline void ForEachWindow(const StepRange& r, const Evaluator::WindowSpec& spec, W w, Fn&& fn) {
  const size_t steps = r.Steps(), n = w.size();
  const model::Sample* data = w.data();
  size_t lo = 0, hi = 0;
  int64_t prev_ref = std::numeric_limits<int64_t>::min();
  int64_t t = r.start;
  for (size_t i = 0; i < steps; ++i, t += r.step) {
    const int64_t ref = spec.Ref(t);
    const int64_t from = ref - spec.range_ms;
    const size_t last = hi - lo;
    if (from == prev_ref) {
      // Abutting: the last window ended at the first sample after `from`.
      lo = hi;
    } else {
      // Samples before hi are at or before the last window's end.
      if (from > prev_ref) lo = hi;
      while (lo < n && data[lo].t <= from) ++lo;
      if (hi < lo) hi = lo;
    }
    prev_ref = ref;
    // Regular samples fill windows alike: try the last window's count
    // before stepping sample by sample.
    if (const size_t guess = lo + last;
        guess > hi && guess <= n && data[guess - 1].t <= ref && (guess == n || data[guess].t > ref)) {
      hi = guess;
    } else {
      while (hi < n && data[hi].t <= ref) ++hi;
    }
    fn(i, t, from, ref, lo, hi);
  }
}

bool CounterReset(W w, const int64_t* st, size_t i) {
  return w[i].v < w[i - 1].v || (st != nullptr && StartTimestampReset(st[i - 1], w[i - 1].t, st[i], w[i].t));
}

ExtrapolationEdges WindowEdges(const RangeCtx& c, int64_t first_t, int64_t last_t, size_t n) {
  const double ft = static_cast<double>(first_t), lt = static_cast<double>(last_t);
  ExtrapolationEdges e;
  e.sampled = (lt - ft) / 1000.0;
  e.to_start = (ft - static_cast<double>(c.range_start)) / 1000.0;
  e.to_end = (static_cast<double>(c.range_end) - lt) / 1000.0;
  const double avg = n > 1 ? e.sampled / static_cast<double>(n - 1) : 0;
  const double threshold = avg * 1.1;
  if (e.to_start >= threshold) e.to_start = avg / 2;
  if (e.to_end >= threshold) e.to_end = avg / 2;
  return e;
}

double Factor(const ExtrapolationEdges& e, const RangeCtx& c, bool is_rate) {
  double factor = e.sampled != 0 ? (e.sampled + e.to_start + e.to_end) / e.sampled : 1.0;
  if (is_rate) factor /= c.range_sec;
  return factor;
}

}  // namespace

double ExtrapolationFactor(const RangeCtx& c, int64_t first_t, int64_t last_t, size_t n, int64_t zero_st, bool counter,
                           double first, double change, bool is_rate) {
  const bool to_zero = counter && change > 0 && first >= 0;
  ExtrapolationEdges e;
  // The factor depends on the window only through the distances of its first
  // and last samples from its edges and its sample count, unless the
  // counter's zero point is nearer than the left edge: a window like the last
  // one reuses it. Below 2^52 the int64 differences convert to the doubles
  // WindowEdges subtracts, so the memo's result is the same bits.
  constexpr int64_t kExact = int64_t{1} << 52;
  if (c.memo != nullptr && zero_st == 0 && c.range_start > -kExact && c.range_end < kExact && first_t > -kExact) {
    ExtrapolationMemo& m = *c.memo;
    const int64_t to_start = first_t - c.range_start, to_end = c.range_end - last_t;
    const int64_t width = c.range_end - c.range_start;
    if (!m.valid || m.to_start != to_start || m.to_end != to_end || m.width != width || m.n != n ||
        m.is_rate != is_rate || m.range_sec != c.range_sec) {
      m.valid = true;
      m.width = width;
      m.to_start = to_start;
      m.to_end = to_end;
      m.n = n;
      m.is_rate = is_rate;
      m.range_sec = c.range_sec;
      m.edges = WindowEdges(c, first_t, last_t, n);
      m.factor = Factor(m.edges, c, is_rate);
      // The zero point is at sampled * first / change before the first
      // sample; it matters when nearer than to_start, i.e. when first /
      // change < to_start / sampled. A margin of 1e-9 is far above the few
      // ulps the divisions here and below round by.
      m.zero_ratio =
          m.edges.sampled != 0 && m.edges.to_start > 0 ? m.edges.to_start / m.edges.sampled * (1 + 1e-9) : 0;
    }
    if (!to_zero || m.zero_ratio == 0) return m.factor;
    const double bound = change * m.zero_ratio;
    if (bound >= std::numeric_limits<double>::min() && first >= bound) return m.factor;
    e = m.edges;  // the zero point may be nearer: worked out below
  } else {
    e = WindowEdges(c, first_t, last_t, n);
  }
  if (zero_st != 0) {
    e.sampled = (static_cast<double>(last_t) - static_cast<double>(zero_st)) / 1000.0;
    e.to_start = 0;
  } else if (to_zero) {
    // Counters cannot go below zero: no extrapolation past where the
    // counter would reach it.
    const double zero_at = e.sampled * (first / change);
    if (zero_at < e.to_start) e.to_start = zero_at;
  }
  return Factor(e, c, is_rate);
}

namespace {

bool ExtrapolatedRate(W w, const RangeCtx& c, bool is_counter, bool is_rate, double* out) {
  const int64_t* st = is_counter ? c.st : nullptr;
  // A counter whose first sample in the window started inside the window was
  // 0 at its start time: that point replaces the extrapolation to the left.
  const bool zero_at_st = st != nullptr && st[0] != 0 && st[0] > c.range_start && st[0] < w.front().t;
  if (w.size() < 2 && !zero_at_st) return false;
  double result = w.back().v - (zero_at_st ? 0 : w.front().v);
  if (is_counter && !c.no_resets) {
    for (size_t i = 1; i < w.size(); ++i) {
      if (CounterReset(w, st, i)) result += w[i - 1].v;
    }
  }
  if (st != nullptr && c.st_overlap != nullptr) {
    for (size_t i = 1; i < w.size(); ++i) {
      if (st[i] != 0 && st[i] < w[i - 1].t && st[i] != st[i - 1]) *c.st_overlap = true;
    }
  }
  *out = result * ExtrapolationFactor(c, w.front().t, w.back().t, w.size(), zero_at_st ? st[0] : 0, is_counter,
                                      w.front().v, result, is_rate);
  return true;
}

bool Rate(W w, const RangeCtx& c, double* out) { return ExtrapolatedRate(w, c, true, true, out); }
bool Increase(W w, const RangeCtx& c, double* out) { return ExtrapolatedRate(w, c, true, false, out); }
bool Delta(W w, const RangeCtx& c, double* out) { return ExtrapolatedRate(w, c, false, false, out); }

bool InstantValue(W w, const int64_t* st, bool is_rate, double* out) {
  if (w.size() < 2) return false;
  const auto& last = w[w.size() - 1];
  const auto& prev = w[w.size() - 2];
  double r = (is_rate && CounterReset(w, st, w.size() - 1)) ? last.v : last.v - prev.v;
  if (is_rate) {
    int64_t dt = last.t - prev.t;
    if (dt == 0) return false;
    r /= static_cast<double>(dt) / 1000.0;
  }
  *out = r;
  return true;
}
bool Irate(W w, const RangeCtx& c, double* out) { return InstantValue(w, c.st, true, out); }
bool Idelta(W w, const RangeCtx&, double* out) { return InstantValue(w, nullptr, false, out); }

void LinearRegression(W w, int64_t intercept_time, double* slope, double* intercept) {
  double n = 0, sx = 0, cx = 0, sy = 0, cy = 0, sxy = 0, cxy = 0, sx2 = 0, cx2 = 0;
  double init_y = w[0].v;
  bool const_y = true;
  for (size_t i = 0; i < w.size(); ++i) {
    if (const_y && i > 0 && w[i].v != init_y) const_y = false;
    n += 1;
    double x = static_cast<double>(w[i].t - intercept_time) / 1e3;
    sx = KahanSumInc(x, sx, &cx);
    sy = KahanSumInc(w[i].v, sy, &cy);
    sxy = KahanSumInc(x * w[i].v, sxy, &cxy);
    sx2 = KahanSumInc(x * x, sx2, &cx2);
  }
  if (const_y) {
    if (std::isinf(init_y)) {
      *slope = NAN;
      *intercept = NAN;
      return;
    }
    *slope = 0;
    *intercept = init_y;
    return;
  }
  sx += cx;
  sy += cy;
  sxy += cxy;
  sx2 += cx2;
  double cov = sxy - sx * sy / n;
  double var = sx2 - sx * sx / n;
  *slope = cov / var;
  *intercept = sy / n - *slope * sx / n;
}

bool Deriv(W w, const RangeCtx&, double* out) {
  if (w.size() < 2) return false;
  double slope, intercept;
  LinearRegression(w, w[0].t, &slope, &intercept);
  *out = slope;
  return true;
}

bool PredictLinear(W w, const RangeCtx& c, double* out) {
  if (w.size() < 2) return false;
  double slope, intercept;
  LinearRegression(w, c.t, &slope, &intercept);
  *out = slope * c.p0 + intercept;
  return true;
}

bool Resets(W w, const RangeCtx& c, double* out) {
  double n = 0;
  for (size_t i = 1; i < w.size(); ++i) {
    if (CounterReset(w, c.st, i)) ++n;
  }
  *out = n;
  return !w.empty();
}

bool Changes(W w, const RangeCtx&, double* out) {
  double n = 0;
  for (size_t i = 1; i < w.size(); ++i) {
    double a = w[i - 1].v, b = w[i].v;
    if (a != b && !(std::isnan(a) && std::isnan(b))) ++n;
  }
  *out = n;
  return !w.empty();
}

bool CountOverTime(W w, const RangeCtx& c, double* out) {
  if (c.counts != nullptr) {
    double n = 0;
    for (size_t i = 0; i < w.size(); ++i) n += c.counts[i];
    *out = n;
    return !w.empty();
  }
  *out = static_cast<double>(w.size());
  return !w.empty();
}

bool SumOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double sum = 0, c = 0;
  for (const auto& s : w) sum = KahanSumInc(s.v, sum, &c);
  *out = std::isinf(sum) ? sum : sum + c;
  return true;
}

// Window sums weighed by their counts: the sum of the raw samples over
// their number, as avg_over_time's Kahan sum without overflow. Started at
// the first point (a tier's window holds one to a few): what the Kahan step
// from 0 gives, 0 + v making -0 the +0 it gives (a NaN's compensation, NaN
// there, makes the result NaN either way). REQUIRES: w is not empty.
[[gnu::always_inline]] inline double CountedMean(W w, const double* counts) {
  double sum = 0.0 + w[0].v, c = 0, count = counts[0];
  for (size_t i = 1; i < w.size(); ++i) {
    sum = KahanSumInc(w[i].v, sum, &c);
    count += counts[i];
  }
  return (std::isinf(sum) ? sum : sum + c) / count;
}

// avg_over_time of raw samples (one each). REQUIRES: w is not empty.
[[gnu::noinline]] double RawMean(W w) {
  double sum = 0, c = 0, count = 0;
  bool overflow = false;
  for (const auto& s : w) {
    count++;
    double nc = c;
    double ns = KahanSumInc(s.v, sum, &nc);
    if (std::isinf(ns) && !std::isinf(s.v)) {
      overflow = true;
      break;
    }
    sum = ns;
    c = nc;
  }
  if (!overflow) return std::isinf(sum) ? sum : (sum + c) / count;
  // Incremental mean to avoid overflow.
  double mean = 0;
  count = 0;
  for (const auto& s : w) {
    count++;
    if (std::isinf(mean)) {
      if (std::isinf(s.v) && (mean > 0) == (s.v > 0)) continue;
      if (!std::isinf(s.v) && !std::isnan(s.v)) continue;
    }
    mean += s.v / count - mean / count;
  }
  return mean;
}

// Small enough to inline where the tier loop calls it: the raw samples'
// mean stays out of line.
inline bool AvgOverTime(W w, const RangeCtx& ctx, double* out) {
  if (w.empty()) return false;
  *out = ctx.counts != nullptr ? CountedMean(w, ctx.counts) : RawMean(w);
  return true;
}

bool MinOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m = w[0].v;
  for (const auto& s : w) {
    if (s.v < m || std::isnan(m)) m = s.v;
  }
  *out = m;
  return true;
}

bool MaxOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m = w[0].v;
  for (const auto& s : w) {
    if (s.v > m || std::isnan(m)) m = s.v;
  }
  *out = m;
  return true;
}

bool TsOfMinOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m = w[0].v;
  int64_t t = w[0].t;
  for (const auto& s : w) {
    if (s.v <= m || std::isnan(m)) {
      m = s.v;
      t = s.t;
    }
  }
  *out = static_cast<double>(t) / 1000.0;
  return true;
}

bool TsOfMaxOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m = w[0].v;
  int64_t t = w[0].t;
  for (const auto& s : w) {
    if (s.v >= m || std::isnan(m)) {
      m = s.v;
      t = s.t;
    }
  }
  *out = static_cast<double>(t) / 1000.0;
  return true;
}

void Variance(W w, double* mean_out, double* var_out) {
  double count = 0, mean = 0, cmean = 0, aux = 0, caux = 0;
  for (const auto& s : w) {
    count++;
    double delta = s.v - (mean + cmean);
    mean = KahanSumInc(delta / count, mean, &cmean);
    aux = KahanSumInc(delta * (s.v - (mean + cmean)), aux, &caux);
  }
  *mean_out = mean + cmean;
  *var_out = (aux + caux) / count;
}

bool StdvarOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m, v;
  Variance(w, &m, &v);
  *out = v;
  return true;
}
bool StddevOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  double m, v;
  Variance(w, &m, &v);
  *out = std::sqrt(v);
  return true;
}

bool LastOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  *out = w.back().v;
  return true;
}
bool FirstOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  *out = w.front().v;
  return true;
}
bool TsOfLastOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  *out = static_cast<double>(w.back().t) / 1000.0;
  return true;
}
bool TsOfFirstOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  *out = static_cast<double>(w.front().t) / 1000.0;
  return true;
}
bool PresentOverTime(W w, const RangeCtx&, double* out) {
  *out = 1;
  return !w.empty();
}

bool QuantileOverTime(W w, const RangeCtx& c, double* out) {
  if (w.empty()) return false;
  thread_local std::vector<double> vals;
  vals.clear();
  for (const auto& s : w) vals.push_back(s.v);
  *out = Quantile(c.p0, &vals);
  return true;
}

bool MadOverTime(W w, const RangeCtx&, double* out) {
  if (w.empty()) return false;
  thread_local std::vector<double> vals;
  vals.clear();
  for (const auto& s : w) {
    if (std::isnan(s.v)) {  // a NaN sample makes the result NaN, not dropped
      *out = NAN;
      return true;
    }
    vals.push_back(s.v);
  }
  double med = Quantile(0.5, &vals);
  for (auto& v : vals) v = std::fabs(v - med);
  *out = Quantile(0.5, &vals);
  return true;
}

bool DoubleExpSmoothing(W w, const RangeCtx& c, double* out) {
  double sf = c.p0, tf = c.p1;
  if (sf <= 0 || sf >= 1) {
    ThrowEval("invalid smoothing factor. Expected: 0 < sf < 1, got: " + FormatFloat(sf));
  }
  if (tf <= 0 || tf >= 1) {
    ThrowEval("invalid trend factor. Expected: 0 < tf < 1, got: " + FormatFloat(tf));
  }
  if (w.size() < 2) return false;
  double s0 = 0, s1 = w[0].v, b = w[1].v - w[0].v;
  for (size_t i = 1; i < w.size(); ++i) {
    double x = sf * w[i].v;
    if (i > 1) b = tf * (s1 - s0) + (1 - tf) * b;
    double y = (1 - sf) * (s1 + b);
    s0 = s1;
    s1 = x + y;
  }
  *out = s1;
  return true;
}

// Prefix sums of a series of integers whose magnitudes add up to less than
// 2^53: every partial sum is exact, so a window's sum is the difference of two
// of them, the same bits as adding the window's samples one by one (Kahan's
// compensation stays 0). False, prefix unusable, for any other series.
bool ExactPrefixSums(std::span<const model::Sample> smp, std::vector<double>* prefix) {
  constexpr double kLimit = 9007199254740992.0;  // 2^53
  prefix->resize(smp.size() + 1);
  double* p = prefix->data();
  p[0] = 0;
  double abs_sum = 0;
  for (size_t i = 0; i < smp.size(); ++i) {
    const double v = smp[i].v;
    const double a = std::fabs(v);
    // NaN fails the first test; the cast is defined below 2^53.
    if (!(a < kLimit) || static_cast<double>(static_cast<int64_t>(v)) != v) return false;
    abs_sum += a;
    if (!(abs_sum < kLimit)) return false;
    p[i + 1] = p[i] + v;
  }
  return true;
}

const RangeFnDef kRangeFns[] = {
    {"rate", Rate, false, 0},
    {"increase", Increase, false, 0},
    {"delta", Delta, false, 0},
    {"irate", Irate, false, 0},
    {"idelta", Idelta, false, 0},
    {"deriv", Deriv, false, 0},
    {"predict_linear", PredictLinear, false, 0},
    {"resets", Resets, false, 0},
    {"changes", Changes, false, 0},
    {"count_over_time", CountOverTime, false, 0},
    {"sum_over_time", SumOverTime, false, 0},
    {"avg_over_time", AvgOverTime, false, 0},
    {"min_over_time", MinOverTime, false, 0},
    {"max_over_time", MaxOverTime, false, 0},
    {"ts_of_min_over_time", TsOfMinOverTime, false, 0},
    {"ts_of_max_over_time", TsOfMaxOverTime, false, 0},
    {"stddev_over_time", StddevOverTime, false, 0},
    {"stdvar_over_time", StdvarOverTime, false, 0},
    {"last_over_time", LastOverTime, true, 0},
    {"first_over_time", FirstOverTime, true, 0},
    {"ts_of_last_over_time", TsOfLastOverTime, false, 0},
    {"ts_of_first_over_time", TsOfFirstOverTime, false, 0},
    {"present_over_time", PresentOverTime, false, 0},
    {"quantile_over_time", QuantileOverTime, false, 1},
    {"mad_over_time", MadOverTime, false, 0},
    {"double_exponential_smoothing", DoubleExpSmoothing, false, 0},
};

}  // namespace

const RangeFnDef* LookupRangeFn(std::string_view name) {
  for (const auto& d : kRangeFns) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

namespace {

using RangeFn = bool (*)(std::span<const model::Sample>, const RangeCtx&, double*);

// Counter increase along a path of values: a drop is a reset (counting from 0).
double CounterIncrease(const double* v, size_t n) {
  double inc = 0;
  for (size_t k = 1; k < n; ++k) inc += v[k] >= v[k - 1] ? v[k] - v[k - 1] : v[k];
  return inc;
}

// `anchored`: the window's samples plus the last sample at or before its
// start (within the lookback delta); no extrapolation.
bool AnchoredValue(RangeFn fn, const model::Sample* data, size_t n, size_t lo, size_t hi, int64_t from,
                   int64_t lookback, double range_sec, double* out) {
  (void)n;
  if (hi == lo) return false;
  size_t first = lo;
  if (lo > 0 && data[lo - 1].t > from - lookback) first = lo - 1;
  std::vector<double> v;
  v.reserve(hi - first);
  for (size_t k = first; k < hi; ++k) v.push_back(data[k].v);
  if (fn == Increase || fn == Rate) {
    double inc = CounterIncrease(v.data(), v.size());
    *out = fn == Rate ? inc / range_sec : inc;
  } else if (fn == Delta) {
    *out = v.back() - v.front();
  } else if (fn == Changes) {
    double c = 0;
    for (size_t k = 1; k < v.size(); ++k) {
      if (v[k] != v[k - 1] && !(std::isnan(v[k]) && std::isnan(v[k - 1]))) ++c;
    }
    *out = c;
  } else {  // Resets
    double c = 0;
    for (size_t k = 1; k < v.size(); ++k) {
      if (v[k] < v[k - 1]) ++c;
    }
    *out = c;
  }
  return true;
}

// Value at x interpolated between the samples around it (within the lookback
// delta), held constant past the first or last sample. For counters a drop
// between the two samples is a reset: the value rises from 0.
double InterpolateAt(const model::Sample* data, size_t n, int64_t x, int64_t lookback, bool counter) {
  const model::Sample* end = data + n;
  const model::Sample* b = std::upper_bound(data, end, x, [](int64_t t, const model::Sample& s) { return t < s.t; });
  const model::Sample* a = b == data ? nullptr : b - 1;
  if (a != nullptr && a->t <= x - lookback) a = nullptr;
  if (a == nullptr) return b != end ? b->v : NAN;
  if (b != end && b->t >= x + lookback) b = end;
  if (a->t == x || b == end) return a->v;
  double f = static_cast<double>(x - a->t) / static_cast<double>(b->t - a->t);
  if (counter && b->v < a->v) return b->v * f;
  return a->v + (b->v - a->v) * f;
}

// `smoothed`: the values at both window edges are interpolated from the
// neighbouring samples; empty unless there is data on both sides of the edges.
bool SmoothedValue(RangeFn fn, const model::Sample* data, size_t n, size_t lo, size_t hi, int64_t from, int64_t ref,
                   int64_t lookback, double range_sec, double* out) {
  // Some sample at or before the end (within lookback) and some after the start.
  if (hi == 0 || data[hi - 1].t <= ref - lookback) return false;
  if (lo >= n) return false;
  const bool counter = fn != Delta;
  double vf = InterpolateAt(data, n, from, lookback, counter);
  double vr = InterpolateAt(data, n, ref, lookback, counter);
  if (fn == Delta) {
    *out = vr - vf;
    return true;
  }
  std::vector<double> v;
  v.reserve(hi - lo + 2);
  v.push_back(vf);
  for (size_t k = lo; k < hi; ++k) v.push_back(data[k].v);
  v.push_back(vr);
  double inc = CounterIncrease(v.data(), v.size());
  *out = fn == Rate ? inc / range_sec : inc;
  return true;
}

// Prometheus's hint that rate() or increase() of a series whose name does not
// say counter (or histogram/summary part) may be a mistake.
void InfoIfNotCounterName(Evaluator& ev, std::string_view name, const parser::Expr& arg) {
  if (name.empty()) return;
  for (std::string_view suffix : {"_total", "_sum", "_count", "_bucket"}) {
    if (name.ends_with(suffix)) return;
  }
  ev.Info("metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"" + std::string(name) +
              "\"",
          arg);
}

}  // namespace

bool FloatWindowValue(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, parser::RangeMod mod,
                      std::span<const model::Sample> smp, size_t lo, size_t hi, int64_t lookback,
                      const RangeCtx& ctx, double* out) {
  if (mod == parser::RangeMod::kAnchored) {
    return AnchoredValue(def.fn, smp.data(), smp.size(), lo, hi, ctx.range_start, lookback, ctx.range_sec, out);
  }
  if (mod == parser::RangeMod::kSmoothed) {
    return SmoothedValue(def.fn, smp.data(), smp.size(), lo, hi, ctx.range_start, ctx.range_end, lookback,
                         ctx.range_sec, out);
  }
  if (hi == lo) return false;
  if (!def.fn(W(smp.data() + lo, hi - lo), ctx, out)) return false;
  if (def.fn == QuantileOverTime) WarnIfInvalidQuantile(ev, ctx.p0, *e.args[0]);
  return true;
}

void ForEachRangeFnSeriesWithHistograms(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def,
                                        const StepRange& r, const RangeSeriesHistogramCallback& cb) {
  size_t matrix_idx = def.matrix_arg;
  std::vector<std::vector<double>> params;
  for (size_t i = 0; i < e.args.size(); ++i) {
    if (i == matrix_idx) continue;
    params.push_back(ScalarArg(ev, *e.args[i], r));
  }
  size_t steps = r.Steps();
  Evaluator::WindowSpec spec;
  // The spec is known before the first callback for selectors; compute it the
  // same way here so the callback can use it.
  const parser::Expr& arg = Unparen(*e.args[matrix_idx]);
  if (arg.kind == parser::NodeKind::kMatrixSelector) {
    const parser::Expr& vs = *arg.args[0];
    spec.range_ms = arg.range_ms;
    spec.offset_ms = vs.offset_ms;
    spec.has_at = vs.at != parser::AtKind::kNone;
    spec.at_ms = vs.at_ms;
  } else {
    spec.range_ms = arg.range_ms;
    spec.offset_ms = arg.offset_ms;
    spec.has_at = arg.at != parser::AtKind::kNone;
    spec.at_ms = arg.at_ms;
  }
  const bool counter = def.fn == Rate || def.fn == Increase;
  parser::RangeMod mod = arg.kind == parser::NodeKind::kMatrixSelector ? arg.args[0]->range_mod : parser::RangeMod::kNone;
  if (mod == parser::RangeMod::kSmoothed && def.fn != Rate && def.fn != Increase && def.fn != Delta) {
    ThrowEval("smoothed modifier can only be used with: delta, increase, rate - not with " + std::string(def.name));
  }
  if (mod == parser::RangeMod::kAnchored && def.fn != Rate && def.fn != Increase && def.fn != Delta &&
      def.fn != Changes && def.fn != Resets) {
    ThrowEval("anchored modifier can only be used with: changes, delta, increase, rate, resets - not with " +
              std::string(def.name));
  }
  const int64_t lookback = ev.lookback_delta();
  const double* p0 = params.size() > 0 ? params[0].data() : nullptr;
  const double* p1 = params.size() > 1 ? params[1].data() : nullptr;
  RangeCtx ctx;
  ExtrapolationMemo memo;
  ctx.memo = &memo;
  std::vector<double> prefix;
  ctx.range_sec = static_cast<double>(spec.range_ms) / 1000.0;
  std::vector<StepValue> vals;
  vals.reserve(steps);
  std::vector<StepHistogram> hvals;
  HistogramSeriesArgs hargs;
  hargs.call = &e;
  hargs.def = &def;
  hargs.mod = mod;
  hargs.r = &r;
  hargs.spec = &spec;
  hargs.lookback = lookback;
  hargs.p0 = p0;
  hargs.p1 = p1;
  const bool reads_st = counter || def.fn == Irate || def.fn == Resets;
  std::string last_name_checked;
  // The functions a downsampled tier answers ask the store for its points.
  const bool tier_fn = def.fn == MinOverTime || def.fn == MaxOverTime || def.fn == SumOverTime ||
                       def.fn == CountOverTime || def.fn == AvgOverTime || def.fn == LastOverTime;
  ev.ForEachRangeSeries(arg, r, [&](const model::Labels& l, bool drop, std::vector<model::Sample>& smp,
                                    const std::vector<int64_t>& st, std::vector<HPoint>& hs) {
    if (smp.empty() && hs.empty()) return;
    vals.clear();
    const int64_t* st_data = reads_st && !st.empty() && mod == parser::RangeMod::kNone ? st.data() : nullptr;
    bool overlap = false;
    ctx.st_overlap = &overlap;
    if (!hs.empty()) {
      // Histogram samples: the slower path that looks at both kinds.
      hvals.clear();
      ctx.no_resets = false;
      if (arg.kind == parser::NodeKind::kSubquery) ForgetCounterResetHints(&hs);
      HistogramRangeSeries(ev, hargs, l, smp, st_data, hs, ctx, &vals, &hvals);
    } else {
      hvals.clear();
      if (counter) {
        // One scan per series instead of one per window. Start timestamps can
        // mark resets the values do not show.
        bool no_resets = st_data == nullptr;
        for (size_t i = 1; i < smp.size() && no_resets; ++i) no_resets = !(smp[i].v < smp[i - 1].v);
        ctx.no_resets = no_resets;
      }
      const size_t n = smp.size();
      const model::Sample* data = smp.data();
      const double* counts = ev.counts().empty() ? nullptr : ev.counts().data();
      // Integer gauges (utilisation, temperatures, counts): window sums from
      // prefix sums, one subtraction a step instead of one addition a sample.
      const bool window_sums = (def.fn == SumOverTime || def.fn == AvgOverTime) && counts == nullptr &&
                               mod == parser::RangeMod::kNone && ExactPrefixSums(smp, &prefix);
      const W series(data, n);
      if (mod != parser::RangeMod::kNone) {
        ForEachWindow(r, spec, series, [&](size_t i, int64_t, int64_t from, int64_t ref, size_t lo, size_t hi) {
          double v;
          bool ok = mod == parser::RangeMod::kAnchored
                        ? AnchoredValue(def.fn, data, n, lo, hi, from, lookback, ctx.range_sec, &v)
                        : SmoothedValue(def.fn, data, n, lo, hi, from, ref, lookback, ctx.range_sec, &v);
          if (ok) vals.push_back({static_cast<uint32_t>(i), v});
        });
      } else if (window_sums) {
        ForEachWindow(r, spec, series, [&](size_t i, int64_t, int64_t, int64_t, size_t lo, size_t hi) {
          if (hi == lo) return;
          const double sum = prefix[hi] - prefix[lo];
          vals.push_back({static_cast<uint32_t>(i), def.fn == AvgOverTime ? sum / static_cast<double>(hi - lo) : sum});
        });
      } else if (tier_fn) {
        // The functions a tier answers read nothing of the context but the
        // counts: called directly (inlined), not through def.fn, with
        // nothing else set a step. A 90-day range is mostly this loop.
        auto run = [&](auto fn) {
          ForEachWindow(r, spec, series, [&](size_t i, int64_t, int64_t, int64_t, size_t lo, size_t hi) {
            if (hi == lo) return;
            ctx.counts = counts != nullptr ? counts + lo : nullptr;
            double v;
            if (fn(W(data + lo, hi - lo), ctx, &v)) vals.push_back({static_cast<uint32_t>(i), v});
          });
        };
        if (def.fn == AvgOverTime) {
          run([](W w, const RangeCtx& c, double* out) { return AvgOverTime(w, c, out); });
        } else if (def.fn == MaxOverTime) {
          run([](W w, const RangeCtx& c, double* out) { return MaxOverTime(w, c, out); });
        } else if (def.fn == MinOverTime) {
          run([](W w, const RangeCtx& c, double* out) { return MinOverTime(w, c, out); });
        } else if (def.fn == SumOverTime) {
          run([](W w, const RangeCtx& c, double* out) { return SumOverTime(w, c, out); });
        } else if (def.fn == CountOverTime) {
          run([](W w, const RangeCtx& c, double* out) { return CountOverTime(w, c, out); });
        } else {
          run([](W w, const RangeCtx& c, double* out) { return LastOverTime(w, c, out); });
        }
      } else {
        ForEachWindow(r, spec, series, [&](size_t i, int64_t t, int64_t from, int64_t ref, size_t lo, size_t hi) {
          if (hi == lo) return;
          ctx.t = t;
          ctx.range_start = from;
          ctx.range_end = ref;
          ctx.p0 = p0 != nullptr ? p0[i] : 0;
          ctx.p1 = p1 != nullptr ? p1[i] : 0;
          ctx.st = st_data != nullptr ? st_data + lo : nullptr;
          ctx.counts = counts != nullptr ? counts + lo : nullptr;
          double v;
          if (!def.fn(W(data + lo, hi - lo), ctx, &v)) return;
          if (def.fn == QuantileOverTime) WarnIfInvalidQuantile(ev, ctx.p0, *e.args[0]);
          vals.push_back({static_cast<uint32_t>(i), v});
        });
      }
    }
    if (overlap) {
      ev.Warn("sample has start time that overlaps with previous sample timestamp for metric \"" +
                  std::string(l.MetricName()) + "\"",
              *e.args[matrix_idx]);
    }
    if (counter && !vals.empty() && l.MetricName() != last_name_checked) {
      last_name_checked = l.MetricName();  // series of one name come in a run
      InfoIfNotCounterName(ev, last_name_checked, *e.args[matrix_idx]);
    }
    if (!vals.empty() || !hvals.empty()) cb(l, def.keeps_name ? drop : true, vals, hvals);
  }, tier_fn ? def.name : std::string_view());
}

void ForEachRangeFnSeries(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, const StepRange& r,
                          const RangeSeriesCallback& cb) {
  // Histogram values have no place in a float callback: callers that can
  // take them use ForEachRangeFnSeriesWithHistograms.
  ForEachRangeFnSeriesWithHistograms(
      ev, e, def, r,
      [&cb](const model::Labels& l, bool drop_name, std::span<const StepValue> vals, std::span<const StepHistogram>) {
        if (!vals.empty()) cb(l, drop_name, vals);
      });
}

Value EvalRangeFunction(Evaluator& ev, const parser::Expr& e, const RangeFnDef& def, const StepRange& r) {
  Value out;
  out.type = parser::Type::kVector;
  ForEachRangeFnSeriesWithHistograms(
      ev, e, def, r,
      [&](const model::Labels& l, bool drop_name, std::span<const StepValue> vals,
          std::span<const StepHistogram> hvals) {
        EvalSeries es;
        es.labels = l;
        es.drop_name = drop_name;
        es.points.reserve(vals.size());
        for (const StepValue& sv : vals) es.points.push_back({r.At(sv.step), sv.v});
        es.hpoints.reserve(hvals.size());
        for (const StepHistogram& sh : hvals) es.hpoints.push_back({r.At(sh.step), sh.h});
        out.series.push_back(std::move(es));
      });
  return out;
}

}  // namespace trainwatch::promql
