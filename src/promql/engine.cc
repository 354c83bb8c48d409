#include "promql/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/mutex.h"
#include "base/status.h"
#include "promql/eval.h"
#include "promql/parser/functions.h"
#include "promql/parser/parse.h"

namespace trainwatch::promql {

using parser::Expr;
using parser::NodeKind;

// Admission: at most max_concurrent queries run; the others wait in FIFO-ish
// order (condition variable) until a slot frees up or their deadline passes.
struct Engine::State {
  base::Mutex mu;
  base::CondVar cv;
  int running TW_GUARDED_BY(mu) = 0;
};

Engine::Engine(EngineOptions opts) : opts_(opts), state_(new State) {}
Engine::~Engine() { delete state_; }

namespace {

// "PromQL warning: <text> (<line>:<column>)", the position 1-based as
// Prometheus's annotations print it.
std::string FormatAnnotation(std::string_view query, const Evaluator::Annotation& w) {
  size_t pos = std::min(static_cast<size_t>(std::max(w.pos, 0)), query.size());
  size_t nl = pos == 0 ? std::string_view::npos : query.rfind('\n', pos - 1);
  size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
  auto line = 1 + std::count(query.begin(), query.begin() + static_cast<std::ptrdiff_t>(pos), '\n');
  return (w.info ? "PromQL info: " : "PromQL warning: ") + w.text + " (" + std::to_string(line) + ":" + std::to_string(pos - line_start + 1) + ")";
}

// Resolves @ start()/end() to fixed timestamps.
void ResolveAt(Expr* e, int64_t start, int64_t end) {
  if (e->at == parser::AtKind::kStart) {
    e->at = parser::AtKind::kValue;
    e->at_ms = start;
  } else if (e->at == parser::AtKind::kEnd) {
    e->at = parser::AtKind::kValue;
    e->at_ms = end;
  }
  for (auto& a : e->args) ResolveAt(a.get(), start, end);
}

// Time span of data the query may touch.
void DataRange(const Expr& e, int64_t start, int64_t end, int64_t lookback, int64_t* mint, int64_t* maxt) {
  switch (e.kind) {
    case NodeKind::kVectorSelector: {
      int64_t s = e.at == parser::AtKind::kValue ? e.at_ms : start;
      int64_t t = e.at == parser::AtKind::kValue ? e.at_ms : end;
      *mint = std::min(*mint, s - e.offset_ms - lookback);
      *maxt = std::max(*maxt, t - e.offset_ms + (e.range_mod == parser::RangeMod::kSmoothed ? lookback : 0));
      return;
    }
    case NodeKind::kMatrixSelector: {
      const Expr& vs = *e.args[0];
      int64_t s = vs.at == parser::AtKind::kValue ? vs.at_ms : start;
      int64_t t = vs.at == parser::AtKind::kValue ? vs.at_ms : end;
      int64_t ext = vs.range_mod != parser::RangeMod::kNone ? lookback : 0;
      *mint = std::min(*mint, s - vs.offset_ms - e.range_ms - ext);
      *maxt = std::max(*maxt, t - vs.offset_ms + (vs.range_mod == parser::RangeMod::kSmoothed ? lookback : 0));
      return;
    }
    case NodeKind::kSubquery: {
      int64_t s = e.at == parser::AtKind::kValue ? e.at_ms : start;
      int64_t t = e.at == parser::AtKind::kValue ? e.at_ms : end;
      DataRange(*e.args[0], s - e.offset_ms - e.range_ms, t - e.offset_ms, lookback, mint, maxt);
      return;
    }
    default:
      for (const auto& a : e.args) DataRange(*a, start, end, lookback, mint, maxt);
  }
}

void SortSeries(std::vector<SeriesPoints>* m) {
  std::sort(m->begin(), m->end(), [](const SeriesPoints& a, const SeriesPoints& b) { return a.labels < b.labels; });
}

// Evaluates the duration expressions left in the tree (those using step()
// or range()) for this query. Instant queries have step() = range() = 0.
Status ResolveDurations(Expr* e, int64_t step, int64_t range) {
  auto eval = [&](const parser::Expr& d, int64_t* out) {
    double v = parser::EvalDurationExpr(d, step, range);
    if (!std::isfinite(v) || std::fabs(v) > 9.2e12) return false;
    *out = static_cast<int64_t>(std::llround(v * 1000));
    return true;
  };
  if (e->range_expr != nullptr) {
    if (!eval(*e->range_expr, &e->range_ms)) return Status::InvalidArgument("range duration out of range");
    if (e->range_ms <= 0) {
      return Status::InvalidArgument("duration must be greater than 0, got " + e->range_expr->String());
    }
    e->range_expr.reset();
  }
  if (e->step_expr != nullptr) {
    if (!eval(*e->step_expr, &e->step_ms)) return Status::InvalidArgument("step duration out of range");
    if (e->step_ms < 0) return Status::InvalidArgument("step must not be negative");
    e->step_expr.reset();
  }
  if (e->offset_expr != nullptr) {
    if (!eval(*e->offset_expr, &e->offset_ms)) return Status::InvalidArgument("offset duration out of range");
    e->offset_expr.reset();
  }
  for (auto& a : e->args) RETURN_IF_ERROR(ResolveDurations(a.get(), step, range));
  return Status::OK();
}

// Prometheus's detectHistogramStatsDecoding: a selector under
// histogram_count, histogram_sum or histogram_avg reads its histograms'
// count and sum only (with counter resets detected as it reads), unless a
// subquery, a function that reads buckets or a trim is on the way up.
void MarkHistogramStatsSelectors(parser::Expr* e, bool under_stats, bool blocked) {
  using parser::NodeKind;
  switch (e->kind) {
    case NodeKind::kVectorSelector:
      e->skip_histogram_buckets = under_stats && !blocked;
      return;
    case NodeKind::kSubquery:
      blocked = true;
      break;
    case NodeKind::kCall: {
      std::string_view n = e->func->name;
      if (n == "histogram_count" || n == "histogram_sum" || n == "histogram_avg") under_stats = true;
      if (n == "histogram_quantile" || n == "histogram_quantiles" || n == "histogram_fraction") blocked = true;
      break;
    }
    case NodeKind::kBinary:
      if (e->op == parser::BinOp::kTrimUpper || e->op == parser::BinOp::kTrimLower) blocked = true;
      break;
    default:
      break;
  }
  for (auto& a : e->args) {
    if (a != nullptr) MarkHistogramStatsSelectors(a.get(), under_stats, blocked);
  }
}

constexpr uint64_t kMaxSteps = 11'000;

Result<QueryResult> Exec(const EngineOptions& opts, storage::Queryable& db, std::string_view query, int64_t start,
                         int64_t end, int64_t step, bool instant, int64_t to,
                         std::chrono::steady_clock::time_point deadline) {
  ASSIGN_OR_RETURN(parser::ExprPtr expr, parser::ParseExpr(query));
  parser::Type type = expr->type();
  if (!instant && type != parser::Type::kScalar && type != parser::Type::kVector) {
    return Status::InvalidArgument(std::string("invalid expression type \"") + parser::TypeName(type) +
                                   "\" for range query, must be Scalar or instant Vector");
  }
  if (!instant) {
    if (step <= 0) return Status::InvalidArgument("zero or negative query resolution step widths are not accepted");
    if (end < start) return Status::InvalidArgument("end timestamp must not be before start time");
  }
  if (!instant && static_cast<uint64_t>((end - start) / step) >= kMaxSteps) {
    return Status::InvalidArgument(
        "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)");
  }
  RETURN_IF_ERROR(ResolveDurations(expr.get(), instant ? 0 : step, end - start));
  ResolveAt(expr.get(), start, end);
  MarkHistogramStatsSelectors(expr.get(), false, false);
  int64_t mint = model::kMaxTime, maxt = model::kMinTime;
  DataRange(*expr, start, end, opts.lookback_delta_ms, &mint, &maxt);
  if (mint > maxt) {
    mint = start;
    maxt = end;
  }
  ASSIGN_OR_RETURN(auto querier, db.NewQuerier(mint, maxt));
  Evaluator ev(querier.get(), opts, start, end, deadline, to);
  QueryResult res;
  try {
    if (instant && type == parser::Type::kMatrix) {
      std::vector<RawSeries> raw = ev.EvalMatrixAt(*expr, start);
      SeriesList tmp;
      for (auto& rs : raw) {
        EvalSeries es;
        es.labels = std::move(rs.labels);
        es.drop_name = rs.drop_name;
        for (const auto& s : rs.samples) es.points.push_back({s.t, s.v});
        es.hpoints = std::move(rs.hsamples);
        tmp.push_back(std::move(es));
      }
      FinalizeNames(&tmp);
      res.type = ValueType::kMatrix;
      for (auto& s : tmp) res.matrix.push_back({std::move(s.labels), std::move(s.points), std::move(s.hpoints)});
      SortSeries(&res.matrix);
    } else {
      StepRange r{start, instant ? start : end, instant ? 1 : step};
      r.end = r.start + static_cast<int64_t>(r.Steps() - 1) * r.step;
      ev.set_query_range(r);
      Value v = ev.Eval(*expr, r);
      switch (v.type) {
        case parser::Type::kString:
          res.type = ValueType::kString;
          res.str = v.str;
          res.scalar = {start, 0};
          break;
        case parser::Type::kScalar:
          if (instant) {
            res.type = ValueType::kScalar;
            res.scalar = {start, v.scalar[0]};
          } else {
            res.type = ValueType::kMatrix;
            SeriesPoints sp;
            for (size_t i = 0; i < v.scalar.size(); ++i) sp.points.push_back({r.At(i), v.scalar[i]});
            res.matrix.push_back(std::move(sp));
          }
          break;
        default:
          if (instant) {
            // Keep evaluation order (sort, topk); only drop names.
            for (auto& s : v.series) {
              if (s.drop_name) {
                s.labels = DropMetricName(s.labels);
                s.drop_name = false;
              }
            }
            SeriesList check = v.series;
            MergeSameLabels(&check);
            res.type = ValueType::kVector;
            for (auto& s : v.series) {
              for (const auto& p : s.points) res.vector.push_back({s.labels, p.t, p.v, nullptr});
              for (const auto& p : s.hpoints) res.vector.push_back({s.labels, p.t, 0, p.h});
            }
          } else {
            FinalizeNames(&v.series);
            res.type = ValueType::kMatrix;
            for (auto& s : v.series) {
              res.matrix.push_back({std::move(s.labels), std::move(s.points), std::move(s.hpoints)});
            }
            SortSeries(&res.matrix);
          }
      }
    }
  } catch (const EvalError& err) {
    return err.status;
  }
  for (const Evaluator::Annotation& a : ev.annotations()) {
    (a.info ? res.infos : res.warnings).push_back(FormatAnnotation(query, a));
  }
  return res;
}

}  // namespace

Result<QueryResult> Engine::Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms) {
  return Instant(db, expr, t_ms, 0);
}

