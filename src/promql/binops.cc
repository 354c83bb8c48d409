// Binary operators. Match signatures are computed once per series and the
// "one" side is laid out densely per step, so matching is O(points).

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "promql/eval.h"

namespace trainwatch::promql {

using parser::BinOp;
using parser::Cardinality;
using parser::Expr;
using parser::Type;

namespace {

double ElemBinop(BinOp op, double l, double r, bool* keep) {
  *keep = true;
  switch (op) {
    case BinOp::kAdd: return l + r;
    case BinOp::kSub: return l - r;
    case BinOp::kMul: return l * r;
    case BinOp::kDiv: return l / r;
    case BinOp::kPow: return std::pow(l, r);
    case BinOp::kMod: return std::fmod(l, r);
    case BinOp::kAtan2: return std::atan2(l, r);
    case BinOp::kEql: *keep = l == r; return l;
    case BinOp::kNeq: *keep = l != r; return l;
    case BinOp::kGtr: *keep = l > r; return l;
    case BinOp::kLss: *keep = l < r; return l;
    case BinOp::kGte: *keep = l >= r; return l;
    case BinOp::kLte: *keep = l <= r; return l;
    default: ThrowEval("operator not allowed for scalar operations");
  }
}

model::Labels Signature(const model::Labels& l, const parser::VectorMatching& m) {
  std::vector<model::Label> out;
  for (const auto& p : l) {
    bool listed = std::find(m.matching_labels.begin(), m.matching_labels.end(), p.name) != m.matching_labels.end();
    if (m.on ? listed : (!listed && p.name != model::kMetricName)) out.push_back(p);
  }
  return model::Labels(std::move(out));
}

// Assigns dense ids to signatures.
// `{__name__="m", a="b"}`: every label in braces, as Prometheus prints the
// series of a duplicate-match error.
std::string BracedLabels(const model::Labels& l) {
  std::string out = "{";
  for (const auto& p : l) {
    if (out.size() > 1) out += ", ";
    out += p.name;
    out += "=\"";
    for (char c : p.value) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        default: out += c;
      }
    }
    out += '"';
  }
  return out + "}";
}

class SigTable {
 public:
  size_t Id(model::Labels sig) {
    uint64_t h = sig.Hash();
    auto& c = index_[h];
    for (size_t id : c) {
      if (sigs_[id] == sig) return id;
    }
    sigs_.push_back(std::move(sig));
    c.push_back(sigs_.size() - 1);
    return sigs_.size() - 1;
  }
  size_t size() const { return sigs_.size(); }
  const model::Labels& sig(size_t id) const { return sigs_[id]; }

 private:
  std::unordered_map<uint64_t, std::vector<size_t>> index_;
  std::vector<model::Labels> sigs_;
};

// A value of either kind, for the histogram paths.
struct VPoint {
  int64_t t = 0;
  double v = 0;
  HistogramPtr h;
};

inline const HistogramPtr* HistOf(const Point&) { return nullptr; }
inline const HistogramPtr* HistOf(const VPoint& p) { return p.h != nullptr ? &p.h : nullptr; }

// A series' floats and histograms in one list by time.
std::vector<VPoint> Merged(const EvalSeries& s) {
  std::vector<VPoint> out;
  out.reserve(s.points.size() + s.hpoints.size());
  size_t a = 0, b = 0;
  while (a < s.points.size() || b < s.hpoints.size()) {
    if (b >= s.hpoints.size() || (a < s.points.size() && s.points[a].t < s.hpoints[b].t)) {
      out.push_back({s.points[a].t, s.points[a].v, nullptr});
      ++a;
    } else {
      out.push_back({s.hpoints[b].t, 0, s.hpoints[b].h});
      ++b;
    }
  }
  return out;
}

// The result of one element operation where a histogram takes part.
struct ElemOut {
  double v = 0;
  HistogramPtr h;
  bool keep = false;
  // An annotation (warn: a warning, else an info); with `error` the element
  // is dropped.
  std::string note;
  bool warn = false;
  bool error = false;
};

ElemOut Incompatible(BinOp op, bool lh, bool rh) {
  ElemOut o;
  std::string name = parser::BinOpString(op);
  o.note = "incompatible sample types encountered for binary operator \"" + name + "\": " +
           (lh ? "histogram " : "float ") + name + (rh ? " histogram" : " float");
  o.error = true;
  return o;
}

