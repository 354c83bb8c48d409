// /api/v1/rules and /api/v1/alerts in Prometheus's JSON shape (2.42, plus the
// rule_name[], rule_group[] and file[] filters of later versions).

#include <charconv>
#include <cmath>
#include <ctime>
#include <set>

#include "http/api.h"
#include "http/format.h"
#include "rules/manager.h"

namespace trainwatch::http {
namespace {

// Go's time.Time JSON form (RFC 3339 with trailing zeros of the fraction cut).
void AppendTime(std::string* out, int64_t ms) {
  if (ms == 0) {
    out->append("\"0001-01-01T00:00:00Z\"");
    return;
  }
  time_t secs = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  int frac = static_cast<int>(ms - static_cast<int64_t>(secs) * 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  out->push_back('"');
  out->append(buf);
  if (frac != 0) {
    char f[8];
    snprintf(f, sizeof f, ".%03d", frac);
    std::string fs = f;
    while (fs.back() == '0') fs.pop_back();
    out->append(fs);
  }
  out->append("Z\"");
}

// Go's encoding/json float64.
void AppendJsonNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("0");
    return;
  }
  char buf[64];
  double a = std::fabs(v);
  if (a != 0 && (a < 1e-6 || a >= 1e21)) {
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    // e-07 -> e-7 as Go.
    size_t e = s.find('e');
    if (e != std::string::npos && s.size() - e == 4 && s[e + 2] == '0') s.erase(e + 2, 1);
    out->append(s);
    return;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out->append(buf, r.ptr);
}

// strconv.FormatFloat(v, 'e', -1, 64), as the alert's "value".
std::string GoExp(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return std::string(buf, r.ptr);
}

void AppendStrMap(std::string* out, const std::map<std::string, std::string>& m) {
  out->push_back('{');
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, k);
    out->push_back(':');
    AppendJsonString(out, v);
  }
  out->push_back('}');
}

void AppendAlert(std::string* out, const rules::Alert& a) {
  out->append("{\"labels\":");
  AppendLabelsJson(out, a.labels);
  out->append(",\"annotations\":");
  AppendLabelsJson(out, a.annotations);
  out->append(",\"state\":");
  AppendJsonString(out, rules::AlertStateName(a.state));
  out->append(",\"activeAt\":");
  AppendTime(out, a.active_at);
  if (a.keep_firing_since != 0) {
    out->append(",\"keepFiringSince\":");
    AppendTime(out, a.keep_firing_since);
  }
  out->append(",\"value\":");
  AppendJsonString(out, GoExp(a.value));
  out->push_back('}');
}

void AppendAlerts(std::string* out, const std::vector<rules::Alert>& alerts) {
  out->push_back('[');
  for (size_t i = 0; i < alerts.size(); ++i) {
    if (i) out->push_back(',');
    AppendAlert(out, alerts[i]);
  }
  out->push_back(']');
}

void AppendRule(std::string* out, const rules::EvalRule& r) {
  rules::RuleStatus st = r.status();
  const rules::RuleSpec& spec = r.spec();
  out->push_back('{');
  if (r.is_alert()) {
    const auto& ar = static_cast<const rules::AlertingRule&>(r);
    std::vector<rules::Alert> alerts = ar.ActiveAlerts();
    rules::AlertState state = rules::AlertState::kInactive;
    for (const rules::Alert& a : alerts) state = std::max(state, a.state);
    out->append("\"state\":");
    AppendJsonString(out, rules::AlertStateName(state));
    out->append(",\"name\":");
    AppendJsonString(out, spec.alert);
    out->append(",\"query\":");
    AppendJsonString(out, r.query_string());
    out->append(",\"duration\":");
    AppendJsonNumber(out, static_cast<double>(spec.for_ms) / 1000);
    out->append(",\"keepFiringFor\":");
    AppendJsonNumber(out, static_cast<double>(spec.keep_firing_for_ms) / 1000);
    out->append(",\"labels\":");
    AppendStrMap(out, spec.labels);
    out->append(",\"annotations\":");
    AppendStrMap(out, spec.annotations);
    out->append(",\"alerts\":");
    AppendAlerts(out, alerts);
    out->append(",");
  } else {
    out->append("\"name\":");
    AppendJsonString(out, spec.record);
    out->append(",\"query\":");
    AppendJsonString(out, r.query_string());
    if (!spec.labels.empty()) {
      out->append(",\"labels\":");
      AppendStrMap(out, spec.labels);
    }
    out->append(",");
  }
  out->append("\"health\":");
  AppendJsonString(out, rules::RuleHealthName(st.health));
  if (!st.last_error.empty()) {
    out->append(",\"lastError\":");
    AppendJsonString(out, st.last_error);
  }
  out->append(",\"evaluationTime\":");
  AppendJsonNumber(out, st.evaluation_seconds);
  out->append(",\"lastEvaluation\":");
  AppendTime(out, st.last_evaluation_ms);
  out->append(",\"type\":");
  out->append(r.is_alert() ? "\"alerting\"" : "\"recording\"");
  out->push_back('}');
}

