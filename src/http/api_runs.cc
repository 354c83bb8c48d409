// The experiment-tracking endpoints under /api/v1/runs (docs/runs-api.md),
// over runs::RunStore. Bodies and answers are JSON in Prometheus's envelope.

#include <charconv>
#include <cmath>

#include "http/api.h"
#include "http/params.h"
#include "runs/filter.h"
#include "runs/metric_name.h"
#include "runs/request.h"
#include "runs/store.h"

namespace trainwatch::http {
namespace {

constexpr std::string_view kPrefix = "/api/v1/runs";

Response JsonSuccess(const runs::Json& data) { return Success(runs::DumpJson(data)); }

Response ListRuns(runs::RunStore& store, const Request& req) {
  auto filter = runs::Filter::Parse(req.Param("filter"));
  if (!filter.ok()) return ApiError(filter.error());
  runs::ListOptions o;
  if (req.Has("sort")) o.sort = std::string(req.Param("sort"));
  if (!runs::IsKnownField(o.sort)) return BadData("invalid parameter \"sort\": unknown field \"" + o.sort + "\"");
  std::string_view order = req.Param("order");
  if (order == "asc") o.descending = false;
  else if (!order.empty() && order != "desc") return BadData("invalid parameter \"order\": expected asc or desc");
  auto limit = IntParam(req, "limit", 1000, 1, 100000);
  if (!limit.ok()) return ApiError(limit.error());
  auto offset = IntParam(req, "offset", 0, 0, INT64_MAX);
  if (!offset.ok()) return ApiError(offset.error());
  o.limit = static_cast<size_t>(*limit);
  o.offset = static_cast<size_t>(*offset);
  runs::Json a = runs::Json::array();
  for (const runs::Run& r : store.List(*filter, o)) a.push_back(runs::RunToJson(r));
  return JsonSuccess(a);
}

Response RunMetrics(runs::RunStore& store, const Request& req) {
  runs::MetricsQuery q;
  q.ids = SplitList(req.Param("ids"));
  if (q.ids.empty()) return BadData("invalid parameter \"ids\": expected one or more run ids, comma-separated");
  if (q.ids.size() > 1000) return BadData("invalid parameter \"ids\": at most 1000 runs");
  q.keys = SplitList(req.Param("keys"));
  std::string_view x = req.Param("x");
  if (x == "time") q.by_step = false;
  else if (!x.empty() && x != "step") return BadData("invalid parameter \"x\": expected step or time");
  auto points = IntParam(req, "points", 1000, 1, 100000);
  if (!points.ok()) return ApiError(points.error());
  q.points = *points;
  if (std::string_view sm = req.Param("smoothing"); !sm.empty()) {
    double v = NAN;
    auto [end, ec] = std::from_chars(sm.data(), sm.data() + sm.size(), v);
    if (ec != std::errc() || end != sm.data() + sm.size() || !(v >= 0 && v < 1)) {
      return BadData("invalid parameter \"smoothing\": expected a number in [0, 1), got \"" + std::string(sm) + "\"");
    }
    q.smoothing = v;
  }
  for (auto [name, out] : {std::pair<std::string_view, std::optional<int64_t>*>{"start", &q.start}, {"end", &q.end}}) {
    std::string_view s = req.Param(name);
    if (s.empty()) continue;
    if (q.by_step) {
      auto v = IntParam(req, name, 0, INT64_MIN, INT64_MAX);
      if (!v.ok()) return ApiError(v.error());
      *out = *v;
    } else {
      auto t = ParseTime(s);
      if (!t.ok()) return BadData("invalid parameter \"" + std::string(name) + "\": " + t.error().message());
      *out = *t;
    }
  }
  auto res = store.ReadMetrics(q);
  if (!res.ok()) return ApiError(res.error());
  return JsonSuccess(*res);
}

// Appends v as the shortest decimal that reads back as v; NaN, +Inf, -Inf.
void AppendNumber(double v, std::string* out) {
  if (std::isnan(v)) {
    *out += "NaN";
  } else if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, end);
  }
}

