#include "notify/config.h"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include <yaml-cpp/yaml.h>

#include "base/file.h"
#include "base/units.h"
#include "common/yaml.h"
#include "notify/templates.h"

namespace trainwatch::notify {
namespace {

// One YAML reader for every config file (common/yaml.h): errors are
// "line N: <field>: <message>".
using common::yaml::Bool;
using common::yaml::CheckKeys;
using common::yaml::Dur;
using common::yaml::Err;
using common::yaml::KeySet;
using common::yaml::OptBool;
using common::yaml::OptStr;
using common::yaml::Str;
using common::yaml::StrList;

std::string Lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// A receiver's (or the global) http_config: common/'s parser, with the keys
// Alertmanager 0.25 takes. Present, it replaces the global one whole, as
// Alertmanager's `if c.HTTPConfig == nil { c.HTTPConfig = global.HTTPConfig }`
// (not field by field). proxy_url and enable_http2 are accepted and have no
// effect; oauth2 is refused by name.
Status ParseHttpConfig(const YAML::Node& n, const std::string& where, HttpConfig* h) {
  if (!n || n.IsNull()) return Status::OK();
  KeySet keys(common::HttpClientConfigKeys().begin(), common::HttpClientConfigKeys().end());
  keys.insert({"proxy_url", "follow_redirects", "enable_http2"});
  RETURN_IF_ERROR(CheckKeys(n, where, keys, {"oauth2"}));
  *h = HttpConfig{};
  return common::ParseHttpClientConfig(n, where, h);
}

// Alertmanager's "at most one of a & b must be configured" for a config's own keys.
Status AtMostOne(const YAML::Node& n, const std::string& where, const char* a, const char* b) {
  if (n[a] && n[b]) return Err(n, where, std::string("at most one of ") + a + " & " + b + " must be configured");
  return Status::OK();
}

Status CheckUrl(const YAML::Node& n, const std::string& where, const std::string& url) {
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return Err(n, where, "unsupported scheme in URL \"" + url + "\" (want http or https)");
  }
  return Status::OK();
}

Status ParseMatcherFields(const YAML::Node& n, const std::string& where, const char* match_key,
                          const char* match_re_key, const char* matchers_key, std::vector<model::Matcher>* out) {
  if (auto m = n[match_key]; m && !m.IsNull()) {
    if (!m.IsMap()) return Err(m, where + "." + match_key, "expected a mapping of label to value");
    for (const auto& kv : m) {
      std::string k = kv.first.as<std::string>();
      if (!model::IsValidLabelName(k)) return Err(kv.first, where + "." + match_key, "invalid label name \"" + k + "\"");
      ASSIGN_OR_RETURN(std::string v, Str(kv.second, where + "." + match_key + "." + k));
      ASSIGN_OR_RETURN(auto mm, model::Matcher::Make(model::MatchType::kEqual, k, v));
      out->push_back(std::move(mm));
    }
  }
  if (auto m = n[match_re_key]; m && !m.IsNull()) {
    if (!m.IsMap()) return Err(m, where + "." + match_re_key, "expected a mapping of label to regular expression");
    for (const auto& kv : m) {
      std::string k = kv.first.as<std::string>();
      if (!model::IsValidLabelName(k)) return Err(kv.first, where + "." + match_re_key, "invalid label name \"" + k + "\"");
      ASSIGN_OR_RETURN(std::string v, Str(kv.second, where + "." + match_re_key + "." + k));
      auto mm = model::Matcher::Make(model::MatchType::kRegex, k, v);
      if (!mm.ok()) return Err(kv.second, where + "." + match_re_key + "." + k, mm.error().message());
      out->push_back(std::move(*mm));
    }
  }
  if (auto m = n[matchers_key]; m && !m.IsNull()) {
    ASSIGN_OR_RETURN(auto list, StrList(m, where + "." + matchers_key));
    for (size_t i = 0; i < list.size(); i++) {
      auto ms = ParseMatchers(list[i]);
      if (!ms.ok()) return Err(m[i], where + "." + matchers_key + "[" + std::to_string(i) + "]", ms.error().message());
      for (auto& x : *ms) out->push_back(std::move(x));
    }
  }
  return Status::OK();
}

void SortMatchers(std::vector<model::Matcher>* ms) {
  std::stable_sort(ms->begin(), ms->end(), [](const model::Matcher& a, const model::Matcher& b) {
    if (a.name() != b.name()) return a.name() < b.name();
    if (a.value() != b.value()) return a.value() < b.value();
    return static_cast<int>(a.type()) < static_cast<int>(b.type());
  });
}

Status ParseRoute(const YAML::Node& n, const std::string& where, const Route* parent, Route* r) {
  RETURN_IF_ERROR(CheckKeys(n, where, {"receiver", "group_by", "match", "match_re", "matchers", "continue",
                                       "group_wait", "group_interval", "repeat_interval", "mute_time_intervals",
                                       "active_time_intervals", "routes"}));
  if (parent != nullptr) {
    r->receiver = parent->receiver;
    r->group_by = parent->group_by;
    r->group_by_all = parent->group_by_all;
    r->group_wait_ms = parent->group_wait_ms;
    r->group_interval_ms = parent->group_interval_ms;
    r->repeat_interval_ms = parent->repeat_interval_ms;
  }
  RETURN_IF_ERROR(OptStr(n, "receiver", where, &r->receiver));
  if (auto g = n["group_by"]; g && !g.IsNull()) {
    ASSIGN_OR_RETURN(auto list, StrList(g, where + ".group_by"));
    r->group_by.clear();
    r->group_by_all = false;
    std::set<std::string> seen;
    for (const std::string& l : list) {
      if (l == "...") {
        if (list.size() != 1) return Err(g, where + ".group_by", "cannot have wildcard group_by (`...`) and other labels at the same time");
        r->group_by_all = true;
        continue;
      }
      if (!model::IsValidLabelName(l)) return Err(g, where + ".group_by", "invalid label name \"" + l + "\" in group_by list");
      if (!seen.insert(l).second) return Err(g, where + ".group_by", "duplicated label \"" + l + "\" in group_by");
      r->group_by.push_back(l);
    }
  }
  RETURN_IF_ERROR(ParseMatcherFields(n, where, "match", "match_re", "matchers", &r->matchers));
  SortMatchers(&r->matchers);
  if (parent == nullptr && !r->matchers.empty()) return Err(n, where, "root route must not have any matchers");
  if (auto c = n["continue"]; c && !c.IsNull()) {
    ASSIGN_OR_RETURN(r->continue_matching, Bool(c, where + ".continue"));
    if (parent == nullptr && r->continue_matching) return Err(c, where, "cannot have continue in root route");
  }
  if (auto d = n["group_wait"]; d) { ASSIGN_OR_RETURN(r->group_wait_ms, Dur(d, where + ".group_wait")); }
  if (auto d = n["group_interval"]; d) {
    ASSIGN_OR_RETURN(r->group_interval_ms, Dur(d, where + ".group_interval"));
    if (r->group_interval_ms == 0) return Err(d, where + ".group_interval", "group_interval cannot be zero");
  }
  if (auto d = n["repeat_interval"]; d) {
    ASSIGN_OR_RETURN(r->repeat_interval_ms, Dur(d, where + ".repeat_interval"));
    if (r->repeat_interval_ms == 0) return Err(d, where + ".repeat_interval", "repeat_interval cannot be zero");
  }
  ASSIGN_OR_RETURN(r->mute_time_intervals, StrList(n["mute_time_intervals"], where + ".mute_time_intervals"));
  ASSIGN_OR_RETURN(r->active_time_intervals, StrList(n["active_time_intervals"], where + ".active_time_intervals"));
  if (parent == nullptr && (!r->mute_time_intervals.empty() || !r->active_time_intervals.empty())) {
    return Err(n, where, "root route must not have any mute or active time intervals");
  }
  r->key = (parent ? parent->key + "/" : std::string()) + MatchersString(r->matchers);
  if (auto rs = n["routes"]; rs && !rs.IsNull()) {
    if (!rs.IsSequence()) return Err(rs, where + ".routes", "expected a list of routes");
    for (size_t i = 0; i < rs.size(); i++) {
      Route child;
      RETURN_IF_ERROR(ParseRoute(rs[i], where + ".routes[" + std::to_string(i) + "]", r, &child));
      r->routes.push_back(std::move(child));
    }
  }
  return Status::OK();
}

Result<std::vector<std::pair<int, int>>> Ranges(const YAML::Node& n, const std::string& where,
                                                 Result<int> (*parse)(std::string_view), int lo, int hi) {
  std::vector<std::pair<int, int>> out;
  ASSIGN_OR_RETURN(auto list, StrList(n, where));
  for (const std::string& s : list) {
    size_t colon = s.find(':');
    std::string a = s.substr(0, colon), b = colon == std::string::npos ? a : s.substr(colon + 1);
    auto x = parse(a), y = parse(b);
    if (!x.ok()) return Err(n, where, x.error().message());
    if (!y.ok()) return Err(n, where, y.error().message());
    if (*x < lo || *x > hi || *y < lo || *y > hi) return Err(n, where, "range \"" + s + "\" out of bounds");
    bool neg = *x < 0 || *y < 0;
    if (!neg && *x > *y) return Err(n, where, "start day cannot be after end day in \"" + s + "\"");
    out.emplace_back(*x, *y);
  }
  return out;
}

Result<int> ParseInt(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return Status::InvalidArgument("invalid number \"" + std::string(s) + "\"");
  return v;
}

Result<int> ParseWeekday(std::string_view s) {
  static const char* kDays[] = {"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"};
  std::string l = Lower(s);
  for (int i = 0; i < 7; i++) if (l == kDays[i]) return i;
  return Status::InvalidArgument("\"" + std::string(s) + "\" is not a valid weekday");
}

Result<int> ParseMonth(std::string_view s) {
  static const char* kMonths[] = {"january", "february", "march", "april", "may", "june", "july",
                                  "august", "september", "october", "november", "december"};
  std::string l = Lower(s);
  for (int i = 0; i < 12; i++) if (l == kMonths[i]) return i + 1;
  auto v = ParseInt(s);
  if (v.ok()) return *v;
  return Status::InvalidArgument("\"" + std::string(s) + "\" is not a valid month");
}

Result<int> ParseClock(const YAML::Node& n, const std::string& where) {
  ASSIGN_OR_RETURN(std::string s, Str(n, where));
  size_t c = s.find(':');
  if (c == std::string::npos) return Err(n, where, "invalid time of day \"" + s + "\" (want HH:MM)");
  auto h = ParseInt(std::string_view(s).substr(0, c)), m = ParseInt(std::string_view(s).substr(c + 1));
  if (!h.ok() || !m.ok() || *h < 0 || *h > 24 || *m < 0 || *m > 59 || (*h == 24 && *m != 0)) {
    return Err(n, where, "invalid time of day \"" + s + "\" (want HH:MM)");
  }
  return *h * 60 + *m;
}

Status ParseTimeIntervals(const YAML::Node& list, const std::string& where, Config* cfg) {
  if (!list || list.IsNull()) return Status::OK();
  if (!list.IsSequence()) return Err(list, where, "expected a list");
  for (size_t i = 0; i < list.size(); i++) {
    const YAML::Node& e = list[i];
    std::string w = where + "[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(CheckKeys(e, w, {"name", "time_intervals"}));
    ASSIGN_OR_RETURN(std::string name, Str(e["name"], w + ".name"));
    if (name.empty()) return Err(e, w, "missing name in time interval");
    if (cfg->time_intervals.contains(name)) return Err(e, w, "time interval \"" + name + "\" is not unique");
    std::vector<TimeInterval>& out = cfg->time_intervals[name];
    YAML::Node tis = e["time_intervals"];
    if (tis && !tis.IsNull() && !tis.IsSequence()) return Err(tis, w + ".time_intervals", "expected a list");
    for (size_t j = 0; tis && j < tis.size(); j++) {
      const YAML::Node& t = tis[j];
      std::string tw = w + ".time_intervals[" + std::to_string(j) + "]";
      RETURN_IF_ERROR(CheckKeys(t, tw, {"times", "weekdays", "days_of_month", "months", "years", "location"}));
      TimeInterval ti;
      if (auto ts = t["times"]; ts && !ts.IsNull()) {
        if (!ts.IsSequence()) return Err(ts, tw + ".times", "expected a list");
        for (const auto& r : ts) {
          RETURN_IF_ERROR(CheckKeys(r, tw + ".times", {"start_time", "end_time"}));
          ASSIGN_OR_RETURN(int a, ParseClock(r["start_time"], tw + ".times.start_time"));
          ASSIGN_OR_RETURN(int b, ParseClock(r["end_time"], tw + ".times.end_time"));
          if (a >= b) return Err(r, tw + ".times", "start time cannot be equal or greater than end time");
          ti.times.emplace_back(a, b);
        }
      }
      ASSIGN_OR_RETURN(ti.weekdays, Ranges(t["weekdays"], tw + ".weekdays", ParseWeekday, 0, 6));
      ASSIGN_OR_RETURN(ti.days_of_month, Ranges(t["days_of_month"], tw + ".days_of_month", ParseInt, -31, 31));
      for (auto [a, b] : ti.days_of_month) {
        if (a == 0 || b == 0) return Err(t["days_of_month"], tw + ".days_of_month", "0 is not a valid day of the month");
      }
      ASSIGN_OR_RETURN(ti.months, Ranges(t["months"], tw + ".months", ParseMonth, 1, 12));
      ASSIGN_OR_RETURN(ti.years, Ranges(t["years"], tw + ".years", ParseInt, 0, 9999));
      if (auto l = t["location"]; l && !l.IsNull()) {
        ASSIGN_OR_RETURN(ti.location, Str(l, tw + ".location"));
        auto zone = LoadZone(ti.location);
        if (!zone.ok()) return Err(l, tw + ".location", zone.error().message());
        ti.zone = std::move(*zone);
      }
      out.push_back(std::move(ti));
    }
  }
  return Status::OK();
}

template <typename T>
using Parser = Status (*)(const YAML::Node&, const std::string&, const Config&, T*);

Status ParseWebhook(const YAML::Node& n, const std::string& w, const Config& cfg, WebhookConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, w, {"send_resolved", "url", "http_config", "max_alerts"}));
  c->http = cfg.global.http;
  RETURN_IF_ERROR(OptBool(n, "send_resolved", w, &c->send_resolved));
  RETURN_IF_ERROR(OptStr(n, "url", w, &c->url));
  if (c->url.empty()) return Err(n, w, "one of url or url_file must be configured");  // 0.25's text
  RETURN_IF_ERROR(CheckUrl(n["url"], w + ".url", c->url));
  RETURN_IF_ERROR(ParseHttpConfig(n["http_config"], w + ".http_config", &c->http));
  if (auto m = n["max_alerts"]; m && !m.IsNull()) {
    std::string s = m.Scalar();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), c->max_alerts);
    if (ec != std::errc() || end != s.data() + s.size()) return Err(m, w + ".max_alerts", "invalid integer \"" + s + "\"");
  }
  return Status::OK();
}

