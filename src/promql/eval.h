#pragma once
// Internal evaluator: series-major evaluation of a PromQL AST over a range of
// steps. Every instant-vector value is a list of series whose points sit on
// step timestamps, so labels, grouping keys and match signatures are computed
// once per series, never per step. Errors unwind as EvalError and are turned
// into a Status by Engine.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "model/sample.h"
#include "promql/engine.h"
#include "promql/parser/ast.h"
#include "storage/storage.h"

namespace trainwatch::promql {

// Thrown inside the evaluator only.
struct EvalError {
  Status status;
};
[[noreturn]] void ThrowEval(Status s);
[[noreturn]] void ThrowEval(std::string msg);  // InvalidArgument-style execution error

struct EvalSeries {
  model::Labels labels;
  std::vector<Point> points;    // increasing t, each a step timestamp
  std::vector<HPoint> hpoints;  // the same for histogram values; never a step of `points`
  bool drop_name = false;       // delayed __name__ removal
};
using SeriesList = std::vector<EvalSeries>;

// A range vector as raw samples (matrix selector) or subquery points.
struct RawSeries {
  model::Labels labels;
  std::vector<model::Sample> samples;
  std::vector<HPoint> hsamples;  // histogram samples, increasing t
  bool drop_name = false;
};

struct StepRange {
  int64_t start = 0;
  int64_t end = 0;
  int64_t step = 1;
  size_t Steps() const { return static_cast<size_t>((end - start) / step) + 1; }
  size_t Index(int64_t t) const { return static_cast<size_t>((t - start) / step); }
  int64_t At(size_t i) const { return start + static_cast<int64_t>(i) * step; }
};

struct Value {
  parser::Type type = parser::Type::kVector;
  SeriesList series;          // kVector
  std::vector<double> scalar;  // kScalar: one per step
  std::string str;             // kString
};

class Evaluator {
 public:
  Evaluator(storage::Querier* q, const EngineOptions& opts, int64_t query_start, int64_t query_end,
            std::chrono::steady_clock::time_point deadline, int64_t timeout_ms)
      : querier_(q), opts_(opts), query_start_(query_start), query_end_(query_end), deadline_(deadline),
        timeout_ms_(timeout_ms) {}

  Value Eval(const parser::Expr& e, const StepRange& r);
  // Range-vector expression evaluated at a single time (top-level instant
  // query of `foo[5m]` or a subquery).
  std::vector<RawSeries> EvalMatrixAt(const parser::Expr& e, int64_t t);

