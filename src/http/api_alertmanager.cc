// The embedded notifier's HTTP API: Alertmanager API v2 subset in its JSON
// shapes (alerts, alert groups, silences, receivers, status), so amtool and
// Grafana's Alertmanager data source work, plus /api/v1/notifications (the
// delivery history). Without an alertmanager config (no notifier) every
// endpoint answers 503.

#include <algorithm>

#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "base/clock.h"
#include "base/json.h"
#include "http/api.h"
#include "notify/notifier.h"

namespace trainwatch::http {
namespace {

using Json = nlohmann::json;

// Labels, annotations, comments and matchers come from users and may hold
// invalid UTF-8: answered as U+FFFD instead of dump() throwing.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Response JsonResponse(int status, const Json& j) {
  Response r;
  r.status = status;
  r.body = Dump(j);
  return r;
}

// Parses a request body; the depth is checked first, so a deeply nested body
// is a 400, never a stack overflow in a later copy or dump.
Result<Json> ParseBody(const Request& req) {
  RETURN_IF_ERROR(CheckJsonDepth(req.body));
  try {
    return Json::parse(req.body);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(e.what());
  }
}

// Alertmanager answers errors as a JSON string.
Response AmError(int status, const std::string& msg) { return JsonResponse(status, Json(msg)); }

Json LabelsJson(const model::Labels& ls) {
  Json o = Json::object();
  for (const auto& l : ls) o[l.name] = l.value;
  return o;
}

Json MatcherJson(const model::Matcher& m) {
  bool re = m.type() == model::MatchType::kRegex || m.type() == model::MatchType::kNotRegex;
  bool eq = m.type() == model::MatchType::kEqual || m.type() == model::MatchType::kRegex;
  return Json{{"name", m.name()}, {"value", m.value()}, {"isRegex", re}, {"isEqual", eq}};
}

Json AlertJson(const notify::AlertView& v) {
  const notify::StoredAlert& a = v.alert;
  Json rec = Json::array();
  for (const auto& r : v.receivers) rec.push_back(Json{{"name", r}});
  return Json{{"annotations", LabelsJson(a.alert.annotations)},
              {"endsAt", notify::FormatTime(a.alert.ends_at_ms)},
              {"fingerprint", notify::FingerprintString(a.fingerprint)},
              {"receivers", rec},
              {"startsAt", notify::FormatTime(a.alert.starts_at_ms)},
              {"status", Json{{"inhibitedBy", v.inhibited_by}, {"silencedBy", v.silenced_by}, {"state", v.state}}},
              {"updatedAt", notify::FormatTime(a.updated_at_ms)},
              {"generatorURL", a.alert.generator_url},
              {"labels", LabelsJson(a.alert.labels)}};
}

Json SilenceJson(const notify::Silence& s, int64_t now) {
  Json m = Json::array();
  for (const auto& x : s.matchers) m.push_back(MatcherJson(x));
  return Json{{"id", s.id},
              {"status", Json{{"state", s.State(now)}}},
              {"updatedAt", notify::FormatTime(s.updated_at_ms)},
              {"comment", s.comment},
              {"createdBy", s.created_by},
              {"endsAt", notify::FormatTime(s.ends_at_ms)},
              {"matchers", m},
              {"startsAt", notify::FormatTime(s.starts_at_ms)}};
}

Result<bool> BoolParam(const Request& req, std::string_view name, bool def) {
  if (!req.Has(name)) return def;
  std::string_view v = req.Param(name);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return Status::InvalidArgument(std::string(name) + " in query should be of type boolean, got \"" + std::string(v) + "\"");
}

Result<std::vector<model::Matcher>> Filters(const Request& req) {
  std::vector<model::Matcher> out;
  for (std::string_view f : req.Params("filter")) {
    auto ms = notify::ParseMatchers(f);
    if (!ms.ok()) return ms.error();
    for (auto& m : *ms) out.push_back(std::move(m));
  }
  return out;
}

Result<model::Labels> LabelsFromJson(const Json& j, const std::string& what) {
  if (j.is_null()) return model::Labels();
  if (!j.is_object()) return Status::InvalidArgument(what + ": expected an object");
  std::vector<model::Label> ls;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::InvalidArgument(what + "." + it.key() + ": expected a string");
    ls.push_back({it.key(), it.value().get<std::string>()});
  }
  return model::Labels(std::move(ls));
}

