#pragma once
// trainwatch's own metrics for GET /metrics: HTTP request counters and
// durations by handler and code, import counters, and TSDB statistics, in the
// Prometheus text format. Thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "http/ingest_gate.h"
#include "tsdb/db.h"

namespace trainwatch::http {

class Metrics {
 public:
  // Counts one served request; `handler` is the route pattern, e.g. "/api/v1/query".
  void ObserveRequest(std::string_view handler, int code, double seconds);
  void AddImported(uint64_t samples);
  // Appends every metric in the text exposition format.
  void Render(std::string* out) const;

  // Push requests refused whole by --ingest.max-series-per-request and
  // --ingest.max-samples-per-request (ingest::RequestLimits counts here).
  std::atomic<uint64_t> requests_refused_series{0};
  std::atomic<uint64_t> requests_refused_samples{0};
  // Pushes refused with 503 by the ingest gate (http/ingest_gate.h).
  std::atomic<uint64_t> requests_refused_memory{0};
  std::atomic<uint64_t> requests_refused_busy{0};
  void CountIngestRefusal(IngestGate::Verdict v) {
    (v == IngestGate::Verdict::kBusy ? requests_refused_busy : requests_refused_memory)
        .fetch_add(1, std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;           // (handler, code) -> count
  std::map<std::string, std::pair<double, uint64_t>, std::less<>> durations_;  // handler -> (sum s, count)
  uint64_t imported_samples_ = 0;
};

// Appends trainwatch_tsdb_* gauges and counters for `stats`.
void RenderTsdbStats(const tsdb::Stats& stats, std::string* out);

}  // namespace trainwatch::http
