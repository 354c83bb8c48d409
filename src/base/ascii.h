#pragma once
// ASCII helpers for protocol tokens: case folding (HTTP schemes and header
// values, media types, "NaN"/"Inf"), locale-free, no allocation; and
// percent-encoding for URL components.

#include <string>
#include <string_view>

namespace trainwatch {

inline char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// `a` equals `lower` (given in lower case) but for ASCII case.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (AsciiLower(a[i]) != lower[i]) return false;
  }
  return true;
}

// `s` starts with `lower_prefix` (given in lower case) but for ASCII case.
inline bool StartsWithIgnoreCase(std::string_view s, std::string_view lower_prefix) {
  return s.size() >= lower_prefix.size() && EqualsIgnoreCase(s.substr(0, lower_prefix.size()), lower_prefix);
}

// `s` percent-encoded for a URL path segment or query value (RFC 3986): every
// byte but the unreserved A-Z a-z 0-9 - _ . ~ becomes %XX.
inline std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace trainwatch
