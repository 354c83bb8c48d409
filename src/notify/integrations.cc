#include "notify/integrations.h"

#include <httplib.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace trainwatch::notify {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

Json LabelsJson(const model::Labels& ls) {
  Json o = Json::object();
  for (const auto& l : ls) o[l.name] = l.value;
  return o;
}

std::string JoinValues(const model::Labels& ls) {
  std::string o;
  for (const auto& l : ls) {
    if (!o.empty()) o += ' ';
    o += l.value;
  }
  return o;
}

std::string ToUpper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string UrlQueryEscape(std::string_view s) {
  std::string o;
  static const char* kHex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') o += static_cast<char>(c);
    else if (c == ' ') o += '+';
    else { o += '%'; o += kHex[c >> 4]; o += kHex[c & 15]; }
  }
  return o;
}

std::string AlertmanagerUrl(const NotificationData& d) {
  return d.external_url + "/#/alerts?receiver=" + UrlQueryEscape(d.receiver);
}

// Alertmanager's "__text_alert_list" for `alerts`.
std::string TextAlertList(const std::vector<const StoredAlert*>& alerts) {
  std::string o;
  for (const StoredAlert* a : alerts) {
    o += "Labels:\n";
    for (const auto& l : a->alert.labels) o += " - " + l.name + " = " + l.value + "\n";
    o += "Annotations:\n";
    for (const auto& l : a->alert.annotations) o += " - " + l.name + " = " + l.value + "\n";
    o += "Source: " + a->alert.generator_url + "\n";
  }
  return o;
}

std::string HtmlEscape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&#34;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

// A compact rendering of Alertmanager's "email.default.html": the same
// sections (title, firing and resolved lists with labels, annotations, source).
std::string DefaultEmailHtml(const NotificationData& d) {
  std::vector<const StoredAlert*> firing, resolved;
  for (const auto& a : d.alerts) (a.Resolved(d.now_ms) ? resolved : firing).push_back(&a);
  std::string o =
      "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" "
      "\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n"
      "<head>\n<meta name=\"viewport\" content=\"width=device-width\" />\n"
      "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\" />\n<title>" +
      HtmlEscape(DefaultSubject(d)) + "</title>\n</head>\n<body>\n";
  o += "<h2>" + std::to_string(firing.size()) + " alert" + (firing.size() == 1 ? "" : "s") + " for " +
       HtmlEscape(JoinValues(d.group_labels)) + "</h2>\n";
  o += "<p><a href=\"" + HtmlEscape(AlertmanagerUrl(d)) + "\">View in Alertmanager</a></p>\n";
  auto list = [&](const char* title, const std::vector<const StoredAlert*>& as) {
    if (as.empty()) return;
    o += std::string("<h3>[") + title + "] " + std::to_string(as.size()) + "</h3>\n";
    for (const StoredAlert* a : as) {
      o += "<p><strong>Labels</strong><br />\n";
      for (const auto& l : a->alert.labels) o += HtmlEscape(l.name) + " = " + HtmlEscape(l.value) + "<br />\n";
      if (!a->alert.annotations.empty()) {
        o += "<strong>Annotations</strong><br />\n";
        for (const auto& l : a->alert.annotations) o += HtmlEscape(l.name) + " = " + HtmlEscape(l.value) + "<br />\n";
      }
      o += "<a href=\"" + HtmlEscape(a->alert.generator_url) + "\">Source</a></p>\n";
    }
  };
  list("FIRING", firing);
  list("RESOLVED", resolved);
  o += "<p>Sent by trainwatch</p>\n</body>\n</html>\n";
  return o;
}

