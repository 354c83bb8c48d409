#include "http/params.h"

#include <charconv>
#include <cmath>
#include <string>

#include "base/units.h"

namespace trainwatch::http {
namespace {

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool ParseFloat(std::string_view s, double* out) {
  if (s.empty()) return false;
  std::string_view body = s;
  if (body[0] == '+') body.remove_prefix(1);
  if (body.empty() || body[0] == '+') return false;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), *out);
  return ec == std::errc() && end == body.data() + body.size();
}

// Parses exactly `n` digits at s[*pos].
bool Digits(std::string_view s, size_t* pos, int n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (int i = 0; i < n; i++) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool ParseRfc3339(std::string_view s, int64_t* out_ms) {
  size_t pos = 0;
  int y, mo, d, h, mi, sec;
  if (!Digits(s, &pos, 4, &y) || !Expect(s, &pos, '-') || !Digits(s, &pos, 2, &mo) || !Expect(s, &pos, '-') ||
      !Digits(s, &pos, 2, &d)) {
    return false;
  }
  if (pos >= s.size() || (s[pos] != 'T' && s[pos] != 't')) return false;
  pos++;
  if (!Digits(s, &pos, 2, &h) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &mi) || !Expect(s, &pos, ':') ||
      !Digits(s, &pos, 2, &sec)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return false;
  int64_t frac_ms = 0;
  if (pos < s.size() && s[pos] == '.') {
    pos++;
    int n = 0;
    int64_t scale = 100;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac_ms += (s[pos] - '0') * scale;  // digits past milliseconds are truncated
      scale /= 10;
      pos++;
      n++;
    }
    if (n == 0) return false;
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    pos++;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    pos++;
    int oh, om;
    if (!Digits(s, &pos, 2, &oh) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &om)) return false;
    offset_s = sign * (oh * 3600 + om * 60);
  } else {
    return false;
  }
  if (pos != s.size()) return false;
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  *out_ms = secs * 1000 + frac_ms;
  return true;
}

}  // namespace

Result<int64_t> ParseTime(std::string_view s) {
  double v;
  if (ParseFloat(s, &v)) {
    if (!std::isfinite(v) || std::fabs(v) > 9.2e15) {
      return Status::InvalidArgument("cannot parse " + Quoted(s) + " to a valid timestamp");
    }
    // As Prometheus: whole seconds plus the fraction rounded to milliseconds.
    double whole;
    double frac = std::modf(v, &whole);
    return static_cast<int64_t>(whole) * 1000 + static_cast<int64_t>(std::round(frac * 1000));
  }
  int64_t ms;
  if (ParseRfc3339(s, &ms)) return ms;
  return Status::InvalidArgument("cannot parse " + Quoted(s) + " to a valid timestamp");
}

Result<int64_t> ParseDuration(std::string_view s) {
  double v;
  if (ParseFloat(s, &v)) {
    if (!std::isfinite(v) || std::fabs(v) > 9.2e15) {
      return Status::InvalidArgument("cannot parse " + Quoted(s) + " to a valid duration");
    }
    return static_cast<int64_t>(std::llround(v * 1000));
  }
  auto ms = ParseDurationMs(s);
  if (!ms.ok()) return Status::InvalidArgument("cannot parse " + Quoted(s) + " to a valid duration");
  return *ms;
}

Result<int64_t> IntParam(const Request& req, std::string_view name, int64_t def, int64_t min, int64_t max) {
  std::string_view s = req.Param(name);
  if (s.empty()) return def;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) {
    return Status::InvalidArgument("invalid parameter \"" + std::string(name) + "\": expected an integer in [" +
                                   std::to_string(min) + ", " + std::to_string(max) + "], got \"" + std::string(s) +
                                   "\"");
  }
  return v;
}

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t c = s.find(',');
    std::string_view part = s.substr(0, c);
    if (!part.empty()) out.emplace_back(part);
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return out;
}

}  // namespace trainwatch::http
