#pragma once
// --web.config.file: the exporter-toolkit web configuration that Prometheus,
// Alertmanager and node_exporter read (docs/security.md, "TLS and
// authentication"): tls_server_config, http_server_config.headers,
// basic_auth_users with bcrypt hashes, rate_limit. This file parses it (and
// reads the certificate files it names); http/web_security.h applies it.
// Every error names the line and the field; fields of the format that
// trainwatch does not implement are refused, never ignored.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trainwatch::http {

// tls_server_config.client_auth_type, as Go's tls.ClientAuthType.
enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,           // asked for, not required, not verified
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // verified when sent
  kRequireAndVerifyClientCert,  // required and verified against the client CA
};

struct WebTlsConfig {
  // Set when the file configures TLS (a certificate, a key, a client CA or a
  // client_auth_type, as exporter-toolkit decides); otherwise HTTP is plain.
  bool enabled = false;
  // PEM text, from cert/key/client_ca inline or read from the *_file paths
  // (relative to the web config file's directory).
  std::string cert_pem, key_pem, client_ca_pem;
  // Where each came from, for errors about its content:
  // "line 3: tls_server_config.cert_file (/etc/tw/cert.pem)".
  std::string cert_where, key_where, client_ca_where;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  // A client certificate must carry one of these SANs (DNS, e-mail, IP, URI).
  std::vector<std::string> client_allowed_sans;
  int min_version = 0x0303;  // TLS 1.2 (wire version numbers)
  int max_version = 0x0304;  // TLS 1.3
  // TLS 1.2 cipher suites by their IANA (Go) names, in preference order;
  // empty: OpenSSL's defaults. TLS 1.3 suites are not configurable (as in Go).
  std::vector<std::string> cipher_suites;
  bool prefer_server_cipher_suites = true;
  std::vector<std::string> curve_preferences;  // OpenSSL group names: P-256, P-384, P-521, X25519
};

struct WebConfig {
  WebTlsConfig tls;
  bool http2 = true;  // parsed; trainwatch speaks HTTP/1.1 only
  // http_server_config.headers: added to every response; blank ones left out.
  std::vector<std::pair<std::string, std::string>> headers;
  // basic_auth_users: user -> bcrypt hash ($2a$, $2b$ or $2y$). Empty: no authentication.
  std::map<std::string, std::string> users;
  // rate_limit: one request per interval, bursts of `burst`; interval 0: no limit.
  int64_t rate_limit_interval_ms = 0;
  int64_t rate_limit_burst = 0;
  // Settings that parse but do nothing, for the log: "line 4: ...".
  std::vector<std::string> warnings;
};

// Parses a web config's YAML; relative file names are read from `dir`.
// Errors are "line N: <field>: <why>".
Result<WebConfig> ParseWebConfig(std::string_view yaml, const std::string& dir);
// Reads and parses the file; errors are prefixed "web config file <path>: ".
Result<WebConfig> LoadWebConfigFile(const std::string& path);

}  // namespace trainwatch::http