Status ParseEmail(const YAML::Node& n, const std::string& w, const Config& cfg, EmailConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, w, {"send_resolved", "to", "from", "hello", "smarthost", "auth_username",
                                   "auth_password", "auth_password_file", "auth_secret", "auth_identity", "headers",
                                   "html", "text", "require_tls", "tls_config"}));
  const GlobalConfig& g = cfg.global;
  c->from = g.smtp_from;
  c->hello = g.smtp_hello;
  c->smarthost = g.smtp_smarthost;
  c->auth_username = g.smtp_auth_username;
  c->auth_password = g.smtp_auth_password;
  c->auth_password_file = g.smtp_auth_password_file;
  c->auth_identity = g.smtp_auth_identity;
  c->auth_secret = g.smtp_auth_secret;
  c->require_tls = g.smtp_require_tls;
  c->html = "{{ template \"email.default.html\" . }}";
  RETURN_IF_ERROR(OptBool(n, "send_resolved", w, &c->send_resolved));
  for (auto [k, p] : std::initializer_list<std::pair<const char*, std::string*>>{
           {"to", &c->to}, {"from", &c->from}, {"hello", &c->hello}, {"smarthost", &c->smarthost},
           {"auth_username", &c->auth_username}, {"auth_password", &c->auth_password},
           {"auth_secret", &c->auth_secret}, {"auth_identity", &c->auth_identity}, {"html", &c->html},
           {"text", &c->text}, {"auth_password_file", &c->auth_password_file}}) {
    RETURN_IF_ERROR(OptStr(n, k, w, p));
  }
  RETURN_IF_ERROR(OptBool(n, "require_tls", w, &c->require_tls));
  if (auto t = n["tls_config"]; t && !t.IsNull()) {
    RETURN_IF_ERROR(CheckKeys(t, w + ".tls_config", {"insecure_skip_verify", "ca_file", "cert_file", "key_file", "server_name", "min_version"}));
    RETURN_IF_ERROR(OptBool(t, "insecure_skip_verify", w + ".tls_config", &c->insecure_skip_verify));
    for (auto [k, p] : std::initializer_list<std::pair<const char*, std::string*>>{
             {"ca_file", &c->ca_file}, {"cert_file", &c->cert_file}, {"key_file", &c->key_file},
             {"server_name", &c->server_name}}) {
      RETURN_IF_ERROR(OptStr(t, k, w + ".tls_config", p));
    }
    if (c->cert_file.empty() != c->key_file.empty()) {
      return Err(t, w + ".tls_config", "exactly one of cert_file and key_file is set; both are needed for a client certificate");
    }
  }
  if (auto h = n["headers"]; h && !h.IsNull()) {
    if (!h.IsMap()) return Err(h, w + ".headers", "expected a mapping");
    for (const auto& kv : h) {
      std::string k = kv.first.as<std::string>();
      // Header names are case-insensitive; Alertmanager title-cases them.
      std::string norm = Lower(k);
      bool up = true;
      for (char& ch : norm) {
        if (up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        up = ch == '-';
      }
      if (c->headers.contains(norm)) return Err(kv.first, w + ".headers", "duplicate header \"" + k + "\"");
      ASSIGN_OR_RETURN(c->headers[norm], Str(kv.second, w + ".headers." + k));
    }
  }
  if (c->to.empty()) return Err(n, w, "missing to address in email config");
  if (c->smarthost.empty()) return Err(n, w, "no global SMTP smarthost set");
  if (c->from.empty()) return Err(n, w, "no global SMTP from set");
  if (c->smarthost.rfind(':') == std::string::npos) return Err(n, w, "address " + c->smarthost + ": missing port in address");
  return Status::OK();
}

