#include "http/request.h"

namespace trainwatch::http {

std::string_view Request::Param(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  return {};
}

bool Request::Has(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return true;
  }
  return false;
}

std::vector<std::string_view> Request::Params(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : params) {
    if (k == name) out.push_back(v);
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string UrlDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void ParseQueryString(std::string_view qs, std::vector<std::pair<std::string, std::string>>* out) {
  while (!qs.empty()) {
    size_t amp = qs.find('&');
    std::string_view part = qs.substr(0, amp);
    qs = amp == std::string_view::npos ? std::string_view() : qs.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      out->emplace_back(UrlDecode(part, true), std::string());
    } else {
      out->emplace_back(UrlDecode(part.substr(0, eq), true), UrlDecode(part.substr(eq + 1), true));
    }
  }
}

}  // namespace trainwatch::http
