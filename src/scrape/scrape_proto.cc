// ScrapeLoop's protobuf path: bodies in Prometheus's delimited MetricFamily
// format (ingest/proto_parser.h), with native histograms appended through
// Appender::AppendHistogram, and each metric's created_timestamp as its
// samples' start timestamp (AppendST, AppendHistogramST). The text path (scrape_loop.cc) is separate so
// that its per-line fast path stays as it is.

#include "base/log.h"
#include "ingest/proto_parser.h"
#include "scrape/scrape_loop.h"

namespace trainwatch::scrape {

Status ScrapeLoop::AppendHistEntry(storage::Appender* app, Entry* e, int64_t t, const model::FloatHistogram& h,
                                   int64_t st) {
  auto append = [&](storage::SeriesRef ref, const model::Labels& labels) {
    return st == 0 ? app->AppendHistogram(ref, labels, t, h) : app->AppendHistogramST(ref, labels, st, t, h);
  };
  if (e->ref != 0) {
    // By ref without labels: the head resolves it; a ref whose series was
    // dropped fails ("series without labels") and is retried with them.
    auto r = append(e->ref, model::Labels());
    if (r.ok()) return Status::OK();
    if (r.error().IsOutOfRange() || r.error().code() == StatusCode::kNotSupported) return r.error();
  }
  model::Labels labels;
  if (!model::DecodeEncodedLabels(e->labels, &labels)) return Status::Corruption("BUG: scrape cache labels undecodable");
  ASSIGN_OR_RETURN(e->ref, append(0, labels));
  return Status::OK();
}

Status ScrapeLoop::AppendProtoBody(storage::Appender* app, std::string_view body, int64_t t, ScrapeCounts* counts) {
  const ScrapeConfig& c = *cfg_;
  ingest::ProtoParseOptions po;
  po.default_timestamp_ms = t;
  po.native_histograms = c.scrape_native_histograms;
  po.keep_classic = c.always_scrape_classic_histograms;
  po.convert_nhcb = c.convert_classic_histograms_to_nhcb;
  po.on_metadata = [this](const ingest::MetadataLine& m) {
    auto it = md_work_.find(m.family);
    if (it == md_work_.end()) it = md_work_.emplace(std::string(m.family), std::pair{MetricMetadata{}, iter_}).first;
    MetricMetadata& x = it->second.first;
    if (it->second.second != iter_) {
      x = MetricMetadata{};
      it->second.second = iter_;
    }
    switch (m.kind) {
      case ingest::MetadataLine::Kind::kHelp: x.help.assign(m.text); break;
      case ingest::MetadataLine::Kind::kType: x.type.assign(m.text); break;
      case ingest::MetadataLine::Kind::kUnit: x.unit.assign(m.text); break;
    }
  };
  ingest::ProtoParser p(body, std::move(po));
  const uint64_t iter = iter_;
  size_t next = 0;
  while (p.Next()) {
    const ingest::TextSample& s = p.sample();
    counts->scraped++;
    Node* node = Lookup(s.series, &next);
    Entry* e;
    if (node != nullptr) {
      e = &node->second;
      if (e->seen_iter == iter) continue;  // duplicate series in one body: first wins
      e->seen_iter = iter;
      seen_.push_back(node);
    } else {
      Entry ne;
      RETURN_IF_ERROR(NewEntry(s, &ne));
      ne.last_iter = iter;
      ne.seen_iter = iter;
      node = &*cache_.emplace(std::string(s.series), std::move(ne)).first;
      e = &node->second;
      seen_.push_back(node);
      if (!e->dropped) counts->series_added++;
    }
    if (e->dropped) continue;
    counts->post_relabel++;
    if (c.sample_limit > 0 && counts->post_relabel > c.sample_limit) return Status::ResourceExhausted("sample limit exceeded");
    const bool explicit_ts = s.has_timestamp && c.honor_timestamps;
    e->stale_tracked = !explicit_ts;
    e->histogram = p.is_histogram();
    const int64_t ts = explicit_ts ? s.timestamp_ms : t;
    Status st = e->histogram ? AppendHistEntry(app, e, ts, p.histogram(), s.start_timestamp_ms)
                             : AppendEntry(app, e, ts, s.value, s.start_timestamp_ms);
    RETURN_IF_ERROR(AdmitAppend(st, "sample", s.line, counts));
  }
  return p.status();
}

}  // namespace trainwatch::scrape