// Resolves {{ .Status }}, {{ .Receiver }}, {{ .ExternalURL }},
// {{ .GroupLabels.x }}, {{ .CommonLabels.x }}, {{ .CommonAnnotations.x }}.
Result<std::string> ExpandFieldRefs(std::string_view text, const NotificationData& d) {
  std::string o;
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find("{{", i);
    if (open == std::string_view::npos) { o += text.substr(i); break; }
    o += text.substr(i, open - i);
    size_t close = text.find("}}", open);
    if (close == std::string_view::npos) return Status::InvalidArgument("template: unclosed action");
    std::string_view act = text.substr(open + 2, close - open - 2);
    while (!act.empty() && (act.front() == ' ' || act.front() == '-')) act.remove_prefix(1);
    while (!act.empty() && (act.back() == ' ' || act.back() == '-')) act.remove_suffix(1);
    auto field = [&](std::string_view prefix, const model::Labels& ls, std::string* out) {
      if (!act.starts_with(prefix)) return false;
      *out = std::string(ls.Get(act.substr(prefix.size())));
      return true;
    };
    std::string v;
    if (act == ".Status") v = d.status;
    else if (act == ".Receiver") v = d.receiver;
    else if (act == ".ExternalURL") v = d.external_url;
    else if (act == ".GroupKey") v = d.group_key;
    else if (act == "len .Alerts.Firing" || act == ".Alerts.Firing | len") v = std::to_string(d.NumFiring());
    else if (act == "len .Alerts.Resolved" || act == ".Alerts.Resolved | len") v = std::to_string(d.alerts.size() - d.NumFiring());
    else if (act == "len .Alerts" || act == ".Alerts | len") v = std::to_string(d.alerts.size());
    else if (field(".GroupLabels.", d.group_labels, &v) || field(".CommonLabels.", d.common_labels, &v) ||
             field(".CommonAnnotations.", d.common_annotations, &v)) {
    } else {
      return Status::NotSupported("template action {{" + std::string(act) +
                                  "}} needs the template engine (only field references are expanded)");
    }
    o += v;
    i = close + 2;
  }
  return o;
}

struct Url {
  std::string base;  // scheme://host:port
  std::string path;  // with query
};

Url SplitUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

Status Post(const std::string& url, const HttpConfig& h, const std::string& body, const SendOptions& o,
            const std::string& what) {
  Url u = SplitUrl(url);
  httplib::Client cli(u.base);
  if (!cli.is_valid()) return Status::InvalidArgument(what + ": invalid URL \"" + url + "\"");
  int64_t t = o.timeout_ms;
  cli.set_connection_timeout(std::chrono::milliseconds(t));
  cli.set_read_timeout(std::chrono::milliseconds(t));
  cli.set_write_timeout(std::chrono::milliseconds(t));
  cli.set_follow_location(h.follow_redirects);
  cli.enable_server_certificate_verification(!h.insecure_skip_verify);
  httplib::Headers headers = {{"User-Agent", "Alertmanager/0.25.0 (trainwatch)"}};
  if (!h.basic_auth_username.empty()) cli.set_basic_auth(h.basic_auth_username, h.basic_auth_password);
  if (!h.authorization_credentials.empty()) {
    headers.emplace("Authorization", h.authorization_type + " " + h.authorization_credentials);
  }
  auto res = cli.Post(u.path, headers, body, "application/json");
  if (!res) return Status::Unavailable(what + ": " + httplib::to_string(res.error()));
  int code = res->status;
  if (code / 100 == 2) return Status::OK();
  std::string snippet = res->body.substr(0, 256);
  std::string msg = what + ": unexpected status code " + std::to_string(code) + (snippet.empty() ? "" : ": " + snippet);
  if (code / 100 == 5 || code == 429) return Status::Unavailable(msg);
  return Status::InvalidArgument(msg);
}

std::string Sha256Hex(std::string_view s) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), md);
  std::string o;
  char buf[3];
  for (unsigned char c : md) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    o += buf;
  }
  return o;
}

}  // namespace

size_t NotificationData::NumFiring() const {
  size_t n = 0;
  for (const auto& a : alerts) n += a.Resolved(now_ms) ? 0 : 1;
  return n;
}

NotificationData MakeNotificationData(std::string receiver, std::string group_key, model::Labels group_labels,
                                      std::vector<StoredAlert> alerts, std::string external_url, int64_t now_ms) {
  NotificationData d;
  d.receiver = std::move(receiver);
  d.group_key = std::move(group_key);
  d.group_labels = std::move(group_labels);
  d.external_url = std::move(external_url);
  d.now_ms = now_ms;
  // Alertmanager's AlertSlice order: job, then instance, then all labels.
  std::stable_sort(alerts.begin(), alerts.end(), [](const StoredAlert& a, const StoredAlert& b) {
    for (std::string_view k : {"job", "instance"}) {
      std::string_view x = a.alert.labels.Get(k), y = b.alert.labels.Get(k);
      if (x != y && !x.empty() && !y.empty()) return x < y;
    }
    return a.alert.labels < b.alert.labels;
  });
  for (auto& a : alerts) {
    if (!a.Resolved(now_ms)) a.alert.ends_at_ms = 0;  // firing alerts show no end, as Alertmanager's flush
  }
  d.status = "resolved";
  for (const auto& a : alerts) if (!a.Resolved(now_ms)) d.status = "firing";
  auto common = [&](auto get) {
    if (alerts.empty()) return model::Labels();
    std::vector<model::Label> out;
    for (const auto& l : get(alerts[0])) {
      bool all = true;
      for (size_t i = 1; i < alerts.size() && all; i++) {
        const model::Labels& o = get(alerts[i]);
        all = o.Has(l.name) && o.Get(l.name) == l.value;
      }
      if (all) out.push_back(l);
    }
    return model::Labels(std::move(out));
  };
  d.common_labels = common([](const StoredAlert& a) -> const model::Labels& { return a.alert.labels; });
  d.common_annotations = common([](const StoredAlert& a) -> const model::Labels& { return a.alert.annotations; });
  d.alerts = std::move(alerts);
  return d;
}

