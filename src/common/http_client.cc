#include "common/http_client.h"

#include <cctype>

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include "base/file.h"
#include "common/url.h"
#include "common/yaml.h"

namespace trainwatch::common {
namespace {

using yaml::CheckKeys;
using yaml::Err;
using yaml::OptBool;
using yaml::OptStr;

std::string TrimSpace(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) i++;
  return s.substr(i);
}

// The first address of `host` in numeric form.
Result<std::string> ResolveNumeric(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return Status::Unavailable("lookup " + host + ": " + gai_strerror(rc));
  }
  char buf[NI_MAXHOST];
  int rc = getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  if (rc != 0) return Status::Unavailable("lookup " + host + ": " + gai_strerror(rc));
  return std::string(buf);
}

}  // namespace

const std::set<std::string, std::less<>>& HttpClientConfigKeys() {
  static const std::set<std::string, std::less<>> k = {"basic_auth", "authorization", "bearer_token",
                                                       "bearer_token_file", "tls_config"};
  return k;
}

Status ParseHttpClientConfig(const YAML::Node& n, const std::string& w, HttpClientConfig* out) {
  // prometheus/common's HTTPClientConfig.Validate, message for message.
  HttpClientConfig& c = *out;
  if (auto b = n["basic_auth"]; b && !b.IsNull()) {
    const std::string bw = w + ".basic_auth";
    RETURN_IF_ERROR(CheckKeys(b, bw, {"username", "password", "password_file"}));
    if (n["authorization"] && !n["authorization"].IsNull()) {
      return Err(n, w, "at most one of basic_auth, oauth2 & authorization must be configured");
    }
    c.has_basic_auth = true;
    RETURN_IF_ERROR(OptStr(b, "username", bw, &c.basic_user));
    RETURN_IF_ERROR(OptStr(b, "password", bw, &c.basic_password));
    RETURN_IF_ERROR(OptStr(b, "password_file", bw, &c.basic_password_file));
    if (!c.basic_password.empty() && !c.basic_password_file.empty()) {
      return Err(b, bw, "at most one of basic_auth password & password_file must be configured");
    }
  }
  int auth_kinds = 0;
  if (auto a = n["authorization"]; a && !a.IsNull()) {
    auth_kinds++;
    const std::string aw = w + ".authorization";
    RETURN_IF_ERROR(CheckKeys(a, aw, {"type", "credentials", "credentials_file"}));
    RETURN_IF_ERROR(OptStr(a, "type", aw, &c.auth_type));
    if (c.auth_type.empty()) c.auth_type = "Bearer";
    std::string lower = c.auth_type;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "basic") return Err(a, aw, "authorization type cannot be set to \"basic\", use \"basic_auth\" instead");
    RETURN_IF_ERROR(OptStr(a, "credentials", aw, &c.credentials));
    RETURN_IF_ERROR(OptStr(a, "credentials_file", aw, &c.credentials_file));
    if (!c.credentials.empty() && !c.credentials_file.empty()) {
      return Err(a, aw, "at most one of authorization credentials & credentials_file must be configured");
    }
  }
  if (n["bearer_token"] || n["bearer_token_file"]) {
    auth_kinds++;
    if (n["authorization"]) return Err(n, w, "authorization is not compatible with bearer_token & bearer_token_file");
    if (n["bearer_token"] && n["bearer_token_file"]) {
      return Err(n, w, "at most one of bearer_token & bearer_token_file must be configured");
    }
    RETURN_IF_ERROR(OptStr(n, "bearer_token", w, &c.credentials));
    RETURN_IF_ERROR(OptStr(n, "bearer_token_file", w, &c.credentials_file));
  }
  if (c.has_basic_auth && auth_kinds > 0) {
    return Err(n, w, "at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured");
  }
  if (auto t = n["tls_config"]; t && !t.IsNull()) {
    const std::string tw = w + ".tls_config";
    RETURN_IF_ERROR(CheckKeys(t, tw, {"ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify", "min_version"}));
    RETURN_IF_ERROR(OptStr(t, "ca_file", tw, &c.tls.ca_file));
    RETURN_IF_ERROR(OptStr(t, "cert_file", tw, &c.tls.cert_file));
    RETURN_IF_ERROR(OptStr(t, "key_file", tw, &c.tls.key_file));
    RETURN_IF_ERROR(OptStr(t, "server_name", tw, &c.tls.server_name));
    RETURN_IF_ERROR(OptBool(t, "insecure_skip_verify", tw, &c.tls.insecure_skip_verify));
    if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
      return Err(t, tw, "client cert file and client key file must both be specified");
    }
  }
  RETURN_IF_ERROR(OptBool(n, "follow_redirects", w, &c.follow_redirects));
  return Status::OK();
}