Result<int64_t> TimeField(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return int64_t{0};
  if (!it->is_string()) return Status::InvalidArgument(std::string(key) + " in body must be of type date-time");
  auto t = notify::ParseTime(it->get<std::string>());
  if (!t.ok()) return Status::InvalidArgument(std::string(key) + " in body must be of type date-time: " + t.error().message());
  // Go's zero time means unset.
  if (*t <= -62135596800000LL) return int64_t{0};
  return *t;
}

Response PostAlerts(notify::Notifier& n, const Request& req) {
  auto parsed = ParseBody(req);
  if (!parsed.ok()) return AmError(400, "parsing alerts body: " + parsed.error().message());
  const Json& body = *parsed;
  if (!body.is_array()) return AmError(400, "parsing alerts body: expected a JSON array of alerts");
  std::vector<notify::Alert> alerts;
  for (size_t i = 0; i < body.size(); i++) {
    const Json& a = body[i];
    std::string where = "alert " + std::to_string(i);
    if (!a.is_object()) return AmError(400, where + ": expected an object");
    notify::Alert al;
    auto labels = LabelsFromJson(a.value("labels", Json()), where + ": labels");
    if (!labels.ok()) return AmError(400, labels.error().message());
    auto ann = LabelsFromJson(a.value("annotations", Json()), where + ": annotations");
    if (!ann.ok()) return AmError(400, ann.error().message());
    al.labels = std::move(*labels);
    al.annotations = std::move(*ann);
    auto s = TimeField(a, "startsAt");
    if (!s.ok()) return AmError(400, where + ": " + s.error().message());
    auto e = TimeField(a, "endsAt");
    if (!e.ok()) return AmError(400, where + ": " + e.error().message());
    al.starts_at_ms = *s;
    al.ends_at_ms = *e;
    if (auto g = a.find("generatorURL"); g != a.end() && g->is_string()) al.generator_url = g->get<std::string>();
    alerts.push_back(std::move(al));
  }
  Status st = n.PutAlerts(std::move(alerts));
  if (!st.ok()) return AmError(400, st.message());
  Response r;
  r.body = "";
  return r;
}

// The alert filters of GET /api/v2/alerts and /alerts/groups.
struct AlertFilter {
  bool active = true, silenced = true, inhibited = true, unprocessed = true;
  std::vector<model::Matcher> matchers;
  std::unique_ptr<RE2> receiver;

  static Result<AlertFilter> From(const Request& req) {
    AlertFilter f;
    ASSIGN_OR_RETURN(f.active, BoolParam(req, "active", true));
    ASSIGN_OR_RETURN(f.silenced, BoolParam(req, "silenced", true));
    ASSIGN_OR_RETURN(f.inhibited, BoolParam(req, "inhibited", true));
    ASSIGN_OR_RETURN(f.unprocessed, BoolParam(req, "unprocessed", true));
    ASSIGN_OR_RETURN(f.matchers, Filters(req));
    if (req.Has("receiver")) {
      f.receiver = std::make_unique<RE2>("^(?:" + std::string(req.Param("receiver")) + ")$");
      if (!f.receiver->ok()) return Status::InvalidArgument("failed to parse receiver param: " + f.receiver->error());
    }
    return f;
  }
  bool Keep(const notify::AlertView& v) const {
    if (!notify::MatchAll(matchers, v.alert.alert.labels)) return false;
    if (receiver) {
      bool any = false;
      for (const auto& r : v.receivers) any = any || RE2::FullMatch(r, *receiver);
      if (!any) return false;
    }
    if (v.state == "active" && !active) return false;
    if (v.state == "unprocessed" && !unprocessed) return false;
    if (!silenced && !v.silenced_by.empty()) return false;
    if (!inhibited && !v.inhibited_by.empty()) return false;
    return true;
  }
};

Response GetAlerts(notify::Notifier& n, const Request& req) {
  auto f = AlertFilter::From(req);
  if (!f.ok()) return AmError(400, f.error().message());
  Json out = Json::array();
  auto alerts = n.ListAlerts();
  std::sort(alerts.begin(), alerts.end(), [](const notify::AlertView& a, const notify::AlertView& b) {
    return a.alert.alert.labels < b.alert.alert.labels;
  });
  for (const auto& v : alerts) {
    if (f->Keep(v)) out.push_back(AlertJson(v));
  }
  return JsonResponse(200, out);
}

