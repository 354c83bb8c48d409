#pragma once
// alertmanager.yml (Alertmanager 0.25) as loaded: global, route tree,
// inhibit_rules, time_intervals / mute_time_intervals, receivers with
// webhook, email, slack and pagerduty configs. Unknown keys are errors, as
// in Alertmanager; every error names the field and the YAML line
// ("line 12: route.routes[0].group_wait: invalid duration \"x\"").

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "common/http_client.h"
#include "model/labels.h"
#include "model/matcher.h"
#include "notify/tz.h"

namespace trainwatch::notify {

// Alertmanager's matcher syntax: `name="value"`, `name=~"re"`, `name!=v`,
// `name!~"re"`, optionally several comma-separated inside `{...}`.
Result<std::vector<model::Matcher>> ParseMatchers(std::string_view s);
// `{a="b", c=~"d"}` as Alertmanager prints a matcher list.
std::string MatchersString(const std::vector<model::Matcher>& ms);
bool MatchAll(const std::vector<model::Matcher>& ms, const model::Labels& ls);

class Templates;  // notify/templates.h

// One `templates:` file as read.
struct TemplateFile {
  std::string path;
  std::string text;
};

// prometheus/common's HTTP client config as Alertmanager 0.25 takes it
// (`http_config`): the one common/ parses for every module. The *_file
// secrets are read (and trimmed) at each request, so a rotated file is
// picked up; LoadConfigFile makes relative paths relative to the config
// file, as Alertmanager.
using HttpConfig = common::HttpClientConfig;

struct WebhookConfig {
  bool send_resolved = true;
  std::string url;
  HttpConfig http;
  uint64_t max_alerts = 0;  // 0: all
};

struct EmailConfig {
  bool send_resolved = false;
  std::string to, from, hello, smarthost;  // smarthost "host:port"
  std::string auth_username, auth_password, auth_identity, auth_secret;
  std::string auth_password_file;  // read at each delivery; wins over auth_password
  bool require_tls = true;
  bool insecure_skip_verify = false;
  std::string ca_file, cert_file, key_file, server_name;  // tls_config
  std::map<std::string, std::string> headers;  // Subject, To, From, ... (templates)
  std::string html;  // template; empty: none
  std::string text;  // template; empty: none
};

struct SlackConfig {
  bool send_resolved = false;
  std::string api_url;
  std::string api_url_file;  // read at each delivery (one of api_url, api_url_file)
  std::string channel, username, color, title, title_link, pretext, text, footer, fallback, icon_emoji, icon_url;
  std::string callback_id, image_url, thumb_url;
  bool link_names = false;
  HttpConfig http;
};

struct PagerdutyConfig {
  bool send_resolved = true;
  std::string routing_key;  // Events API v2
  std::string service_key;  // Events API v1 (sent as v2 with routing_key)
  std::string routing_key_file, service_key_file;  // read at each delivery
  std::string url;
  std::string client, client_url, description, severity, klass, component, group;
  std::string source;  // empty: client, as Alertmanager
  std::map<std::string, std::string> details;
  HttpConfig http;
};

struct Receiver {
  std::string name;
  std::vector<WebhookConfig> webhook;
  std::vector<EmailConfig> email;
  std::vector<SlackConfig> slack;
  std::vector<PagerdutyConfig> pagerduty;
  bool empty() const { return webhook.empty() && email.empty() && slack.empty() && pagerduty.empty(); }
};

struct Route {
  std::string receiver;
  std::vector<std::string> group_by;
  bool group_by_all = false;  // group_by: ['...']
  std::vector<model::Matcher> matchers;
  bool continue_matching = false;
  int64_t group_wait_ms = 30000;
  int64_t group_interval_ms = 300000;
  int64_t repeat_interval_ms = 4 * 3600000;
  std::vector<std::string> mute_time_intervals;
  std::vector<std::string> active_time_intervals;
  std::vector<Route> routes;
  std::string key;  // "{}/{env=\"prod\"}": the group key's route part
};

// One entry of a time_intervals[].time_intervals list; empty lists match all.
struct TimeInterval {
  std::vector<std::pair<int, int>> times;          // minutes of day [start, end)
  std::vector<std::pair<int, int>> weekdays;       // 0 = Sunday, inclusive ranges
  std::vector<std::pair<int, int>> days_of_month;  // 1..31 or negative from the end, inclusive
  std::vector<std::pair<int, int>> months;         // 1..12 inclusive
  std::vector<std::pair<int, int>> years;          // inclusive
  std::string location = "UTC";                    // "UTC", "Local" or an IANA name
  std::shared_ptr<const Zone> zone;                // null: UTC
  bool Contains(int64_t unix_ms) const;
};

struct InhibitRule {
  std::vector<model::Matcher> source;
  std::vector<model::Matcher> target;
  std::vector<std::string> equal;
};

struct GlobalConfig {
  int64_t resolve_timeout_ms = 300000;
  std::string smtp_from, smtp_hello = "localhost", smtp_smarthost;
  std::string smtp_auth_username, smtp_auth_password, smtp_auth_identity, smtp_auth_secret;
  std::string smtp_auth_password_file;
  bool smtp_require_tls = true;
  std::string slack_api_url, slack_api_url_file;
  std::string pagerduty_url = "https://events.pagerduty.com/v2/enqueue";
  HttpConfig http;
};

struct Config {
  GlobalConfig global;
  Route route;
  std::vector<Receiver> receivers;
  std::vector<InhibitRule> inhibit_rules;
  std::map<std::string, std::vector<TimeInterval>> time_intervals;  // both time_intervals and mute_time_intervals
  std::vector<std::string> templates;       // template file globs, relative to the config file
  std::vector<TemplateFile> template_files;  // the files they matched, read by LoadConfigFile
  // The defaults plus template_files (Templates::Parse), set by ParseConfig
  // and LoadConfigFile; null only in a Config built otherwise (then only
  // texts without actions can be expanded).
  std::shared_ptr<const Templates> compiled_templates;
  std::string original;                      // the YAML as given

  const Receiver* FindReceiver(std::string_view name) const;
};

// The default templates are parsed too (no files: a YAML text has no
// directory to resolve `templates:` globs in).
Result<std::shared_ptr<const Config>> ParseConfig(std::string_view yaml);
// Also reads the `templates:` files (globs relative to the file; a glob that
// matches nothing is fine, as in Alertmanager) and parses them after the
// defaults. Errors start with the path: "alertmanager.yml: line 3: ...".
Result<std::shared_ptr<const Config>> LoadConfigFile(const std::string& path);
// Reads the files the globs match (relative ones under `dir`; "" for the
// working directory), in glob order; a glob that matches nothing adds nothing.
Result<std::vector<TemplateFile>> ReadTemplateGlobs(const std::vector<std::string>& globs, const std::string& dir);
// The same for the `templates:` globs of `cfg`, relative to the directory of `config_path`.
Result<std::vector<TemplateFile>> ReadTemplateFiles(const Config& cfg, const std::string& config_path);

// alertmanager.yml as GET /api/v2/status shows it (config_redact.cc): every
// secret (passwords, credentials and bearer tokens, Slack api_url and
// webhook url, routing / service keys, SMTP auth secrets) is "<secret>" as in
// Alertmanager 0.25, a URL's userinfo password "xxxxx"; comments are dropped.
// "" when the text can't be re-emitted (never the secrets).
std::string RedactSecrets(std::string_view yaml);

// The routes an alert goes to, depth first as Alertmanager's Route.Match.
std::vector<const Route*> MatchRoutes(const Route& root, const model::Labels& ls);

}  // namespace trainwatch::notify
