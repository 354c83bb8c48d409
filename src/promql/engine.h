#pragma once
// PromQL evaluation over any storage::Queryable (never the tsdb engine
// directly). Thread-safe: one Engine serves concurrent queries.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::promql {

enum class ValueType { kScalar, kVector, kMatrix, kString };

struct Point {
  int64_t t = 0;  // ms
  double v = 0;
};

// A native histogram value. Shared, never modified once made: a selector
// hands the same histogram to every step that looks back to it.
using HistogramPtr = std::shared_ptr<const model::FloatHistogram>;

struct HPoint {
  int64_t t = 0;  // ms
  HistogramPtr h;
  int64_t st = 0;  // start timestamp of a stored sample (ms; 0 = unknown), for range functions
};

// One element of an instant vector: a float, or a histogram when h is set.
struct VectorSample {
  model::Labels labels;
  int64_t t = 0;
  double v = 0;
  HistogramPtr h;
};

// One series of a range-query result or a range vector: float points and
// histogram points, each list in increasing time, never both at one time.
struct SeriesPoints {
  model::Labels labels;
  std::vector<Point> points;
  std::vector<HPoint> hpoints;
};

struct QueryResult {
  ValueType type = ValueType::kVector;
  Point scalar;                       // kScalar
  std::string str;                    // kString (at scalar.t)
  std::vector<VectorSample> vector;   // kVector
  std::vector<SeriesPoints> matrix;   // kMatrix (range queries always return this), sorted by labels
  std::vector<std::string> warnings;  // "PromQL warning: ... (line:col)"
  std::vector<std::string> infos;     // "PromQL info: ... (line:col)"
};

struct EngineOptions {
  int64_t lookback_delta_ms = 5 * 60 * 1000;
  // Samples one query may hold in memory at once (Prometheus's
  // --query.max-samples); over it: ResourceExhausted("query processing would
  // load too many samples into memory in query execution").
  int64_t max_samples = 50'000'000;
  // Default per-query timeout (--query.timeout); over it: Cancelled("query
  // timed out in expression evaluation"). A per-query timeout_ms passed to
  // Instant/Range replaces it.
  int64_t timeout_ms = 2 * 60 * 1000;
  // Queries evaluated at once (--query.max-concurrency); further queries wait
  // for a slot and fail with Cancelled("query timed out in query queue") when
  // their timeout passes first.
  int max_concurrent = 20;
};

// Errors: InvalidArgument for parse and type errors (message "1:5: parse
// error: ..." like Prometheus) and for range queries over 11,000 steps,
// ResourceExhausted for the sample limit, Cancelled for the timeout (also
// while waiting for a concurrency slot).
class Engine {
 public:
  explicit Engine(EngineOptions opts);
  ~Engine();
  Result<QueryResult> Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms);
  Result<QueryResult> Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms);
  // Same as above with a per-query timeout overriding EngineOptions::timeout_ms
  // (0 = the default); the time spent waiting for a slot counts against it.
  Result<QueryResult> Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms, int64_t timeout_ms);
  Result<QueryResult> Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms, int64_t timeout_ms);
  const EngineOptions& options() const { return opts_; }
  int running() const;  // queries holding a slot now

 private:
  class Slot;
  Result<QueryResult> Run(storage::Queryable& db, std::string_view expr, int64_t start, int64_t end, int64_t step,
                          bool instant, int64_t timeout_ms);
  EngineOptions opts_;
  struct State;
  State* state_;  // concurrency gate
};

}  // namespace trainwatch::promql
