// Function-call dispatch and the instant-vector / scalar functions.

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numbers>

#include "promql/eval.h"
#include "promql/functions_internal.h"
#include "promql/parser/functions.h"

namespace trainwatch::promql {

using parser::Expr;
using parser::NodeKind;
using parser::Type;

namespace {

Value VectorOf(SeriesList s) {
  Value v;
  v.type = Type::kVector;
  v.series = std::move(s);
  return v;
}

template <typename F>
Value MapValues(Evaluator& ev, const Expr& arg, const StepRange& r, F f) {
  Value v = ev.Eval(arg, r);
  for (auto& s : v.series) {
    for (auto& p : s.points) p.v = f(p.v);
    s.drop_name = true;
  }
  return v;
}

double Sgn(double v) {
  if (v > 0) return 1;
  if (v < 0) return -1;
  return v;  // 0 or NaN
}

struct DateParts {
  int year, month, mday, wday, yday, hour, minute;
};
DateParts Breakdown(double secs) {
  time_t t = static_cast<time_t>(std::floor(secs));
  struct tm tm;
  gmtime_r(&t, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_wday, tm.tm_yday + 1, tm.tm_hour, tm.tm_min};
}
int DaysInMonth(int y, int m) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
  return kDays[m - 1];
}

Value DateFunction(Evaluator& ev, const Expr& e, const StepRange& r, int (*part)(const DateParts&)) {
  auto f = [part](double v) -> double {
    if (std::isnan(v) || std::isinf(v)) return NAN;
    return part(Breakdown(v));
  };
  if (e.args.empty()) {
    SeriesList s(1);
    for (size_t i = 0; i < r.Steps(); ++i) {
      int64_t t = r.At(i);
      s[0].points.push_back({t, f(static_cast<double>(t) / 1000.0)});
    }
    return VectorOf(std::move(s));
  }
  return MapValues(ev, *e.args[0], r, f);
}

// Labels for absent(): the equality matchers of a plain selector.
model::Labels AbsentLabels(const Expr& arg0) {
  const Expr& arg = Unparen(arg0);
  const Expr* vs = nullptr;
  if (arg.kind == NodeKind::kVectorSelector) vs = &arg;
  if (arg.kind == NodeKind::kMatrixSelector) vs = arg.args[0].get();
  if (vs == nullptr) return {};
  std::vector<model::Label> out;
  std::vector<std::string> dup;
  for (const auto& m : vs->matchers) {
    if (m.name() == model::kMetricName) continue;
    bool seen = false;
    for (const auto& l : out) seen |= l.name == m.name();
    for (const auto& d : dup) seen |= d == m.name();
    if (m.type() == model::MatchType::kEqual && !seen) {
      out.push_back({m.name(), m.value()});
    } else if (seen || m.type() == model::MatchType::kEqual) {
      std::erase_if(out, [&](const model::Label& l) { return l.name == m.name(); });
      dup.push_back(m.name());
    }
  }
  // Non-equality matchers on a label also make it ambiguous.
  for (const auto& m : vs->matchers) {
    if (m.type() != model::MatchType::kEqual) {
      std::erase_if(out, [&](const model::Label& l) { return l.name == m.name(); });
    }
  }
  std::erase_if(out, [](const model::Label& l) { return l.value.empty(); });
  return model::Labels(std::move(out));
}

Value Absent(Evaluator& ev, const Expr& e, const StepRange& r, bool over_time) {
  std::vector<uint8_t> present(r.Steps(), 0);
  if (over_time) {
    const RangeFnDef* def = LookupRangeFn("present_over_time");
    Value v = EvalRangeFunction(ev, e, *def, r);
    for (const auto& s : v.series) {
      for (const auto& p : s.points) present[r.Index(p.t)] = 1;
    }
  } else {
    Value v = ev.Eval(*e.args[0], r);
    for (const auto& s : v.series) {
      for (const auto& p : s.points) present[r.Index(p.t)] = 1;
      for (const auto& p : s.hpoints) present[r.Index(p.t)] = 1;
    }
  }
  EvalSeries out;
  out.labels = AbsentLabels(*e.args[0]);
  for (size_t i = 0; i < present.size(); ++i) {
    if (!present[i]) out.points.push_back({r.At(i), 1});
  }
  SeriesList sl;
  if (!out.points.empty()) sl.push_back(std::move(out));
  return VectorOf(std::move(sl));
}

// Orders series for instant queries (range results are sorted by labels).
Value Sort(Evaluator& ev, const Expr& e, const StepRange& r, bool desc) {
  ev.WarnSortInRange(e, r);
  Value v = ev.Eval(*e.args[0], r);
  // Histograms have no order: sort passes over them.
  for (auto& s : v.series) s.hpoints.clear();
  std::erase_if(v.series, [](const EvalSeries& s) { return s.points.empty(); });
  if (r.Steps() == 1) {
    std::stable_sort(v.series.begin(), v.series.end(), [desc](const EvalSeries& a, const EvalSeries& b) {
      double x = a.points[0].v, y = b.points[0].v;
      if (std::isnan(x)) return false;
      if (std::isnan(y)) return true;
      return desc ? x > y : x < y;
    });
  }
  return v;
}

}  // namespace