Response GetGroups(notify::Notifier& n, const Request& req) {
  auto f = AlertFilter::From(req);
  if (!f.ok()) return AmError(400, f.error().message());
  Json out = Json::array();
  for (const auto& g : n.ListGroups()) {
    if (f->receiver && !RE2::FullMatch(g.receiver, *f->receiver)) continue;
    Json alerts = Json::array();
    for (const auto& v : g.alerts) {
      if (f->Keep(v)) alerts.push_back(AlertJson(v));
    }
    if (alerts.empty()) continue;
    out.push_back(Json{{"alerts", alerts}, {"labels", LabelsJson(g.labels)}, {"receiver", Json{{"name", g.receiver}}}});
  }
  return JsonResponse(200, out);
}

Response GetSilences(notify::Notifier& n, const Request& req) {
  auto ms = Filters(req);
  if (!ms.ok()) return AmError(400, ms.error().message());
  int64_t now = NowMillis();
  auto sil = n.ListSilences();
  // Alertmanager's order: active (soonest end first), pending (soonest start
  // first), expired (latest end first).
  auto rank = [&](const notify::Silence& s) {
    std::string st = s.State(now);
    return st == "active" ? 0 : st == "pending" ? 1 : 2;
  };
  std::sort(sil.begin(), sil.end(), [&](const notify::Silence& a, const notify::Silence& b) {
    int ra = rank(a), rb = rank(b);
    if (ra != rb) return ra < rb;
    if (ra == 0) return a.ends_at_ms < b.ends_at_ms;
    if (ra == 1) return a.starts_at_ms < b.starts_at_ms;
    return a.ends_at_ms > b.ends_at_ms;
  });
  Json out = Json::array();
  for (const auto& s : sil) {
    // A filter matches a silence that has an equal matcher, as Alertmanager's API does.
    bool keep = true;
    for (const auto& f : *ms) {
      bool found = false;
      for (const auto& m : s.matchers) {
        found = found || (m.name() == f.name() && m.value() == f.value() && m.type() == f.type());
      }
      keep = keep && found;
    }
    if (keep) out.push_back(SilenceJson(s, now));
  }
  return JsonResponse(200, out);
}

Response PostSilence(notify::Notifier& n, const Request& req) {
  auto parsed = ParseBody(req);
  if (!parsed.ok()) return AmError(400, "parsing silence body: " + parsed.error().message());
  const Json& b = *parsed;
  if (!b.is_object()) return AmError(400, "parsing silence body: expected an object");
  notify::Silence s;
  if (auto id = b.find("id"); id != b.end() && id->is_string()) s.id = id->get<std::string>();
  if (auto c = b.find("comment"); c != b.end() && c->is_string()) s.comment = c->get<std::string>();
  if (auto c = b.find("createdBy"); c != b.end() && c->is_string()) s.created_by = c->get<std::string>();
  auto st = TimeField(b, "startsAt");
  if (!st.ok()) return AmError(400, st.error().message());
  auto en = TimeField(b, "endsAt");
  if (!en.ok()) return AmError(400, en.error().message());
  if (*st == 0) return AmError(400, "startsAt in body is required");
  if (*en == 0) return AmError(400, "endsAt in body is required");
  s.starts_at_ms = *st;
  s.ends_at_ms = *en;
  auto m = b.find("matchers");
  if (m == b.end() || !m->is_array()) return AmError(400, "matchers in body is required");
  for (size_t i = 0; i < m->size(); i++) {
    const Json& x = (*m)[i];
    if (!x.is_object() || !x.contains("name") || !x.contains("value") || !x["name"].is_string() ||
        !x["value"].is_string()) {
      return AmError(400, "matchers[" + std::to_string(i) + "]: name and value are required strings");
    }
    bool re = x.value("isRegex", false), eq = x.value("isEqual", true);
    model::MatchType t = re ? (eq ? model::MatchType::kRegex : model::MatchType::kNotRegex)
                            : (eq ? model::MatchType::kEqual : model::MatchType::kNotEqual);
    auto mm = model::Matcher::Make(t, x["name"].get<std::string>(), x["value"].get<std::string>());
    if (!mm.ok()) return AmError(400, "matchers[" + std::to_string(i) + "]: " + mm.error().message());
    s.matchers.push_back(std::move(*mm));
  }
  auto id = n.PutSilence(std::move(s));
  if (!id.ok()) {
    // Not persisted (IOError): a 5xx, so the client retries instead of trusting a silence that isn't there.
    int code = id.error().IsNotFound() ? 404 : id.error().IsInvalidArgument() ? 400 : 500;
    return AmError(code, id.error().message());
  }
  return JsonResponse(200, Json{{"silenceID", *id}});
}

