#pragma once
// PromQL evaluation over any storage::Queryable (never the tsdb engine
// directly). Thread-safe: one Engine serves concurrent queries.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::promql {

enum class ValueType { kScalar, kVector, kMatrix, kString };

struct Point {
  int64_t t = 0;  // ms
  double v = 0;
};

// One element of an instant vector.
struct VectorSample {
  model::Labels labels;
  int64_t t = 0;
  double v = 0;
};

// One series of a range-query result or a range vector.
struct SeriesPoints {
  model::Labels labels;
  std::vector<Point> points;
};

struct QueryResult {
  ValueType type = ValueType::kVector;
  Point scalar;                       // kScalar
  std::string str;                    // kString (at scalar.t)
  std::vector<VectorSample> vector;   // kVector
  std::vector<SeriesPoints> matrix;   // kMatrix (range queries always return this), sorted by labels
  std::vector<std::string> warnings;
};

struct EngineOptions {
  int64_t lookback_delta_ms = 5 * 60 * 1000;
  int64_t max_samples = 50'000'000;  // samples loaded at once by one query
  int64_t timeout_ms = 2 * 60 * 1000;
  int max_concurrent = 20;
};

// Errors: InvalidArgument for parse and type errors (message "parse error at
// line 1, char 5: ..." like Prometheus), ResourceExhausted for limits,
// Cancelled for the timeout, Unavailable when too many queries run at once.
class Engine {
 public:
  explicit Engine(EngineOptions opts);
  ~Engine();
  Result<QueryResult> Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms);
  Result<QueryResult> Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms);
  // Same as above with a per-query timeout overriding the default (0 = default).
  Result<QueryResult> Instant(storage::Queryable& db, std::string_view expr, int64_t t_ms, int64_t timeout_ms);
  Result<QueryResult> Range(storage::Queryable& db, std::string_view expr, int64_t start_ms, int64_t end_ms,
                            int64_t step_ms, int64_t timeout_ms);
  const EngineOptions& options() const { return opts_; }

 private:
  EngineOptions opts_;
  struct State;
  State* state_;  // concurrency gate
};

}  // namespace trainwatch::promql
