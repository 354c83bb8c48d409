// RedactSecrets: alertmanager.yml as GET /api/v2/status shows it, every
// secret replaced by "<secret>" as Alertmanager 0.25 marshals its Secret and
// SecretURL fields (config/config.go, config/notifiers.go, and
// prometheus/common's HTTPClientConfig).

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/url.h"
#include "notify/config.h"

namespace trainwatch::notify {
namespace {

constexpr std::string_view kSecret = "<secret>";

// Keys whose value is a secret wherever they appear: prometheus/common's
// basic_auth password, authorization credentials, bearer_token, oauth2
// client_secret, tls_config key; the global and receiver secrets of
// Alertmanager (including receivers trainwatch does not implement, so a
// config written for Alertmanager never leaks through this path).
constexpr std::string_view kSecretKeys[] = {
    "password",    "credentials", "bearer_token",     "client_secret",     "auth_password",     "auth_secret",
    "smtp_auth_password", "smtp_auth_secret", "slack_api_url", "routing_key", "service_key", "api_key",
    "opsgenie_api_key", "victorops_api_key", "wechat_api_secret", "api_secret", "user_key", "token",
    "bot_token", "secret_key", "webhook_url",
};

// Aliases make the tree a DAG that can be exponentially larger than the
// text; a walk past this many nodes gives up (and shows nothing).
constexpr size_t kMaxVisits = 1000000;

// Keys that are secret only under a parent key (the parent of a list item is
// the list's key): webhook and Slack URLs are SecretURLs, other `url`s and
// `api_url`s are plain URLs.
bool IsSecret(std::string_view parent, std::string_view key) {
  for (std::string_view k : kSecretKeys) {
    if (key == k) return true;
  }
  if (key == "url") return parent == "webhook_configs";
  if (key == "api_url") return parent == "slack_configs";
  if (key == "key") return parent == "tls_config";
  return false;
}

struct TooLarge {};

void Redact(YAML::Node node, std::string_view parent, size_t* visits) {
  if (++*visits > kMaxVisits) throw TooLarge{};
  if (node.IsSequence()) {
    for (YAML::Node item : node) Redact(item, parent, visits);
    return;
  }
  if (!node.IsMap()) return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string& key = it->first.Scalar();
    YAML::Node value = it->second;
    if (IsSecret(parent, key)) {
      // An empty secret marshals as empty in Alertmanager; anything else,
      // whatever its YAML type, is hidden. Assigning through the handle also
      // hides it at its anchor when it was aliased.
      if (!value.IsNull() && !(value.IsScalar() && value.Scalar().empty())) value = std::string(kSecret);
    } else if (value.IsScalar() && (key == "proxy_url" || key == "url" || key == "pagerduty_url")) {
      std::string redacted = common::RedactUrl(value.Scalar());
      if (redacted != value.Scalar()) value = redacted;
    } else {
      Redact(value, key, visits);
    }
  }
}

}  // namespace

std::string RedactSecrets(std::string_view yaml) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    size_t visits = 0;
    Redact(root, "", &visits);
    YAML::Emitter out;
    out << root;
    if (!out.good()) return "";
    return std::string(out.c_str(), out.size()) + "\n";
  } catch (...) {
    // Never the text as given: it may hold the secrets.
    return "";
  }
}

}  // namespace trainwatch::notify