Result<std::unique_ptr<httplib::Client>> NewHttpClient(const std::string& base, const HttpClientConfig& c,
                                                       int64_t timeout_ms) {
  // tls_config.server_name: httplib takes the TLS name (SNI and the
  // certificate check) from the host it connects to, so the client is made
  // for server_name, pointed at the target's address, and sends the target's
  // own Host header, as Go's client does.
  auto url = common::Url::Parse(base);
  if (!url.ok()) return Status::InvalidArgument(url.status().message());
  const bool https = url->scheme == "https";
  const std::string& authority = url->host;
  const std::string host = url->Hostname();
  const std::string port = url->Port().empty() ? (https ? "443" : "80") : url->Port();
  std::string connect = base, ip;
  const bool rename = https && !c.tls.server_name.empty() && c.tls.server_name != host;
  if (rename) {
    ASSIGN_OR_RETURN(ip, ResolveNumeric(host));
    const bool v6 = c.tls.server_name.find(':') != std::string::npos;
    connect = "https://" + (v6 ? "[" + c.tls.server_name + "]" : c.tls.server_name) + ":" + port;
  }
  std::unique_ptr<httplib::Client> client;
  if (!c.tls.cert_file.empty()) client = std::make_unique<httplib::Client>(connect, c.tls.cert_file, c.tls.key_file);
  else client = std::make_unique<httplib::Client>(connect);
  if (!client->is_valid()) return Status::Unavailable("cannot create client for " + base + " (tls_config files readable?)");
  if (rename) {
    client->set_hostname_addr_map({{c.tls.server_name, ip}});
    client->set_default_headers({{"Host", authority}});
  }
  const time_t sec = static_cast<time_t>(timeout_ms / 1000), usec = static_cast<time_t>((timeout_ms % 1000) * 1000);
  client->set_connection_timeout(sec, usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  client->set_keep_alive(true);
  if (https) {
    if (!c.tls.ca_file.empty()) client->set_ca_cert_path(c.tls.ca_file);
    client->enable_server_certificate_verification(!c.tls.insecure_skip_verify);
  }
  return client;
}

Status ApplyHttpAuth(const HttpClientConfig& c, httplib::Client* client,
                     std::vector<std::pair<std::string, std::string>>* headers) {
  if (c.has_basic_auth) {
    std::string pw = c.basic_password;
    if (!c.basic_password_file.empty()) {
      Status s = file::ReadFile(c.basic_password_file, &pw);
      if (!s.ok()) return Status::Unavailable("unable to read basic auth password file: " + s.message());
      pw = TrimSpace(pw);
    }
    client->set_basic_auth(c.basic_user, pw);
  } else if (!c.credentials.empty() || !c.credentials_file.empty()) {
    std::string cred = c.credentials;
    if (!c.credentials_file.empty()) {
      Status s = file::ReadFile(c.credentials_file, &cred);
      if (!s.ok()) return Status::Unavailable("unable to read authorization credentials file: " + s.message());
      cred = TrimSpace(cred);
    }
    headers->emplace_back("Authorization", c.auth_type + " " + cred);
  }
  return Status::OK();
}

}  // namespace trainwatch::common
