#pragma once
// Prometheus's common HTTP client settings (`http_config`: basic_auth,
// authorization, bearer_token[_file], tls_config), shared by everything that
// calls out over HTTP with a prometheus.yml section: scrape jobs and
// remote_write queues. Parsing errors name the field:
// `remote_write[0].basic_auth: unknown field "pass"`.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace httplib {
class Client;
}

namespace trainwatch::common {

struct TlsConfig {
  std::string ca_file, cert_file, key_file, server_name;
  bool insecure_skip_verify = false;
};

struct HttpClientConfig {
  // basic_auth: the password, or the file it is read from at each request.
  bool has_basic_auth = false;
  std::string basic_user, basic_password, basic_password_file;
  // authorization (or the older bearer_token / bearer_token_file): the
  // header is "<auth_type> <credentials>"; a file is read at each request.
  std::string auth_type = "Bearer", credentials, credentials_file;
  TlsConfig tls;
  // follow_redirects: read when the caller allows the key (Alertmanager's receivers).
  bool follow_redirects = true;
};

// The keys of a mapping that ParseHttpClientConfig reads.
const std::set<std::string, std::less<>>& HttpClientConfigKeys();

// Reads the http_config keys present in mapping `n` (others are left to the
// caller) into *out; `where` prefixes error messages.
Status ParseHttpClientConfig(const YAML::Node& n, const std::string& where, HttpClientConfig* out);

// A client for `base` ("http://host:port" or "https://host:port") with the
// TLS settings of `c` and every timeout set to timeout_ms. With
// tls_config.server_name, the TLS name (SNI, certificate check) is that name
// while the connection goes to base's host (resolved now) with base's Host
// header. Unavailable when the TLS files can not be used or the host does not
// resolve.
Result<std::unique_ptr<httplib::Client>> NewHttpClient(const std::string& base, const HttpClientConfig& c,
                                                       int64_t timeout_ms);

// The authentication of `c` for one request: basic auth is set on `client`,
// an Authorization header is appended to *headers. Secrets in files are read
// now, so a rotated token is picked up. Unavailable when a file can't be read.
Status ApplyHttpAuth(const HttpClientConfig& c, httplib::Client* client,
                     std::vector<std::pair<std::string, std::string>>* headers);

}  // namespace trainwatch::common