Status ParseSlack(const YAML::Node& n, const std::string& w, const Config& cfg, SlackConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, w, {"send_resolved", "api_url", "api_url_file", "http_config", "channel", "username",
                                   "color", "title", "title_link", "pretext", "text", "footer", "fallback",
                                   "icon_emoji", "icon_url", "fields", "actions", "short_fields", "image_url",
                                   "thumb_url", "link_names", "mrkdwn_in", "callback_id"}));
  RETURN_IF_ERROR(AtMostOne(n, w, "api_url", "api_url_file"));
  c->http = cfg.global.http;
  if (!n["api_url"] && !n["api_url_file"]) {
    c->api_url = cfg.global.slack_api_url;
    c->api_url_file = cfg.global.slack_api_url_file;
  }
  c->username = "{{ template \"slack.default.username\" . }}";
  c->color = "{{ if eq .Status \"firing\" }}danger{{ else }}good{{ end }}";
  c->title = "{{ template \"slack.default.title\" . }}";
  c->title_link = "{{ template \"slack.default.titlelink\" . }}";
  c->text = "{{ template \"slack.default.text\" . }}";
  c->fallback = "{{ template \"slack.default.fallback\" . }}";
  c->callback_id = "{{ template \"slack.default.callbackid\" . }}";
  RETURN_IF_ERROR(OptBool(n, "send_resolved", w, &c->send_resolved));
  for (auto [k, p] : std::initializer_list<std::pair<const char*, std::string*>>{
           {"api_url", &c->api_url}, {"channel", &c->channel}, {"username", &c->username}, {"color", &c->color},
           {"title", &c->title}, {"title_link", &c->title_link}, {"pretext", &c->pretext}, {"text", &c->text},
           {"footer", &c->footer}, {"fallback", &c->fallback}, {"icon_emoji", &c->icon_emoji},
           {"icon_url", &c->icon_url}, {"callback_id", &c->callback_id}, {"image_url", &c->image_url},
           {"thumb_url", &c->thumb_url}, {"api_url_file", &c->api_url_file}}) {
    RETURN_IF_ERROR(OptStr(n, k, w, p));
  }
  RETURN_IF_ERROR(OptBool(n, "link_names", w, &c->link_names));
  if (c->api_url.empty() && c->api_url_file.empty()) return Err(n, w, "no global Slack API URL set either inline or in a file");
  if (!c->api_url.empty()) RETURN_IF_ERROR(CheckUrl(n, w + ".api_url", c->api_url));
  RETURN_IF_ERROR(ParseHttpConfig(n["http_config"], w + ".http_config", &c->http));
  return Status::OK();
}

