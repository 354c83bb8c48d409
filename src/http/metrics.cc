#include "http/metrics.h"

#include <string>
#include <utility>
#include <vector>

namespace trainwatch::http {

using common::metrics::Desc;
using common::metrics::Emitter;
using common::metrics::Type;

Metrics::Metrics(common::metrics::Registry* registry)
    : requests_("trainwatch_http_requests_total", "HTTP requests served, by handler and status code.",
                {"code", "handler"}),
      durations_("trainwatch_http_request_duration_seconds", "Time spent serving HTTP requests, by handler.",
                 {"handler"}),
      imported_("trainwatch_import_samples_total", "Samples stored through /api/v1/import/prometheus."),
      refused_("trainwatch_ingest_requests_refused_total",
               "Push requests refused whole: remote_write and import by --ingest.max-series-per-request or "
               "--ingest.max-samples-per-request (400); any push over --ingest.max-memory or kept waiting by "
               "--ingest.max-concurrent-pushes (503).",
               {"limit"}) {
  for (const char* limit : {"series_per_request", "samples_per_request", "memory", "concurrency"}) {
    refused_.With({limit});  // shown at 0
  }
  reg_ = registry->MustRegister({&requests_, &durations_, &imported_, &refused_});
}

void Metrics::ObserveRequest(std::string_view handler, int code, double seconds) {
  std::string h(handler);
  requests_.With({std::to_string(code), h}).Inc();
  durations_.With({std::move(h)}).Observe(seconds);
}

std::unique_ptr<common::metrics::Collector> NewTsdbCollector(tsdb::DB* db) {
  struct Value {
    const char* name;
    const char* help;
    Type type;
    double (*get)(const tsdb::Stats&);
  };
  static const Value kValues[] = {
      {"trainwatch_tsdb_head_series", "Series in the head.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.head_series); }},
      {"trainwatch_tsdb_head_samples", "Samples in the head.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.head_samples); }},
      {"trainwatch_tsdb_head_chunks", "Chunks in the head.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.head_chunks); }},
      {"trainwatch_tsdb_head_min_time", "Lowest timestamp in the head, in milliseconds.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.head_min_time); }},
      {"trainwatch_tsdb_head_max_time", "Highest timestamp in the head, in milliseconds.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.head_max_time); }},
      {"trainwatch_tsdb_blocks_loaded", "Persisted blocks.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.blocks); }},
      {"trainwatch_tsdb_storage_blocks_bytes", "Bytes of persisted blocks.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.block_bytes); }},
      {"trainwatch_tsdb_tier_blocks", "Downsampled tier blocks, 5m and 1h (docs/format/downsample.md).",
       Type::kGauge, [](const tsdb::Stats& s) { return static_cast<double>(s.tier_blocks); }},
      {"trainwatch_tsdb_storage_tier_bytes", "Bytes of downsampled tier blocks.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.tier_bytes); }},
      {"trainwatch_tsdb_wal_storage_size_bytes", "Bytes of WAL segments.", Type::kGauge,
       [](const tsdb::Stats& s) { return static_cast<double>(s.wal_bytes); }},
      {"trainwatch_tsdb_blocks_set_aside",
       "Damaged blocks renamed <id>.corrupt in the data dir and no longer served: found at start, or set aside "
       "since when a read failed its checksum.",
       Type::kGauge, [](const tsdb::Stats& s) { return static_cast<double>(s.blocks_set_aside); }},
      {"trainwatch_tsdb_head_chunks_mapped_bytes",
       "Bytes of closed head chunks written to chunks_mapped/ and mapped back: page cache, not anonymous memory.",
       Type::kGauge, [](const tsdb::Stats& s) { return static_cast<double>(s.head_chunks_mapped_bytes); }},
      {"trainwatch_tsdb_head_chunk_spill_failures_total",
       "Blocks of closed head chunks that could not be written to chunks_mapped/ or mapped, and stayed in memory.",
       Type::kCounter, [](const tsdb::Stats& s) { return static_cast<double>(s.head_chunk_spill_failures_total); }},
      {"trainwatch_tsdb_head_samples_appended_total", "Samples appended.", Type::kCounter,
       [](const tsdb::Stats& s) { return static_cast<double>(s.appended_samples_total); }},
      {"trainwatch_tsdb_out_of_order_samples_total", "Samples appended out of order.", Type::kCounter,
       [](const tsdb::Stats& s) { return static_cast<double>(s.out_of_order_samples_total); }},
      {"trainwatch_tsdb_duplicate_samples_total", "Samples ignored for repeating a stored timestamp.", Type::kCounter,
       [](const tsdb::Stats& s) { return static_cast<double>(s.duplicate_samples_total); }},
      {"trainwatch_tsdb_wal_corruptions_total", "WAL corruptions found on replay.", Type::kCounter,
       [](const tsdb::Stats& s) { return static_cast<double>(s.wal_corruptions_total); }},
      {"trainwatch_tsdb_compactions_total", "Compactions run.", Type::kCounter,
       [](const tsdb::Stats& s) { return static_cast<double>(s.compactions_total); }},
      {"trainwatch_tsdb_compaction_series_skipped_total",
       "Series left out of a block because a block cannot hold their labels (logged with the series).",
       Type::kCounter, [](const tsdb::Stats& s) { return static_cast<double>(s.compaction_series_skipped_total); }},
  };
  constexpr const char* kRefused = "trainwatch_tsdb_series_refused_total";
  constexpr const char* kOutOfBound = "trainwatch_tsdb_out_of_bound_samples_total";
  std::vector<Desc> descs;
  for (const Value& v : kValues) descs.push_back(Desc{v.name, v.help, v.type, {}});
  descs.push_back(Desc{kRefused,
                       "Appends of new series refused by a limit (--storage.max-series, "
                       "--ingest.max-labels-per-series, --ingest.max-label-name-length, "
                       "--ingest.max-label-value-length).",
                       Type::kCounter,
                       {"limit"}});
  descs.push_back(Desc{kOutOfBound,
                       "Samples refused for their timestamp: later than the clock plus --ingest.max-future, or "
                       "older than the retention.",
                       Type::kCounter,
                       {"reason"}});
  return std::make_unique<common::metrics::Collector>(std::move(descs), [db](Emitter* e) {
    const tsdb::Stats s = db->GetStats();
    for (const Value& v : kValues) e->Add(v.name, {}, v.get(s));
    for (size_t i = 0; i < tsdb::kNumSeriesRefusals; i++) {
      e->Add(kRefused, {std::string(tsdb::SeriesRefusalName(static_cast<tsdb::SeriesRefusal>(i)))},
             static_cast<double>(s.series_refused_total[i]));
    }
    e->Add(kOutOfBound, {"too_far_in_future"}, static_cast<double>(s.too_far_in_future_samples_total));
    e->Add(kOutOfBound, {"too_old"}, static_cast<double>(s.too_old_samples_total));
  });
}

}  // namespace trainwatch::http