  // How a matrix-typed argument's window moves with the step time.
  struct WindowSpec {
    int64_t range_ms = 0;
    int64_t offset_ms = 0;
    bool has_at = false;
    int64_t at_ms = 0;
    // Window for step t is (Ref(t) - range_ms, Ref(t)].
    int64_t Ref(int64_t t) const { return (has_at ? at_ms : t) - offset_ms; }
  };
  // `st` is empty, or holds each sample's start timestamp (0 = unknown).
  // Subquery points carry none: a subquery cuts start timestamps off.
  // `hs` holds the series' histogram samples (the float ones are in
  // `samples`; a timestamp is in at most one of them).
  using RawCallback = std::function<void(const model::Labels&, bool drop_name, std::vector<model::Sample>& samples,
                                         const std::vector<int64_t>& st, std::vector<HPoint>& hs)>;
  // Streams every series of a matrix selector or subquery with all samples
  // any step of `r` needs (stale markers removed), one series at a time.
  // `func`: the range function the samples go into, passed to the store as
  // SelectHints::func (for a plain matrix selector), so a store with
  // downsampled tiers may answer with window points (see counts()).
  WindowSpec ForEachRangeSeries(const parser::Expr& matrix_arg, const StepRange& r, const RawCallback& cb,
                                std::string_view func = {});
  // Inside a RawCallback: how many raw samples each of `samples` stands for
  // (SeriesIterator::AtCount), parallel to them; empty when one each.
  const std::vector<double>& counts() const { return counts_; }
  // Default subquery step.
  int64_t default_step() const { return 60'000; }
  int64_t lookback_delta() const { return opts_.lookback_delta_ms; }

  void CheckDeadline();
  void AddSamples(int64_t n);
  // Dense per-(series or group, step) tables: refuse sizes over the sample
  // limit before allocating them (same error as AddSamples).
  void CheckCells(size_t n) const;
  void ReleaseSamples(int64_t n) { cur_samples_ -= n; }
  const StepRange& query_range() const { return query_range_; }
  void set_query_range(const StepRange& r) { query_range_ = r; }
  // Prometheus's annotations: warnings (the result may be wrong) and infos
  // (the query may not mean what it says).
  struct Annotation {
    std::string text;
    int pos = 0;  // byte offset into the query
    bool info = false;
  };
  // Adds a warning or an info about `at` (once: a repeat is dropped). Engine
  // prefixes "PromQL warning: " or "PromQL info: " and appends `at`'s
  // position, as Prometheus does.
  void Warn(std::string text, const parser::Expr& at) { Annotate(std::move(text), at, false); }
  void Info(std::string text, const parser::Expr& at) { Annotate(std::move(text), at, true); }
  const std::vector<Annotation>& annotations() const { return annotations_; }
  // Warns that sorting `e` (a sort function call evaluated over `r`) is lost:
  // series of a range result are always ordered by labels.
  void WarnSortInRange(const parser::Expr& e, const StepRange& r);

  // Pieces implemented in separate files.
  Value EvalCall(const parser::Expr& e, const StepRange& r);
  Value EvalFunction(const parser::Expr& e, const StepRange& r);  // EvalCall's body, histograms not yet dropped
  Value EvalAggregate(const parser::Expr& e, const StepRange& r);
  Value EvalBinary(const parser::Expr& e, const StepRange& r);

  // What a vector selector yields at each step: the selected sample's value,
  // its timestamp (timestamp()) or its start timestamp (start_timestamp(), 0
  // when unknown), the last two in seconds.
  enum class SelectorValue { kValue, kTimestamp, kStartTimestamp };
  SeriesList EvalVectorSelector(const parser::Expr& e, const StepRange& r, SelectorValue what);
  // `func`, `range_ms`, `step_ms`: SelectHints' (empty / 0: not a range function's input).
  void SelectRaw(const parser::Expr& vs, int64_t mint, int64_t maxt, bool keep_stale, const RawCallback& cb,
                 std::string_view func = {}, int64_t range_ms = 0, int64_t step_ms = 0);
  Value EvalNode(const parser::Expr& e, const StepRange& r);
  std::vector<RawSeries> EvalSubqueryRaw(const parser::Expr& sq, int64_t min_ref, int64_t max_ref);

 private:

  storage::Querier* querier_;
  std::vector<double> counts_;  // the series SelectRaw passes to its callback: counts() 
  const EngineOptions& opts_;
  int64_t query_start_, query_end_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t timeout_ms_;
  int64_t cur_samples_ = 0;
  int checks_ = 127;  // the first CheckDeadline() looks at the clock
  StepRange query_range_;
  void Annotate(std::string text, const parser::Expr& at, bool info);
  std::vector<Annotation> annotations_;
};

// Helpers shared by the evaluator files.
// Kahan-Babuska (Neumaier) summation step; inline because every sum, avg and
// *_over_time calls it per sample.
inline double KahanSumInc(double inc, double sum, double* c) {
  double t = sum + inc;
  if (std::isinf(t)) {
    *c = 0;
  } else if (std::fabs(sum) >= std::fabs(inc)) {
    *c += (sum - t) + inc;
  } else {
    *c += (inc - t) + sum;
  }
  return t;
}
double Quantile(double q, std::vector<double>* values);  // sorts values
std::string FormatFloat(double v);                        // Go's strconv 'f', -1
model::Labels DropMetricName(const model::Labels& l);
// Sorts by labels and merges series with equal labels; fails with "vector
// cannot contain metrics with the same labelset" when two share a step.
void MergeSameLabels(SeriesList* s);
// Applies delayed __name__ removal to every flagged series, then merges.
void FinalizeNames(SeriesList* s);
const parser::Expr& Unparen(const parser::Expr& e);
// Prometheus's warning for a quantile outside [0, 1] (or NaN), at `param`.
void WarnIfInvalidQuantile(Evaluator& ev, double q, const parser::Expr& param);
// A histogram sample that is a staleness marker (its sum is StaleNaN).
bool IsStaleHistogram(const model::FloatHistogram& h);
// -h, a new histogram.
HistogramPtr NegateHistogram(const model::FloatHistogram& h);
// Scalar value as a dense vector over steps.
std::vector<double> ScalarArg(Evaluator& ev, const parser::Expr& e, const StepRange& r);

}  // namespace trainwatch::promql
