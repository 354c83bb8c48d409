#pragma once
// trainwatch's own HTTP metrics for GET /metrics: request counters and
// durations by handler and code, import counters, refused pushes; and the
// TSDB's statistics as a collector. Both register with the registry the
// /metrics handler renders (common/metrics.h). Thread-safe.

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/metrics.h"
#include "http/ingest_gate.h"
#include "tsdb/db.h"

namespace trainwatch::http {

class Metrics {
 public:
  // Registers its families in `registry`, which outlives it.
  explicit Metrics(common::metrics::Registry* registry);

  // Counts one served request; `handler` is the route pattern, e.g. "/api/v1/query".
  void ObserveRequest(std::string_view handler, int code, double seconds);
  void AddImported(uint64_t samples) { imported_.Get().Inc(samples); }

  // Push requests refused whole by --ingest.max-series-per-request and
  // --ingest.max-samples-per-request (ingest::RequestLimits counts there).
  common::metrics::Counter* requests_refused_series() { return &refused_.With({"series_per_request"}); }
  common::metrics::Counter* requests_refused_samples() { return &refused_.With({"samples_per_request"}); }
  // Pushes refused with 503 by the ingest gate (http/ingest_gate.h).
  void CountIngestRefusal(IngestGate::Verdict v) {
    refused_.With({v == IngestGate::Verdict::kBusy ? "concurrency" : "memory"}).Inc();
  }

 private:
  common::metrics::CounterFamily requests_;
  common::metrics::SummaryFamily durations_;
  common::metrics::CounterFamily imported_;
  common::metrics::CounterFamily refused_;  // by limit
  common::metrics::Registration reg_;  // last: unregisters first
};

// The trainwatch_tsdb_* gauges and counters of `db`'s statistics, read at
// scrape time. REQUIRES: `db` outlives the collector's registration.
std::unique_ptr<common::metrics::Collector> NewTsdbCollector(tsdb::DB* db);

}  // namespace trainwatch::http
