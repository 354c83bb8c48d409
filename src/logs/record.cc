#include "logs/record.h"

#include <re2/re2.h>

#include <cstdio>

#include "base/units.h"
#include "logs/json_record.h"

namespace trainwatch::logs {

std::string NormalizeLevel(std::string_view level) {
  std::string u;
  u.reserve(level.size());
  for (char c : level) u += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
  if (u == "WARN" || u == "W") return "WARNING";
  if (u == "ERR" || u == "E") return "ERROR";
  if (u == "CRIT" || u == "FATAL" || u == "F" || u == "PANIC" || u == "EMERG" || u == "ALERT") return "CRITICAL";
  if (u == "I" || u == "INFORMATION" || u == "NOTICE") return "INFO";
  if (u == "D") return "DEBUG";
  return u;
}

std::string InferLevel(std::string_view message) {
  static const RE2 word(R"(\b(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b)");
  // A Python exception line: a (dotted) class name ending in Error or
  // Exception, then ':' or the end ("KeyError", "torch.OutOfMemoryError: ...").
  static const RE2 exception(R"(^\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::|\s*$))");
  static const RE2 fatal(R"(Traceback \(most recent call last\)|CUDA error|CUDA out of memory|NCCL error|)"
                         R"(Segmentation fault|core dumped)");
  // Python's warnings module: "train.py:12: UserWarning: ...".
  static const RE2 warning(R"(\b[A-Z]\w*Warning: )");
  if (message.starts_with("Traceback (most recent call last):")) return "ERROR";
  std::string lvl;
  if (RE2::PartialMatch(message.substr(0, 80), word, &lvl)) return NormalizeLevel(lvl);
  if (RE2::PartialMatch(message, exception) || RE2::PartialMatch(message, fatal)) return "ERROR";
  if (RE2::PartialMatch(message, warning)) return "WARNING";
  return "";
}

void InferMissingLevel(Record* r) {
  if (r->level.empty()) r->level = InferLevel(r->message);
}

int LevelRank(std::string_view canonical) {
  for (size_t i = 0; i < std::size(kLevels); ++i) {
    if (kLevels[i] == canonical) return static_cast<int>(i) + 1;
  }
  return 0;
}

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

Result<int64_t> ParseRfc3339(std::string_view s) {
  auto bad = [&] { return Status::InvalidArgument("invalid RFC 3339 time \"" + std::string(s.substr(0, 64)) + "\""); };
  int y, mo, d, h, mi, sec;
  if (!Digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !Digits(s, 5, 2, &mo) || s[7] != '-' ||
      !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !Digits(s, 11, 2, &h) ||
      s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' || !Digits(s, 17, 2, &sec)) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return bad();
  size_t pos = 19;
  int64_t frac = 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    int n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (n < 9) frac = frac * 10 + (s[pos] - '0'), ++n;
      ++pos;
    }
    if (n == 0) return bad();
    while (n++ < 9) frac *= 10;
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!Digits(s, pos + 1, 2, &oh)) return bad();
    size_t mpos = pos + 3;
    if (mpos < s.size() && s[mpos] == ':') ++mpos;
    if (!Digits(s, mpos, 2, &om)) return bad();
    offset_s = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos = mpos + 2;
  } else {
    return bad();  // a time without a zone is ambiguous
  }
  if (pos != s.size()) return bad();
  int64_t secs = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 +
                 sec - offset_s;
  if (secs >= INT64_MAX / 1000000000 || secs <= INT64_MIN / 1000000000) {
    return Status::InvalidArgument("RFC 3339 time \"" + std::string(s.substr(0, 64)) +
                                   "\" is out of range (years 1678 to 2262)");
  }
  return secs * 1000000000 + frac;
}

