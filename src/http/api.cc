#include "http/api.h"
#include "remote/read.h"

#include <algorithm>
#include <charconv>
#include <exception>

#include "base/clock.h"
#include "base/log.h"
#include "collect/snapshot.h"
#include "http/format.h"
#include "http/ingest_gate.h"
#include "http/routes.h"
#include "logs/store.h"
#include "notify/notifier.h"
#include "remote/manager.h"
#include "runs/store.h"
#include "rules/manager.h"

namespace trainwatch::http {

Response ApiError(const Status& s) {
  Response r;
  std::string_view type = "execution";
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: r.status = 400; type = "bad_data"; break;
    case StatusCode::kCancelled: r.status = 503; type = "timeout"; break;
    case StatusCode::kUnavailable: r.status = 503; type = "unavailable"; break;
    case StatusCode::kNotFound: r.status = 404; type = "not_found"; break;
    case StatusCode::kResourceExhausted: r.status = 422; type = "execution"; break;
    case StatusCode::kIOError:
    case StatusCode::kCorruption: r.status = 500; type = "internal"; break;
    case StatusCode::kNoSpace: r.status = 507; type = "unavailable"; break;
    default: r.status = 422; type = "execution"; break;
  }
  r.body = ErrorJson(type, s.message());
  if (s.IsNoSpace()) r.headers.emplace_back("Retry-After", std::string(kNoSpaceRetryAfter));
  return r;
}

Response BadData(std::string msg) { return ApiError(Status::InvalidArgument(std::move(msg))); }

Response Success(std::string_view data_json) {
  Response r;
  r.body.reserve(data_json.size() + 32);
  r.body += "{\"status\":\"success\",\"data\":";
  r.body += data_json;
  r.body += '}';
  return r;
}

Response Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  if (!r.body.empty() && r.body.back() != '\n') r.body += '\n';
  return r;
}

Response IngestError(std::string_view handler, const Status& s, std::string_view reason_prefix) {
  if (s.IsInvalidArgument() || s.IsOutOfRange()) return Text(400, std::string(reason_prefix) + s.message());
  TW_LOG(Error, "{}: {}", handler, s.ToString());
  if (s.IsNoSpace()) {
    // Nothing of the request was kept; senders retry (Prometheus retries every 5xx).
    Response r = Text(507, s.message());
    r.headers.emplace_back("Retry-After", std::string(kNoSpaceRetryAfter));
    return r;
  }
  return Text(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kResourceExhausted ? 503 : 500,
              s.message());
}

Response NoContent() {
  Response resp;
  resp.status = 204;
  resp.content_type.clear();
  return resp;
}

static Response MethodNotAllowed() { return Text(405, "method not allowed\n"); }

Api::Api(ApiDeps deps)
    : deps_(std::move(deps)),
      own_registry_(deps_.metrics == nullptr ? std::make_unique<common::metrics::Registry>() : nullptr),
      registry_(deps_.metrics != nullptr ? deps_.metrics : own_registry_.get()),
      metrics_(registry_),
      tsdb_metrics_(deps_.db != nullptr ? NewTsdbCollector(deps_.db) : nullptr) {
  deps_.request_limits.series_refused = metrics_.requests_refused_series();
  deps_.request_limits.samples_refused = metrics_.requests_refused_samples();
  std::vector<const common::metrics::Source*> sources;
  if (tsdb_metrics_ != nullptr) sources.push_back(tsdb_metrics_.get());
  if (deps_.ingest_gate != nullptr) sources.push_back(deps_.ingest_gate->metrics());
  registration_ = registry_->MustRegister(std::move(sources));
}

Response Api::Handle(const Request& req) {
  int64_t start = MonoNanos();
  std::string_view handler = "other";
  Response resp;
  try {
    resp = Route(req, &handler);
  } catch (const std::exception& e) {
    TW_LOG(Error, "http {} {}: {}", req.method, req.path, e.what());
    resp = Response{};
    resp.status = 500;
    resp.body = ErrorJson("internal", std::string("internal error: ") + e.what());
  }
  metrics_.ObserveRequest(handler, resp.status, static_cast<double>(MonoNanos() - start) / 1e9);
  TW_LOG(Debug, "http {} {} -> {}", req.method, req.path, resp.status);
  return resp;
}

// Dispatches from the route table (routes.h).
Response Api::Route(const Request& req, std::string_view* handler) {
  const http::Route* r = FindRoute(req.method, req.path, req.accept);
  if (deps_.db == nullptr && (r == nullptr || !r->agent)) {
    // Agent mode: no local store, so nothing to query or push into.
    *handler = "agent";
    Response resp;
    resp.status = 503;
    resp.body = ErrorJson("unavailable", "unavailable in trainwatch agent mode");
    return resp;
  }
  // The admin API only with --web.enable-admin-api, as in Prometheus (which
  // answers its admin routes so, whatever the method).
  if (r != nullptr && r->admin && !deps_.enable_admin_api) {
    *handler = "admin";
    Response resp;
    resp.status = 503;
    resp.body = ErrorJson("unavailable", "admin APIs disabled");
    return resp;
  }
  if (r == nullptr) return Text(404, "404 page not found\n");
  if (r->router != nullptr) return (this->*r->router)(req, handler);
  *handler = r->handler;
  if ((r->methods & MethodBit(req.method)) == 0) return MethodNotAllowed();
  if (r->serve == nullptr) return Text(404, "404 page not found\n");
  return (this->*r->serve)(req);
}

