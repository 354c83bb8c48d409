#include "notify/integrations.h"

#include <httplib.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "common/http_client.h"
#include "common/url.h"

namespace trainwatch::notify {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

// Labels, annotations and template output come from users and may hold
// invalid UTF-8 (dump() would throw type_error 316): sent as U+FFFD.
template <typename J>
std::string Dump(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

Json LabelsJson(const model::Labels& ls) {
  Json o = Json::object();
  for (const auto& l : ls) o[l.name] = l.value;
  return o;
}

Status Post(const std::string& url, const HttpConfig& h, const std::string& body, const SendOptions& o,
            const std::string& what) {
  auto parsed = common::Url::Parse(url);
  if (!parsed.ok()) return Status::InvalidArgument(what + ": " + parsed.status().message());
  const common::Url& u = *parsed;
  // The shared client: TLS files, CA, verification and tls_config.server_name,
  // and the authentication, as every other module's http_config.
  auto made = common::NewHttpClient(u.Base(), h, o.timeout_ms);
  if (!made.ok()) {
    // A host that does not resolve (server_name) may later; a TLS file that
    // cannot be read stays so: not retried.
    const std::string why = made.error().message();
    return why.starts_with("lookup ") ? Status::Unavailable(what + ": " + why) : Status::InvalidArgument(what + ": " + why);
  }
  std::unique_ptr<httplib::Client> cli = std::move(*made);
  cli->set_keep_alive(false);
  cli->set_follow_location(h.follow_redirects);
  std::vector<std::pair<std::string, std::string>> auth;
  // prometheus/common reads the secret files at each request: a network-like
  // failure (Unavailable), so the delivery is retried.
  if (Status s = common::ApplyHttpAuth(h, cli.get(), &auth); !s.ok()) return s.Annotate(what);
  httplib::Headers headers = {{"User-Agent", "Alertmanager/0.25.0 (trainwatch)"}};
  for (auto& [k, v] : auth) headers.emplace(std::move(k), std::move(v));
  auto res = cli->Post(u.RequestUri(), headers, body, "application/json");
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

// Expands each (key, template) into (*out)[key]; omit_empty: an empty result leaves the key out.
Status ExpandFields(const char* integration, const NotificationData& d, const SendOptions& o,
                    std::initializer_list<std::pair<const char*, const std::string*>> fields, bool omit_empty,
                    Json* out) {
  for (auto [k, t] : fields) {
    auto v = Expand(*t, d, o.templates);
    if (!v.ok()) return v.error().Annotate(std::string(integration) + ": expand " + k);
    if (!omit_empty || !v->empty()) (*out)[k] = std::move(*v);
  }
  return Status::OK();
}

// The first `n` UTF-8 characters of `s` (Alertmanager's notify.Truncate keeps
// n-1 and appends "…" when it cuts).
std::string TruncateRunes(const std::string& s, size_t n) {
  size_t runes = 0, i = 0, cut = 0;
  for (; i < s.size(); ++runes) {
    if (runes == n - 1) cut = i;
    size_t len = 1;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) len = 4;
    else if (c >= 0xE0) len = 3;
    else if (c >= 0xC0) len = 2;
    i += len;
  }
  if (runes <= n) return s;
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

}  // namespace

Result<std::string> ReadSecretFile(const std::string& path) {
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  size_t b = text.find_first_not_of(" \t\r\n\v\f"), e = text.find_last_not_of(" \t\r\n\v\f");
  return b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
}

size_t NotificationData::NumFiring() const {
  size_t n = 0;
  for (const auto& a : alerts) n += a.Resolved(now_ms) ? 0 : 1;
  return n;
}

NotificationData MakeNotificationData(std::string receiver, std::string group_key, model::Labels group_labels,
                                      std::vector<StoredAlert> alerts, std::string external_url, int64_t now_ms) {
  NotificationData d;
  // Alertmanager's template.Data holds regexp.QuoteMeta(receiver): templates
  // and the webhook payload see `team\.ml` for a receiver "team.ml".
  for (char c : receiver) {
    if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos) d.receiver += '\\';
    d.receiver += c;
  }
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
  return Dump(o);
}

Result<std::string> Expand(std::string_view text, const NotificationData& d, const Templates* t, bool html) {
  if (t != nullptr) return html ? t->ExecuteHtml(text, d) : t->ExecuteText(text, d);
  if (text.find("{{") == std::string_view::npos) return std::string(text);
  return Status::InvalidArgument("no template engine to expand \"" + std::string(text) + "\"");
}

Status SendWebhook(const WebhookConfig& c, const NotificationData& d, const SendOptions& o) {
  return Post(c.url, c.http, WebhookPayload(d, c.max_alerts), o, "webhook");
}

Status SendSlack(const SlackConfig& c, const NotificationData& d, const SendOptions& o) {
  Json att;
  // Alertmanager 0.25's attachment: text, fallback, callback_id and footer
  // are sent even when empty; the others are omitempty.
  RETURN_IF_ERROR(ExpandFields("slack", d, o,
                               {{"title", &c.title}, {"title_link", &c.title_link}, {"pretext", &c.pretext},
                                {"image_url", &c.image_url}, {"thumb_url", &c.thumb_url}, {"color", &c.color}},
                               true, &att));
  RETURN_IF_ERROR(ExpandFields("slack", d, o,
                               {{"text", &c.text}, {"fallback", &c.fallback}, {"callback_id", &c.callback_id},
                                {"footer", &c.footer}},
                               false, &att));
  if (att.contains("title")) att["title"] = TruncateRunes(att["title"].get<std::string>(), 1024);
  att["mrkdwn_in"] = Json::array({"fallback", "pretext", "text"});
  Json body;
  RETURN_IF_ERROR(ExpandFields(
      "slack", d, o,
      {{"channel", &c.channel}, {"username", &c.username}, {"icon_emoji", &c.icon_emoji}, {"icon_url", &c.icon_url}},
      true, &body));
  if (c.link_names) body["link_names"] = true;
  body["attachments"] = Json::array({att});
  std::string api_url = c.api_url;
  if (!c.api_url_file.empty()) {
    auto r = ReadSecretFile(c.api_url_file);
    if (!r.ok()) return r.error().Annotate("slack: api_url_file");
    api_url = std::move(*r);
  }
  return Post(api_url, c.http, Dump(body), o, "slack");
}

Status SendPagerduty(const PagerdutyConfig& c, const NotificationData& d, const SendOptions& o) {
  Json details = Json::object();
  for (const auto& [k, v] : c.details) {
    auto e = Expand(v, d, o.templates);
    if (!e.ok()) return e.error().Annotate("pagerduty: expand details." + k);
    details[k] = *e;
  }
  const std::string& source = c.source.empty() ? c.client : c.source;
  Json payload;
  RETURN_IF_ERROR(ExpandFields("pagerduty", d, o,
                               {{"summary", &c.description}, {"source", &source}, {"severity", &c.severity},
                                {"class", &c.klass}, {"component", &c.component}, {"group", &c.group}},
                               true, &payload));
  // Events API v2 limit, as Alertmanager truncates.
  payload["summary"] = TruncateRunes(payload.value("summary", ""), 1024);
  payload["custom_details"] = details;
  Json body;
  RETURN_IF_ERROR(ExpandFields("pagerduty", d, o, {{"client", &c.client}, {"client_url", &c.client_url}}, false, &body));
  // The routing key, else the service key (sent as a v2 routing key); each may come from its file.
  std::string key;
  for (auto [value, path, name] : std::initializer_list<std::tuple<const std::string*, const std::string*, const char*>>{
           {&c.routing_key, &c.routing_key_file, "routing_key_file"}, {&c.service_key, &c.service_key_file, "service_key_file"}}) {
    if (!value->empty()) {
      key = *value;
    } else if (!path->empty()) {
      auto r = ReadSecretFile(*path);
      if (!r.ok()) return r.error().Annotate(std::string("pagerduty: ") + name);
      key = std::move(*r);
    }
    if (!key.empty()) break;
  }
  if (key.empty()) return Status::InvalidArgument("pagerduty: routing key cannot be empty");
  body["routing_key"] = key;
  body["dedup_key"] = Sha256Hex(d.group_key);
  body["event_action"] = d.status == "firing" ? "trigger" : "resolve";
  if (d.status == "firing") body["payload"] = payload;
  return Post(c.url, c.http, Dump(body), o, "pagerduty");
}

}  // namespace trainwatch::notify
