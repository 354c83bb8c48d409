#pragma once
// One target's scrape loop, as Prometheus's scrapeLoop: every interval (at an
// offset spread over the interval by the target's hash) it fetches the
// target over HTTP(S), parses the body with the exposition parser chosen by
// Content-Type, and appends the samples plus the report series (up,
// scrape_duration_seconds, scrape_samples_scraped,
// scrape_samples_post_metric_relabeling, scrape_series_added) in one commit.
// Samples carry their start timestamps (OpenMetrics `_created`, the protobuf
// format's created_timestamp) to Appender::AppendST / AppendHistogramST.
// With convert_classic_histograms_to_nhcb each classic histogram is stored
// as one native histogram with custom buckets (nhcb_collector.h).
// A failed scrape appends nothing from the body, and writes staleness markers
// for the series of the last successful scrape; series that disappear
// between successful scrapes get markers too, as do all series when the
// loop is stopped for good (target gone on reload).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "base/mutex.h"
#include "ingest/text_parser.h"
#include "scrape/config.h"
#include "scrape/nhcb_collector.h"
#include "scrape/target.h"
#include "storage/storage.h"

namespace httplib {
class Client;
}

namespace trainwatch::scrape {

// Prometheus 2.42's Accept header: OpenMetrics preferred, text 0.0.4 fallback.
inline constexpr std::string_view kAcceptHeader =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

struct MetricMetadata {
  std::string type = "unknown";
  std::string help;
  std::string unit;
  bool operator==(const MetricMetadata&) const = default;
};

enum class Health { kUnknown, kUp, kDown };

// What /api/v1/targets shows of a loop.
struct TargetState {
  Health health = Health::kUnknown;
  std::string last_error;
  int64_t last_scrape_unix_ns = 0;  // 0: never
  double last_duration_s = 0;
};

// Counts of one scrape, as the report series carry them.
struct ScrapeCounts {
  uint64_t scraped = 0;         // samples in the body
  uint64_t post_relabel = 0;    // samples left after metric_relabel_configs
  uint64_t series_added = 0;    // series not seen in earlier scrapes
  uint64_t out_of_bounds = 0;   // samples with explicit timestamps the TSDB refused (skipped, as Prometheus)
  uint64_t series_limited = 0;  // samples of new series the TSDB refused by a series limit (skipped)
};

class ScrapeLoop {
 public:
  ScrapeLoop(std::shared_ptr<const ScrapeConfig> cfg, TargetSpec target, storage::Appendable* db);
  ~ScrapeLoop();
  ScrapeLoop(const ScrapeLoop&) = delete;
  ScrapeLoop& operator=(const ScrapeLoop&) = delete;

  // Starts the loop thread.
  void Start();
  // Stops the thread (an in-flight scrape finishes or times out). With
  // `stale`, writes staleness markers for every series of the last
  // successful scrape and the report series.
  void Stop(bool stale);

  // One scrape at wall time `now_ms`: fetch, append, report, commit.
  void ScrapeOnce(int64_t now_ms);
  // The part after the fetch (tests drive it with bodies directly).
  // `fetch_error` non-OK means the fetch failed.
  void ProcessScrape(const Status& fetch_error, std::string_view body, std::string_view content_type, int64_t now_ms,
                     double duration_s);

  // While set (non-OK), each scrape fails with this error without fetching:
  // up is 0 and /api/v1/targets shows it (the job's target_limit).
  void SetForcedError(Status s);

  const TargetSpec& target() const { return target_; }
  const ScrapeConfig& config() const { return *cfg_; }
  const std::string& url() const { return url_; }
  TargetState state() const;
  std::map<std::string, MetricMetadata> metadata() const;
  size_t cache_size() const { return cache_.size(); }

 private:
  struct Entry {
    storage::SeriesRef ref = 0;
    // Final labels (model::AppendEncodedLabels: they are needed only when
    // the ref went stale, and a cache holds many); empty when dropped.
    std::string labels;
    uint64_t last_iter = 0;   // last successful scrape that had it
    uint64_t seen_iter = 0;   // last scrape (any) that had it: duplicate check
    uint32_t pos = 0;         // index in order_ (when in it)
    bool dropped = false;
    bool stale_tracked = true;  // false for samples with explicit timestamps
    bool histogram = false;     // its last sample was a native histogram: stale markers are histograms
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return HashString(s); }
  };