std::string WebhookPayload(const NotificationData& d, uint64_t max_alerts) {
  OJson o;
  o["receiver"] = d.receiver;
  o["status"] = d.status;
  OJson alerts = OJson::array();
  size_t n = d.alerts.size();
  size_t keep = max_alerts > 0 && max_alerts < n ? static_cast<size_t>(max_alerts) : n;
  for (size_t i = 0; i < keep; i++) {
    const StoredAlert& a = d.alerts[i];
    OJson j;
    j["status"] = a.Resolved(d.now_ms) ? "resolved" : "firing";
    j["labels"] = LabelsJson(a.alert.labels);
    j["annotations"] = LabelsJson(a.alert.annotations);
    j["startsAt"] = FormatTime(a.alert.starts_at_ms);
    j["endsAt"] = FormatTime(a.alert.ends_at_ms);
    j["generatorURL"] = a.alert.generator_url;
    j["fingerprint"] = FingerprintString(a.fingerprint);
    alerts.push_back(std::move(j));
  }
  o["alerts"] = std::move(alerts);
  o["groupLabels"] = LabelsJson(d.group_labels);
  o["commonLabels"] = LabelsJson(d.common_labels);
  o["commonAnnotations"] = LabelsJson(d.common_annotations);
  o["externalURL"] = d.external_url;
  o["version"] = "4";
  o["groupKey"] = d.group_key;
  o["truncatedAlerts"] = n - keep;
  return o.dump();
}

std::string TemplateDataJson(const NotificationData& d) {
  Json o;
  o["Receiver"] = d.receiver;
  o["Status"] = d.status;
  Json alerts = Json::array();
  for (const auto& a : d.alerts) {
    Json j;
    j["Status"] = a.Resolved(d.now_ms) ? "resolved" : "firing";
    j["Labels"] = LabelsJson(a.alert.labels);
    j["Annotations"] = LabelsJson(a.alert.annotations);
    j["StartsAt"] = FormatTime(a.alert.starts_at_ms);
    j["EndsAt"] = FormatTime(a.alert.ends_at_ms);
    j["GeneratorURL"] = a.alert.generator_url;
    j["Fingerprint"] = FingerprintString(a.fingerprint);
    alerts.push_back(std::move(j));
  }
  o["Alerts"] = std::move(alerts);
  o["GroupLabels"] = LabelsJson(d.group_labels);
  o["CommonLabels"] = LabelsJson(d.common_labels);
  o["CommonAnnotations"] = LabelsJson(d.common_annotations);
  o["ExternalURL"] = d.external_url;
  return o.dump();
}

std::string DefaultSubject(const NotificationData& d) {
  std::string o = "[" + ToUpper(d.status);
  if (d.status == "firing") o += ":" + std::to_string(d.NumFiring());
  o += "] " + JoinValues(d.group_labels) + " ";
  if (d.common_labels.size() > d.group_labels.size()) {
    std::vector<model::Label> rest;
    for (const auto& l : d.common_labels) if (!d.group_labels.Has(l.name)) rest.push_back(l);
    o += "(" + JoinValues(model::Labels(std::move(rest))) + ")";
  }
  return o;
}