// GET /api/v1/runs/{id}/history: every stored point of the run at full
// resolution, by step (docs/runs-api.md): JSON columns, or CSV rows.
Response RunHistory(runs::RunStore& store, std::string_view id, const Request& req) {
  runs::StepQuery q;
  for (const std::string& k : SplitList(req.Param("keys"))) {
    auto m = runs::KeyToMetricName(k);
    if (!m.ok()) return BadData("invalid parameter \"keys\": \"" + k + "\": " + m.error().message());
    q.metrics.push_back(*m);
  }
  if (req.Has("rank")) {
    auto v = IntParam(req, "rank", 0, 0, INT64_MAX);
    if (!v.ok()) return ApiError(v.error());
    q.rank = *v;
  }
  for (auto [name, out] : {std::pair<std::string_view, std::optional<int64_t>*>{"start", &q.start_step},
                           {"end", &q.end_step}}) {
    if (!req.Has(name)) continue;
    auto v = IntParam(req, name, 0, INT64_MIN, INT64_MAX);
    if (!v.ok()) return ApiError(v.error());
    *out = *v;
  }
  std::string_view format = req.Param("format");
  if (!format.empty() && format != "json" && format != "csv") {
    return BadData("invalid parameter \"format\": expected json or csv, got \"" + std::string(format) + "\"");
  }
  auto res = store.ReadSteps(id, q);
  if (!res.ok()) return ApiError(res.error());
  if (format == "csv") {
    Response r;
    r.content_type = "text/csv; charset=utf-8";
    r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + std::string(id) + ".csv\"");
    std::string& b = r.body;
    b = "rank,key,step,timestamp,value\n";
    char buf[32];
    for (const runs::StepSeries& s : *res) {
      std::string prefix = (s.rank ? std::to_string(*s.rank) : std::string()) + ",";
      std::string key = runs::MetricNameToKey(s.metric);
      // Keys are free text: quoted as RFC 4180 has it when they need it.
      if (key.find_first_of(",\"\r\n") != std::string::npos) {
        std::string q2 = "\"";
        for (char c : key) q2 += c == '"' ? std::string("\"\"") : std::string(1, c);
        key = q2 + "\"";
      }
      prefix += key + ",";
      for (const runs::StepPoint& p : s.points) {
        b += prefix;
        b += std::to_string(p.step);
        b += ',';
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<double>(p.ts_ms) / 1000.0,
                                       std::chars_format::fixed, 3);
        b.append(buf, end);
        b += ',';
        AppendNumber(p.value, &b);
        b += '\n';
      }
    }
    return r;
  }
  runs::Json a = runs::Json::array();
  for (const runs::StepSeries& s : *res) {
    runs::Json steps = runs::Json::array(), ts = runs::Json::array(), values = runs::Json::array();
    for (const runs::StepPoint& p : s.points) {
      steps.push_back(p.step);
      ts.push_back(p.ts_ms);
      values.push_back(runs::NumberJson(p.value));
    }
    a.push_back({{"key", runs::MetricNameToKey(s.metric)}, {"metric", runs::TimeViewNameOf(s.metric).name}, {"labels", runs::StepLabelsJson(s)},
                 {"steps", std::move(steps)}, {"timestamps", std::move(ts)}, {"values", std::move(values)}});
  }
  return JsonSuccess(a);
}

Response GetRun(runs::RunStore& store, std::string_view id) {
  auto r = store.Get(id);
  if (!r.ok()) return ApiError(r.error());
  auto alerts = store.Alerts(id);
  if (!alerts.ok()) return ApiError(alerts.error());
  auto actions = store.Actions(id);
  if (!actions.ok()) return ApiError(actions.error());
  return JsonSuccess(runs::RunToJson(*r, &*alerts, &*actions));
}

// The actions rank `rank` of run `id` has yet to acknowledge, for the answer
// to its batch or heartbeat (docs/runs-api.md, "Actions").
runs::Json PendingActionsJson(runs::RunStore& store, std::string_view id, int64_t rank) {
  runs::Json a = runs::Json::array();
  for (const runs::RunAction& x : store.PendingActions(id, rank)) a.push_back(runs::RunActionJson(x));
  return a;
}