  void Run();
  Status Fetch(std::string* body, std::string* content_type);
  // Appends the body's samples; on error the caller rolls back.
  Status AppendBody(storage::Appender* app, std::string_view body, std::string_view content_type, int64_t t,
                    ScrapeCounts* counts);
  // A classic histogram of a text body converted to a native one
  // (convert_classic_histograms_to_nhcb; scrape_nhcb.cc): appended as a
  // sample of its own cache entry. `r` nullptr: it did not convert (`why`),
  // and nothing is stored, as in Prometheus.
  Status AppendNhcb(storage::Appender* app, const NhcbCollector::Ready* r, const std::string& why, int64_t t,
                    ScrapeCounts* counts, size_t* next);
  // AppendBody for the protobuf exposition format (scrape_proto.cc).
  Status AppendProtoBody(storage::Appender* app, std::string_view body, int64_t t, ScrapeCounts* counts);
  Status NewEntry(const ingest::TextSample& s, Entry* e);
  void AppendStale(storage::Appender* app, int64_t t);
  void AppendReport(storage::Appender* app, int64_t t, bool up, double duration_s, const ScrapeCounts& c);
  void AppendOne(storage::Appender* app, storage::SeriesRef* ref, const model::Labels& labels, int64_t t, double v);
  // AppendOne of a cache entry: by ref, else with its decoded labels. With
  // a start timestamp `st` (ms; 0 = unknown) through Appender::AppendST.
  Status AppendEntry(storage::Appender* app, Entry* e, int64_t t, double v, int64_t st = 0);
  // What one sample's append result does to the scrape, as Prometheus: a
  // sample out of the TSDB's time bounds or a new series beyond a series
  // limit is skipped and counted (the first of each logged); any other
  // error fails the scrape, annotated with where it was (`what` `n`: "line
  // 3", "sample 3"). OK when the scrape goes on.
  Status AdmitAppend(const Status& st, const char* what, size_t n, ScrapeCounts* counts) {
    return st.ok() ? st : AdmitFailedAppend(st, what, n, counts);
  }
  Status AdmitFailedAppend(const Status& st, const char* what, size_t n, ScrapeCounts* counts);
  // The same for a native histogram sample.
  Status AppendHistEntry(storage::Appender* app, Entry* e, int64_t t, const model::FloatHistogram& h, int64_t st = 0);

  std::shared_ptr<const ScrapeConfig> cfg_;
  TargetSpec target_;
  model::Labels public_labels_;
  std::string url_;
  std::string accept_;  // the Accept header (AcceptHeaderFor)
  storage::Appendable* db_;
  std::unique_ptr<httplib::Client> client_;

  using Cache = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;
  using Node = Cache::value_type;  // stable address: the map only grows between erase_if passes
  // The cache entry of `text`: first the one after the previous hit in the
  // last successful scrape's order (targets expose series in the same order
  // each time: a compare, no hash), else a map lookup. Advances *next.
  Node* Lookup(std::string_view text, size_t* next);
  Cache cache_;
  std::vector<Node*> order_;  // the last successful scrape's entries in body order; empty after a failure
  std::vector<Node*> seen_;   // this scrape's, in body order
  std::string body_;          // reused between scrapes
  // Metadata as this scrape sets it, reused between scrapes: family ->
  // (metadata, iteration that last set it).
  std::map<std::string, std::pair<MetricMetadata, uint64_t>, std::less<>> md_work_;
  uint64_t iter_ = 0;
  uint64_t prev_success_ = 0;  // iteration of the previous scrape when it succeeded, else 0
  struct ReportSeries {
    model::Labels labels;
    storage::SeriesRef ref = 0;
  };
  ReportSeries report_[5];

  std::thread thread_;
  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  TargetState state_ TW_GUARDED_BY(mu_);
  Status forced_error_ TW_GUARDED_BY(mu_);
  std::map<std::string, MetricMetadata> metadata_ TW_GUARDED_BY(mu_);  // written by the loop thread only
};

}  // namespace trainwatch::scrape
