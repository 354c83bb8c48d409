// Evaluator core: dispatch, selectors, range windows, subqueries, helpers.

#include "promql/eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "promql/functions_range_histogram.h"

namespace trainwatch::promql {

using parser::Expr;
using parser::NodeKind;
using parser::Type;

void ThrowEval(Status s) { throw EvalError{std::move(s)}; }
void ThrowEval(std::string msg) { throw EvalError{Status::InvalidArgument(std::move(msg))}; }

double Quantile(double q, std::vector<double>* values) {
  if (values->empty() || std::isnan(q)) return NAN;
  if (q < 0) return -INFINITY;
  if (q > 1) return INFINITY;
  std::sort(values->begin(), values->end(), [](double a, double b) {
    if (std::isnan(a)) return !std::isnan(b);  // NaN first, like Go's sort.Float64s
    return a < b;
  });
  double n = static_cast<double>(values->size());
  double rank = q * (n - 1);
  double lower = std::max(0.0, std::floor(rank));
  double upper = std::min(n - 1, lower + 1);
  double weight = rank - std::floor(rank);
  return (*values)[static_cast<size_t>(lower)] * (1 - weight) + (*values)[static_cast<size_t>(upper)] * weight;
}

std::string FormatFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // Go's 'f' format never uses exponents.
  std::string s = buf;
  if (s.find('e') == std::string::npos) return s;
  double av = std::fabs(v);
  int digits = 0;
  if (av < 1) {
    // enough decimals for round trip
    for (digits = 1; digits < 400; ++digits) {
      std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

model::Labels DropMetricName(const model::Labels& l) {
  if (!l.Has(model::kMetricName) && !l.Has("__type__") && !l.Has("__unit__")) return l;
  std::vector<model::Label> out;
  out.reserve(l.size());
  for (const auto& p : l) {
    if (p.name == model::kMetricName || p.name == "__type__" || p.name == "__unit__") continue;
    out.push_back(p);
  }
  return model::Labels(std::move(out));
}

namespace {
// Merges two lists sorted by t; a timestamp in both is an error.
template <typename P>
void MergeByTime(std::vector<P>* dst, std::vector<P>* src) {
  if (src->empty()) return;
  std::vector<P> merged;
  merged.reserve(dst->size() + src->size());
  size_t a = 0, b = 0;
  while (a < dst->size() || b < src->size()) {
    if (b >= src->size() || (a < dst->size() && (*dst)[a].t < (*src)[b].t)) {
      merged.push_back(std::move((*dst)[a++]));
    } else if (a >= dst->size() || (*src)[b].t < (*dst)[a].t) {
      merged.push_back(std::move((*src)[b++]));
    } else {
      ThrowEval("vector cannot contain metrics with the same labelset");
    }
  }
  *dst = std::move(merged);
}

// True when a float point and a histogram point share a timestamp.
bool FloatAndHistogramCollide(const std::vector<Point>& f, const std::vector<HPoint>& h) {
  size_t a = 0, b = 0;
  while (a < f.size() && b < h.size()) {
    if (f[a].t == h[b].t) return true;
    if (f[a].t < h[b].t) {
      ++a;
    } else {
      ++b;
    }
  }
  return false;
}
}  // namespace

void MergeSameLabels(SeriesList* s) {
  std::stable_sort(s->begin(), s->end(), [](const EvalSeries& a, const EvalSeries& b) { return a.labels < b.labels; });
  size_t out = 0;
  for (size_t i = 0; i < s->size(); ++i) {
    if (out > 0 && (*s)[out - 1].labels == (*s)[i].labels) {
      EvalSeries& dst = (*s)[out - 1];
      EvalSeries& src = (*s)[i];
      MergeByTime(&dst.points, &src.points);
      MergeByTime(&dst.hpoints, &src.hpoints);
      if (!dst.hpoints.empty() && FloatAndHistogramCollide(dst.points, dst.hpoints)) {
        ThrowEval("vector cannot contain metrics with the same labelset");
      }
      continue;
    }
    if (out != i) (*s)[out] = std::move((*s)[i]);
    ++out;
  }
  s->resize(out);
}

void FinalizeNames(SeriesList* s) {
  bool any = false;
  for (auto& x : *s) {
    if (x.drop_name) {
      x.labels = DropMetricName(x.labels);
      x.drop_name = false;
      any = true;
    }
  }
  if (any) MergeSameLabels(s);
}

const Expr& Unparen(const Expr& e) {
  const Expr* p = &e;
  while (p->kind == NodeKind::kParen) p = p->args[0].get();
  return *p;
}

std::vector<double> ScalarArg(Evaluator& ev, const Expr& e, const StepRange& r) {
  Value v = ev.Eval(e, r);
  if (v.type != Type::kScalar) ThrowEval("expected scalar argument");
  return std::move(v.scalar);
}

void Evaluator::CheckDeadline() {
  if ((++checks_ & 127) != 0) return;
  if (std::chrono::steady_clock::now() > deadline_) {
    ThrowEval(Status::Cancelled("query timed out in expression evaluation"));
  }
}

void Evaluator::AddSamples(int64_t n) {
  cur_samples_ += n;
  if (cur_samples_ > opts_.max_samples) {
    ThrowEval(Status::ResourceExhausted("query processing would load too many samples into memory in query execution"));
  }
}

void Evaluator::CheckCells(size_t n) const {
  if (n > static_cast<size_t>(opts_.max_samples)) {
    ThrowEval(Status::ResourceExhausted("query processing would load too many samples into memory in query execution"));
  }
}

namespace {
int64_t CountPoints(const Value& v) {
  if (v.type == Type::kScalar) return static_cast<int64_t>(v.scalar.size());
  int64_t n = 0;
  for (const auto& s : v.series) n += static_cast<int64_t>(s.points.size() + s.hpoints.size());
  return n;
}
}  // namespace

Value Evaluator::Eval(const Expr& e, const StepRange& r) {
  int64_t before = cur_samples_;
  Value v = EvalNode(e, r);
  cur_samples_ = before;
  AddSamples(CountPoints(v));
  return v;
}

Value Evaluator::EvalNode(const Expr& e, const StepRange& r) {
  CheckDeadline();
  Value out;
  switch (e.kind) {
    case NodeKind::kNumber:
      out.type = Type::kScalar;
      out.scalar.assign(r.Steps(), e.number);
      return out;
    case NodeKind::kString:
      out.type = Type::kString;
      out.str = e.str;
      return out;
    case NodeKind::kParen:
    case NodeKind::kStepInvariant:
      return Eval(*e.args[0], r);
    case NodeKind::kUnary: {
      out = Eval(*e.args[0], r);
      if (!e.negative) return out;
      if (out.type == Type::kScalar) {
        for (double& d : out.scalar) d = -d;
      } else {
        for (auto& s : out.series) {
          for (auto& p : s.points) p.v = -p.v;
          for (auto& p : s.hpoints) p.h = NegateHistogram(*p.h);
          s.drop_name = true;
        }
      }
      return out;
    }
    case NodeKind::kVectorSelector:
      out.type = Type::kVector;
      out.series = EvalVectorSelector(e, r, SelectorValue::kValue);
      return out;
    case NodeKind::kMatrixSelector:
    case NodeKind::kSubquery:
      ThrowEval("range vector cannot be evaluated as an instant vector");
    case NodeKind::kCall:
      return EvalCall(e, r);
    case NodeKind::kAggregate:
      return EvalAggregate(e, r);
    case NodeKind::kBinary:
      return EvalBinary(e, r);
  }
  ThrowEval("unknown expression");
}

void Evaluator::Annotate(std::string text, const parser::Expr& at, bool info) {
  for (const Annotation& a : annotations_) {
    if (a.pos == at.pos_start && a.info == info && a.text == text) return;
  }
  annotations_.push_back({std::move(text), at.pos_start, info});
}

void Evaluator::WarnSortInRange(const parser::Expr& e, const StepRange& r) {
  if (query_start_ == query_end_ && r.Steps() == 1) return;
  Warn("sort is ineffective for range queries since results are always ordered by labels", e);
}

void WarnIfInvalidQuantile(Evaluator& ev, double q, const parser::Expr& param) {
  if (q >= 0 && q <= 1) return;  // false for NaN
  ev.Warn("quantile value should be between 0 and 1, got " + FormatFloat(q), param);
}

bool IsStaleHistogram(const model::FloatHistogram& h) { return model::IsStaleNaN(h.sum); }

HistogramPtr NegateHistogram(const model::FloatHistogram& h) {
  auto n = std::make_shared<model::FloatHistogram>(h);
  n->Mul(-1);
  return n;
}

void Evaluator::SelectRaw(const Expr& vs, int64_t mint, int64_t maxt, bool keep_stale, const RawCallback& cb,
                          std::string_view func, int64_t range_ms, int64_t step_ms) {
  storage::SelectHints hints;
  hints.start = mint;
  hints.end = maxt;
  hints.func = func;
  hints.range_ms = range_ms;
  hints.step_ms = step_ms;
  auto set = querier_->Select(false, hints, vs.matchers);
  std::vector<model::Sample> buf;
  std::vector<int64_t> st_buf;
  std::vector<HPoint> hbuf;
  while (set->Next()) {
    CheckDeadline();
    const storage::Series& s = set->At();
    buf.clear();
    st_buf.clear();
    hbuf.clear();
    counts_.clear();
    auto it = s.Iterator();
    // Under histogram_count and the like: count and sum only, with the
    // counter-reset hint worked out against the histogram read before.
    model::FloatHistogram last_full;
    bool have_last = false;
    auto stats_only = [&](const model::FloatHistogram& h) {
      auto out = std::make_shared<model::FloatHistogram>();
      out->counter_reset_hint = h.counter_reset_hint;
      out->schema = h.schema;
      out->count = h.count;
      out->sum = h.sum;
      if (IsStaleHistogram(h)) return out;
      if (out->counter_reset_hint == model::CounterResetHint::kUnknown && have_last) {
        out->counter_reset_hint =
            h.DetectReset(last_full) ? model::CounterResetHint::kCounterReset : model::CounterResetHint::kNotCounterReset;
      }
      last_full = h;
      last_full.counter_reset_hint = out->counter_reset_hint;
      have_last = true;
      return out;
    };
    if (it->Seek(mint)) {
      if (!it->HasST() && !it->HasHistograms() && !it->HasCounts()) {
        it->AppendUntil(maxt, &buf);
        if (!keep_stale) std::erase_if(buf, [](const model::Sample& x) { return model::IsStaleNaN(x.v); });
      } else if (!it->HasST() && !it->HasHistograms()) {
        // Points of a downsampled tier, with their windows' counts.
        it->AppendCountedUntil(maxt, &buf, &counts_);
        // A tier holds no stale markers; raw samples merged beside its
        // points may. Nothing moves before the first.
        const auto stale = [](const model::Sample& x) { return model::IsStaleNaN(x.v); };
        size_t k = buf.size();
        if (!keep_stale) k = static_cast<size_t>(std::find_if(buf.begin(), buf.end(), stale) - buf.begin());
        if (k < buf.size()) {
          for (size_t i = k; i < buf.size(); ++i) {
            if (stale(buf[i])) continue;
            buf[k] = buf[i];
            counts_[k] = counts_[i];
            ++k;
          }
          buf.resize(k);
          counts_.resize(k);
        }
      } else {
        const bool has_st = it->HasST();
        const bool has_counts = it->HasCounts();
        do {
          model::Sample smp = it->At();
          if (smp.t > maxt) break;
          if (it->AtIsHistogram()) {
            const model::FloatHistogram* h = it->AtHistogram();
            if (!keep_stale && IsStaleHistogram(*h)) continue;
            int64_t hst = has_st ? it->AtST() : 0;
            if (vs.skip_histogram_buckets) {
              hbuf.push_back({smp.t, stats_only(*h), hst});
            } else {
              hbuf.push_back({smp.t, std::make_shared<model::FloatHistogram>(*h), hst});
            }
            continue;
          }
          if (!keep_stale && model::IsStaleNaN(smp.v)) continue;
          buf.push_back(smp);
          if (has_st) st_buf.push_back(it->AtST());
          if (has_counts) counts_.push_back(it->AtCount());
        } while (it->Next());
        // A series whose samples in range carry no start timestamp reads as one without.
        if (std::all_of(st_buf.begin(), st_buf.end(), [](int64_t x) { return x == 0; })) st_buf.clear();
      }
    }
    if (Status st = it->Err(); !st.ok()) ThrowEval(st);
    int64_t n = static_cast<int64_t>(buf.size() + hbuf.size());
    AddSamples(n);
    cb(s.labels(), false, buf, st_buf, hbuf);
    ReleaseSamples(n);
  }
  if (Status st = set->Err(); !st.ok()) ThrowEval(st);
}

SeriesList Evaluator::EvalVectorSelector(const Expr& e, const StepRange& r, SelectorValue what) {
  const bool timestamps = what == SelectorValue::kTimestamp;
  const int64_t lookback = opts_.lookback_delta_ms;
  bool has_at = e.at != parser::AtKind::kNone;
  int64_t first_ref = (has_at ? e.at_ms : r.start) - e.offset_ms;
  int64_t last_ref = (has_at ? e.at_ms : r.end) - e.offset_ms;
  size_t steps = r.Steps();
  SeriesList out;
  if (e.range_mod == parser::RangeMod::kSmoothed && what != SelectorValue::kStartTimestamp) {
    // The value at each step is interpolated between the samples around it
    // within the lookback delta on both sides (a start timestamp is not: it
    // is the selected sample's). A window that holds floats and histograms
    // yields nothing, with a warning.
    SelectRaw(e, first_ref - lookback + 1, last_ref + lookback - 1, false,
              [&](const model::Labels& l, bool, std::vector<model::Sample>& smp, const std::vector<int64_t>&,
                  std::vector<HPoint>& hs) {
                EvalSeries es;
                auto after = [](int64_t x, const auto& s) { return x < s.t; };
                for (size_t i = 0; i < steps; ++i) {
                  int64_t t = r.At(i);
                  int64_t ref = (has_at ? e.at_ms : t) - e.offset_ms;
                  auto in_window = [&](int64_t x) { return x > ref - lookback && x < ref + lookback; };
                  auto it = std::upper_bound(smp.begin(), smp.end(), ref, after);
                  auto hit = std::upper_bound(hs.begin(), hs.end(), ref, after);
                  bool floats = (it != smp.begin() && in_window((it - 1)->t)) || (it != smp.end() && in_window(it->t));
                  bool hists = (hit != hs.begin() && in_window((hit - 1)->t)) || (hit != hs.end() && in_window(hit->t));
                  if (floats && hists) {
                    Warn("encountered a mix of histograms and floats for metric name \"" + std::string(l.MetricName()) +
                             "\"",
                         e);
                    continue;
                  }
                  if (hists) {
                    if (hit == hs.begin() || !in_window((hit - 1)->t)) continue;  // nothing at or before ref
                    const HPoint& a = *(hit - 1);
                    if (a.t == ref || hit == hs.end() || !in_window(hit->t)) {
                      auto h = std::make_shared<model::FloatHistogram>(*a.h);
                      if (a.t != ref) h->counter_reset_hint = model::CounterResetHint::kUnknown;
                      es.hpoints.push_back({t, std::move(h)});
                      continue;
                    }
                    const HPoint& b = *hit;
                    if (a.h->UsesCustomBuckets() != b.h->UsesCustomBuckets()) {
                      Warn("vector contains a mix of histograms with exponential and custom buckets schemas for metric "
                           "name \"" +
                               std::string(l.MetricName()) + "\"",
                           e);
                      continue;
                    }
                    const bool counter = a.h->counter_reset_hint != model::CounterResetHint::kGauge ||
                                         b.h->counter_reset_hint != model::CounterResetHint::kGauge;
                    auto h = InterpolateHistogramAt(*this, a, b, ref, counter, l.MetricName(), e);
                    if (h.has_value()) es.hpoints.push_back({t, std::make_shared<model::FloatHistogram>(std::move(*h))});
                    continue;
                  }
                  if (it == smp.begin()) continue;
                  const model::Sample& a = *(it - 1);
                  if (a.t <= ref - lookback) continue;
                  double v = a.v;
                  if (a.t != ref && it != smp.end() && it->t < ref + lookback) {
                    v = a.v + (it->v - a.v) * static_cast<double>(ref - a.t) / static_cast<double>(it->t - a.t);
                  }
                  es.points.push_back({t, timestamps ? static_cast<double>(a.t) / 1000.0 : v});
                }
                if (!es.points.empty() || !es.hpoints.empty()) {
                  es.labels = l;
                  out.push_back(std::move(es));
                }
              });
    return out;
  }
  SelectRaw(e, first_ref - lookback + 1, last_ref, true,
            [&](const model::Labels& l, bool, std::vector<model::Sample>& smp, const std::vector<int64_t>& st,
                std::vector<HPoint>& hs) {
    if (smp.empty() && hs.empty()) return;
    EvalSeries es;
    size_t j = 0, k = 0;
    for (size_t i = 0; i < steps; ++i) {
      int64_t t = r.At(i);
      int64_t ref = (has_at ? e.at_ms : t) - e.offset_ms;
      while (j < smp.size() && smp[j].t <= ref) ++j;
      while (k < hs.size() && hs[k].t <= ref) ++k;
      // The newest sample at or before ref, of either kind.
      const bool hist = k > 0 && (j == 0 || hs[k - 1].t > smp[j - 1].t);
      if (hist) {
        const HPoint& h = hs[k - 1];
        if (h.t <= ref - lookback || IsStaleHistogram(*h.h)) continue;
        if (what == SelectorValue::kValue) {
          es.hpoints.push_back({t, h.h});
        } else {
          es.points.push_back({t, static_cast<double>(what == SelectorValue::kTimestamp ? h.t : h.st) / 1000.0});
        }
        continue;
      }
      if (j == 0) continue;
      const model::Sample& s = smp[j - 1];
      if (s.t <= ref - lookback || model::IsStaleNaN(s.v)) continue;
      if (es.points.empty()) es.points.reserve(steps - i);
      double v = s.v;
      if (what == SelectorValue::kTimestamp) v = static_cast<double>(s.t) / 1000.0;
      if (what == SelectorValue::kStartTimestamp) v = st.empty() ? 0 : static_cast<double>(st[j - 1]) / 1000.0;
      es.points.push_back({t, v});
    }
    if (!es.points.empty() || !es.hpoints.empty()) {
      es.labels = l;
      out.push_back(std::move(es));
    }
  });
  return out;
}

Evaluator::WindowSpec Evaluator::ForEachRangeSeries(const Expr& arg0, const StepRange& r, const RawCallback& cb,
                                                    std::string_view func) {
  const Expr& arg = Unparen(arg0);
  WindowSpec spec;
  if (arg.kind == NodeKind::kMatrixSelector) {
    const Expr& vs = *arg.args[0];
    spec.range_ms = arg.range_ms;
    spec.offset_ms = vs.offset_ms;
    spec.has_at = vs.at != parser::AtKind::kNone;
    spec.at_ms = vs.at_ms;
    int64_t min_ref = spec.Ref(r.start), max_ref = spec.Ref(r.end);
    // anchored/smoothed also read the sample before the window (and smoothed
    // the one after it), within the lookback delta.
    int64_t before = vs.range_mod != parser::RangeMod::kNone ? opts_.lookback_delta_ms : 0;
    int64_t after = vs.range_mod == parser::RangeMod::kSmoothed ? opts_.lookback_delta_ms - 1 : 0;
    if (vs.range_mod != parser::RangeMod::kNone) func = {};
    SelectRaw(vs, min_ref - spec.range_ms - before + 1, max_ref + after, false, cb, func, spec.range_ms,
              r.Steps() > 1 ? r.step : 0);
    return spec;
  }
  if (arg.kind != NodeKind::kSubquery) ThrowEval("expected range vector argument");
  spec.range_ms = arg.range_ms;
  spec.offset_ms = arg.offset_ms;
  spec.has_at = arg.at != parser::AtKind::kNone;
  spec.at_ms = arg.at_ms;
  int64_t min_ref = spec.Ref(r.start), max_ref = spec.Ref(r.end);
  std::vector<RawSeries> raw = EvalSubqueryRaw(arg, min_ref, max_ref);
  const std::vector<int64_t> no_st;
  for (auto& s : raw) {
    CheckDeadline();
    counts_.clear();  // subquery points stand for one each
    cb(s.labels, s.drop_name, s.samples, no_st, s.hsamples);
  }
  return spec;
}

std::vector<RawSeries> Evaluator::EvalSubqueryRaw(const Expr& sq, int64_t min_ref, int64_t max_ref) {
  int64_t step = sq.step_ms > 0 ? sq.step_ms : default_step();
  int64_t lo = min_ref - sq.range_ms;
  int64_t start = step * (lo / step);
  if (start <= lo) start += step;
  std::vector<RawSeries> out;
  if (start > max_ref) return out;
  StepRange inner{start, max_ref, step};
  inner.end = start + static_cast<int64_t>((max_ref - start) / step) * step;
  // Every inner step can hold a point: refuse before allocating per-step
  // buffers for a subquery like x[10y:1s].
  if (static_cast<int64_t>(inner.Steps()) > opts_.max_samples) {
    ThrowEval(Status::ResourceExhausted("query processing would load too many samples into memory in query execution"));
  }
  Value v = Eval(*sq.args[0], inner);
  out.reserve(v.series.size());
  for (auto& s : v.series) {
    RawSeries rs;
    rs.labels = std::move(s.labels);
    rs.drop_name = s.drop_name;
    rs.samples.reserve(s.points.size());
    for (const auto& p : s.points) rs.samples.push_back({p.t, p.v});
    rs.hsamples = std::move(s.hpoints);
    for (HPoint& p : rs.hsamples) p.st = 0;  // a subquery cuts start timestamps off
    out.push_back(std::move(rs));
  }
  return out;
}

std::vector<RawSeries> Evaluator::EvalMatrixAt(const Expr& e, int64_t t) {
  StepRange r{t, t, 1};
  std::vector<RawSeries> out;
  WindowSpec spec;
  spec = ForEachRangeSeries(e, r, [&](const model::Labels& l, bool drop, std::vector<model::Sample>& smp,
                                      const std::vector<int64_t>&, std::vector<HPoint>& hs) {
    // Window filtering happens below once the spec is known; keep all.
    RawSeries rs;
    rs.labels = l;
    rs.drop_name = drop;
    rs.samples = smp;
    rs.hsamples = hs;
    out.push_back(std::move(rs));
  });
  int64_t ref = spec.Ref(t);
  auto in_window = [&](int64_t x) { return x > ref - spec.range_ms && x <= ref; };
  std::vector<RawSeries> kept;
  for (auto& s : out) {
    std::erase_if(s.samples, [&](const model::Sample& x) { return !in_window(x.t); });
    std::erase_if(s.hsamples, [&](const HPoint& x) { return !in_window(x.t); });
    if (s.samples.empty() && s.hsamples.empty()) continue;
    kept.push_back(std::move(s));
  }
  return kept;
}

}  // namespace trainwatch::promql