Response RunAction(runs::RunStore& store, std::string_view id, std::string_view action, const Request& req) {
  if (action == "batches") {
    auto b = runs::ParseBatchRequest(req.body);
    if (!b.ok()) return ApiError(b.error());
    auto res = store.WriteBatch(id, *b);
    if (!res.ok()) return ApiError(res.error());
    runs::Json data = {{"accepted", res->accepted}, {"duplicate", res->duplicate},
                       {"rejected", runs::RejectionsJson(res->rejected)}};
    if (runs::Json a = PendingActionsJson(store, id, b->rank.value_or(0)); !a.empty()) data["actions"] = std::move(a);
    return JsonSuccess(data);
  }
  if (action == "heartbeat") {
    auto hb = runs::ParseHeartbeatRequest(req.body);
    if (!hb.ok()) return ApiError(hb.error());
    Status s = store.Heartbeat(id);
    if (!s.ok()) return ApiError(s);
    runs::Json a = PendingActionsJson(store, id, hb->rank);
    if (a.empty()) return NoContent();
    return JsonSuccess({{"actions", std::move(a)}});
  }
  if (action.starts_with("actions/")) {
    auto n = runs::ParseActionId(action.substr(8));
    if (!n.ok()) return ApiError(n.error());
    auto ack = runs::ParseActionAck(req.body);
    if (!ack.ok()) return ApiError(ack.error());
    Status s = store.AckAction(id, *n, ack->rank, ack->status, ack->result);
    return s.ok() ? NoContent() : ApiError(s);
  }
  if (action == "finish") {
    auto f = runs::ParseFinishRequest(req.body);
    if (!f.ok()) return ApiError(f.error());
    auto r = store.Finish(id, *f);
    if (!r.ok()) return ApiError(r.error());
    return JsonSuccess(runs::RunToJson(*r));
  }
  // alerts
  auto a = runs::ParseAlertRequest(req.body);
  if (!a.ok()) return ApiError(a.error());
  Status s = store.AddAlert(id, std::move(*a));
  return s.ok() ? NoContent() : ApiError(s);
}

}  // namespace

Response Api::Runs(const Request& req, std::string_view* handler) {
  std::string_view p = req.path;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool post = req.method == "POST";
  auto method_not_allowed = [] { return Text(405, "method not allowed\n"); };
  runs::RunStore* store = deps_.runs;
  auto unavailable = [] { return ApiError(Status::Unavailable("experiment tracking is not enabled")); };
  if (p == kPrefix) {
    *handler = kPrefix;
    if (!get && !post) return method_not_allowed();
    if (store == nullptr) return unavailable();
    if (get) return ListRuns(*store, req);
    auto c = runs::ParseCreateRequest(req.body);
    if (!c.ok()) return ApiError(c.error());
    auto r = store->CreateOrResume(*c);
    if (!r.ok()) return ApiError(r.error());
    return JsonSuccess(runs::RunToJson(*r));
  }
  std::string_view rest = p.substr(kPrefix.size() + 1);  // after "/api/v1/runs/"
  if (rest == "metrics") {
    *handler = "/api/v1/runs/metrics";
    if (!get && !post) return method_not_allowed();
    if (store == nullptr) return unavailable();
    return RunMetrics(*store, req);
  }
  if (rest == "media" || rest == "histograms" || rest == "media/keys") {
    return *RunsMediaRoute(store, req, "", rest, handler);
  }
  size_t slash = rest.find('/');
  std::string_view id = rest.substr(0, slash);
  if (slash == std::string_view::npos) {
    *handler = "/api/v1/runs/:id";
    if (!get) return method_not_allowed();
    if (store == nullptr) return unavailable();
    return GetRun(*store, id);
  }
  std::string_view action = rest.substr(slash + 1);
  if (auto media = RunsMediaRoute(store, req, id, action, handler)) return std::move(*media);
  if (action == "history") {
    *handler = "/api/v1/runs/:id/history";
    if (!get) return method_not_allowed();
    if (store == nullptr) return unavailable();
    return RunHistory(*store, id, req);
  }
  static constexpr std::string_view kActions[] = {"batches", "heartbeat", "finish", "alerts"};
  static constexpr std::string_view kHandlers[] = {"/api/v1/runs/:id/batches", "/api/v1/runs/:id/heartbeat",
                                                   "/api/v1/runs/:id/finish", "/api/v1/runs/:id/alerts"};
  for (size_t i = 0; i < std::size(kActions); i++) {
    if (action != kActions[i]) continue;
    *handler = kHandlers[i];
    if (!post) return method_not_allowed();
    if (store == nullptr) return unavailable();
    return RunAction(*store, id, action, req);
  }
  if (action.starts_with("actions/") && action.find('/', 8) == std::string_view::npos) {
    *handler = "/api/v1/runs/:id/actions/:n";
    if (!post) return method_not_allowed();
    if (store == nullptr) return unavailable();
    return RunAction(*store, id, action, req);
  }
  return Text(404, "404 page not found\n");
}

}  // namespace trainwatch::http