Status ParsePagerduty(const YAML::Node& n, const std::string& w, const Config& cfg, PagerdutyConfig* c) {
  RETURN_IF_ERROR(CheckKeys(n, w, {"send_resolved", "routing_key", "routing_key_file", "service_key",
                                   "service_key_file", "url", "http_config", "client", "client_url", "description",
                                   "details", "images", "links", "source", "severity", "class", "component",
                                   "group"}));
  RETURN_IF_ERROR(AtMostOne(n, w, "routing_key", "routing_key_file"));
  RETURN_IF_ERROR(AtMostOne(n, w, "service_key", "service_key_file"));
  c->http = cfg.global.http;
  c->url = cfg.global.pagerduty_url;
  c->client = "{{ template \"pagerduty.default.client\" . }}";
  c->client_url = "{{ template \"pagerduty.default.clientURL\" . }}";
  c->description = "{{ template \"pagerduty.default.description\" .}}";
  c->severity = "error";
  RETURN_IF_ERROR(OptBool(n, "send_resolved", w, &c->send_resolved));
  for (auto [k, p] : std::initializer_list<std::pair<const char*, std::string*>>{
           {"routing_key", &c->routing_key}, {"service_key", &c->service_key}, {"url", &c->url},
           {"client", &c->client}, {"client_url", &c->client_url}, {"description", &c->description},
           {"severity", &c->severity}, {"class", &c->klass}, {"component", &c->component}, {"group", &c->group},
           {"source", &c->source}, {"routing_key_file", &c->routing_key_file},
           {"service_key_file", &c->service_key_file}}) {
    RETURN_IF_ERROR(OptStr(n, k, w, p));
  }
  if (c->routing_key.empty() && c->service_key.empty() && c->routing_key_file.empty() && c->service_key_file.empty()) {
    return Err(n, w, "missing service or routing key in PagerDuty config");
  }
  RETURN_IF_ERROR(CheckUrl(n, w + ".url", c->url));
  if (auto d = n["details"]; d && !d.IsNull()) {
    if (!d.IsMap()) return Err(d, w + ".details", "expected a mapping");
    for (const auto& kv : d) { ASSIGN_OR_RETURN(c->details[kv.first.as<std::string>()], Str(kv.second, w + ".details")); }
  }
  // Alertmanager's DefaultPagerdutyDetails, for the keys not given.
  for (auto [k, v] : std::initializer_list<std::pair<const char*, const char*>>{
           {"firing", "{{ template \"pagerduty.default.instances\" .Alerts.Firing }}"},
           {"resolved", "{{ template \"pagerduty.default.instances\" .Alerts.Resolved }}"},
           {"num_firing", "{{ .Alerts.Firing | len }}"},
           {"num_resolved", "{{ .Alerts.Resolved | len }}"}}) {
    c->details.emplace(k, v);
  }
  RETURN_IF_ERROR(ParseHttpConfig(n["http_config"], w + ".http_config", &c->http));
  return Status::OK();
}

