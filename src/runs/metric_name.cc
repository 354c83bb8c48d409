#include "runs/metric_name.h"

#include <cstdint>

namespace trainwatch::runs {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_][a-zA-Z0-9_]* (colon_ok adds ':' anywhere).
bool IsName(std::string_view s, bool colon_ok) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (IsLetter(c) || (colon_ok && c == ':') || (i > 0 && IsDigit(c))) continue;
    return false;
  }
  return true;
}

// Decodes one UTF-8 code point at s[*i]; false on invalid UTF-8 (overlong
// forms and surrogates included), as Go's utf8.DecodeRuneInString rejects them.
bool NextRune(std::string_view s, size_t* i, uint32_t* out) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(*i);
  int n;
  uint32_t cp;
  if (c < 0x80) { *out = c; ++*i; return true; }
  if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
  else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
  else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
  else return false;
  if (*i + n >= s.size()) return false;  // truncated sequence
  for (int k = 1; k <= n; k++) {
    if ((b(*i + k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b(*i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  *i += n + 1;
  *out = cp;
  return true;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

constexpr std::string_view kEscapePrefix = "U__";
constexpr std::string_view kRunSeriesPrefix = "trainwatch_run_";

}  // namespace

bool IsRunSeriesName(std::string_view name) { return name.starts_with(kRunSeriesPrefix); }

TimeViewName TimeViewNameOf(std::string_view metric) {
  // Only names that can decode to the prefix: `step_phase:...` or escaped.
  if (metric.starts_with("step_phase:") || metric.starts_with(kEscapePrefix)) {
    std::string key = MetricNameToKey(metric);
    if (key.size() > kStepPhaseKeyPrefix.size() && key.starts_with(kStepPhaseKeyPrefix)) {
      return {std::string(kStepPhaseSeries), key.substr(kStepPhaseKeyPrefix.size())};
    }
  }
  return {std::string(metric), {}};
}

Result<std::string> KeyToMetricName(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("empty key");
  std::string name;
  bool plain = key.find(':') == std::string_view::npos && !key.starts_with(kEscapePrefix);
  if (plain && IsName(key, false)) {
    name = key;
  } else if (std::string slashed(key); plain) {
    for (char& c : slashed) if (c == '/') c = ':';
    if (IsName(slashed, true)) name = std::move(slashed);
  }
  if (name.empty()) {
    // Prometheus's model.EscapeName with ValueEncodingEscaping, always prefixed.
    name = kEscapePrefix;
    size_t i = 0;
    bool first = true;
    while (i < key.size()) {
      uint32_t cp;
      if (!NextRune(key, &i, &cp)) return Status::InvalidArgument("key is not valid UTF-8");
      if (cp == '_') {
        name += "__";
      } else if ((cp < 0x80 && IsLetter(static_cast<char>(cp))) || cp == ':' ||
                 (!first && cp < 0x80 && IsDigit(static_cast<char>(cp)))) {
        name += static_cast<char>(cp);
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        for (uint32_t v = cp; ; v >>= 4) {
          hex.insert(hex.begin(), kHex[v & 0xF]);
          if (v < 16) break;
        }
        name += '_';
        name += hex;
        name += '_';
      }
      first = false;
    }
  }
  if (IsRunSeriesName(name)) return Status::InvalidArgument("key maps to the reserved name " + name);
  return name;
}

std::string MetricNameToKey(std::string_view name) {
  if (!name.starts_with(kEscapePrefix)) {
    std::string key(name);
    for (char& c : key) if (c == ':') c = '/';
    return key;
  }
  // Prometheus's model.UnescapeName: malformed input comes back unchanged.
  std::string_view e = name.substr(kEscapePrefix.size());
  std::string out;
  for (size_t i = 0; i < e.size(); i++) {
    if (e[i] != '_') {
      out += e[i];
      continue;
    }
    if (++i >= e.size()) return std::string(name);
    if (e[i] == '_') {
      out += '_';
      continue;
    }
    uint32_t cp = 0;
    for (int j = 0;; j++, i++) {
      if (i >= e.size() || j >= 6) return std::string(name);
      char c = e[i];
      if (c == '_') break;
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
      if (IsDigit(c)) cp = cp * 16 + (c - '0');
      else if (c >= 'a' && c <= 'f') cp = cp * 16 + (c - 'a' + 10);
      else return std::string(name);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::string(name);
    AppendUtf8(&out, cp);
  }
  return out;
}

}  // namespace trainwatch::runs