// Prometheus's vectorElemBinop when hl or hr is set.
ElemOut HistogramElemBinop(BinOp op, double fl, const HistogramPtr* hl, double fr, const HistogramPtr* hr) {
  ElemOut o;
  auto make = [](model::FloatHistogram h) { return std::make_shared<const model::FloatHistogram>(std::move(h)); };
  if (hl == nullptr) {  // float op histogram
    if (op != BinOp::kMul) return Incompatible(op, false, true);
    model::FloatHistogram h = **hr;
    h.Mul(fl);
    h.Compact(0);
    o.h = make(std::move(h));
    o.keep = true;
    return o;
  }
  if (hr == nullptr) {  // histogram op float
    if (op == BinOp::kTrimUpper || op == BinOp::kTrimLower) {
      o.h = make((*hl)->TrimBuckets(fr, op == BinOp::kTrimUpper));
      o.keep = true;
      return o;
    }
    if (op != BinOp::kMul && op != BinOp::kDiv) return Incompatible(op, true, false);
    model::FloatHistogram h = **hl;
    if (op == BinOp::kMul) {
      h.Mul(fr);
    } else {
      h.Div(fr);
    }
    h.Compact(0);
    o.h = make(std::move(h));
    o.keep = true;
    return o;
  }
  switch (op) {
    case BinOp::kAdd:
    case BinOp::kSub: {
      model::FloatHistogram h = **hl;
      auto res = op == BinOp::kAdd ? h.Add(**hr) : h.Sub(**hr);
      const char* what = op == BinOp::kAdd ? "addition" : "subtraction";
      if (!res.ok()) {
        o.note = std::string("incompatible bucket layout encountered for binary operator ") + parser::BinOpString(op);
        o.warn = true;
        o.error = true;
        return o;
      }
      if (op == BinOp::kSub) h.counter_reset_hint = model::CounterResetHint::kGauge;
      h.Compact(0);
      o.h = make(std::move(h));
      o.keep = true;
      if (res->nhcb_bounds_reconciled) o.note = std::string("mismatched custom buckets were reconciled during ") + what;
      if (res->counter_reset_collision) {
        // Reported as an error: Prometheus drops the element.
        o.note = std::string("conflicting counter resets during histogram ") + what;
        o.warn = true;
        o.error = true;
      }
      return o;
    }
    case BinOp::kEql:
    case BinOp::kNeq:
      o.h = *hl;
      o.keep = (*hl)->Equals(**hr) == (op == BinOp::kEql);
      return o;
    default:
      return Incompatible(op, true, true);
  }
}

// The last annotation of each step (Prometheus reports only the last one of
// an operation at a step).
class StepNotes {
 public:
  explicit StepNotes(size_t steps) : steps_(steps) {}
  void Set(size_t step, const ElemOut& o) {
    if (o.note.empty()) return;
    if (notes_.empty()) notes_.resize(steps_);
    notes_[step] = {o.note, o.warn};
  }
  void Report(Evaluator& ev, const Expr& at) {
    for (const auto& [text, warn] : notes_) {
      if (text.empty()) continue;
      if (warn) {
        ev.Warn(text, at);
      } else {
        ev.Info(text, at);
      }
    }
  }

 private:
  size_t steps_;
  std::vector<std::pair<std::string, bool>> notes_;  // sized at the first note
};

bool IsTrim(BinOp op) { return op == BinOp::kTrimUpper || op == BinOp::kTrimLower; }

}  // namespace

