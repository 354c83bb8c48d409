// The log endpoints (docs/logs.md) over logs::LogStore: native NDJSON push,
// Elasticsearch _bulk and Loki push for shippers, query with cursor paging,
// histogram, live tail over Server-Sent Events, stream label names/values.

#include <charconv>
#include <cmath>
#include <memory>

#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "http/format.h"
#include "http/params.h"
#include "logs/query.h"
#include "logs/shippers.h"
#include "logs/store.h"

namespace trainwatch::http {
namespace {

constexpr int64_t kNsPerMs = 1000000;
constexpr size_t kMaxLimit = 5000;

Response Unavailable() { return ApiError(Status::Unavailable("the log store is not enabled")); }

int64_t ReceiveNs(const Request& req) { return (req.receive_time_ms ? req.receive_time_ms : NowMillis()) * kNsPerMs; }

// start/end parameters as an inclusive ns range; absent bounds are open unless defaults are given.
Status TimeRange(const Request& req, int64_t def_start_ns, int64_t def_end_ns, int64_t* start_ns, int64_t* end_ns) {
  *start_ns = def_start_ns;
  *end_ns = def_end_ns;
  if (req.Has("start")) {
    auto t = ParseTime(req.Param("start"));
    if (!t.ok()) return t.error().Annotate("invalid parameter \"start\"");
    *start_ns = logs::MsToNsSaturated(*t);
  }
  if (req.Has("end")) {
    auto t = ParseTime(req.Param("end"));
    if (!t.ok()) return t.error().Annotate("invalid parameter \"end\"");
    int64_t ns = logs::MsToNsSaturated(*t);
    *end_ns = ns > INT64_MAX - (kNsPerMs - 1) ? INT64_MAX : ns + (kNsPerMs - 1);
  }
  if (*end_ns < *start_ns) return Status::InvalidArgument("invalid parameter \"end\": before start");
  return Status::OK();
}

Result<logs::Query> QueryParam(const Request& req) {
  auto q = logs::Query::Parse(req.Param("query"));
  if (!q.ok()) return q.error().Annotate("invalid parameter \"query\"");
  return q;
}

// A push refused for a line's time: counted, then answered like any bad body.
void CountRefusal(logs::LogStore& store, const logs::TimeBounds& bounds) {
  if (bounds.rejected != logs::TimeReject::kNone) store.CountRejected(bounds.rejected);
}

Response Push(logs::LogStore& store, const Request& req) {
  std::vector<model::Label> params;
  std::string_view batch_id;
  for (const auto& [name, value] : req.params) {
    // batch_id: an idempotency key (a retry of a stored batch stores nothing), not a label.
    if (name == "batch_id") {
      if (value.empty() || value.size() > 200) return Text(400, "invalid parameter \"batch_id\": want 1..200 bytes");
      batch_id = value;
      continue;
    }
    if (!model::IsValidLabelName(name)) return Text(400, "invalid stream label name \"" + name + "\" in the query string");
    // Stream labels reach JSON answers and alert notifications, which need UTF-8.
    if (!logs::IsValidUtf8(value)) return Text(400, "invalid parameter \"" + name + "\": value is not valid UTF-8");
    params.push_back({name, value});
  }
  auto stream = logs::MergeLabels(model::Labels(), params);  // later repeats win, n log n
  if (!stream.ok()) return Text(400, "invalid query string: " + stream.error().message());
  std::vector<logs::Record> recs;
  logs::TimeBounds bounds = store.IngestBounds();
  Status s = logs::ParseNative(req.body, *stream, ReceiveNs(req), &recs, &bounds);
  CountRefusal(store, bounds);
  if (!s.ok()) return IngestError("/api/v1/logs", s);
  s = store.Append(std::move(recs), batch_id);
  if (!s.ok()) return IngestError("/api/v1/logs", s);
  return NoContent();
}

Response ElasticError(int status, std::string_view type, std::string_view reason) {
  Response r;
  r.status = status;
  r.body = logs::ElasticErrorJson(type, reason, status);
  return r;
}

Response Bulk(logs::LogStore& store, const Request& req, std::string_view index) {
  int64_t t0 = MonoNanos();
  logs::BulkRequest bulk;
  logs::TimeBounds bounds = store.IngestBounds();
  Status s = logs::ParseBulk(req.body, index, ReceiveNs(req), &bulk, &bounds);
  CountRefusal(store, bounds);
  if (!s.ok()) return ElasticError(400, "illegal_argument_exception", s.message());
  s = store.Append(std::move(bulk.records));
  if (!s.ok()) {
    // Nothing of the request is acknowledged; shippers retry on 5xx.
    TW_LOG(Error, "/_bulk: {}", s.ToString());
    return ElasticError(s.IsInvalidArgument() ? 400 : 503, "es_rejected_execution_exception", s.message());
  }
  Response r;
  r.body = logs::BulkResponseJson(bulk, (MonoNanos() - t0) / 1000000);
  return r;
}

Response LokiPush(logs::LogStore& store, const Request& req, size_t max_decoded_bytes) {
  std::vector<logs::Record> recs;
  logs::TimeBounds bounds = store.IngestBounds();
  Status s = req.content_type.starts_with("application/json")
                 ? logs::ParseLokiJson(req.body, ReceiveNs(req), &recs, &bounds)
                 : logs::ParseLokiProto(req.body, ReceiveNs(req), max_decoded_bytes, &recs, &bounds);
  CountRefusal(store, bounds);
  if (!s.ok()) return IngestError("/loki/api/v1/push", s);
  s = store.Append(std::move(recs));
  if (!s.ok()) return IngestError("/loki/api/v1/push", s);
  return NoContent();
}

Response QueryLines(logs::LogStore& store, const Request& req) {
  auto q = QueryParam(req);
  if (!q.ok()) return ApiError(q.error());
  logs::SelectOptions o;
  if (Status s = TimeRange(req, INT64_MIN, INT64_MAX, &o.start_ns, &o.end_ns); !s.ok()) return ApiError(s);
  std::string_view lim = req.Param("limit");
  if (!lim.empty()) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(lim.data(), lim.data() + lim.size(), n);
    if (ec != std::errc() || end != lim.data() + lim.size() || n == 0 || n > kMaxLimit) {
      return BadData("invalid parameter \"limit\": expected an integer in [1, " + std::to_string(kMaxLimit) + "]");
    }
    o.limit = n;
  }
  o.cursor = std::string(req.Param("cursor"));
  auto r = store.Select(*q, o);
  if (!r.ok()) return ApiError(r.error());
  std::string d = "{\"lines\":[";
  for (size_t i = 0; i < r->lines.size(); ++i) {
    if (i) d += ',';
    logs::AppendRecordJson(&d, r->lines[i]);
  }
  d += "],\"next_cursor\":";
  AppendJsonString(&d, r->next_cursor);
  d += '}';
  return Success(d);
}

Response Histogram(logs::LogStore& store, const Request& req) {
  auto q = QueryParam(req);
  if (!q.ok()) return ApiError(q.error());
  int64_t now = NowMillis() * kNsPerMs, start, end;
  if (Status s = TimeRange(req, now - 3600 * 1000 * kNsPerMs, now, &start, &end); !s.ok()) return ApiError(s);
  // Unsigned: end - start overflows int64 for a range wider than half of it.
  uint64_t span = static_cast<uint64_t>(end) - static_cast<uint64_t>(start);
  int64_t step = static_cast<int64_t>(std::max<uint64_t>(span / 100, kNsPerMs));
  if (req.Has("step")) {
    auto d = ParseDuration(req.Param("step"));
    if (!d.ok() || *d <= 0) return BadData("invalid parameter \"step\": expected a positive duration");
    step = logs::MsToNsSaturated(*d);
  }
  auto h = store.Histogram(*q, start, end, step);
  if (!h.ok()) return ApiError(h.error());
  std::string d = "[";
  char buf[64];
  for (size_t i = 0; i < h->size(); ++i) {
    if (i) d += ',';
    auto [t, n] = (*h)[i];
    double secs = static_cast<double>(t) / 1e9;
    int len = std::snprintf(buf, sizeof buf, "[%.17g,%llu]", std::round(secs * 1000) / 1000,
                            static_cast<unsigned long long>(n));
    d.append(buf, static_cast<size_t>(len));
  }
  d += ']';
  return Success(d);
}

Response Tail(logs::LogStore& store, const Request& req) {
  auto q = QueryParam(req);
  if (!q.ok()) return ApiError(q.error());
  struct State {
    logs::Query query;
    uint64_t seq = 0;
    bool started = false;
  };
  auto st = std::make_shared<State>();
  st->query = std::move(*q);
  st->seq = store.LastSeq();
  Response r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-cache");
  logs::LogStore* sp = &store;
  r.stream = [st, sp](std::string* chunk) {
    if (!st->started) {
      // Sent at once so a client knows it is subscribed before lines arrive.
      st->started = true;
      *chunk = ": tailing\n\n";
      return Response::Chunk::kMore;
    }
    if (sp->IsShutdown()) return Response::Chunk::kDone;
    for (const logs::Record& rec : sp->WaitNew(&st->seq, 1000)) {
      if (!st->query.Matches(rec)) continue;
      *chunk += "data: ";
      logs::AppendRecordJson(chunk, rec);
      *chunk += "\n\n";
    }
    // A comment when idle: writing is how a closed client is noticed.
    if (chunk->empty()) *chunk = ": keepalive\n\n";
    return Response::Chunk::kMore;
  };
  return r;
}

Response StringList(const Result<std::vector<std::string>>& v) {
  if (!v.ok()) return ApiError(v.error());
  std::string d = "[";
  for (size_t i = 0; i < v->size(); ++i) {
    if (i) d += ',';
    AppendJsonString(&d, (*v)[i]);
  }
  return Success(d + "]");
}

}  // namespace

