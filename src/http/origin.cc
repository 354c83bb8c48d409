#include "http/origin.h"

#include "base/ascii.h"
#include "common/url.h"

namespace trainwatch::http {
namespace {

// "host:port" with the scheme's default port made explicit, lower case.
std::string Authority(std::string_view hostport, std::string_view scheme) {
  std::string out(hostport);
  for (char& c : out) c = AsciiLower(c);
  size_t colon = out.rfind(':');
  size_t bracket = out.rfind(']');  // [::1]:9800
  bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  if (!has_port) out += scheme == "https" ? ":443" : ":80";
  return out;
}

}  // namespace

std::optional<std::string> CrossSiteRefusal(const OriginHeaders& h) {
  if (h.method == "GET" || h.method == "HEAD" || h.method == "OPTIONS") return std::nullopt;
  if (!h.sec_fetch_site.empty()) {
    if (EqualsIgnoreCase(h.sec_fetch_site, "same-origin") || EqualsIgnoreCase(h.sec_fetch_site, "none")) return std::nullopt;
    return "cross-site request refused: Sec-Fetch-Site is \"" + std::string(h.sec_fetch_site) +
           "\"; a page of another site cannot change state here";
  }
  if (h.origin.empty()) return std::nullopt;  // not a browser, or one that sends no Origin on same-origin requests
  if (auto o = common::Url::Parse(h.origin); o.ok()) {
    const std::string& scheme = o->scheme;
    std::string origin = Authority(o->host, scheme);
    if (!h.host.empty() && origin == Authority(h.host, scheme)) return std::nullopt;
    // Behind a reverse proxy the Host may be ours and the Origin the proxy's.
    for (std::string_view fh = h.forwarded_host; !fh.empty();) {
      size_t comma = fh.find(',');
      std::string_view one = fh.substr(0, comma);
      while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
      while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
      if (!one.empty() && origin == Authority(one, scheme)) return std::nullopt;
      if (comma == std::string_view::npos) break;
      fh.remove_prefix(comma + 1);
    }
  }
  return "cross-origin request refused: Origin \"" + std::string(h.origin) + "\" is not this server (Host \"" +
         std::string(h.host) + "\"); a page of another site cannot change state here";
}

}  // namespace trainwatch::http
