#include "scrape/scrape_loop.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "base/clock.h"
#include "base/log.h"
#include "common/url.h"
#include "ingest/proto_parser.h"
#include "model/sample.h"
#include "scrape/nhcb_collector.h"

namespace trainwatch::scrape {
namespace {

constexpr std::string_view kReportNames[5] = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                                              "scrape_samples_post_metric_relabeling", "scrape_series_added"};
// Cache entries not seen for this many scrapes are forgotten.
constexpr uint64_t kCacheKeepIters = 10;

// A native histogram's staleness marker: sum is the stale NaN.
const model::FloatHistogram& StaleHistogram() {
  static const model::FloatHistogram h = [] {
    model::FloatHistogram x;
    x.sum = model::StaleNaN();
    return x;
  }();
  return h;
}

const char* StatusText(int code) {
  switch (code) {
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "";
  }
}

}  // namespace

ScrapeLoop::ScrapeLoop(std::shared_ptr<const ScrapeConfig> cfg, TargetSpec target, storage::Appendable* db)
    : cfg_(std::move(cfg)), target_(std::move(target)), db_(db) {
  public_labels_ = target_.PublicLabels();
  url_ = target_.Url(*cfg_);
  accept_ = AcceptHeaderFor(*cfg_);
  for (int i = 0; i < 5; i++) {
    model::LabelsBuilder b(public_labels_);
    b.Set(model::kMetricName, kReportNames[i]);
    report_[i].labels = b.Build();
  }
}

ScrapeLoop::~ScrapeLoop() { Stop(false); }

void ScrapeLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void ScrapeLoop::Stop(bool stale) {
  {
    base::MutexLock l(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  if (stale) {
    auto app = db_->NewAppender();
    int64_t t = NowMillis();
    AppendStale(app.get(), t);
    for (auto& r : report_) AppendOne(app.get(), &r.ref, r.labels, t, model::StaleNaN());
    Status s = app->Commit();
    if (!s.ok()) TW_LOG(Warn, "scrape {}: stale markers at stop: {}", url_, s.ToString());
    prev_success_ = 0;
  }
}

void ScrapeLoop::Run() {
  const int64_t interval_ns = cfg_->scrape_interval_ms * 1000000;
  // Spread targets over the interval: each scrapes at a fixed offset within
  // it, from the hash of its labels (Prometheus's Target.offset).
  int64_t now = NowNanos();
  int64_t offset = static_cast<int64_t>(target_.Hash() % static_cast<uint64_t>(interval_ns));
  int64_t next = now - now % interval_ns + offset;
  if (next < now) next += interval_ns;
  for (;;) {
    {
      base::MutexLock l(&mu_);
      auto deadline = SteadyAt(next);
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
      if (stop_) return;
    }
    ScrapeOnce(NowMillis());
    next += interval_ns;
    now = NowNanos();
    if (next <= now) next += ((now - next) / interval_ns + 1) * interval_ns;  // skip missed slots
  }
}

Status ScrapeLoop::Fetch(std::string* body, std::string* content_type) {
  const ScrapeConfig& c = *cfg_;
  // A target whose __address__ or __scheme__ relabeling made unusable fails
  // its scrapes with the reason (it once ended the process, issue 24).
  auto url = common::Url::Parse(url_);
  if (!url.ok()) return Status::InvalidArgument("scrape url: " + url.status().message());
  const std::string path = url->RequestUri();
  if (!client_) {
    auto client = common::NewHttpClient(url->Base(), c.http, c.scrape_timeout_ms);
    if (!client.ok()) return Status::Unavailable("Get \"" + url_ + "\": " + client.error().message());
    client_ = std::move(*client);
    client_->set_decompress(true);
  }
  std::vector<std::pair<std::string, std::string>> auth;
  RETURN_IF_ERROR(common::ApplyHttpAuth(c.http, client_.get(), &auth));
  httplib::Headers h = {
      {"Accept", accept_},
      {"Accept-Encoding", "gzip"},
      {"User-Agent", "trainwatch"},
      {"X-Prometheus-Scrape-Timeout-Seconds", fmt::format("{}", static_cast<double>(c.scrape_timeout_ms) / 1000)},
  };
  h.insert(auth.begin(), auth.end());
  const int64_t deadline = MonoNanos() + c.scrape_timeout_ms * 1000000;
  int status = 0;
  bool over_size = false, over_time = false;
  body->clear();
  auto res = client_->Get(
      path, h,
      [&](const httplib::Response& r) {
        status = r.status;
        *content_type = r.get_header_value("Content-Type");
        return r.status == 200;
      },
      [&](const char* data, size_t n) {
        if (c.body_size_limit > 0 && body->size() + n > c.body_size_limit) {
          over_size = true;
          return false;
        }
        if (MonoNanos() > deadline) {
          over_time = true;
          return false;
        }
        body->append(data, n);
        return true;
      });
  if (over_size) {
    client_.reset();
    return Status::ResourceExhausted("body size limit exceeded");
  }
  if (status != 0 && status != 200) {
    return Status::Unavailable(fmt::format("server returned HTTP status {} {}", status, StatusText(status)));
  }
  if (!res || over_time || MonoNanos() > deadline) {
    httplib::Error e = res.error();
    client_.reset();  // drop a possibly half-read connection
    if (over_time || MonoNanos() > deadline || e == httplib::Error::ConnectionTimeout || e == httplib::Error::Read) {
      return Status::Unavailable("Get \"" + url_ + "\": context deadline exceeded");
    }
    std::string why;
    switch (e) {
      case httplib::Error::Connection: why = "connection refused or host unreachable"; break;
      case httplib::Error::SSLConnection: why = "tls handshake failed"; break;
      case httplib::Error::SSLLoadingCerts: why = "tls: cannot load certificates"; break;
      case httplib::Error::SSLServerVerification: why = "x509: certificate verification failed"; break;
      case httplib::Error::Compression: why = "gzip: invalid compressed body"; break;
      default: why = httplib::to_string(e); break;
    }
    return Status::Unavailable("Get \"" + url_ + "\": " + why);
  }
  return Status::OK();
}

void ScrapeLoop::SetForcedError(Status s) {
  base::MutexLock l(&mu_);
  forced_error_ = std::move(s);
}

void ScrapeLoop::ScrapeOnce(int64_t now_ms) {
  Status forced;
  {
    base::MutexLock l(&mu_);
    forced = forced_error_;
  }
  if (!forced.ok()) {
    ProcessScrape(forced, "", "", now_ms, 0);
    return;
  }
  int64_t t0 = MonoNanos();
  std::string ctype;
  Status s = Fetch(&body_, &ctype);
  double dur = static_cast<double>(MonoNanos() - t0) / 1e9;
  ProcessScrape(s, body_, ctype, now_ms, dur);
  if (body_.capacity() > (size_t{16} << 20)) std::string().swap(body_);
}

void ScrapeLoop::AppendOne(storage::Appender* app, storage::SeriesRef* ref, const model::Labels& labels, int64_t t,
                           double v) {
  if (*ref != 0 && app->AppendByRef(*ref, t, v)) return;
  auto r = app->Append(0, labels, t, v);
  if (r.ok()) *ref = *r;
  else TW_LOG(Warn, "scrape {}: append {}: {}", url_, labels.ToString(), r.error().ToString());
}

Status ScrapeLoop::AppendEntry(storage::Appender* app, Entry* e, int64_t t, double v, int64_t st) {
  if (st == 0 && e->ref != 0 && app->AppendByRef(e->ref, t, v)) return Status::OK();
  if (st != 0 && e->ref != 0) {
    // No by-ref form carries a start timestamp: the ref without labels, as
    // AppendHistEntry; one whose series was dropped fails and is retried
    // with them.
    auto r = app->AppendST(e->ref, model::Labels(), st, t, v);
    if (r.ok() || r.error().IsOutOfRange()) return r.ok() ? Status::OK() : r.error();
  }
  model::Labels labels;
  if (!model::DecodeEncodedLabels(e->labels, &labels)) return Status::Corruption("BUG: scrape cache labels undecodable");
  ASSIGN_OR_RETURN(e->ref, st == 0 ? app->Append(0, labels, t, v) : app->AppendST(0, labels, st, t, v));
  return Status::OK();
}

ScrapeLoop::Node* ScrapeLoop::Lookup(std::string_view text, size_t* next) {
  Node* n = nullptr;
  if (*next < order_.size() && order_[*next]->first == text) {
    n = order_[*next];
  } else if (auto it = cache_.find(text); it != cache_.end()) {
    n = &*it;
  }
  if (n != nullptr) *next = size_t{n->second.pos} + 1;  // resync after a series came or went
  return n;
}

void ScrapeLoop::AppendStale(storage::Appender* app, int64_t t) {
  if (prev_success_ == 0) return;
  // Entries of the previous successful scrape whose last_iter this one did
  // not move on (see ProcessScrape).
  for (Node* n : order_) {
    auto& [text, e] = *n;
    if (e.last_iter == prev_success_ && !e.dropped && e.stale_tracked) {
      Status s = e.histogram ? AppendHistEntry(app, &e, t, StaleHistogram()) : AppendEntry(app, &e, t, model::StaleNaN());
      if (!s.ok()) TW_LOG(Warn, "scrape {}: stale marker for {}: {}", url_, text, s.ToString());
    }
  }
}

void ScrapeLoop::AppendReport(storage::Appender* app, int64_t t, bool up, double duration_s, const ScrapeCounts& c) {
  const double v[5] = {up ? 1.0 : 0.0, duration_s, static_cast<double>(c.scraped), static_cast<double>(c.post_relabel),
                       static_cast<double>(c.series_added)};
  for (int i = 0; i < 5; i++) AppendOne(app, &report_[i].ref, report_[i].labels, t, v[i]);
}

Status ScrapeLoop::NewEntry(const ingest::TextSample& s, Entry* e) {
  const ScrapeConfig& c = *cfg_;
  std::vector<model::Label> raw;
  raw.reserve(s.num_labels + 1 + public_labels_.size());
  raw.push_back({std::string(model::kMetricName), std::string(s.name)});
  for (size_t i = 0; i < s.num_labels; i++) {
    if (s.labels[i].name == model::kMetricName) continue;
    raw.push_back({std::string(s.labels[i].name), std::string(s.labels[i].value)});
  }
  common::LabelSet exposed(std::move(raw));
  common::LabelSet lb = exposed;
  // Target labels: honor_labels keeps the scraped value on conflict;
  // otherwise the target wins and the scraped one becomes exported_<name>.
  if (c.honor_labels) {
    for (const model::Label& l : public_labels_) {
      if (!exposed.Has(l.name)) lb.Set(l.name, l.value);
    }
  } else {
    std::vector<model::Label> conflicts;
    for (const model::Label& l : public_labels_) {
      std::string_view v = exposed.Get(l.name);
      if (!v.empty()) conflicts.push_back({l.name, std::string(v)});
      lb.Set(l.name, l.value);
    }
    std::stable_sort(conflicts.begin(), conflicts.end(),
                     [](const model::Label& a, const model::Label& b) { return a.name.size() < b.name.size(); });
    for (size_t i = 0; i < conflicts.size(); i++) {
      std::string name = conflicts[i].name;
      for (;;) {
        name = "exported_" + name;
        bool taken = exposed.Has(name) || public_labels_.Has(name);
        for (size_t j = 0; j < i && !taken; j++) taken = conflicts[j].name == name;
        if (!taken) break;
      }
      conflicts[i].name = name;
    }
    for (const model::Label& l : conflicts) lb.Set(l.name, l.value);
  }
  if (!common::Relabel(c.metric_relabel_configs, &lb) || lb.pairs().empty()) {
    e->dropped = true;
    return Status::OK();
  }
  const auto& pairs = lb.pairs();
  if (c.label_limit > 0 && pairs.size() > c.label_limit) {
    return Status::ResourceExhausted(fmt::format("label_limit exceeded (metric: {:.50}, number of labels: {}, limit: {})",
                                                 s.series, pairs.size(), c.label_limit));
  }
  for (const model::Label& l : pairs) {
    if (c.label_name_length_limit > 0 && l.name.size() > c.label_name_length_limit) {
      return Status::ResourceExhausted(
          fmt::format("label_name_length_limit exceeded (metric: {:.50}, label name: {:.50}, length: {}, limit: {})",
                      s.series, l.name, l.name.size(), c.label_name_length_limit));
    }
    if (c.label_value_length_limit > 0 && l.value.size() > c.label_value_length_limit) {
      return Status::ResourceExhausted(
          fmt::format("label_value_length_limit exceeded (metric: {:.50}, label name: {:.50}, value: {:.50}, length: "
                      "{}, limit: {})",
                      s.series, l.name, l.value, l.value.size(), c.label_value_length_limit));
    }
    if (!model::IsValidLabelName(l.name)) {
      return Status::InvalidArgument("line " + std::to_string(s.line) + ": invalid label name \"" + l.name +
                                     "\" after relabeling");
    }
  }
  if (lb.Get(model::kMetricName).empty()) {
    return Status::InvalidArgument("line " + std::to_string(s.line) + ": no metric name after relabeling");
  }
  model::AppendEncodedLabels(lb.ToLabels(), &e->labels);
  return Status::OK();
}

Status ScrapeLoop::AppendBody(storage::Appender* app, std::string_view body, std::string_view received_type, int64_t t,
                              ScrapeCounts* counts) {
  const std::string_view content_type = EffectiveContentType(*cfg_, received_type);
  if (ingest::IsProtobufContentType(content_type)) return AppendProtoBody(app, body, t, counts);
  const ScrapeConfig& c = *cfg_;
  ingest::ParseOptions po;
  po.format = ingest::FormatFromContentType(content_type);
  po.default_timestamp_ms = t;
  po.start_timestamps = true;  // OpenMetrics `_created` (the text format has none)
  // The lookup done for a line in known_series (before its labels would be
  // parsed) is reused for the sample: one lookup per known series.
  std::string_view looked_up;
  Node* found = nullptr;
  size_t next = 0;
  // convert_classic_histograms_to_nhcb: classic histograms collated into
  // native ones (nhcb_collector.h); their classic series are stored only
  // with always_scrape_classic_histograms.
  std::optional<NhcbCollector> nhcb;
  if (c.convert_classic_histograms_to_nhcb) nhcb.emplace();
  po.known_series = [&](std::string_view text) {
    if (nhcb && nhcb->NeedsLabels(text)) return false;
    looked_up = text;
    found = Lookup(text, &next);
    return found != nullptr;
  };
  // Into the reused md_work_: a family seen before keeps its node and
  // strings (no allocation when its metadata did not change).
  po.on_metadata = [this, &nhcb](const ingest::MetadataLine& m) {
    if (nhcb) nhcb->OnMetadata(m);
    auto it = md_work_.find(m.family);
    if (it == md_work_.end()) it = md_work_.emplace(std::string(m.family), std::pair{MetricMetadata{}, iter_}).first;
    auto& [x, at] = it->second;
    if (at != iter_) {  // first line of this family in this scrape: start from the defaults
      x.type = "unknown";
      x.help.clear();
      x.unit.clear();
      at = iter_;
    }
    switch (m.kind) {
      case ingest::MetadataLine::Kind::kHelp: x.help.assign(m.text); break;
      case ingest::MetadataLine::Kind::kType: x.type.assign(m.text); break;
      case ingest::MetadataLine::Kind::kUnit: x.unit.assign(m.text); break;
    }
  };
  ingest::TextParser p(body, std::move(po));
  const uint64_t iter = iter_;
  std::string nhcb_error;
  while (p.Next()) {
    const ingest::TextSample& s = p.sample();
    if (nhcb) {
      if (nhcb->Ends(s)) RETURN_IF_ERROR(AppendNhcb(app, nhcb->Finish(&nhcb_error), nhcb_error, t, counts, &next));
      if (nhcb->Add(s) && !c.always_scrape_classic_histograms) continue;
    }
    counts->scraped++;
    std::string_view key = s.series.empty() ? s.name : s.series;
    Node* node = key.data() == looked_up.data() && key.size() == looked_up.size() ? found : Lookup(key, &next);
    Entry* e;
    if (node != nullptr) {
      e = &node->second;
      if (e->seen_iter == iter) continue;  // duplicate series in one body: first wins
      e->seen_iter = iter;
      seen_.push_back(node);
    } else {
      if (s.labels_skipped) return Status::NotSupported("BUG: labels skipped for an unknown series");
      Entry ne;
      RETURN_IF_ERROR(NewEntry(s, &ne));
      ne.last_iter = iter;  // never equal to a successful iteration before this one
      ne.seen_iter = iter;
      node = &*cache_.emplace(std::string(key), std::move(ne)).first;
      e = &node->second;
      seen_.push_back(node);
      if (!e->dropped) counts->series_added++;
    }
    if (e->dropped) continue;
    counts->post_relabel++;
    if (c.sample_limit > 0 && counts->post_relabel > c.sample_limit) return Status::ResourceExhausted("sample limit exceeded");
    bool explicit_ts = s.has_timestamp && c.honor_timestamps;
    e->stale_tracked = !explicit_ts;
    int64_t ts = explicit_ts ? s.timestamp_ms : t;
    RETURN_IF_ERROR(AdmitAppend(AppendEntry(app, e, ts, s.value, s.start_timestamp_ms), "line", s.line, counts));
  }
  RETURN_IF_ERROR(p.status());
  if (nhcb) RETURN_IF_ERROR(AppendNhcb(app, nhcb->Finish(&nhcb_error), nhcb_error, t, counts, &next));
  return Status::OK();
}

Status ScrapeLoop::AdmitFailedAppend(const Status& st, const char* what, size_t n, ScrapeCounts* counts) {
  const std::string where = std::string(what) + " " + std::to_string(n);
  if (st.IsOutOfRange()) {
    // A sample whose exposed timestamp is out of bounds: the rest of the
    // scrape is stored.
    if (counts->out_of_bounds++ == 0) TW_LOG(Warn, "scrape {}: {}: {}", url_, where, st.message());
    return Status::OK();
  }
  if (st.code() == StatusCode::kResourceExhausted) {
    // A new series beyond a TSDB series limit (--storage.max-series, a
    // label bound): skipped (counted there); the target's other series are stored.
    if (counts->series_limited++ == 0) TW_LOG(Warn, "scrape {}: {}: {}", url_, where, st.message());
    return Status::OK();
  }
  return st.Annotate(where);
}

void ScrapeLoop::ProcessScrape(const Status& fetch_error, std::string_view body, std::string_view content_type,
                               int64_t now_ms, double duration_s) {
  iter_++;
  seen_.clear();
  ScrapeCounts counts;
  auto app = db_->NewAppender();
  Status err = fetch_error;
  if (err.ok()) {
    err = AppendBody(app.get(), body, content_type, now_ms, &counts);
    if (!err.ok()) {
      app->Rollback();
      app = db_->NewAppender();
    }
  }
  if (err.ok()) {
    for (Node* n : seen_) n->second.last_iter = iter_;
    // Series of the previous successful scrape missing from this one.
    AppendStale(app.get(), now_ms);
    prev_success_ = iter_;
    order_.swap(seen_);
    for (size_t i = 0; i < order_.size(); i++) order_[i]->second.pos = static_cast<uint32_t>(i);
  } else {
    // As an empty scrape: every series of the last successful one goes stale.
    AppendStale(app.get(), now_ms);
    prev_success_ = 0;
    order_.clear();
  }
  seen_.clear();
  AppendReport(app.get(), now_ms, err.ok(), duration_s, counts);
  Status cs = app->Commit();
  if (!cs.ok()) {
    TW_LOG(Warn, "scrape {}: commit: {}", url_, cs.ToString());
    if (err.ok()) err = cs;
  }
  // Forget series not seen for a while (never one in order_: those were
  // seen in this scrape).
  if (iter_ % kCacheKeepIters == 0) {
    std::erase_if(cache_, [&](const auto& kv) { return kv.second.seen_iter + kCacheKeepIters < iter_; });
  }
  // This scrape's metadata: the families it had; published when it changed.
  bool md_changed = false;
  if (err.ok()) std::erase_if(md_work_, [&](const auto& kv) { return kv.second.second != iter_; });
  base::MutexLock l(&mu_);
  if (err.ok()) {
    md_changed = md_work_.size() != metadata_.size() ||
                 !std::equal(md_work_.begin(), md_work_.end(), metadata_.begin(), [](const auto& a, const auto& b) {
                   return a.first == b.first && a.second.first == b.second;
                 });
  }
  if (md_changed) {
    metadata_.clear();
    for (const auto& [family, md] : md_work_) metadata_.emplace_hint(metadata_.end(), family, md.first);
  }
  state_.health = err.ok() ? Health::kUp : Health::kDown;
  state_.last_error = err.ok() ? "" : err.message();
  state_.last_scrape_unix_ns = now_ms * 1000000;
  state_.last_duration_s = duration_s;
  if (!err.ok()) TW_LOG(Debug, "scrape {} failed: {}", url_, err.message());
}

TargetState ScrapeLoop::state() const {
  base::MutexLock l(&mu_);
  return state_;
}

std::map<std::string, MetricMetadata> ScrapeLoop::metadata() const {
  base::MutexLock l(&mu_);
  return metadata_;
}

}  // namespace trainwatch::scrape
