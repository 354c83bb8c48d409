#pragma once
// ASCII case folding for protocol tokens (HTTP schemes and header values,
// media types, "NaN"/"Inf"): locale-free, no allocation.

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

}  // namespace trainwatch