template <typename T>
Status ParseList(const YAML::Node& r, const char* key, const std::string& w, const Config& cfg, Parser<T> p,
                 std::vector<T>* out) {
  YAML::Node l = r[key];
  if (!l || l.IsNull()) return Status::OK();
  if (!l.IsSequence()) return Err(l, w + "." + key, "expected a list");
  for (size_t i = 0; i < l.size(); i++) {
    T c;
    RETURN_IF_ERROR(p(l[i], w + "." + key + "[" + std::to_string(i) + "]", cfg, &c));
    out->push_back(std::move(c));
  }
  return Status::OK();
}

const KeySet kUnsupportedReceivers = {"opsgenie_configs", "wechat_configs", "pushover_configs",
                                      "victorops_configs", "sns_configs", "telegram_configs",
                                      "discord_configs", "webex_configs", "msteams_configs"};

Status CheckRouteRefs(const Route& r, const YAML::Node& n, const std::string& where, const Config& cfg) {
  if (r.receiver.empty()) return Err(n, where, "root route must specify a default receiver");
  if (cfg.FindReceiver(r.receiver) == nullptr) return Err(n, where, "undefined receiver \"" + r.receiver + "\" used in route");
  for (const auto& t : r.mute_time_intervals) {
    if (!cfg.time_intervals.contains(t)) return Err(n, where, "undefined time interval \"" + t + "\" used in route");
  }
  for (const auto& t : r.active_time_intervals) {
    if (!cfg.time_intervals.contains(t)) return Err(n, where, "undefined time interval \"" + t + "\" used in route");
  }
  YAML::Node rs = n["routes"];
  for (size_t i = 0; i < r.routes.size(); i++) {
    RETURN_IF_ERROR(CheckRouteRefs(r.routes[i], rs[i], where + ".routes[" + std::to_string(i) + "]", cfg));
  }
  return Status::OK();
}