void AppendRfc3339Nano(std::string* out, int64_t ns) {
  // Floor divisions: -((-ns + ...)) overflowed for INT64_MIN.
  int64_t secs = FloorDiv(ns, 1000000000);
  int64_t frac = ns % 1000000000;
  if (frac < 0) frac += 1000000000;  // secs * 1e9 itself would overflow for INT64_MIN
  int64_t days = FloorDiv(secs, 86400);
  int64_t rem = secs - days * 86400;
  // civil_from_days
  int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld", static_cast<long long>(y), m, d,
                        static_cast<long long>(rem / 3600), static_cast<long long>(rem / 60 % 60),
                        static_cast<long long>(rem % 60));
  out->append(buf, static_cast<size_t>(n));
  if (frac != 0) {
    n = std::snprintf(buf, sizeof buf, ".%09lld", static_cast<long long>(frac));
    while (n > 1 && buf[n - 1] == '0') --n;
    out->append(buf, static_cast<size_t>(n));
  }
  *out += 'Z';
}

std::string_view TimeRejectName(TimeReject r) {
  switch (r) {
    case TimeReject::kTooFarInFuture: return "too_far_in_future";
    case TimeReject::kTooOld: return "too_old";
    case TimeReject::kNone: break;
  }
  return "none";
}

Status TimeBounds::Check(int64_t t_ns) {
  if (t_ns >= min_ns && t_ns <= max_ns) return Status::OK();
  std::string msg = "time ";
  AppendRfc3339Nano(&msg, t_ns);
  std::string now;
  AppendRfc3339Nano(&now, MsToNsSaturated(now_ms));
  if (t_ns > max_ns) {
    rejected = TimeReject::kTooFarInFuture;
    msg += " is more than " + FormatDurationMs(max_future_ms) + " after the server clock (" + now +
           "; the limit is --ingest.max-future)";
  } else {
    rejected = TimeReject::kTooOld;
    msg += " is more than the log retention " + FormatDurationMs(retention_ms) + " before the server clock (" + now +
           "); it would be deleted at once";
  }
  return Status::InvalidArgument(msg);
}

bool TruncateUtf8(std::string* s, size_t max) {
  if (s->size() <= max) return false;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>((*s)[n]) & 0xC0) == 0x80) --n;
  s->resize(n);
  return true;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Len(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;  // overlong
  if (n == 3) {
    unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return 0;  // overlong, surrogate
  }
  if (n == 4) {
    unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return 0;
  }
  return n;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

const model::Label* FirstNonUtf8Label(const model::Labels& labels) {
  for (const model::Label& l : labels) {
    if (!IsValidUtf8(l.name) || !IsValidUtf8(l.value)) return &l;
  }
  return nullptr;
}

namespace {

void AssignValidUtf8(std::string* out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8Len(s, i);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) {
    out->assign(s);
    return;
  }
  out->assign(s.substr(0, i));
  while (i < s.size()) {
    size_t n = Utf8Len(s, i);
    if (n == 0) {
      *out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out->append(s.substr(i, n));
      i += n;
    }
  }
}

}  // namespace

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  AssignValidUtf8(&out, s);
  return out;
}

void SetMessage(Record* r, std::string_view s) {
  // Invalid UTF-8 (a binary or Latin-1 line) becomes U+FFFD, so answers stay valid JSON.
  AssignValidUtf8(&r->message, s);
  if (TruncateUtf8(&r->message, kMaxMessageBytes)) r->truncated = true;
}

Status ParseNativeLine(std::string_view line, int64_t receive_ns, Record* r, std::vector<model::Label>* extra_labels) {
  RecordDecoder d;
  return d.NativeLine(line, receive_ns, r, extra_labels);
}

void AppendJsonEscaped(std::string* out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  *out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          *out += "\\u00";
          *out += kHex[c >> 4];
          *out += kHex[c & 15];
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void AppendRecordJson(std::string* out, const Record& r) {
  *out += "{\"time\":\"";
  AppendRfc3339Nano(out, r.time_ns);
  *out += "\",\"labels\":{";
  bool first = true;
  for (const model::Label& l : r.labels) {
    if (!first) *out += ',';
    first = false;
    AppendJsonEscaped(out, l.name);
    *out += ':';
    AppendJsonEscaped(out, l.value);
  }
  *out += "},\"level\":";
  AppendJsonEscaped(out, r.level);
  *out += ",\"message\":";
  AppendJsonEscaped(out, r.message);
  *out += ",\"fields\":";
  *out += r.fields.empty() ? "{}" : r.fields;
  if (r.truncated) *out += ",\"truncated\":true";
  *out += '}';
}

}  // namespace trainwatch::logs