Response Status_(notify::Notifier& n, const BuildInfo& build) {
  auto cfg = n.config();
  Json j{{"cluster", Json{{"name", ""}, {"peers", Json::array()}, {"status", "disabled"}}},
         // Alertmanager shows its config with every secret as "<secret>".
         {"config", Json{{"original", notify::RedactSecrets(cfg->original)}}},
         {"uptime", notify::FormatTime(n.start_time_ms())},
         {"versionInfo", Json{{"branch", build.branch}, {"buildDate", build.build_date}, {"buildUser", build.build_user},
                              {"goVersion", build.go_version}, {"revision", build.revision},
                              {"version", build.version}}}};
  return JsonResponse(200, j);
}

Response Notifications(notify::Notifier& n, const Request& req) {
  size_t limit = 100;
  if (req.Has("limit")) {
    std::string v(req.Param("limit"));
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x < 1 || x > 100000) {
      return BadData("invalid parameter \"limit\": expected an integer in [1, 100000], got \"" + v + "\"");
    }
    limit = static_cast<size_t>(x);
  }
  Json out = Json::array();
  for (const auto& r : n.History(limit)) {
    out.push_back(Json{{"time", notify::FormatTime(r.time_ms)}, {"receiver", r.receiver},
                       {"integration", r.integration}, {"groupKey", r.group_key}, {"status", r.status},
                       {"alerts", r.alerts}, {"attempt", r.attempt}, {"outcome", r.success ? "success" : "failed"},
                       {"error", r.error}});
  }
  return Success(Dump(out));
}

}  // namespace

Response Api::Alertmanager(const Request& req, std::string_view* handler) {
  const std::string& p = req.path;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool post = req.method == "POST";
  auto not_allowed = [] { return Text(405, "method not allowed\n"); };
  notify::Notifier* n = deps_.notifier;
  if (p == "/api/v1/notifications") {
    *handler = "/api/v1/notifications";
    if (!get) return not_allowed();
    if (n == nullptr) return ApiError(Status::Unavailable("notifier disabled: no --alertmanager.config.file given"));
    return Notifications(*n, req);
  }
  Response unavailable = AmError(503, "the embedded Alertmanager is disabled: no --alertmanager.config.file given");
  if (p == "/api/v2/alerts") {
    *handler = "/api/v2/alerts";
    if (!get && !post) return not_allowed();
    if (n == nullptr) return unavailable;
    return post ? PostAlerts(*n, req) : GetAlerts(*n, req);
  }
  if (p == "/api/v2/alerts/groups") {
    *handler = "/api/v2/alerts/groups";
    if (!get) return not_allowed();
    if (n == nullptr) return unavailable;
    return GetGroups(*n, req);
  }
  if (p == "/api/v2/silences") {
    *handler = "/api/v2/silences";
    if (!get && !post) return not_allowed();
    if (n == nullptr) return unavailable;
    return post ? PostSilence(*n, req) : GetSilences(*n, req);
  }
  constexpr std::string_view kSilence = "/api/v2/silence/";
  if (p.starts_with(kSilence) && p.size() > kSilence.size()) {
    *handler = "/api/v2/silence/:id";
    bool del = req.method == "DELETE";
    if (!get && !del) return not_allowed();
    if (n == nullptr) return unavailable;
    std::string id = p.substr(kSilence.size());
    if (del) {
      Status s = n->ExpireSilence(id);
      if (s.IsNotFound()) return AmError(404, s.message());
      if (!s.ok()) return AmError(500, s.message());
      Response r;
      r.body = "";
      return r;
    }
    auto s = n->GetSilence(id);
    if (!s.ok()) return AmError(404, s.error().message());
    return JsonResponse(200, SilenceJson(*s, NowMillis()));
  }
  if (p == "/api/v2/status") {
    *handler = "/api/v2/status";
    if (!get) return not_allowed();
    if (n == nullptr) return unavailable;
    return Status_(*n, deps_.build);
  }
  if (p == "/api/v2/receivers") {
    *handler = "/api/v2/receivers";
    if (!get) return not_allowed();
    if (n == nullptr) return unavailable;
    Json out = Json::array();
    for (const auto& r : n->config()->receivers) out.push_back(Json{{"name", r.name}});
    return JsonResponse(200, out);
  }
  *handler = "/api/v2";
  return AmError(404, "path " + p + " was not found");
}

}  // namespace trainwatch::http
