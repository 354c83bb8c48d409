#include "common/url.h"

namespace trainwatch::common {
namespace {

bool Digit(char c) { return c >= '0' && c <= '9'; }

bool SchemeChar(char c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return !first && (Digit(c) || c == '+' || c == '-' || c == '.');
}

// Where the port starts in host (the ':'), npos when there is none.
size_t PortColon(std::string_view host) {
  size_t colon = host.rfind(':');
  if (colon == std::string_view::npos) return colon;
  size_t bracket = host.rfind(']');
  if (bracket != std::string_view::npos && bracket > colon) return std::string_view::npos;
  return colon;
}

}  // namespace

Result<Url> Url::Parse(std::string_view s) {
  const std::string quoted = "\"" + std::string(s) + "\"";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ' ') {
      return Status::InvalidArgument("invalid URL " + quoted + ": contains a space or control character");
    }
  }
  size_t sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return Status::InvalidArgument("invalid URL " + quoted + ": no scheme (want scheme://host[:port][/path])");
  }
  Url u;
  for (size_t i = 0; i < sep; i++) {
    if (!SchemeChar(s[i], i == 0)) {
      return Status::InvalidArgument("invalid URL " + quoted + ": invalid character in scheme \"" +
                                     std::string(s.substr(0, sep)) + "\"");
    }
  }
  u.scheme = std::string(s.substr(0, sep));
  std::string_view rest = s.substr(sep + 3);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    u.userinfo = std::string(authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  u.host = std::string(authority);
  if (u.Hostname().empty()) return Status::InvalidArgument("invalid URL " + quoted + ": no host");
  if (size_t colon = PortColon(u.host); colon != std::string::npos) {
    std::string_view port = std::string_view(u.host).substr(colon + 1);
    for (char c : port) {
      if (!Digit(c)) {
        return Status::InvalidArgument("invalid URL " + quoted + ": invalid port \":" + std::string(port) +
                                       "\" after host");
      }
    }
  }
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) {
    u.fragment = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    u.has_query = true;
    u.query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  u.path = std::string(rest);
  return u;
}

std::string Url::Base() const { return scheme + "://" + host; }

std::string Url::RequestUri() const {
  std::string out = path.empty() ? "/" : path;
  if (has_query) out += "?" + query;
  return out;
}

std::string Url::Hostname() const {
  std::string_view h = host;
  if (size_t colon = PortColon(h); colon != std::string_view::npos) h = h.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  return std::string(h);
}

std::string Url::Port() const {
  size_t colon = PortColon(host);
  return colon == std::string::npos ? "" : host.substr(colon + 1);
}

std::string Url::String() const {
  std::string out = scheme + "://";
  if (!userinfo.empty()) out += userinfo + "@";
  out += host + path;
  if (has_query) out += "?" + query;
  if (!fragment.empty()) out += "#" + fragment;
  return out;
}

std::string Url::Redacted() const {
  size_t colon = userinfo.find(':');
  if (colon == std::string::npos) return String();
  Url r = *this;
  r.userinfo = userinfo.substr(0, colon) + ":xxxxx";
  return r.String();
}

std::string RedactUrl(std::string_view url) {
  // On the string, not on Parse's result: a URL that does not parse (a
  // space, a bad port) must not show its password either.
  // Without a scheme the string may still be user:password@host (a --server
  // flag written without http://).
  size_t sep = url.find("://");
  size_t host_start = sep == std::string_view::npos ? 0 : sep + 3;
  size_t end = url.find_first_of("/?#", host_start);
  std::string_view authority = url.substr(host_start, end == std::string_view::npos ? end : end - host_start);
  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  size_t colon = authority.find(':');
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, host_start + colon + 1)) + "xxxxx" + std::string(url.substr(host_start + at));
}

}  // namespace trainwatch::common