namespace {

// Vector-vector arithmetic and comparison over points of type P (Point for
// float-only operands, VPoint when histograms take part).
template <typename P>
Value VectorVector(Evaluator& ev, const Expr& e, const StepRange& r, Value& lhs, Value& rhs,
                   const std::vector<const std::vector<P>*>& lpts, const std::vector<const std::vector<P>*>& rpts,
                   SigTable& sigs, const std::vector<size_t>& lsig, const std::vector<size_t>& rsig) {
  const BinOp op = e.op;
  const parser::VectorMatching& m = e.matching;
  const size_t steps = r.Steps();
  const size_t nsig = sigs.size();
  const bool cmp = parser::IsComparison(op);
  Value out;
  out.type = Type::kVector;
  StepNotes notes(steps);
  bool swapped = m.card == Cardinality::kOneToMany;
  Value& many = swapped ? rhs : lhs;
  Value& one = swapped ? lhs : rhs;
  const auto& many_pts = swapped ? rpts : lpts;
  const auto& one_pts = swapped ? lpts : rpts;
  const std::vector<size_t>& many_sig = swapped ? rsig : lsig;
  const std::vector<size_t>& one_sig = swapped ? lsig : rsig;
  // Dense "one" side: index of the series per (sig, step), -1 when absent.
  std::vector<int32_t> one_at(nsig * steps, -1);
  std::vector<uint8_t> has_sig(nsig, 0);
  for (size_t i = 0; i < one.series.size(); ++i) {
    has_sig[one_sig[i]] = 1;
    for (const auto& p : *one_pts[i]) {
      int32_t& slot = one_at[one_sig[i] * steps + r.Index(p.t)];
      if (slot >= 0) {
        const model::Labels* a = &one.series[static_cast<size_t>(slot)].labels;
        const model::Labels* b = &one.series[i].labels;
        if (*b < *a) std::swap(a, b);  // stable message: sorted
        ThrowEval("found duplicate series for the match group " + sigs.sig(one_sig[i]).ToString() + " on the " +
                  (swapped ? "left" : "right") + " hand-side of the operation: [" + BracedLabels(*a) + ", " +
                  BracedLabels(*b) + "];many-to-many matching not allowed: matching labels must be unique on one side");
      }
      slot = static_cast<int32_t>(i);
    }
  }
  // fill_left fills the left operand as Prometheus swaps it (the many side),
  // fill_right the other one, also for group_right.
  const bool fill_many = m.fill_left, fill_one = m.fill_right;
  std::vector<uint8_t> matched;
  if (m.card == Cardinality::kOneToOne || fill_many) matched.assign(nsig * steps, 0);
  // Output series per (many series, one series) pair.
  std::unordered_map<uint64_t, size_t> pair_out;
  // Arithmetic changes what the value means and drops the name; a
  // comparison or a trim keeps it.
  const bool drop = (!cmp && !IsTrim(op)) || e.return_bool;
  constexpr uint32_t kNoOne = 0xFFFFFFFFu;
  auto out_series = [&](uint64_t key, const model::Labels& many_labels, bool many_drop, const EvalSeries* os) {
    auto po = pair_out.find(key);
    if (po != pair_out.end()) return po->second;
    model::LabelsBuilder b(many_labels);
    if (m.card == Cardinality::kOneToOne) {
      if (m.on) {
        for (const auto& l : many_labels) {
          if (std::find(m.matching_labels.begin(), m.matching_labels.end(), l.name) == m.matching_labels.end()) {
            b.Del(l.name);
          }
        }
      } else {
        for (const auto& l : m.matching_labels) b.Del(l);
      }
    }
    for (const auto& l : m.include) {
      std::string_view v2 = os != nullptr ? os->labels.Get(l) : std::string_view();
      if (!v2.empty()) {
        b.Set(l, v2);
      } else {
        b.Del(l);
      }
    }
    EvalSeries es;
    es.labels = b.Build();
    es.drop_name = drop || many_drop;
    out.series.push_back(std::move(es));
    return pair_out.emplace(key, out.series.size() - 1).first->second;
  };
  // Applies the operator to (left, right) and appends the result to output
  // series o at t; false when the element is dropped.
  auto apply = [&](int64_t t, size_t si, double fl, const HistogramPtr* hl, double fr, const HistogramPtr* hr,
                   auto&& series_of) {
    double v;
    HistogramPtr h;
    bool keep;
    if (hl == nullptr && hr == nullptr && !IsTrim(op)) {
      v = ElemBinop(op, fl, fr, &keep);
    } else if (hl == nullptr && hr == nullptr) {
      notes.Set(si, Incompatible(op, false, false));  // trims are for histograms
      return;
    } else {
      ElemOut o = HistogramElemBinop(op, fl, hl, fr, hr);
      notes.Set(si, o);
      if (o.error) return;
      v = o.v;
      h = std::move(o.h);
      keep = o.keep;
    }
    if (e.return_bool) {
      v = keep ? 1 : 0;
      h = nullptr;
    } else if (!keep) {
      return;
    }
    EvalSeries& os = out.series[series_of()];
    if (h != nullptr) {
      os.hpoints.push_back({t, std::move(h)});
    } else {
      os.points.push_back({t, v});
    }
  };
  for (size_t i = 0; i < many.series.size(); ++i) {
    ev.CheckDeadline();
    size_t sg = many_sig[i];
    if (!has_sig[sg] && !fill_one) continue;
    const auto& ms = many.series[i];
    for (const auto& p : *many_pts[i]) {
      size_t si = r.Index(p.t);
      int32_t oi = has_sig[sg] ? one_at[sg * steps + si] : -1;
      if (oi < 0 && !fill_one) continue;
      const EvalSeries* os = oi >= 0 ? &one.series[static_cast<size_t>(oi)] : nullptr;
      double fl = p.v, fr = m.fill_right_value;
      const HistogramPtr* hl = HistOf(p);
      const HistogramPtr* hr = nullptr;
      if (os != nullptr) {
        // Find the one-side point at t.
        const std::vector<P>& opts = *one_pts[static_cast<size_t>(oi)];
        auto it = std::lower_bound(opts.begin(), opts.end(), p.t, [](const P& a, int64_t t) { return a.t < t; });
        fr = it->v;
        hr = HistOf(*it);
        // Matches count before a comparison filters them: many-to-one without
        // group_left fails even when all but one (or all) are filtered away.
        if (!matched.empty()) {
          uint8_t& seen = matched[sg * steps + si];
          if (m.card == Cardinality::kOneToOne && seen) {
            ThrowEval("multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)");
          }
          seen = 1;
        }
      }
      if (swapped) {
        std::swap(fl, fr);
        std::swap(hl, hr);
      }
      uint64_t key = (static_cast<uint64_t>(i) << 32) | (oi >= 0 ? static_cast<uint32_t>(oi) : kNoOne);
      apply(p.t, si, fl, hl, fr, hr, [&] { return out_series(key, ms.labels, ms.drop_name, os); });
    }
  }
  if (fill_many) {
    // One-side samples no many-side series matched: the many side is filled
    // with a series labelled like the match group.
    for (size_t j = 0; j < one.series.size(); ++j) {
      ev.CheckDeadline();
      size_t sg = one_sig[j];
      const auto& os = one.series[j];
      for (const auto& p : *one_pts[j]) {
        size_t si = r.Index(p.t);
        if (matched[sg * steps + si]) continue;
        double fl = m.fill_left_value, fr = p.v;
        const HistogramPtr* hl = nullptr;
        const HistogramPtr* hr = HistOf(p);
        if (swapped) {
          std::swap(fl, fr);
          std::swap(hl, hr);
        }
        uint64_t key = (static_cast<uint64_t>(kNoOne) << 32) | static_cast<uint32_t>(sg);
        apply(p.t, si, fl, hl, fr, hr, [&] { return out_series(key, sigs.sig(sg), false, &os); });
      }
    }
  }
  notes.Report(ev, e);
  std::erase_if(out.series, [](const EvalSeries& s) { return s.points.empty() && s.hpoints.empty(); });
  if (m.card != Cardinality::kOneToOne) {
    // Grouping labels must make results unique per step.
    SeriesList copy = out.series;
    try {
      MergeSameLabels(&copy);
    } catch (const EvalError&) {
      ThrowEval("multiple matches for labels: grouping labels must ensure unique matches");
    }
  }
  return out;
}

bool HasHistograms(const Value& v) {
  for (const auto& s : v.series) {
    if (!s.hpoints.empty()) return true;
  }
  return false;
}

}  // namespace

