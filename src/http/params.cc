#include "http/params.h"

#include <charconv>
#include <cmath>
#include <string>

#include "base/units.h"
#include "model/labels.h"

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

namespace {

class SelectorParser {
 public:
  explicit SelectorParser(std::string_view s) : s_(s) {}

  Result<model::Matchers> Parse() {
    model::Matchers out;
    SkipSpaces();
    if (pos_ < s_.size() && IsNameStart(s_[pos_], true)) {
      std::string name = Ident(true);
      auto m = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), name);
      if (!m.ok()) return m.error();
      out.push_back(std::move(*m));
      SkipSpaces();
    }
    if (pos_ < s_.size() && s_[pos_] == '{') {
      pos_++;
      while (true) {
        SkipSpaces();
        if (pos_ >= s_.size()) return Error("unexpected end of input inside braces");
        if (s_[pos_] == '}') {
          pos_++;
          break;
        }
        if (!IsNameStart(s_[pos_], false)) return Error("unexpected character " + std::string(1, s_[pos_]) + " in label matching, expected label name");
        std::string name = Ident(false);
        SkipSpaces();
        model::MatchType type;
        if (Consume("=~")) type = model::MatchType::kRegex;
        else if (Consume("!~")) type = model::MatchType::kNotRegex;
        else if (Consume("!=")) type = model::MatchType::kNotEqual;
        else if (Consume("=")) type = model::MatchType::kEqual;
        else return Error("expected label matching operator after label name \"" + name + "\"");
        SkipSpaces();
        std::string value;
        RETURN_IF_ERROR(String(&value));
        auto m = model::Matcher::Make(type, std::move(name), std::move(value));
        if (!m.ok()) return m.error();
        out.push_back(std::move(*m));
        SkipSpaces();
        if (Consume(",")) continue;
        if (pos_ < s_.size() && s_[pos_] == '}') continue;
        return Error("expected \",\" or \"}\" in label matching");
      }
    }
    SkipSpaces();
    if (pos_ != s_.size()) return Error("unexpected \"" + std::string(s_.substr(pos_)) + "\" after selector");
    if (out.empty()) return Error("empty selector");
    bool all_empty = true;
    for (const auto& m : out) all_empty = all_empty && m.MatchesEmpty();
    if (all_empty) {
      return Status::InvalidArgument("vector selector must contain at least one non-empty matcher");
    }
    return out;
  }

 private:
  static bool IsNameStart(char c, bool colon) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  }
  static bool IsNameChar(char c, bool colon) { return IsNameStart(c, colon) || (c >= '0' && c <= '9'); }

  Status Error(std::string msg) const {
    return Status::InvalidArgument("parse error at char " + std::to_string(pos_ + 1) + ": " + msg);
  }
  void SkipSpaces() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }
  bool Consume(std::string_view tok) {
    if (!s_.substr(pos_).starts_with(tok)) return false;
    pos_ += tok.size();
    return true;
  }
  std::string Ident(bool colon) {
    size_t start = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_], colon)) pos_++;
    return std::string(s_.substr(start, pos_ - start));
  }
  static void AppendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  Status Hex(int n, std::string* out) {
    if (pos_ + n > s_.size()) return Error("invalid escape sequence");
    uint32_t cp = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + n, cp, 16);
    if (ec != std::errc() || p != s_.data() + pos_ + n) return Error("invalid escape sequence");
    pos_ += n;
    if (n == 2) out->push_back(static_cast<char>(cp));
    else AppendUtf8(out, cp);
    return Status::OK();
  }
  Status String(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'' && s_[pos_] != '`')) {
      return Error("expected string in label matching");
    }
    char q = s_[pos_++];
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated quoted string");
      char c = s_[pos_++];
      if (c == q) return Status::OK();
      if (c != '\\' || q == '`') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated quoted string");
      char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'a': out->push_back('\a'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case '\\': case '"': case '\'': out->push_back(e); break;
        case 'x': RETURN_IF_ERROR(Hex(2, out)); break;
        case 'u': RETURN_IF_ERROR(Hex(4, out)); break;
        case 'U': RETURN_IF_ERROR(Hex(8, out)); break;
        default: return Error(std::string("unknown escape sequence \\") + e);
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<model::Matchers> ParseSelector(std::string_view s) { return SelectorParser(s).Parse(); }

}  // namespace trainwatch::http