Result<QueryResult> Engine::Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                                  int64_t step_ms) {
  return Range(db, expr, start_ms, end_ms, step_ms, 0);
}

// Waits for a free query slot until `deadline`; releases it on destruction.
class Engine::Slot {
 public:
  Slot(State* st, int max, std::chrono::steady_clock::time_point deadline) : st_(st) {
    base::MutexLock lock(&st_->mu);
    while (st_->running >= max && st_->cv.WaitUntil(&st_->mu, deadline)) {
    }
    acquired_ = st_->running < max;
    if (acquired_) ++st_->running;
  }
  ~Slot() {
    if (!acquired_) return;
    {
      base::MutexLock lock(&st_->mu);
      --st_->running;
    }
    st_->cv.Signal();
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  bool acquired() const { return acquired_; }

 private:
  State* st_;
  bool acquired_ = false;
};

Result<QueryResult> Engine::Run(storage::Queryable& db, std::string_view expr, int64_t start, int64_t end,
                                int64_t step, bool instant, int64_t timeout_ms) {
  int64_t to = timeout_ms > 0 ? timeout_ms : opts_.timeout_ms;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(to);
  Slot slot(state_, std::max(1, opts_.max_concurrent), deadline);
  if (!slot.acquired()) return Status::Cancelled("query timed out in query queue");
  return Exec(opts_, db, expr, start, end, step, instant, to, deadline);
}

Result<QueryResult> Engine::Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms, int64_t timeout_ms) {
  return Run(db, expr, t_ms, t_ms, 1, true, timeout_ms);
}

Result<QueryResult> Engine::Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                                  int64_t step_ms, int64_t timeout_ms) {
  return Run(db, expr, start_ms, end_ms, step_ms, false, timeout_ms);
}

int Engine::running() const {
  base::MutexLock lock(&state_->mu);
  return state_->running;
}

}  // namespace trainwatch::promql