Result<std::shared_ptr<const Config>> Parse(const YAML::Node& root, std::string_view text) {
  auto cfg = std::make_shared<Config>();
  cfg->original = std::string(text);
  if (!root || root.IsNull()) return Status::InvalidArgument("empty configuration: no route provided in config");
  RETURN_IF_ERROR(CheckKeys(root, "config", {"global", "route", "inhibit_rules", "receivers", "templates",
                                             "time_intervals", "mute_time_intervals"}));
  if (auto g = root["global"]; g && !g.IsNull()) {
    GlobalConfig& gc = cfg->global;
    RETURN_IF_ERROR(CheckKeys(g, "global", {"resolve_timeout", "http_config", "smtp_from", "smtp_hello",
                                            "smtp_smarthost", "smtp_auth_username", "smtp_auth_password",
                                            "smtp_auth_password_file", "smtp_auth_secret", "smtp_auth_identity",
                                            "smtp_require_tls", "slack_api_url", "slack_api_url_file",
                                            "pagerduty_url", "opsgenie_api_url", "opsgenie_api_key",
                                            "opsgenie_api_key_file", "wechat_api_url", "wechat_api_secret",
                                            "wechat_api_corp_id", "victorops_api_url", "victorops_api_key",
                                            "victorops_api_key_file", "telegram_api_url", "webex_api_url"}));
    if (auto d = g["resolve_timeout"]; d) {
      ASSIGN_OR_RETURN(gc.resolve_timeout_ms, Dur(d, "global.resolve_timeout"));
      if (gc.resolve_timeout_ms <= 0) return Err(d, "global.resolve_timeout", "resolve_timeout must be positive");
    }
    for (auto [k, p] : std::initializer_list<std::pair<const char*, std::string*>>{
             {"smtp_from", &gc.smtp_from}, {"smtp_hello", &gc.smtp_hello}, {"smtp_smarthost", &gc.smtp_smarthost},
             {"smtp_auth_username", &gc.smtp_auth_username}, {"smtp_auth_password", &gc.smtp_auth_password},
             {"smtp_auth_secret", &gc.smtp_auth_secret}, {"smtp_auth_identity", &gc.smtp_auth_identity},
             {"slack_api_url", &gc.slack_api_url}, {"pagerduty_url", &gc.pagerduty_url},
             {"smtp_auth_password_file", &gc.smtp_auth_password_file}, {"slack_api_url_file", &gc.slack_api_url_file}}) {
      RETURN_IF_ERROR(OptStr(g, k, "global", p));
    }
    RETURN_IF_ERROR(AtMostOne(g, "global", "smtp_auth_password", "smtp_auth_password_file"));
    RETURN_IF_ERROR(AtMostOne(g, "global", "slack_api_url", "slack_api_url_file"));
    RETURN_IF_ERROR(OptBool(g, "smtp_require_tls", "global", &gc.smtp_require_tls));
    RETURN_IF_ERROR(ParseHttpConfig(g["http_config"], "global.http_config", &gc.http));
  }
  ASSIGN_OR_RETURN(cfg->templates, StrList(root["templates"], "templates"));
  RETURN_IF_ERROR(ParseTimeIntervals(root["time_intervals"], "time_intervals", cfg.get()));
  RETURN_IF_ERROR(ParseTimeIntervals(root["mute_time_intervals"], "mute_time_intervals", cfg.get()));

  YAML::Node recv = root["receivers"];
  if (recv && !recv.IsNull() && !recv.IsSequence()) return Err(recv, "receivers", "expected a list");
  std::set<std::string> names;
  for (size_t i = 0; recv && i < recv.size(); i++) {
    const YAML::Node& r = recv[i];
    std::string w = "receivers[" + std::to_string(i) + "]";
    if (r.IsMap()) {
      for (const auto& kv : r) {
        std::string k = kv.first.as<std::string>();
        if (kUnsupportedReceivers.contains(k)) return Err(kv.first, w + "." + k, "receiver type not supported by trainwatch");
      }
    }
    RETURN_IF_ERROR(CheckKeys(r, w, {"name", "webhook_configs", "email_configs", "slack_configs", "pagerduty_configs"}));
    Receiver rc;
    ASSIGN_OR_RETURN(rc.name, Str(r["name"], w + ".name"));
    if (rc.name.empty()) return Err(r, w, "missing name in receiver");
    if (!names.insert(rc.name).second) return Err(r, w, "notification config name \"" + rc.name + "\" is not unique");
    RETURN_IF_ERROR(ParseList<WebhookConfig>(r, "webhook_configs", w, *cfg, ParseWebhook, &rc.webhook));
    RETURN_IF_ERROR(ParseList<EmailConfig>(r, "email_configs", w, *cfg, ParseEmail, &rc.email));
    RETURN_IF_ERROR(ParseList<SlackConfig>(r, "slack_configs", w, *cfg, ParseSlack, &rc.slack));
    RETURN_IF_ERROR(ParseList<PagerdutyConfig>(r, "pagerduty_configs", w, *cfg, ParsePagerduty, &rc.pagerduty));
    cfg->receivers.push_back(std::move(rc));
  }

  YAML::Node route = root["route"];
  if (!route || route.IsNull()) return Status::InvalidArgument("no route provided in config");
  RETURN_IF_ERROR(ParseRoute(route, "route", nullptr, &cfg->route));
  RETURN_IF_ERROR(CheckRouteRefs(cfg->route, route, "route", *cfg));

  YAML::Node inh = root["inhibit_rules"];
  if (inh && !inh.IsNull() && !inh.IsSequence()) return Err(inh, "inhibit_rules", "expected a list");
  for (size_t i = 0; inh && i < inh.size(); i++) {
    std::string w = "inhibit_rules[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(CheckKeys(inh[i], w, {"source_match", "source_match_re", "source_matchers", "target_match",
                                          "target_match_re", "target_matchers", "equal"}));
    InhibitRule ir;
    RETURN_IF_ERROR(ParseMatcherFields(inh[i], w, "source_match", "source_match_re", "source_matchers", &ir.source));
    RETURN_IF_ERROR(ParseMatcherFields(inh[i], w, "target_match", "target_match_re", "target_matchers", &ir.target));
    ASSIGN_OR_RETURN(ir.equal, StrList(inh[i]["equal"], w + ".equal"));
    for (const auto& l : ir.equal) {
      if (!model::IsValidLabelName(l)) return Err(inh[i]["equal"], w + ".equal", "invalid label name \"" + l + "\"");
    }
    cfg->inhibit_rules.push_back(std::move(ir));
  }
  return std::shared_ptr<const Config>(std::move(cfg));
}

}  // namespace