Result<std::string> Expand(std::string_view text, const NotificationData& d, const TemplateFunc& render) {
  auto is = [&](std::string_view name) {
    std::string a = "{{ template \"" + std::string(name) + "\" . }}";
    std::string b = "{{ template \"" + std::string(name) + "\" .}}";
    return text == a || text == b;
  };
  std::vector<const StoredAlert*> all;
  for (const auto& a : d.alerts) all.push_back(&a);
  if (is("__subject") || is("email.default.subject") || is("slack.default.title") ||
      is("pagerduty.default.description")) {
    return DefaultSubject(d);
  }
  if (is("__alertmanager") || is("slack.default.username") || is("pagerduty.default.client")) return std::string("Alertmanager");
  if (is("__alertmanagerURL") || is("slack.default.titlelink") || is("pagerduty.default.clientURL")) return AlertmanagerUrl(d);
  if (is("slack.default.fallback")) return DefaultSubject(d) + " | " + AlertmanagerUrl(d);
  if (is("slack.default.text") || is("slack.default.pretext") || is("slack.default.footer") ||
      is("__description")) {
    return std::string();
  }
  if (is("pagerduty.default.instances") || is("__text_alert_list")) return TextAlertList(all);
  if (is("email.default.html")) return DefaultEmailHtml(d);
  if (text == "{{ if eq .Status \"firing\" }}danger{{ else }}good{{ end }}") {
    return std::string(d.status == "firing" ? "danger" : "good");
  }
  if (text.find("{{") == std::string_view::npos) return std::string(text);
  if (render) return render(text, TemplateDataJson(d));
  return ExpandFieldRefs(text, d);
}

Status SendWebhook(const WebhookConfig& c, const NotificationData& d, const SendOptions& o) {
  return Post(c.url, c.http, WebhookPayload(d, c.max_alerts), o, "webhook");
}

Status SendSlack(const SlackConfig& c, const NotificationData& d, const SendOptions& o) {
  Json att;
  std::vector<std::pair<const char*, const std::string*>> fields = {
      {"title", &c.title}, {"title_link", &c.title_link}, {"pretext", &c.pretext}, {"text", &c.text},
      {"fallback", &c.fallback}, {"footer", &c.footer}, {"color", &c.color}};
  for (auto [k, t] : fields) {
    auto v = Expand(*t, d, o.render);
    if (!v.ok()) return v.error().Annotate(std::string("slack: expand ") + k);
    if (!v->empty()) att[k] = *v;
  }
  att["mrkdwn_in"] = Json::array({"fallback", "pretext", "text"});
  Json body;
  for (auto [k, t] : std::vector<std::pair<const char*, const std::string*>>{
           {"channel", &c.channel}, {"username", &c.username}, {"icon_emoji", &c.icon_emoji}, {"icon_url", &c.icon_url}}) {
    auto v = Expand(*t, d, o.render);
    if (!v.ok()) return v.error().Annotate(std::string("slack: expand ") + k);
    if (!v->empty()) body[k] = *v;
  }
  body["attachments"] = Json::array({att});
  return Post(c.api_url, c.http, body.dump(), o, "slack");
}

Status SendPagerduty(const PagerdutyConfig& c, const NotificationData& d, const SendOptions& o) {
  Json body;
  body["routing_key"] = c.routing_key.empty() ? c.service_key : c.routing_key;
  body["dedup_key"] = Sha256Hex(d.group_key);
  body["event_action"] = d.status == "firing" ? "trigger" : "resolve";
  auto desc = Expand(c.description, d, o.render);
  if (!desc.ok()) return desc.error().Annotate("pagerduty: expand description");
  auto client = Expand(c.client, d, o.render);
  if (!client.ok()) return client.error().Annotate("pagerduty: expand client");
  auto client_url = Expand(c.client_url, d, o.render);
  if (!client_url.ok()) return client_url.error().Annotate("pagerduty: expand client_url");
  Json payload;
  std::string summary = *desc;
  if (summary.size() > 1024) summary.resize(1024);  // Events API v2 limit, as Alertmanager truncates
  payload["summary"] = summary;
  payload["source"] = *client;
  auto sev = Expand(c.severity, d, o.render);
  if (!sev.ok()) return sev.error().Annotate("pagerduty: expand severity");
  payload["severity"] = *sev;
  Json details = Json::object();
  std::vector<const StoredAlert*> firing, resolved;
  for (const auto& a : d.alerts) (a.Resolved(d.now_ms) ? resolved : firing).push_back(&a);
  details["firing"] = TextAlertList(firing);
  details["resolved"] = TextAlertList(resolved);
  details["num_firing"] = std::to_string(firing.size());
  details["num_resolved"] = std::to_string(resolved.size());
  for (const auto& [k, v] : c.details) {
    auto e = Expand(v, d, o.render);
    if (!e.ok()) return e.error().Annotate("pagerduty: expand details." + k);
    details[k] = *e;
  }
  payload["custom_details"] = details;
  if (!c.component.empty()) payload["component"] = c.component;
  if (!c.group.empty()) payload["group"] = c.group;
  if (!c.klass.empty()) payload["class"] = c.klass;
  if (d.status == "firing") body["payload"] = payload;
  body["client"] = *client;
  body["client_url"] = *client_url;
  return Post(c.url, c.http, body.dump(), o, "pagerduty");
}

}  // namespace trainwatch::notify
