// ScrapeLoop's classic histograms converted to native histograms with custom
// buckets (convert_classic_histograms_to_nhcb) on the text path: the
// collated histogram (nhcb_collector.h) is one sample of one series, under
// the same rules as the body's other samples (metric_relabel_configs on its
// labels, sample_limit, the label limits, staleness, the cache by ref).

#include "base/log.h"
#include "scrape/scrape_loop.h"

namespace trainwatch::scrape {

Status ScrapeLoop::AppendNhcb(storage::Appender* app, const NhcbCollector::Ready* r, const std::string& why,
                              int64_t t, ScrapeCounts* counts, size_t* next) {
  if (r == nullptr) {
    // Prometheus's NHCBParser drops such a histogram without a word; a
    // debug line says which.
    if (!why.empty()) TW_LOG(Debug, "scrape {}: classic histogram not converted to native: {}", url_, why);
    return Status::OK();
  }
  const ScrapeConfig& c = *cfg_;
  const ingest::TextSample& s = r->sample;
  counts->scraped++;
  Node* node = Lookup(r->cache_key, next);
  Entry* e;
  if (node != nullptr) {
    e = &node->second;
    if (e->seen_iter == iter_) return Status::OK();  // the same histogram twice in one body: first wins
    e->seen_iter = iter_;
    seen_.push_back(node);
  } else {
    Entry ne;
    RETURN_IF_ERROR(NewEntry(s, &ne));
    ne.last_iter = iter_;
    ne.seen_iter = iter_;
    node = &*cache_.emplace(std::string(r->cache_key), std::move(ne)).first;
    e = &node->second;
    seen_.push_back(node);
    if (!e->dropped) counts->series_added++;
  }
  if (e->dropped) return Status::OK();
  counts->post_relabel++;
  if (c.sample_limit > 0 && counts->post_relabel > c.sample_limit) return Status::ResourceExhausted("sample limit exceeded");
  const bool explicit_ts = s.has_timestamp && c.honor_timestamps;
  e->stale_tracked = !explicit_ts;
  e->histogram = true;
  const int64_t ts = explicit_ts ? s.timestamp_ms : t;
  return AdmitAppend(AppendHistEntry(app, e, ts, r->histogram, s.start_timestamp_ms), "line", s.line, counts);
}

}  // namespace trainwatch::scrape