Response Api::Logs(const Request& req, std::string_view* handler) {
  const std::string& p = req.path;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool post = req.method == "POST" || req.method == "PUT";
  logs::LogStore* store = deps_.logs;
  auto method_not_allowed = [] { return Text(405, "method not allowed\n"); };
  if (p == "/") {
    // Elasticsearch's banner, for shippers that check the version first.
    *handler = "/ (elasticsearch)";
    std::string d = "{\"name\":\"trainwatch\",\"cluster_name\":\"trainwatch\",\"cluster_uuid\":\"trainwatch\","
                    "\"version\":{\"number\":\"8.11.0\",\"build_flavor\":\"default\",\"build_type\":\"deb\","
                    "\"lucene_version\":\"9.8.0\",\"minimum_wire_compatibility_version\":\"7.17.0\","
                    "\"minimum_index_compatibility_version\":\"7.0.0\"},\"tagline\":\"You Know, for Search\"}";
    Response r;
    r.body = std::move(d);
    r.headers.emplace_back("X-Elastic-Product", "Elasticsearch");
    return r;
  }
  if (p == "/_bulk" || (p.ends_with("/_bulk") && p.find('/', 1) == p.size() - 6)) {
    *handler = "/_bulk";
    if (!post) return method_not_allowed();
    // Without a log store a push can never succeed: 404, which shippers do
    // not retry (503 is for "over the memory bound, retry": http/ingest_gate.h).
    if (store == nullptr) return ElasticError(404, "not_found", "the log store is not enabled");
    std::string_view index = p == "/_bulk" ? std::string_view() : std::string_view(p).substr(1, p.size() - 7);
    Response r = Bulk(*store, req, index);
    r.headers.emplace_back("X-Elastic-Product", "Elasticsearch");
    return r;
  }
  if (p == "/loki/api/v1/push") {
    *handler = "/loki/api/v1/push";
    if (!post) return method_not_allowed();
    if (store == nullptr) return Text(404, "the log store is not enabled");
    return LokiPush(*store, req, deps_.request_limits.max_decoded_bytes);
  }
  if (p == "/api/v1/logs") {
    *handler = "/api/v1/logs";
    if (!post) return method_not_allowed();
    if (store == nullptr) return Text(404, "the log store is not enabled");
    return Push(*store, req);
  }
  constexpr std::string_view kLabel = "/api/v1/logs/label/", kValues = "/values";
  struct Route {
    std::string_view path;
    Response (*fn)(logs::LogStore&, const Request&);
  };
  static const Route kRoutes[] = {
      {"/api/v1/logs/query", QueryLines},
      {"/api/v1/logs/histogram", Histogram},
      {"/api/v1/logs/tail", Tail},
      {"/api/v1/logs/labels",
       [](logs::LogStore& s, const Request& r) {
         int64_t a, b;
         if (Status st = TimeRange(r, INT64_MIN, INT64_MAX, &a, &b); !st.ok()) return ApiError(st);
         return StringList(s.LabelNames(a, b));
       }},
  };
  for (const Route& rt : kRoutes) {
    if (p != rt.path) continue;
    *handler = rt.path;
    if (!get && req.method != "POST") return method_not_allowed();
    if (store == nullptr) return Unavailable();
    return rt.fn(*store, req);
  }
  if (p.size() > kLabel.size() + kValues.size() && p.starts_with(kLabel) && p.ends_with(kValues)) {
    *handler = "/api/v1/logs/label/:name/values";
    if (!get) return method_not_allowed();
    if (store == nullptr) return Unavailable();
    int64_t a, b;
    if (Status st = TimeRange(req, INT64_MIN, INT64_MAX, &a, &b); !st.ok()) return ApiError(st);
    std::string_view name = std::string_view(p).substr(kLabel.size(), p.size() - kLabel.size() - kValues.size());
    return StringList(store->LabelValues(name, a, b));
  }
  *handler = "other";
  return Text(404, "404 page not found\n");
}

}  // namespace trainwatch::http
