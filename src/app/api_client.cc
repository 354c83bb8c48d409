#include "app/api_client.h"

#include <cstdlib>

#include "common/http_client.h"
#include "http/request.h"

namespace trainwatch::app {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

Result<ApiClient> NewApiClient(const std::string& server) {
  // Without a scheme: http.
  const std::string url = server.find("://") == std::string::npos ? "http://" + server : server;
  ApiClient c;
  c.display = RedactUrl(url);
  auto parsed = common::Url::Parse(url);
  if (!parsed.ok() || (parsed->scheme != "http" && parsed->scheme != "https")) {
    return Status::InvalidArgument("invalid server URL \"" + c.display +
                                   "\": expected http(s)://[user:password@]host[:port][/prefix]");
  }
  const common::Url& p = *parsed;
  c.prefix = p.path;
  while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
  common::HttpClientConfig cfg;
  cfg.tls.ca_file = Env("TRAINWATCH_CA_FILE");  // https: else the system's CAs
  // httplib's own default, for long queries and exports.
  auto made = common::NewHttpClient(p.Base(), cfg, /*timeout_ms=*/300'000);
  if (!made.ok()) return Status::InvalidArgument("invalid server URL \"" + c.display + "\": " + made.status().message());
  c.http = std::move(*made);
  if (!p.userinfo.empty()) {
    size_t colon = p.userinfo.find(':');
    std::string user = http::UrlDecode(p.userinfo.substr(0, colon), false);
    std::string password = colon == std::string::npos ? "" : http::UrlDecode(p.userinfo.substr(colon + 1), false);
    c.http->set_basic_auth(user, password);
  } else if (std::string token = Env("TRAINWATCH_TOKEN"); !token.empty()) {
    c.http->set_bearer_token_auth(token);
  } else if (std::string user = Env("TRAINWATCH_USERNAME"); !user.empty()) {
    c.http->set_basic_auth(user, Env("TRAINWATCH_PASSWORD"));
  }
  return c;
}

}  // namespace trainwatch::app