const Receiver* Config::FindReceiver(std::string_view name) const {
  for (const Receiver& r : receivers) if (r.name == name) return &r;
  return nullptr;
}

Result<std::shared_ptr<const Config>> ParseConfig(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": yaml: " + e.msg);
  }
  auto c = [&]() -> Result<std::shared_ptr<const Config>> {
    try {
      return Parse(root, yaml);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
  }();
  if (!c.ok()) return c;
  auto t = Templates::Parse({});
  if (!t.ok()) return t.error().Annotate("templates");
  auto cfg = std::make_shared<Config>(**c);
  cfg->compiled_templates = std::move(*t);
  return std::shared_ptr<const Config>(std::move(cfg));
}

Result<std::vector<TemplateFile>> ReadTemplateGlobs(const std::vector<std::string>& globs, const std::string& dir) {
  std::vector<TemplateFile> out;
  for (const std::string& pattern : globs) {
    std::string full = pattern.starts_with("/") || dir.empty() ? pattern : dir + "/" + pattern;
    glob_t g{};
    int rc = glob(full.c_str(), 0, nullptr, &g);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      globfree(&g);
      return Status::InvalidArgument("templates: cannot expand \"" + pattern + "\"");
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
      TemplateFile f{g.gl_pathv[i], ""};
      Status rs = file::ReadFile(f.path, &f.text);
      if (!rs.ok()) {
        globfree(&g);
        return rs.Annotate("templates");
      }
      out.push_back(std::move(f));
    }
    globfree(&g);
  }
  return out;
}

Result<std::vector<TemplateFile>> ReadTemplateFiles(const Config& cfg, const std::string& config_path) {
  size_t slash = config_path.rfind('/');
  return ReadTemplateGlobs(cfg.templates, slash == std::string::npos ? "." : config_path.substr(0, slash));
}

namespace {

// Alertmanager's resolveFilepaths: http_config files are relative to the
// config file's directory (the receivers' own *_file keys are used as given).
void ResolveHttpFiles(Config* cfg, const std::string& dir) {
  auto join = [&](std::string* p) {
    if (!p->empty() && (*p)[0] != '/') *p = dir + "/" + *p;
  };
  auto http = [&](HttpConfig& h) {
    for (std::string* p : {&h.basic_password_file, &h.credentials_file, &h.tls.ca_file, &h.tls.cert_file,
                           &h.tls.key_file}) {
      join(p);
    }
  };
  http(cfg->global.http);
  for (Receiver& r : cfg->receivers) {
    for (auto& c : r.webhook) http(c.http);
    for (auto& c : r.slack) http(c.http);
    for (auto& c : r.pagerduty) http(c.http);
  }
}

}  // namespace

Result<std::shared_ptr<const Config>> LoadConfigFile(const std::string& path) {
  std::string text;
  Status s = file::ReadFile(path, &text);
  if (!s.ok()) return s.Annotate("read alertmanager config");
  auto c = ParseConfig(text);
  if (!c.ok()) return c.error().Annotate(path);
  // Template files are read now, so a reload picks up their changes and a
  // broken one fails the load.
  auto cfg = std::make_shared<Config>(**c);
  size_t slash = path.rfind('/');
  ResolveHttpFiles(cfg.get(), slash == std::string::npos ? "." : path.substr(0, slash));
  auto files = ReadTemplateFiles(*cfg, path);
  if (!files.ok()) return files.error().Annotate(path);
  cfg->template_files = std::move(*files);
  auto t = Templates::Parse(cfg->template_files);
  if (!t.ok()) return t.error().Annotate(path + ": templates");
  cfg->compiled_templates = std::move(*t);
  return std::shared_ptr<const Config>(std::move(cfg));
}

// ---- matchers ----

