#pragma once
// OpenTelemetry metrics in, as Prometheus 3 takes them: POST
// /api/v1/otlp/v1/metrics with an ExportMetricsServiceRequest
// (opentelemetry-proto, collector/metrics/v1) as protobuf or as OTLP/JSON
// (gzip is undone by the HTTP server). Both encodings decode into the same
// per-metric structs, which one translator turns into Prometheus series with
// Prometheus 3's default translation (UnderscoreEscapingWithSuffixes):
//
// - Metric names: runs of characters outside [a-zA-Z0-9:] become one `_`;
//   the unit is appended (`s` -> `_seconds`, `By/s` -> `_bytes_per_second`,
//   `{...}` annotations dropped); monotonic sums get `_total`, gauges with
//   unit "1" get `_ratio`. Label names: characters outside [a-zA-Z0-9_] become
//   `_`, a leading digit gets `key_`; attributes whose names collide join
//   their values with ";" in key order. Non-string values as text (arrays
//   and maps as JSON).
// - Resource: service.name (with service.namespace, "ns/name") is `job`,
//   service.instance.id is `instance`, on every series; the other resource
//   attributes go on `target_info{job, instance}` = 1 at the resource's first
//   and last point.
// - Gauges and sums are samples; histograms are classic `_bucket{le}`,
//   `_count` and `_sum` series (with OtlpOptions::convert_histograms_to_nhcb
//   one native histogram with custom buckets, as Prometheus 3's
//   convert_histograms_to_nhcb); summaries `{quantile}`, `_count`, `_sum`.
//   Exponential histograms are native histograms as Prometheus 3's
//   otlptranslator makes them (histograms.go): scale is the schema (above 8
//   downscaled to 8 by merging buckets, below -4 rejected), offset and
//   bucket counts become spans (gaps over 2 buckets start a new span), the
//   zero threshold is Prometheus's 1e-128 (OTLP's is ignored, as there), an
//   absent sum is 0, the counter reset hint unknown.
// - Delta sums, delta explicit and delta exponential histograms are made
//   cumulative by OtlpDeltas (a running total per series, kept in memory: a
//   server restart is a counter reset, which rate() and increase() handle;
//   histograms are added as FloatHistogram::Add does, at the lower schema).
//   A point not newer than its series' last one is rejected.
// - Start timestamps (Appender::AppendST, ms; 0 = unknown), as Prometheus
//   3's otlptranslator passes them: start_time_unix_nano / 1e6 on every
//   series of a cumulative sum, histogram, exponential histogram or summary
//   point (_bucket, _count, _sum and quantiles alike); none on gauges and
//   target_info. A delta series made cumulative here has the start time of
//   the first delta in its running total (a new total: that delta's).
// - A point with the "no recorded value" flag is a staleness marker (for a
//   native histogram: sum and count the stale NaN).
//
// A body that does not decode is refused whole (InvalidArgument naming the
// byte offset or JSON field). Points that decode but cannot be stored (an
// unspecified temporality, bucket counts that do not match the bounds, a
// exponential scale below -4) are left out and reported as OTLP's partial
// success (rejected count and the first reason); the rest is stored.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "ingest/append_batch.h"
#include "ingest/refusals.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::ingest {

// Prometheus 3's name translation (exposed for tests).
enum class OtlpMetricType { kGauge, kMonotonicCounter, kNonMonotonicCounter, kHistogram, kSummary };
std::string OtlpMetricName(std::string_view name, std::string_view unit, OtlpMetricType type);
// "" when the name has no character left to keep.
std::string OtlpLabelName(std::string_view key);

// Running totals of delta series (see above), shared by all requests. A
// request holds mu_ (OtlpBatch's DeltaLock) from its first delta point until
// it has committed and applied its totals (or failed), so two requests for
// one series never both start from the same total.
class OtlpDeltas {
 public:
  // Entries not updated for this long are forgotten (their next point
  // starts again from zero: a counter reset).
  static constexpr int64_t kForgetAfterMs = 3600 * 1000;
  static constexpr size_t kMaxEntries = size_t{1} << 20;

  struct Update {
    std::string key;  // the series' labels, encoded
    int64_t t;
    double total;
    int64_t st;  // start of the running total, ms (0: unknown)
  };
  struct HistUpdate {
    std::string key;
    int64_t t;
    model::FloatHistogram total;
    int64_t st;
  };
  // Tells the analysis a batch's DeltaLock holds mu_.
  void AssertHeld() const TW_ASSERT_CAPABILITY(mu_) {}
  // The cumulative value of the series `key` at `t`
  // after adding `delta` (whose window started at `start_ms`), and *st the
  // start of that running total: `start_ms` when it starts here. False when
  // `t` is not after its last point (pending points of this request included).
  bool Add(const std::string& key, int64_t t, int64_t start_ms, double delta, std::vector<Update>* pending,
           double* total, int64_t* st) TW_REQUIRES(mu_);
  // As Add for a native histogram; also false when
  // the delta cannot be added (custom and exponential buckets mixed).
  bool AddHistogram(const std::string& key, int64_t t, int64_t start_ms, const model::FloatHistogram& delta,
                    std::vector<HistUpdate>* pending, model::FloatHistogram* total, int64_t* st) TW_REQUIRES(mu_);
  // Records a committed request's totals.
  void Apply(const std::vector<Update>& pending, const std::vector<HistUpdate>& hist_pending, int64_t now_ms)
      TW_REQUIRES(mu_);
  size_t size() {
    base::MutexLock l(&mu_);
    return totals_.size() + hist_totals_.size();
  }