std::set<std::string> ParamSet(const Request& req, std::string_view a, std::string_view b = {}) {
  std::set<std::string> out;
  for (std::string_view v : req.Params(a)) out.emplace(v);
  if (!b.empty()) {
    for (std::string_view v : req.Params(b)) out.emplace(v);
  }
  return out;
}

Response RulesList(rules::Manager& m, const Request& req) {
  std::string_view type = req.Param("type");
  if (!type.empty() && type != "alert" && type != "record") {
    return BadData("not supported value \"" + std::string(type) + "\"");
  }
  const std::set<std::string> names = ParamSet(req, "rule_name[]");
  const std::set<std::string> groups = ParamSet(req, "rule_group[]", "group_name[]");
  const std::set<std::string> files = ParamSet(req, "file[]");
  const bool filtered = !type.empty() || !names.empty() || !groups.empty() || !files.empty();
  std::string d = "{\"groups\":[";
  bool first_group = true;
  for (const auto& g : m.Groups()) {
    if (!groups.empty() && !groups.contains(g->name())) continue;
    if (!files.empty() && !files.contains(g->file())) continue;
    std::string rs;
    for (const auto& r : g->rules()) {
      if (type == "alert" && !r->is_alert()) continue;
      if (type == "record" && r->is_alert()) continue;
      if (!names.empty() && !names.contains(r->name())) continue;
      if (!rs.empty()) rs.push_back(',');
      AppendRule(&rs, *r);
    }
    if (filtered && rs.empty()) continue;
    if (!first_group) d.push_back(',');
    first_group = false;
    d += "{\"name\":";
    AppendJsonString(&d, g->name());
    d += ",\"file\":";
    AppendJsonString(&d, g->file());
    d += ",\"rules\":[" + rs + "],\"interval\":";
    AppendJsonNumber(&d, static_cast<double>(g->interval_ms()) / 1000);
    d += ",\"limit\":" + std::to_string(g->limit()) + ",\"evaluationTime\":";
    AppendJsonNumber(&d, g->evaluation_seconds());
    d += ",\"lastEvaluation\":";
    AppendTime(&d, g->last_evaluation_ms());
    d += '}';
  }
  d += "]}";
  return Success(d);
}

Response AlertsList(rules::Manager& m) {
  std::vector<rules::Alert> all;
  for (const auto& g : m.Groups()) {
    for (const auto& r : g->rules()) {
      if (!r->is_alert()) continue;
      auto a = static_cast<const rules::AlertingRule&>(*r).ActiveAlerts();
      all.insert(all.end(), a.begin(), a.end());
    }
  }
  std::string d = "{\"alerts\":";
  AppendAlerts(&d, all);
  d += '}';
  return Success(d);
}

}  // namespace

Response Api::RulesApi(const Request& req, std::string_view* handler) {
  const bool rules_path = req.path == "/api/v1/rules";
  *handler = rules_path ? "/api/v1/rules" : "/api/v1/alerts";
  if (req.method != "GET" && req.method != "HEAD" && req.method != "POST") return Text(405, "method not allowed\n");
  if (deps_.rules == nullptr) return ApiError(Status::Unavailable("rule evaluation is not running"));
  return rules_path ? RulesList(*deps_.rules, req) : AlertsList(*deps_.rules);
}

}  // namespace trainwatch::http
