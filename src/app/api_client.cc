#include "app/api_client.h"

#include <cstdlib>

#include "http/request.h"

namespace trainwatch::app {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

struct Parts {
  std::string scheme, userinfo, hostport, path;
};

Parts Split(const std::string& url) {
  Parts p;
  std::string rest = url;
  size_t sep = rest.find("://");
  if (sep != std::string::npos) {
    p.scheme = rest.substr(0, sep);
    rest = rest.substr(sep + 3);
  } else {
    p.scheme = "http";
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  p.path = slash == std::string::npos ? "" : rest.substr(slash);
  size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    p.userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  p.hostport = authority;
  return p;
}

}  // namespace

std::string RedactUrl(const std::string& url) {
  Parts p = Split(url);
  size_t colon = p.userinfo.find(':');
  if (colon == std::string::npos) return url;
  return p.scheme + "://" + p.userinfo.substr(0, colon) + ":xxxxx@" + p.hostport + p.path;
}

Result<ApiClient> NewApiClient(const std::string& url) {
  Parts p = Split(url);
  ApiClient c;
  c.display = RedactUrl(url);
  if ((p.scheme != "http" && p.scheme != "https") || p.hostport.empty()) {
    return Status::InvalidArgument("invalid server URL \"" + c.display +
                                   "\": expected http(s)://[user:password@]host[:port][/prefix]");
  }
  c.prefix = p.path;
  while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
  c.http = std::make_unique<httplib::Client>(p.scheme + "://" + p.hostport);
  if (!c.http->is_valid()) return Status::InvalidArgument("invalid server URL \"" + c.display + "\"");
  if (p.scheme == "https") {
    if (std::string ca = Env("TRAINWATCH_CA_FILE"); !ca.empty()) c.http->set_ca_cert_path(ca.c_str());
    c.http->enable_server_certificate_verification(true);
  }
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