 private:
  friend class OtlpBatch;  // its DeltaLock takes mu_
  struct Entry {
    int64_t t;
    double total;
    int64_t st;  // start of the running total, ms
  };
  base::Mutex mu_;
  struct HistEntry {
    int64_t t;
    model::FloatHistogram total;
    int64_t st;
  };
  std::unordered_map<std::string, Entry> totals_ TW_GUARDED_BY(mu_);
  std::unordered_map<std::string, HistEntry> hist_totals_ TW_GUARDED_BY(mu_);
  int64_t last_sweep_ms_ TW_GUARDED_BY(mu_) = 0;
};

struct OtlpStats {
  uint64_t samples = 0;     // floats and native histograms
  uint64_t histograms = 0;  // native histograms among them
  uint64_t series = 0;
  uint64_t points = 0;           // data points read
  uint64_t rejected_points = 0;  // left out (partial success)
  std::string first_rejection;   // why the first was, naming the metric
};

// What the `otlp:` section of the config file sets (Prometheus 3's
// OTLPConfig) that the translation uses.
struct OtlpOptions {
  // convert_histograms_to_nhcb: explicit-bucket histograms become one native
  // histogram with custom buckets (schema -53) each, named as the classic
  // family (no _bucket/_count/_sum), instead of the classic series.
  bool convert_histograms_to_nhcb = false;
  bool operator==(const OtlpOptions&) const = default;
};

// One decoded request, translated. Not thread-safe.
class OtlpBatch {
 public:
  explicit OtlpBatch(OtlpOptions options = {}) : options_(options) {}

  // `now_ms` stands in for a point without a timestamp.
  Status ParseProto(std::string_view body, int64_t now_ms, const RequestLimits& limits, OtlpDeltas* deltas);
  Status ParseJson(std::string_view body, int64_t now_ms, const RequestLimits& limits, OtlpDeltas* deltas);
  // Appends every sample; the caller commits or rolls back, then calls
  // Committed() after a successful commit (the delta totals advance). A
  // batch destroyed without it releases the totals unchanged.
  Status AppendTo(storage::Appender* app);
  void Committed(int64_t now_ms);
  const SeriesRefusals& refusals() const { return refusals_; }
  const OtlpStats& stats() const { return stats_; }

  // Internal: the translator's output.
  using Series = BatchSeries;
  using Sample = BatchSample;
  using HistSample = BatchHistogram;

 private:
  friend class OtlpTranslator;
  // OtlpDeltas::mu_ held by a batch from its first delta point until
  // Committed or the batch's end. It is held across calls, which the
  // analysis cannot follow: the users call deltas_->AssertHeld() after
  // Take, and Take and Release are not analysed.
  class DeltaLock {
   public:
    DeltaLock() = default;
    DeltaLock(DeltaLock&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    DeltaLock& operator=(DeltaLock&& o) noexcept {
      Release();
      d_ = std::exchange(o.d_, nullptr);
      return *this;
    }
    ~DeltaLock() { Release(); }
    bool held() const { return d_ != nullptr; }
    void Take(OtlpDeltas* d) TW_NO_THREAD_SAFETY_ANALYSIS {
      d->mu_.Lock();
      d_ = d;
    }
    void Release() TW_NO_THREAD_SAFETY_ANALYSIS {
      if (d_ != nullptr) d_->mu_.Unlock();
      d_ = nullptr;
    }

   private:
    OtlpDeltas* d_ = nullptr;
  };
  OtlpOptions options_;
  std::vector<Series> series_;
  std::unordered_map<std::string, uint32_t> index_;  // serialized labels -> series_
  std::vector<Sample> samples_;
  std::vector<HistSample> hist_samples_;
  std::vector<OtlpDeltas::Update> pending_;
  std::vector<OtlpDeltas::HistUpdate> hist_pending_;
  OtlpDeltas* deltas_ = nullptr;
  DeltaLock delta_lock_;  // deltas_'s, held from the first delta point
  OtlpStats stats_;
  SeriesRefusals refusals_;
};

// The ExportMetricsServiceResponse to a request: empty when nothing was
// rejected, else partial_success {rejected_data_points, error_message}, as
// protobuf or as JSON.
std::string OtlpResponseProto(const OtlpStats& stats);
std::string OtlpResponseJson(const OtlpStats& stats);

}  // namespace trainwatch::ingest
