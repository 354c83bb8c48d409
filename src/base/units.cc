#include "base/units.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

namespace trainwatch {

Result<int64_t> ParseDurationMs(std::string_view s) {
  // Prometheus's model.ParseDuration: units y w d h m s ms, largest first,
  // each at most once; a total past int64 milliseconds is out of range.
  auto bad = [&] { return Status::InvalidArgument("invalid duration \"" + std::string(s) + "\""); };
  if (s == "0") return int64_t{0};
  if (s.empty()) return bad();
  struct Unit {
    std::string_view name;
    int64_t ms;
  };
  static constexpr Unit kUnits[] = {{"y", 365LL * 86400000}, {"w", 7LL * 86400000}, {"d", 86400000}, {"h", 3600000},
                                    {"m", 60000},            {"s", 1000},             {"ms", 1}};
  int64_t total = 0;
  size_t pos = 0;
  int last = -1;
  while (pos < s.size()) {
    size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) pos++;
    if (pos == start) return bad();
    int64_t n = 0;
    auto parsed = std::from_chars(s.data() + start, s.data() + pos, n).ec;
    int found = -1;
    // "ms" before "m": try the longest unit name first.
    if (s.substr(pos).starts_with("ms")) found = 6;
    else {
      for (int i = 0; i < 6; i++) {
        if (s.substr(pos).starts_with(kUnits[i].name)) {
          found = i;
          break;
        }
      }
    }
    if (found <= last) return bad();
    last = found;
    pos += kUnits[found].name.size();
    int64_t part = 0;
    if (parsed != std::errc() || __builtin_mul_overflow(n, kUnits[found].ms, &part) ||
        __builtin_add_overflow(total, part, &total)) {
      return Status::InvalidArgument("duration \"" + std::string(s) + "\" out of range");
    }
  }
  return total;
}

Result<uint64_t> ParseByteSize(std::string_view s) {
  auto bad = [&] { return Status::InvalidArgument("invalid size \"" + std::string(s) + "\""); };
  size_t pos = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) pos++;
  uint64_t n = 0;
  if (pos == 0 || std::from_chars(s.data(), s.data() + pos, n).ec != std::errc()) return bad();
  std::string unit(s.substr(pos));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit[1] == 'I' && unit[2] == 'B') unit = unit.substr(0, 1) + "B";  // KiB == KB
  static const std::pair<std::string_view, int> kUnits[] = {{"", 0},   {"B", 0},   {"KB", 10}, {"MB", 20},
                                                            {"GB", 30}, {"TB", 40}, {"PB", 50}, {"EB", 60}};
  for (auto [name, shift] : kUnits) {
    if (unit == name) {
      if (shift > 0 && n > (UINT64_MAX >> shift)) return bad();
      if (unit.empty() && n != 0) return bad();  // a bare number is ambiguous except 0
      return n << shift;
    }
  }
  return bad();
}

std::string FormatDurationMs(int64_t ms) {
  if (ms <= 0) return "0s";
  static constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
  std::string out;
  for (auto [unit, name] : kUnits) {
    if (ms < unit) continue;
    out += std::to_string(ms / unit) + name;
    ms %= unit;
  }
  return out;
}

}  // namespace trainwatch