Result<std::vector<model::Matcher>> ParseMatchers(std::string_view s) {
  std::vector<model::Matcher> out;
  auto trim = [](std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  };
  std::string_view in = trim(s);
  if (in.starts_with("{")) {
    if (!in.ends_with("}")) return Status::InvalidArgument("missing closing \"}\" in matchers \"" + std::string(s) + "\"");
    in = trim(in.substr(1, in.size() - 2));
  }
  size_t i = 0;
  while (i < in.size()) {
    while (i < in.size() && std::isspace(static_cast<unsigned char>(in[i]))) i++;
    size_t start = i;
    while (i < in.size() && (std::isalnum(static_cast<unsigned char>(in[i])) || in[i] == '_')) i++;
    std::string name(in.substr(start, i - start));
    while (i < in.size() && std::isspace(static_cast<unsigned char>(in[i]))) i++;
    if (name.empty()) return Status::InvalidArgument("bad matcher format: \"" + std::string(s) + "\": missing label name");
    model::MatchType t;
    if (in.substr(i).starts_with("=~")) { t = model::MatchType::kRegex; i += 2; }
    else if (in.substr(i).starts_with("!~")) { t = model::MatchType::kNotRegex; i += 2; }
    else if (in.substr(i).starts_with("!=")) { t = model::MatchType::kNotEqual; i += 2; }
    else if (in.substr(i).starts_with("=")) { t = model::MatchType::kEqual; i += 1; }
    else return Status::InvalidArgument("bad matcher format: \"" + std::string(s) + "\": expected an operator after \"" + name + "\"");
    while (i < in.size() && std::isspace(static_cast<unsigned char>(in[i]))) i++;
    std::string value;
    if (i < in.size() && in[i] == '"') {
      i++;
      bool closed = false;
      while (i < in.size()) {
        char c = in[i++];
        if (c == '"') { closed = true; break; }
        if (c == '\\' && i < in.size()) {
          char e = in[i++];
          if (e == 'n') value += '\n';
          else if (e == 't') value += '\t';
          else value += e;
          continue;
        }
        value += c;
      }
      if (!closed) return Status::InvalidArgument("bad matcher format: \"" + std::string(s) + "\": unterminated quoted value");
      while (i < in.size() && std::isspace(static_cast<unsigned char>(in[i]))) i++;
    } else {
      size_t vs = i;
      while (i < in.size() && in[i] != ',') i++;
      value = std::string(trim(in.substr(vs, i - vs)));
    }
    auto m = model::Matcher::Make(t, name, value);
    if (!m.ok()) return m.error();
    out.push_back(std::move(*m));
    if (i < in.size()) {
      if (in[i] != ',') return Status::InvalidArgument("bad matcher format: \"" + std::string(s) + "\": expected \",\" at offset " + std::to_string(i));
      i++;
    }
  }
  return out;
}

namespace {
std::string GoQuote(std::string_view v) {
  std::string o = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else o += c;
  }
  return o + "\"";
}
const char* OpString(model::MatchType t) {
  switch (t) {
    case model::MatchType::kEqual: return "=";
    case model::MatchType::kNotEqual: return "!=";
    case model::MatchType::kRegex: return "=~";
    case model::MatchType::kNotRegex: return "!~";
  }
  return "=";
}
}  // namespace

std::string MatchersString(const std::vector<model::Matcher>& ms) {
  std::string o = "{";
  for (size_t i = 0; i < ms.size(); i++) {
    if (i > 0) o += ',';
    o += ms[i].name() + OpString(ms[i].type()) + GoQuote(ms[i].value());
  }
  return o + "}";
}

bool MatchAll(const std::vector<model::Matcher>& ms, const model::Labels& ls) {
  for (const auto& m : ms) if (!m.Matches(ls.Get(m.name()))) return false;
  return true;
}

std::vector<const Route*> MatchRoutes(const Route& r, const model::Labels& ls) {
  if (!MatchAll(r.matchers, ls)) return {};
  std::vector<const Route*> all;
  for (const Route& c : r.routes) {
    auto m = MatchRoutes(c, ls);
    all.insert(all.end(), m.begin(), m.end());
    if (!m.empty() && !c.continue_matching) break;
  }
  if (all.empty()) all.push_back(&r);
  return all;
}

// ---- time intervals ----

bool TimeInterval::Contains(int64_t unix_ms) const {
  int64_t secs = unix_ms / 1000;
  int64_t local = secs + (zone ? zone->OffsetAt(secs) : 0);
  time_t lt = static_cast<time_t>(local);
  struct tm tm {};
  gmtime_r(&lt, &tm);
  auto in = [](const std::vector<std::pair<int, int>>& rs, int v) {
    if (rs.empty()) return true;
    for (auto [a, b] : rs) if (v >= a && v <= b) return true;
    return false;
  };
  if (!times.empty()) {
    int minute = tm.tm_hour * 60 + tm.tm_min;
    bool ok = false;
    for (auto [a, b] : times) if (minute >= a && minute < b) ok = true;
    if (!ok) return false;
  }
  if (!in(weekdays, tm.tm_wday)) return false;
  if (!in(months, tm.tm_mon + 1)) return false;
  if (!in(years, tm.tm_year + 1900)) return false;
  if (!days_of_month.empty()) {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y = tm.tm_year + 1900;
    int dim = kDays[tm.tm_mon] + (tm.tm_mon == 1 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 1 : 0);
    bool ok = false;
    for (auto [a, b] : days_of_month) {
      int s = a < 0 ? dim + a + 1 : a, e = b < 0 ? dim + b + 1 : b;
      s = std::max(s, 1);
      e = std::min(e, dim);
      if (tm.tm_mday >= s && tm.tm_mday <= e) ok = true;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace trainwatch::notify