Value Evaluator::EvalCall(const Expr& e, const StepRange& r) {
  std::string_view name = e.func->name;
  if (const RangeFnDef* def = LookupRangeFn(name)) return EvalRangeFunction(*this, e, *def, r);
  Value v = EvalFunction(e, r);
  // Functions that only move series about keep their histogram values;
  // every other function reads and yields floats, and (as Prometheus's do)
  // silently passes over histogram samples.
  static constexpr std::string_view kKeepHistograms[] = {"label_replace", "label_join", "sort_by_label",
                                                         "sort_by_label_desc", "info"};
  if (std::find(std::begin(kKeepHistograms), std::end(kKeepHistograms), name) == std::end(kKeepHistograms)) {
    bool dropped = false;
    for (auto& s : v.series) {
      dropped = dropped || !s.hpoints.empty();
      s.hpoints.clear();
    }
    if (dropped) std::erase_if(v.series, [](const EvalSeries& s) { return s.points.empty(); });
  }
  return v;
}

Value Evaluator::EvalFunction(const Expr& e, const StepRange& r) {
  std::string_view name = e.func->name;

  size_t steps = r.Steps();
  auto unary = [&](double (*f)(double)) { return MapValues(*this, *e.args[0], r, f); };
  if (name == "abs") return unary(std::fabs);
  if (name == "ceil") return unary(std::ceil);
  if (name == "floor") return unary(std::floor);
  if (name == "exp") return unary(std::exp);
  if (name == "ln") return unary(std::log);
  if (name == "log2") return unary(std::log2);
  if (name == "log10") return unary(std::log10);
  if (name == "sqrt") return unary(std::sqrt);
  if (name == "sgn") return unary(Sgn);
  if (name == "sin") return unary(std::sin);
  if (name == "cos") return unary(std::cos);
  if (name == "tan") return unary(std::tan);
  if (name == "asin") return unary(std::asin);
  if (name == "acos") return unary(std::acos);
  if (name == "atan") return unary(std::atan);
  if (name == "sinh") return unary(std::sinh);
  if (name == "cosh") return unary(std::cosh);
  if (name == "tanh") return unary(std::tanh);
  if (name == "asinh") return unary(std::asinh);
  if (name == "acosh") return unary(std::acosh);
  if (name == "atanh") return unary(std::atanh);
  if (name == "deg") return unary([](double v) { return v * 180 / std::numbers::pi; });
  if (name == "rad") return unary([](double v) { return v * std::numbers::pi / 180; });

  if (name == "round") {
    std::vector<double> to = e.args.size() > 1 ? ScalarArg(*this, *e.args[1], r) : std::vector<double>(steps, 1.0);
    Value v = Eval(*e.args[0], r);
    for (auto& s : v.series) {
      for (auto& p : s.points) {
        double inv = 1.0 / to[r.Index(p.t)];
        p.v = std::floor(p.v * inv + 0.5) / inv;
      }
      s.drop_name = true;
    }
    return v;
  }
  if (name == "clamp" || name == "clamp_min" || name == "clamp_max") {
    std::vector<double> lo(steps, -INFINITY), hi(steps, INFINITY);
    if (name == "clamp") {
      lo = ScalarArg(*this, *e.args[1], r);
      hi = ScalarArg(*this, *e.args[2], r);
    } else if (name == "clamp_min") {
      lo = ScalarArg(*this, *e.args[1], r);
    } else {
      hi = ScalarArg(*this, *e.args[1], r);
    }
    Value v = Eval(*e.args[0], r);
    for (auto& s : v.series) {
      std::erase_if(s.points, [&](const Point& p) {
        size_t i = r.Index(p.t);
        return hi[i] < lo[i];
      });
      for (auto& p : s.points) {
        size_t i = r.Index(p.t);
        p.v = std::fmax(lo[i], std::fmin(hi[i], p.v));
        if (std::isnan(lo[i]) || std::isnan(hi[i])) p.v = NAN;
      }
      s.drop_name = true;
    }
    std::erase_if(v.series, [](const EvalSeries& s) { return s.points.empty(); });
    return v;
  }
  if (name == "time" || name == "pi") {
    Value v;
    v.type = Type::kScalar;
    v.scalar.resize(steps);
    for (size_t i = 0; i < steps; ++i) {
      v.scalar[i] = name == "pi" ? std::numbers::pi : static_cast<double>(r.At(i)) / 1000.0;
    }
    return v;
  }
  if (name == "start" || name == "end" || name == "step" || name == "range") {
    const StepRange& q = query_range();
    double v = name == "start" ? static_cast<double>(q.start) / 1000.0
               : name == "end" ? static_cast<double>(q.end) / 1000.0
               : name == "range" ? static_cast<double>(q.end - q.start) / 1000.0
               : (q.start == q.end ? 0.0 : static_cast<double>(q.step) / 1000.0);
    Value out;
    out.type = Type::kScalar;
    out.scalar.assign(steps, v);
    return out;
  }
  if (name == "min_of" || name == "max_of") {
    Value out;
    out.type = Type::kScalar;
    out.scalar.assign(steps, NAN);
    for (size_t a = 0; a < e.args.size(); ++a) {
      std::vector<double> v = ScalarArg(*this, *e.args[a], r);
      for (size_t i = 0; i < steps; ++i) {
        double& o = out.scalar[i];
        if (a == 0 || std::isnan(v[i])) {
          o = (a == 0 || std::isnan(v[i])) ? (a == 0 ? v[i] : v[i]) : o;
        } else if (!std::isnan(o)) {
          o = name == "min_of" ? std::fmin(o, v[i]) : std::fmax(o, v[i]);
        }
      }
    }
    return out;
  }
  if (name == "vector") {
    std::vector<double> sc = ScalarArg(*this, *e.args[0], r);
    SeriesList s(1);
    for (size_t i = 0; i < steps; ++i) s[0].points.push_back({r.At(i), sc[i]});
    return VectorOf(std::move(s));
  }
  if (name == "scalar") {
    Value v = Eval(*e.args[0], r);
    Value out;
    out.type = Type::kScalar;
    out.scalar.assign(steps, NAN);
    std::vector<int> count(steps, 0);
    for (const auto& s : v.series) {
      for (const auto& p : s.points) {
        size_t i = r.Index(p.t);
        if (++count[i] == 1) out.scalar[i] = p.v;
      }
    }
    for (size_t i = 0; i < steps; ++i) {
      if (count[i] != 1) out.scalar[i] = NAN;
    }
    return out;
  }
  if (name == "start_timestamp") {
    // Start timestamps exist only on stored samples: any other argument
    // (an expression over them) yields nothing.
    const Expr& arg = Unparen(*e.args[0]);
    Value v;
    v.type = Type::kVector;
    if (arg.kind == NodeKind::kVectorSelector) v.series = EvalVectorSelector(arg, r, SelectorValue::kStartTimestamp);
    for (auto& s : v.series) s.drop_name = true;
    return v;
  }
  if (name == "timestamp") {
    const Expr& arg = Unparen(*e.args[0]);
    Value v;
    if (arg.kind == NodeKind::kVectorSelector) {
      v.type = Type::kVector;
      v.series = EvalVectorSelector(arg, r, SelectorValue::kTimestamp);
    } else {
      v = Eval(*e.args[0], r);
      for (auto& s : v.series) {
        for (auto& p : s.points) p.v = static_cast<double>(p.t) / 1000.0;
        for (const auto& p : s.hpoints) s.points.push_back({p.t, static_cast<double>(p.t) / 1000.0});
        if (!s.hpoints.empty()) {
          std::sort(s.points.begin(), s.points.end(), [](const Point& a, const Point& b) { return a.t < b.t; });
          s.hpoints.clear();
        }
      }
    }
    for (auto& s : v.series) s.drop_name = true;
    return v;
  }
  if (name == "absent") return Absent(*this, e, r, false);
  if (name == "absent_over_time") return Absent(*this, e, r, true);
  if (name == "sort") return Sort(*this, e, r, false);
  if (name == "sort_desc") return Sort(*this, e, r, true);
  if (name == "sort_by_label") return EvalSortByLabel(*this, e, r, false);
  if (name == "sort_by_label_desc") return EvalSortByLabel(*this, e, r, true);
  if (name == "label_replace") return EvalLabelReplace(*this, e, r);
  if (name == "info") return EvalInfo(*this, e, r);
  if (name == "label_join") return EvalLabelJoin(*this, e, r);
  if (name == "histogram_count") return EvalHistogramStat(*this, e, r, HistogramStat::kCount);
  if (name == "histogram_sum") return EvalHistogramStat(*this, e, r, HistogramStat::kSum);
  if (name == "histogram_avg") return EvalHistogramStat(*this, e, r, HistogramStat::kAvg);
  if (name == "histogram_stddev") return EvalHistogramStat(*this, e, r, HistogramStat::kStdDev);
  if (name == "histogram_stdvar") return EvalHistogramStat(*this, e, r, HistogramStat::kStdVar);
  if (name == "histogram_quantile") return EvalHistogramQuantile(*this, e, r);
  if (name == "histogram_quantiles") return EvalHistogramQuantiles(*this, e, r);
  if (name == "histogram_fraction") return EvalHistogramFraction(*this, e, r);
  if (name == "day_of_month") return DateFunction(*this, e, r, [](const DateParts& d) { return d.mday; });
  if (name == "day_of_week") return DateFunction(*this, e, r, [](const DateParts& d) { return d.wday; });
  if (name == "day_of_year") return DateFunction(*this, e, r, [](const DateParts& d) { return d.yday; });
  if (name == "days_in_month") {
    return DateFunction(*this, e, r, [](const DateParts& d) { return DaysInMonth(d.year, d.month); });
  }
  if (name == "hour") return DateFunction(*this, e, r, [](const DateParts& d) { return d.hour; });
  if (name == "minute") return DateFunction(*this, e, r, [](const DateParts& d) { return d.minute; });
  if (name == "month") return DateFunction(*this, e, r, [](const DateParts& d) { return d.month; });
  if (name == "year") return DateFunction(*this, e, r, [](const DateParts& d) { return d.year; });
  ThrowEval(Status::NotSupported("function \"" + std::string(name) + "\" is not supported"));
}

}  // namespace trainwatch::promql
