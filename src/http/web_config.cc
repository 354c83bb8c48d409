#include "http/web_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "base/file.h"
#include "base/units.h"
#include "common/yaml.h"
#include "http/basic_auth.h"

namespace trainwatch::http {
namespace {

// One YAML reader for every config file (common/yaml.h): "line N: <field>: <message>".
using common::yaml::Bool;
using common::yaml::CheckKeys;
using common::yaml::Err;
using common::yaml::Int;
using common::yaml::LinePrefix;
using common::yaml::Map;
using common::yaml::Str;
using common::yaml::StrList;

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A file named by the config, relative to the config's directory.
Result<std::string> ReadNamed(const YAML::Node& n, std::string_view field, const std::string& dir,
                              std::string* where) {
  ASSIGN_OR_RETURN(std::string path, Str(n, field));
  if (!path.empty() && path[0] != '/' && !dir.empty()) path = dir + "/" + path;
  *where = LinePrefix(n) + std::string(field) + " (" + path + ")";
  std::string data;
  if (Status s = file::ReadFile(path, &data); !s.ok()) return Err(n, field, s.message());
  return data;
}

// Go's tls.CipherSuites(): the suites Prometheus accepts by name.
constexpr std::string_view kTls12Suites[] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
};
constexpr std::string_view kTls13Suites[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                             "TLS_CHACHA20_POLY1305_SHA256"};

Result<int> TlsVersion(const YAML::Node& n, std::string_view field) {
  ASSIGN_OR_RETURN(std::string v, Str(n, field));
  static const std::pair<std::string_view, int> kVersions[] = {
      {"TLS10", 0x0301}, {"TLS11", 0x0302}, {"TLS12", 0x0303}, {"TLS13", 0x0304}};
  for (const auto& [name, wire] : kVersions) {
    if (v == name) return wire;
  }
  return Err(n, field, "unknown TLS version " + Quote(v) + " (one of TLS10, TLS11, TLS12, TLS13)");
}

Status ParseTls(const YAML::Node& t, const std::string& dir, WebConfig* c) {
  ASSIGN_OR_RETURN(bool present, Map(t, "tls_server_config"));
  if (!present) return Status::OK();
  RETURN_IF_ERROR(CheckKeys(t, "tls_server_config",
                            {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type",
                             "client_ca_file", "client_allowed_sans", "min_version", "max_version",
                             "cipher_suites", "prefer_server_cipher_suites", "curve_preferences"},
                            {"client_fingerprints", "client_allowed_sans_regex", "client_common_name"}));
  WebTlsConfig& tls = c->tls;
  // The PEM of `inline_key` or of the file `file_key`, never both.
  auto pem = [&](std::string_view inline_key, std::string_view file_key, std::string* out, std::string* where) -> Status {
    const YAML::Node in = t[std::string(inline_key)], file = t[std::string(file_key)];
    std::string in_field = "tls_server_config." + std::string(inline_key);
    std::string file_field = "tls_server_config." + std::string(file_key);
    ASSIGN_OR_RETURN(std::string text, Str(in, in_field));
    ASSIGN_OR_RETURN(std::string path, Str(file, file_field));
    if (!text.empty() && !path.empty()) {
      return Err(file, file_field, "give " + std::string(inline_key) + " or " + std::string(file_key) + ", not both");
    }
    if (!path.empty()) {
      ASSIGN_OR_RETURN(*out, ReadNamed(file, file_field, dir, where));
    } else if (!text.empty()) {
      *out = std::move(text);
      *where = LinePrefix(in) + in_field;
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(pem("cert", "cert_file", &tls.cert_pem, &tls.cert_where));
  RETURN_IF_ERROR(pem("key", "key_file", &tls.key_pem, &tls.key_where));
  RETURN_IF_ERROR(pem("client_ca", "client_ca_file", &tls.client_ca_pem, &tls.client_ca_where));
  const YAML::Node auth = t["client_auth_type"];
  ASSIGN_OR_RETURN(std::string auth_type, Str(auth, "tls_server_config.client_auth_type"));
  static const std::pair<std::string_view, ClientAuth> kAuth[] = {
      {"", ClientAuth::kNoClientCert},
      {"NoClientCert", ClientAuth::kNoClientCert},
      {"RequestClientCert", ClientAuth::kRequestClientCert},
      {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
      {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // exporter-toolkit's older name
      {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
      {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
  };
  auto it = std::find_if(std::begin(kAuth), std::end(kAuth), [&](const auto& p) { return p.first == auth_type; });
  if (it == std::end(kAuth)) {
    return Err(auth, "tls_server_config.client_auth_type",
               "invalid ClientAuth " + Quote(auth_type) +
                   " (one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, "
                   "RequireAndVerifyClientCert)");
  }
  tls.client_auth = it->second;
  // As exporter-toolkit: these make TLS on; the other fields only tune it.
  tls.enabled = !tls.cert_pem.empty() || !tls.key_pem.empty() || !tls.client_ca_pem.empty() || !auth_type.empty();
  if (tls.enabled && tls.cert_pem.empty()) {
    return Err(t, "tls_server_config", "missing one of cert or cert_file");
  }
  if (tls.enabled && tls.key_pem.empty()) return Err(t, "tls_server_config", "missing one of key or key_file");
  if (!tls.client_ca_pem.empty() && tls.client_auth == ClientAuth::kNoClientCert) {
    return Err(t["client_ca_file"] ? t["client_ca_file"] : t["client_ca"], "tls_server_config.client_ca_file",
               "client CAs are configured without a client_auth_type, so no client certificate would be checked "
               "(set client_auth_type: RequireAndVerifyClientCert)");
  }
  const YAML::Node sans = t["client_allowed_sans"];
  ASSIGN_OR_RETURN(tls.client_allowed_sans, StrList(sans, "tls_server_config.client_allowed_sans"));
  if (sans && !sans.IsNull() && tls.client_auth != ClientAuth::kRequireAnyClientCert &&
      tls.client_auth != ClientAuth::kRequireAndVerifyClientCert) {
    return Err(sans, "tls_server_config.client_allowed_sans",
               "needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert");
  }
  if (const YAML::Node v = t["min_version"]; v && !v.IsNull()) {
    ASSIGN_OR_RETURN(tls.min_version, TlsVersion(v, "tls_server_config.min_version"));
  }
  if (const YAML::Node v = t["max_version"]; v && !v.IsNull()) {
    ASSIGN_OR_RETURN(tls.max_version, TlsVersion(v, "tls_server_config.max_version"));
  }
  if (tls.min_version > tls.max_version) {
    return Err(t["max_version"] ? t["max_version"] : t["min_version"], "tls_server_config.max_version",
               "is below min_version: no TLS version would be left");
  }
  const YAML::Node suites = t["cipher_suites"];
  ASSIGN_OR_RETURN(std::vector<std::string> names, StrList(suites, "tls_server_config.cipher_suites"));
  for (const std::string& s : names) {
    if (std::find(std::begin(kTls12Suites), std::end(kTls12Suites), s) != std::end(kTls12Suites)) {
      tls.cipher_suites.push_back(s);
    } else if (std::find(std::begin(kTls13Suites), std::end(kTls13Suites), s) != std::end(kTls13Suites)) {
      c->warnings.push_back(LinePrefix(suites) + "tls_server_config.cipher_suites: " + s +
                            " ignored: TLS 1.3 suites are not configurable (as in Prometheus)");
    } else {
      return Err(suites, "tls_server_config.cipher_suites", "unknown cipher " + Quote(s));
    }
  }
  if (!names.empty() && tls.cipher_suites.empty() && tls.min_version <= 0x0303) {
    return Err(suites, "tls_server_config.cipher_suites",
               "names only TLS 1.3 suites, so TLS 1.2 would have none (add TLS 1.2 suites or set min_version: TLS13)");
  }
  if (const YAML::Node p = t["prefer_server_cipher_suites"]; p && !p.IsNull()) {
    ASSIGN_OR_RETURN(tls.prefer_server_cipher_suites, Bool(p, "tls_server_config.prefer_server_cipher_suites"));
  }
  const YAML::Node curves = t["curve_preferences"];
  ASSIGN_OR_RETURN(names, StrList(curves, "tls_server_config.curve_preferences"));
  static const std::pair<std::string_view, std::string_view> kCurves[] = {
      {"CurveP256", "P-256"}, {"CurveP384", "P-384"}, {"CurveP521", "P-521"}, {"X25519", "X25519"}};
  for (const std::string& s : names) {
    auto c2 = std::find_if(std::begin(kCurves), std::end(kCurves), [&](const auto& p) { return p.first == s; });
    if (c2 == std::end(kCurves)) {
      return Err(curves, "tls_server_config.curve_preferences",
                 "unknown curve " + Quote(s) + " (one of CurveP256, CurveP384, CurveP521, X25519)");
    }
    tls.curve_preferences.emplace_back(c2->second);
  }
  if (!tls.enabled) {
    for (std::string_view k : {"client_allowed_sans", "min_version", "max_version", "cipher_suites",
                               "prefer_server_cipher_suites", "curve_preferences"}) {
      if (t[std::string(k)]) {
        c->warnings.push_back(LinePrefix(t[std::string(k)]) + "tls_server_config." + std::string(k) +
                              " has no effect: without cert_file and key_file TLS is off (as in Prometheus)");
      }
    }
  }
  return Status::OK();
}

// The headers exporter-toolkit lets a web config set, with the values it allows (empty: any).
struct AllowedHeader {
  std::string_view name;
  std::vector<std::string_view> values;
};
const AllowedHeader kHeaders[] = {
    {"Strict-Transport-Security", {}},
    {"X-Content-Type-Options", {"nosniff"}},
    {"X-Frame-Options", {"deny", "sameorigin"}},
    {"X-XSS-Protection", {}},
    {"Content-Security-Policy", {}},
};

Status ParseHttp(const YAML::Node& h, WebConfig* c) {
  ASSIGN_OR_RETURN(bool present, Map(h, "http_server_config"));
  if (!present) return Status::OK();
  RETURN_IF_ERROR(CheckKeys(h, "http_server_config", {"http2", "headers"}));
  if (const YAML::Node v = h["http2"]; v && !v.IsNull()) {
    ASSIGN_OR_RETURN(c->http2, Bool(v, "http_server_config.http2"));
  }
  const YAML::Node headers = h["headers"];
  ASSIGN_OR_RETURN(bool any, Map(headers, "http_server_config.headers"));
  if (!any) return Status::OK();
  std::set<std::string> seen;
  for (const auto& kv : headers) {
    const std::string name = kv.first.Scalar();
    std::string field = "http_server_config.headers." + name;
    auto allowed = std::find_if(std::begin(kHeaders), std::end(kHeaders),
                                [&](const AllowedHeader& a) { return a.name == name; });
    if (allowed == std::end(kHeaders)) {
      return Err(kv.first, "http_server_config.headers",
                 "HTTP header " + Quote(name) +
                     " can not be configured (only Strict-Transport-Security, X-Content-Type-Options, "
                     "X-Frame-Options, X-XSS-Protection and Content-Security-Policy, as in Prometheus)");
    }
    if (!seen.insert(name).second) return Err(kv.first, field, "given twice");
    ASSIGN_OR_RETURN(std::string value, Str(kv.second, field));
    if (std::any_of(value.begin(), value.end(), [](char ch) { return (ch >= 0 && ch < 0x20 && ch != '\t') || ch == 0x7f; })) {
      return Err(kv.second, field, "control characters are not allowed in a header value");
    }
    if (value.empty()) continue;  // "unset if blank"
    if (!allowed->values.empty() &&
        std::find(allowed->values.begin(), allowed->values.end(), value) == allowed->values.end()) {
      std::string list;
      for (std::string_view v : allowed->values) list += (list.empty() ? "" : ", ") + Quote(v);
      return Err(kv.second, field, "invalid value " + Quote(value) + " (one of " + list + ")");
    }
    c->headers.emplace_back(name, std::move(value));
  }
  return Status::OK();
}

Status ParseUsers(const YAML::Node& u, WebConfig* c) {
  ASSIGN_OR_RETURN(bool present, Map(u, "basic_auth_users"));
  if (!present) return Status::OK();
  for (const auto& kv : u) {
    if (!kv.first.IsScalar()) return Err(kv.first, "basic_auth_users", "user names must be strings");
    const std::string& user = kv.first.Scalar();
    std::string field = "basic_auth_users." + user;
    if (user.find(':') != std::string::npos) {
      return Err(kv.first, field, "a user name can not contain ':' (basic auth could never send it)");
    }
    ASSIGN_OR_RETURN(std::string hash, Str(kv.second, field));
    if (!IsBcryptHash(hash)) {
      return Err(kv.second, field,
                 "not a bcrypt hash: expected $2y$, $2b$ or $2a$, a cost of 04 to 31 and 53 more characters, "
                 "60 in all (make one with htpasswd -nBC 10 \"\" | tr -d ':\\n')");
    }
    if (!c->users.emplace(user, std::move(hash)).second) return Err(kv.first, field, "given twice");
  }
  return Status::OK();
}

Status ParseRateLimit(const YAML::Node& r, WebConfig* c) {
  ASSIGN_OR_RETURN(bool present, Map(r, "rate_limit"));
  if (!present) return Status::OK();
  RETURN_IF_ERROR(CheckKeys(r, "rate_limit", {"interval", "burst"}));
  if (const YAML::Node v = r["interval"]; v && !v.IsNull()) {
    ASSIGN_OR_RETURN(std::string s, Str(v, "rate_limit.interval"));
    auto ms = ParseDurationMs(s);
    if (!ms.ok()) return Err(v, "rate_limit.interval", ms.error().message());
    c->rate_limit_interval_ms = *ms;
  }
  if (const YAML::Node v = r["burst"]; v && !v.IsNull()) {
    ASSIGN_OR_RETURN(c->rate_limit_burst, Int(v, "rate_limit.burst"));
    if (c->rate_limit_burst < 0) return Err(v, "rate_limit.burst", "must not be negative");
  }
  if (c->rate_limit_interval_ms > 0 && c->rate_limit_burst == 0) {
    return Err(r, "rate_limit", "burst 0 would refuse every request (give burst: 1 or more)");
  }
  return Status::OK();
}

}  // namespace

Result<WebConfig> ParseWebConfig(std::string_view yaml, const std::string& dir) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": yaml: " + e.msg);
  }
  WebConfig c;
  if (!root || root.IsNull()) return c;  // an empty file: no TLS, no authentication
  if (!root.IsMap()) return Err(root, "web config", "expected a mapping at the top");
  try {
    RETURN_IF_ERROR(CheckKeys(root, "", {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"},
                              {"auth_excluded_paths", "ip_socket_config"}));
    RETURN_IF_ERROR(ParseTls(root["tls_server_config"], dir, &c));
    RETURN_IF_ERROR(ParseHttp(root["http_server_config"], &c));
    RETURN_IF_ERROR(ParseUsers(root["basic_auth_users"], &c));
    RETURN_IF_ERROR(ParseRateLimit(root["rate_limit"], &c));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return c;
}

Result<WebConfig> LoadWebConfigFile(const std::string& path) {
  std::string text;
  if (Status s = file::ReadFile(path, &text); !s.ok()) return s.Annotate("web config file " + path);
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty()) dir = "/";
  auto c = ParseWebConfig(text, dir);
  if (!c.ok()) return c.error().Annotate("web config file " + path);
  return c;
}

}  // namespace trainwatch::http