Value Evaluator::EvalBinary(const Expr& e, const StepRange& r) {
  Value lhs = Eval(*e.args[0], r);
  Value rhs = Eval(*e.args[1], r);
  const BinOp op = e.op;
  const bool cmp = parser::IsComparison(op);
  size_t steps = r.Steps();

  if (lhs.type == Type::kScalar && rhs.type == Type::kScalar) {
    Value out;
    out.type = Type::kScalar;
    out.scalar.resize(steps);
    for (size_t i = 0; i < steps; ++i) {
      bool keep;
      double v = ElemBinop(op, lhs.scalar[i], rhs.scalar[i], &keep);
      out.scalar[i] = cmp ? (keep ? 1.0 : 0.0) : v;
    }
    return out;
  }
  if (lhs.type == Type::kScalar || rhs.type == Type::kScalar) {
    bool scalar_left = lhs.type == Type::kScalar;
    Value& vec = scalar_left ? rhs : lhs;
    const std::vector<double>& sc = scalar_left ? lhs.scalar : rhs.scalar;
    StepNotes notes(steps);
    for (auto& s : vec.series) {
      size_t o = 0;
      for (size_t j = 0; j < s.points.size(); ++j) {
        Point p = s.points[j];
        double sv = sc[r.Index(p.t)];
        if (IsTrim(op)) {
          notes.Set(r.Index(p.t), Incompatible(op, false, false));
          continue;
        }
        bool keep;
        double v = scalar_left ? ElemBinop(op, sv, p.v, &keep) : ElemBinop(op, p.v, sv, &keep);
        if (cmp) {
          if (e.return_bool) {
            v = keep ? 1 : 0;
          } else {
            if (!keep) continue;
            v = p.v;
          }
        }
        s.points[o++] = {p.t, v};
      }
      s.points.resize(o);
      // Histograms: only histogram * scalar, scalar * histogram and
      // histogram / scalar are defined; the rest is dropped with an info.
      o = 0;
      for (size_t j = 0; j < s.hpoints.size(); ++j) {
        const HPoint& p = s.hpoints[j];
        size_t si = r.Index(p.t);
        double sv = sc[si];
        ElemOut eo = scalar_left ? HistogramElemBinop(op, sv, nullptr, 0, &p.h)
                                 : HistogramElemBinop(op, 0, &p.h, sv, nullptr);
        if (eo.error) {
          notes.Set(si, eo);
          continue;
        }
        s.hpoints[o++] = {p.t, std::move(eo.h)};
      }
      s.hpoints.resize(o);
      if ((!cmp && !IsTrim(op)) || e.return_bool) s.drop_name = true;
    }
    notes.Report(*this, e);
    std::erase_if(vec.series, [](const EvalSeries& s) { return s.points.empty() && s.hpoints.empty(); });
    return std::move(vec);
  }

  // Vector-vector.
  const parser::VectorMatching& m = e.matching;
  SigTable sigs;
  std::vector<size_t> lsig(lhs.series.size()), rsig(rhs.series.size());
  for (size_t i = 0; i < lhs.series.size(); ++i) lsig[i] = sigs.Id(Signature(lhs.series[i].labels, m));
  for (size_t i = 0; i < rhs.series.size(); ++i) rsig[i] = sigs.Id(Signature(rhs.series[i].labels, m));
  size_t nsig = sigs.size();
  CheckCells(nsig * steps);
  Value out;
  out.type = Type::kVector;

  if (parser::IsSetOp(op)) {
    auto presence = [&](const Value& v, const std::vector<size_t>& sig) {
      std::vector<uint8_t> p(nsig * steps, 0);
      for (size_t i = 0; i < v.series.size(); ++i) {
        for (const auto& pt : v.series[i].points) p[sig[i] * steps + r.Index(pt.t)] = 1;
        for (const auto& pt : v.series[i].hpoints) p[sig[i] * steps + r.Index(pt.t)] = 1;
      }
      return p;
    };
    auto empty = [](const EvalSeries& s) { return s.points.empty() && s.hpoints.empty(); };
    if (op == BinOp::kAnd || op == BinOp::kUnless) {
      std::vector<uint8_t> rp = presence(rhs, rsig);
      bool want = op == BinOp::kAnd;
      for (size_t i = 0; i < lhs.series.size(); ++i) {
        auto& s = lhs.series[i];
        auto drop = [&](int64_t t) { return (rp[lsig[i] * steps + r.Index(t)] != 0) != want; };
        std::erase_if(s.points, [&](const Point& p) { return drop(p.t); });
        std::erase_if(s.hpoints, [&](const HPoint& p) { return drop(p.t); });
        if (!empty(s)) out.series.push_back(std::move(s));
      }
      return out;
    }
    std::vector<uint8_t> lp = presence(lhs, lsig);
    for (auto& s : lhs.series) out.series.push_back(std::move(s));
    for (size_t i = 0; i < rhs.series.size(); ++i) {
      auto& s = rhs.series[i];
      auto drop = [&](int64_t t) { return lp[rsig[i] * steps + r.Index(t)] != 0; };
      std::erase_if(s.points, [&](const Point& p) { return drop(p.t); });
      std::erase_if(s.hpoints, [&](const HPoint& p) { return drop(p.t); });
      if (!empty(s)) out.series.push_back(std::move(s));
    }
    return out;
  }

  if (!HasHistograms(lhs) && !HasHistograms(rhs)) {
    std::vector<const std::vector<Point>*> lp, rp;
    for (const auto& s : lhs.series) lp.push_back(&s.points);
    for (const auto& s : rhs.series) rp.push_back(&s.points);
    return VectorVector<Point>(*this, e, r, lhs, rhs, lp, rp, sigs, lsig, rsig);
  }
  std::vector<std::vector<VPoint>> lm, rm;
  for (const auto& s : lhs.series) lm.push_back(Merged(s));
  for (const auto& s : rhs.series) rm.push_back(Merged(s));
  std::vector<const std::vector<VPoint>*> lp, rp;
  for (const auto& v : lm) lp.push_back(&v);
  for (const auto& v : rm) rp.push_back(&v);
  return VectorVector<VPoint>(*this, e, r, lhs, rhs, lp, rp, sigs, lsig, rsig);
}

}  // namespace trainwatch::promql