// GET|POST /api/v1/label/<name>/values
Response Api::LabelValuesRoute(const Request& req) {
  constexpr std::string_view kLabel = "/api/v1/label/", kValues = "/values";
  const std::string& p = req.path;
  return LabelValues(req, std::string_view(p).substr(kLabel.size(), p.size() - kLabel.size() - kValues.size()));
}

Response Api::Healthy(const Request&) { return Text(200, "trainwatch is Healthy.\n"); }
Response Api::Ready(const Request&) {
  // A failed fsync means acknowledged data may be gone and writes are
  // refused: not ready, and say why (the process keeps serving reads).
  if (deps_.db != nullptr) {
    if (Status s = deps_.db->Health(); !s.ok()) return Text(503, "trainwatch is not ready: " + s.message() + "\n");
  }
  return Text(200, "trainwatch is Ready.\n");
}

Response Api::Flush(const Request&) {
  Status s = deps_.db->Flush();
  if (!s.ok()) {
    TW_LOG(Error, "flush: {}", s.ToString());
    Response r;
    r.status = 500;
    r.body = ErrorJson("internal", "flush: " + s.message());
    return r;
  }
  Response r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

// POST|PUT /api/v1/admin/tsdb/snapshot?skip_head=<bool>: as Prometheus's,
// {"name": "<dir under <data-dir>/snapshots>"}.
Response Api::Snapshot(const Request& req) {
  bool skip_head = false;
  if (std::string_view v = req.Param("skip_head"); !v.empty()) {
    // Go's strconv.ParseBool, as Prometheus reads it.
    static constexpr std::string_view kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
    static constexpr std::string_view kFalse[] = {"0", "f", "F", "FALSE", "false", "False"};
    if (std::find(std::begin(kTrue), std::end(kTrue), v) != std::end(kTrue)) {
      skip_head = true;
    } else if (std::find(std::begin(kFalse), std::end(kFalse), v) == std::end(kFalse)) {
      return BadData("unable to parse boolean 'skip_head' argument: strconv.ParseBool: parsing \"" + std::string(v) +
                     "\": invalid syntax");
    }
  }
  auto name = deps_.db->Snapshot(skip_head);
  if (!name.ok()) {
    TW_LOG(Error, "snapshot: {}", name.status().ToString());
    Response r;
    r.status = 500;
    r.body = ErrorJson("internal", "create snapshot: " + name.status().message());
    return r;
  }
  std::string d = "{\"name\":";
  AppendJsonString(&d, *name);
  d += '}';
  return Success(d);
}

// trainwatch's own: {"open": whether anyone who reaches the port may read
// and write, "warning": what to do about it}; the UI shows it as a banner.
Response Api::SecurityStatus(const Request&) {
  std::string d = deps_.security_warning.empty() ? "{\"open\":false,\"warning\":\"\"}" : "{\"open\":true,\"warning\":";
  if (!deps_.security_warning.empty()) {
    AppendJsonString(&d, deps_.security_warning);
    d += '}';
  }
  return Success(d);
}

Response Api::BuildInfoHandler(const Request&) {
  const BuildInfo& b = deps_.build;
  std::string d = "{\"version\":";
  AppendJsonString(&d, b.version);
  d += ",\"revision\":";
  AppendJsonString(&d, b.revision);
  d += ",\"branch\":";
  AppendJsonString(&d, b.branch);
  d += ",\"buildUser\":";
  AppendJsonString(&d, b.build_user);
  d += ",\"buildDate\":";
  AppendJsonString(&d, b.build_date);
  d += ",\"goVersion\":";
  AppendJsonString(&d, b.go_version);
  d += '}';
  return Success(d);
}

// Prometheus's /api/v1/status/tsdb: the head's statistics, each list the
// `limit` (default 10) largest.
Response Api::TsdbStatus(const Request& req) {
  size_t limit = 10;
  if (std::string_view l = req.Param("limit"); !l.empty()) {
    size_t n = 0;
    auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), n);
    if (ec != std::errc() || p != l.data() + l.size() || n == 0) return BadData("limit must be a positive number");
    limit = std::min<size_t>(n, 10000);
  }
  tsdb::Stats s = deps_.db->GetStats();
  index::MemPostings::Cardinality c = deps_.db->Cardinality(limit);
  std::string d = "{\"headStats\":{\"numSeries\":" + std::to_string(s.head_series) +
                  ",\"numLabelPairs\":" + std::to_string(c.num_label_pairs) +
                  ",\"chunkCount\":" + std::to_string(s.head_chunks) + ",\"minTime\":" + std::to_string(s.head_min_time) +
                  ",\"maxTime\":" + std::to_string(s.head_max_time) + "}";
  for (auto [key, list] : {std::pair{"seriesCountByMetricName", &c.series_by_metric_name},
                           std::pair{"labelValueCountByLabelName", &c.label_value_count_by_name},
                           std::pair{"memoryInBytesByLabelName", &c.memory_by_label_name},
                           std::pair{"seriesCountByLabelValuePair", &c.series_by_label_pair}}) {
    d += std::string(",\"") + key + "\":[";
    for (size_t i = 0; i < list->size(); i++) {
      if (i > 0) d += ',';
      d += "{\"name\":";
      AppendJsonString(&d, (*list)[i].first);
      d += ",\"value\":" + std::to_string((*list)[i].second) + "}";
    }
    d += ']';
  }
  d += '}';
  return Success(d);
}

Response Api::MetricsHandler(const Request&) {
  Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  registry_->Render(&r.body);
  if (deps_.collected != nullptr) deps_.collected->Render(&r.body);  // node_*, DCGM_* (collect/)
  return r;
}

}  // namespace trainwatch::http
