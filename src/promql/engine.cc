#include "promql/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "promql/eval.h"
#include "promql/parser/parse.h"

namespace trainwatch::promql {

using parser::Expr;
using parser::NodeKind;

struct Engine::State {
  std::atomic<int> running{0};
};

Engine::Engine(EngineOptions opts) : opts_(opts), state_(new State) {}
Engine::~Engine() { delete state_; }

namespace {

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
      *maxt = std::max(*maxt, t - e.offset_ms);
      return;
    }
    case NodeKind::kMatrixSelector: {
      const Expr& vs = *e.args[0];
      int64_t s = vs.at == parser::AtKind::kValue ? vs.at_ms : start;
      int64_t t = vs.at == parser::AtKind::kValue ? vs.at_ms : end;
      *mint = std::min(*mint, s - vs.offset_ms - e.range_ms);
      *maxt = std::max(*maxt, t - vs.offset_ms);
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

class Gate {
 public:
  explicit Gate(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
  ~Gate() { n_->fetch_sub(1); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

 private:
  std::atomic<int>* n_;
};

Result<QueryResult> Exec(const EngineOptions& opts, storage::Queryable& db, std::string_view query, int64_t start,
                         int64_t end, int64_t step, bool instant, int64_t timeout_ms) {
  auto begin = std::chrono::steady_clock::now();
  int64_t to = timeout_ms > 0 ? timeout_ms : opts.timeout_ms;
  auto deadline = begin + std::chrono::milliseconds(to);
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
  ResolveAt(expr.get(), start, end);
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
        tmp.push_back(std::move(es));
      }
      FinalizeNames(&tmp);
      res.type = ValueType::kMatrix;
      for (auto& s : tmp) res.matrix.push_back({std::move(s.labels), std::move(s.points)});
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
              for (const auto& p : s.points) res.vector.push_back({s.labels, p.t, p.v});
            }
          } else {
            FinalizeNames(&v.series);
            res.type = ValueType::kMatrix;
            for (auto& s : v.series) res.matrix.push_back({std::move(s.labels), std::move(s.points)});
            SortSeries(&res.matrix);
          }
      }
    }
  } catch (const EvalError& err) {
    return err.status;
  }
  res.warnings = std::move(ev.warnings());
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

Result<QueryResult> Engine::Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms, int64_t timeout_ms) {
  Gate g(&state_->running);
  if (state_->running.load() > opts_.max_concurrent) {
    return Status::Unavailable("too many concurrent queries");
  }
  return Exec(opts_, db, expr, t_ms, t_ms, 1, true, timeout_ms);
}

Result<QueryResult> Engine::Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                                  int64_t step_ms, int64_t timeout_ms) {
  Gate g(&state_->running);
  if (state_->running.load() > opts_.max_concurrent) {
    return Status::Unavailable("too many concurrent queries");
  }
  return Exec(opts_, db, expr, start_ms, end_ms, step_ms, false, timeout_ms);
}

}  // namespace trainwatch::promql
