#include "http/metrics.h"

#include <fmt/format.h>

#include "http/format.h"

namespace trainwatch::http {

void Metrics::ObserveRequest(std::string_view handler, int code, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{std::string(handler), code}]++;
  auto it = durations_.find(handler);
  if (it == durations_.end()) it = durations_.emplace(std::string(handler), std::pair<double, uint64_t>{0, 0}).first;
  it->second.first += seconds;
  it->second.second++;
}

void Metrics::AddImported(uint64_t samples) {
  std::lock_guard<std::mutex> lock(mu_);
  imported_samples_ += samples;
}

static void Header(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

static std::string Num(double v) {
  std::string s;
  AppendPromFloat(&s, v);
  return s;
}

void Metrics::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  Header(out, "trainwatch_http_requests_total", "counter", "HTTP requests served, by handler and status code.");
  for (const auto& [key, n] : requests_) {
    *out += fmt::format("trainwatch_http_requests_total{{code=\"{}\",handler=\"{}\"}} {}\n", key.second, key.first, n);
  }
  Header(out, "trainwatch_http_request_duration_seconds", "summary", "Time spent serving HTTP requests, by handler.");
  for (const auto& [handler, d] : durations_) {
    *out += fmt::format("trainwatch_http_request_duration_seconds_sum{{handler=\"{}\"}} {}\n", handler, Num(d.first));
    *out += fmt::format("trainwatch_http_request_duration_seconds_count{{handler=\"{}\"}} {}\n", handler, d.second);
  }
  Header(out, "trainwatch_import_samples_total", "counter", "Samples stored through /api/v1/import/prometheus.");
  *out += fmt::format("trainwatch_import_samples_total {}\n", imported_samples_);
  Header(out, "trainwatch_ingest_requests_refused_total", "counter",
         "Push requests refused whole: remote_write and import by --ingest.max-series-per-request or "
         "--ingest.max-samples-per-request (400); any push over --ingest.max-memory or kept waiting by "
         "--ingest.max-concurrent-pushes (503).");
  *out += fmt::format("trainwatch_ingest_requests_refused_total{{limit=\"series_per_request\"}} {}\n",
                      requests_refused_series.load(std::memory_order_relaxed));
  *out += fmt::format("trainwatch_ingest_requests_refused_total{{limit=\"samples_per_request\"}} {}\n",
                      requests_refused_samples.load(std::memory_order_relaxed));
  *out += fmt::format("trainwatch_ingest_requests_refused_total{{limit=\"memory\"}} {}\n",
                      requests_refused_memory.load(std::memory_order_relaxed));
  *out += fmt::format("trainwatch_ingest_requests_refused_total{{limit=\"concurrency\"}} {}\n",
                      requests_refused_busy.load(std::memory_order_relaxed));
}

void RenderTsdbStats(const tsdb::Stats& s, std::string* out) {
  auto gauge = [&](std::string_view name, std::string_view help, double v) {
    Header(out, name, "gauge", help);
    *out += fmt::format("{} {}\n", name, Num(v));
  };
  auto counter = [&](std::string_view name, std::string_view help, double v) {
    Header(out, name, "counter", help);
    *out += fmt::format("{} {}\n", name, Num(v));
  };
  gauge("trainwatch_tsdb_head_series", "Series in the head.", static_cast<double>(s.head_series));
  gauge("trainwatch_tsdb_head_samples", "Samples in the head.", static_cast<double>(s.head_samples));
  gauge("trainwatch_tsdb_head_chunks", "Chunks in the head.", static_cast<double>(s.head_chunks));
  gauge("trainwatch_tsdb_head_min_time", "Lowest timestamp in the head, in milliseconds.", static_cast<double>(s.head_min_time));
  gauge("trainwatch_tsdb_head_max_time", "Highest timestamp in the head, in milliseconds.", static_cast<double>(s.head_max_time));
  gauge("trainwatch_tsdb_blocks_loaded", "Persisted blocks.", static_cast<double>(s.blocks));
  gauge("trainwatch_tsdb_storage_blocks_bytes", "Bytes of persisted blocks.", static_cast<double>(s.block_bytes));
  gauge("trainwatch_tsdb_wal_storage_size_bytes", "Bytes of WAL segments.", static_cast<double>(s.wal_bytes));
  gauge("trainwatch_tsdb_blocks_set_aside",
        "Damaged blocks renamed <id>.corrupt in the data dir and no longer served: found at start, or set aside "
        "since when a read failed its checksum.",
        static_cast<double>(s.blocks_set_aside));
  counter("trainwatch_tsdb_head_samples_appended_total", "Samples appended.", static_cast<double>(s.appended_samples_total));
  counter("trainwatch_tsdb_out_of_order_samples_total", "Samples appended out of order.", static_cast<double>(s.out_of_order_samples_total));
  counter("trainwatch_tsdb_duplicate_samples_total", "Samples ignored for repeating a stored timestamp.", static_cast<double>(s.duplicate_samples_total));
  counter("trainwatch_tsdb_wal_corruptions_total", "WAL corruptions found on replay.", static_cast<double>(s.wal_corruptions_total));
  counter("trainwatch_tsdb_compactions_total", "Compactions run.", static_cast<double>(s.compactions_total));
  counter("trainwatch_tsdb_compaction_series_skipped_total",
          "Series left out of a block because a block cannot hold their labels (logged with the series).",
          static_cast<double>(s.compaction_series_skipped_total));
  Header(out, "trainwatch_tsdb_series_refused_total", "counter",
         "Appends of new series refused by a limit (--storage.max-series, --ingest.max-labels-per-series, "
         "--ingest.max-label-name-length, --ingest.max-label-value-length).");
  for (size_t i = 0; i < tsdb::kNumSeriesRefusals; i++) {
    *out += fmt::format("trainwatch_tsdb_series_refused_total{{limit=\"{}\"}} {}\n",
                        tsdb::SeriesRefusalName(static_cast<tsdb::SeriesRefusal>(i)), s.series_refused_total[i]);
  }
  Header(out, "trainwatch_tsdb_out_of_bound_samples_total", "counter",
         "Samples refused for their timestamp: later than the clock plus --ingest.max-future, or older than the retention.");
  *out += fmt::format("trainwatch_tsdb_out_of_bound_samples_total{{reason=\"too_far_in_future\"}} {}\n",
                      s.too_far_in_future_samples_total);
  *out += fmt::format("trainwatch_tsdb_out_of_bound_samples_total{{reason=\"too_old\"}} {}\n", s.too_old_samples_total);
}

}  // namespace trainwatch::http
