#pragma once
// prometheus/common's HTTP client config as Prometheus 2.42 reads it inline
// in a scrape config and in an `alerting.alertmanagers` entry: basic_auth,
// authorization, bearer_token / bearer_token_file, tls_config. Errors are
// prometheus/common's ("at most one of basic_auth password & password_file
// must be configured"), after the caller's `where`. Secret files are read at
// each request, so a rotated secret needs no reload.

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace trainwatch::scrape {

struct TlsConfig {
  std::string ca_file, cert_file, key_file, server_name;
  bool insecure_skip_verify = false;
};

struct HttpClientConfig {
  bool has_basic_auth = false;
  std::string basic_user, basic_password, basic_password_file;
  std::string auth_type = "Bearer", credentials, credentials_file;  // authorization or bearer_token*
  TlsConfig tls;
};

// The keys ParseHttpClientConfig reads from the enclosing mapping.
const std::set<std::string, std::less<>>& HttpClientConfigKeys();

// Reads those keys of `n` (the scrape config or alertmanager config mapping).
Status ParseHttpClientConfig(const YAML::Node& n, const std::string& where, HttpClientConfig* c);

// A client for `base` ("https://host:port"): the client certificate, and for
// https the CA file and verification; connect/read/write timeouts.
Result<std::unique_ptr<httplib::Client>> NewHttpClient(const std::string& base, const HttpClientConfig& c,
                                                       int64_t timeout_ms);

// Basic auth on `cli`, or the Authorization header into `headers`; reads the
// password / credentials file now (whitespace trimmed). Unavailable when a
// file cannot be read.
Status ApplyHttpAuth(const HttpClientConfig& c, httplib::Client* cli, httplib::Headers* headers);

}  // namespace trainwatch::scrape
