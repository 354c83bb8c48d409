#include "logs/record.h"

#include <cmath>
#include <cstdio>

#include "logs/json_record.h"

namespace trainwatch::logs {

using nlohmann::json;

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
  return secs * 1000000000 + frac;
}

void AppendRfc3339Nano(std::string* out, int64_t ns) {
  int64_t secs = ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000);
  int64_t frac = ns - secs * 1000000000;
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
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

void SetMessage(Record* r, std::string_view s) {
  // Invalid UTF-8 (a binary or Latin-1 line) becomes U+FFFD, so answers stay valid JSON.
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8Len(s, i);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) {
    r->message.assign(s);
  } else {
    r->message.assign(s.substr(0, i));
    while (i < s.size()) {
      size_t n = Utf8Len(s, i);
      if (n == 0) {
        r->message += "\xEF\xBF\xBD";
        ++i;
      } else {
        r->message.append(s.substr(i, n));
        i += n;
      }
    }
  }
  if (TruncateUtf8(&r->message, kMaxMessageBytes)) r->truncated = true;
}

const KeyNames& NativeKeys() {
  static const KeyNames k{{"time", "ts", "timestamp", "@timestamp"}, {"level", "levelname", "severity"},
                          {"message", "msg"}, {}, true};
  return k;
}

const KeyNames& ElasticKeys() {
  static const KeyNames k{{"@timestamp", "timestamp", "time", "ts"},
                          {"level", "log.level", "severity", "levelname", "syslogseverity-text"},
                          {"message", "msg", "log"},
                          {"project", "run", "rank", "host", "hostname", "source", "program", "syslogtag"},
                          true};
  return k;
}

namespace {

// A time value: unix seconds (fraction allowed; numbers above 1e11/1e14/1e17
// are read as ms/us/ns), a numeric string likewise, or RFC 3339.
Result<int64_t> TimeFromJson(const json& v, std::string_view key) {
  auto from_number = [](double x) -> int64_t {
    double a = std::fabs(x);
    if (a >= 1e17) return static_cast<int64_t>(x);
    if (a >= 1e14) return static_cast<int64_t>(x * 1e3);
    if (a >= 1e11) return static_cast<int64_t>(x * 1e6);
    return static_cast<int64_t>(std::llround(x * 1e9));
  };
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x >= 100000000000000000LL || x <= -100000000000000000LL) return x;
    return from_number(static_cast<double>(x));
  }
  if (v.is_number()) {
    double x = v.get<double>();
    if (std::isfinite(x) && std::fabs(x) < 9e18) return from_number(x);
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    bool numeric = !s.empty();
    for (char c : s) numeric = numeric && ((c >= '0' && c <= '9') || c == '.' || c == '-');
    if (numeric) {
      if (s.find('.') == std::string::npos && s.size() >= 18) return static_cast<int64_t>(std::stoll(s));
      char* end = nullptr;
      double x = std::strtod(s.c_str(), &end);
      if (end == s.c_str() + s.size() && std::isfinite(x)) return from_number(x);
    } else {
      auto t = ParseRfc3339(s);
      if (t.ok()) return *t;
      return Status::InvalidArgument("field \"" + std::string(key) + "\": " + t.error().message());
    }
  }
  return Status::InvalidArgument("field \"" + std::string(key) +
                                 "\": expected unix seconds or an RFC 3339 string, got " + v.dump().substr(0, 64));
}

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// Looks up a possibly dotted key ("log.level") flat first, then nested.
json* Find(json& obj, std::string_view key, json** parent, std::string* leaf) {
  auto it = obj.find(key);
  if (it != obj.end()) {
    *parent = &obj;
    *leaf = std::string(key);
    return &*it;
  }
  size_t dot = key.find('.');
  if (dot == std::string_view::npos) return nullptr;
  auto p = obj.find(key.substr(0, dot));
  if (p == obj.end() || !p->is_object()) return nullptr;
  return Find(*p, key.substr(dot + 1), parent, leaf);
}

}  // namespace

Status RecordFromJson(json& obj, const KeyNames& keys, int64_t receive_ns, Record* r,
                      std::vector<model::Label>* extra_labels) {
  json* parent = nullptr;
  std::string leaf;
  r->time_ns = receive_ns;
  for (std::string_view k : keys.time) {
    if (json* v = Find(obj, k, &parent, &leaf)) {
      if (v->is_null()) break;
      ASSIGN_OR_RETURN(r->time_ns, TimeFromJson(*v, k));
      parent->erase(leaf);
      break;
    }
  }
  for (std::string_view k : keys.level) {
    if (json* v = Find(obj, k, &parent, &leaf)) {
      r->level = NormalizeLevel(ScalarText(*v));
      parent->erase(leaf);
      break;
    }
  }
  for (std::string_view k : keys.message) {
    if (json* v = Find(obj, k, &parent, &leaf)) {
      SetMessage(r, ScalarText(*v));
      parent->erase(leaf);
      break;
    }
  }
  for (std::string_view k : keys.label_keys) {
    auto it = obj.find(k);
    if (it == obj.end() || !(it->is_string() || it->is_number())) continue;
    std::string name = k == "hostname" ? "host" : std::string(k);
    std::string value = ScalarText(*it);
    // rsyslog's syslogtag ends with ':'; keep the program name only.
    if (k == "syslogtag") {
      name = "program";
      while (!value.empty() && (value.back() == ':' || value.back() == ' ')) value.pop_back();
      size_t br = value.find('[');
      if (br != std::string::npos) value.resize(br);
    }
    if (!value.empty()) extra_labels->push_back({std::move(name), std::move(value)});
    obj.erase(it);
  }
  if (keys.labels_object) {
    auto it = obj.find("labels");
    if (it != obj.end()) {
      if (!it->is_object()) return Status::InvalidArgument("field \"labels\": expected an object of strings");
      for (auto& [name, v] : it->items()) {
        if (!model::IsValidLabelName(name)) {
          return Status::InvalidArgument("field \"labels\": invalid label name \"" + name + "\"");
        }
        if (!(v.is_string() || v.is_number() || v.is_boolean())) {
          return Status::InvalidArgument("field \"labels\": label \"" + name + "\" must be a string");
        }
        extra_labels->push_back({name, ScalarText(v)});
      }
      obj.erase(it);
    }
  }
  if (!obj.empty()) {
    r->fields = obj.dump(-1, ' ', false, json::error_handler_t::replace);
    if (r->fields.size() > kMaxMessageBytes) {
      // Too large to index as fields: kept, flagged, as text in "_fields".
      std::string text = std::move(r->fields);
      TruncateUtf8(&text, kMaxMessageBytes);
      json f = {{"_fields", text}};
      r->fields = f.dump(-1, ' ', false, json::error_handler_t::replace);
      r->truncated = true;
    }
  }
  return Status::OK();
}

Status ParseNativeLine(std::string_view line, int64_t receive_ns, Record* r, std::vector<model::Label>* extra_labels) {
  r->time_ns = receive_ns;
  if (line.size() > kMaxLineBytes) {
    SetMessage(r, line);
    r->truncated = true;
    return Status::OK();
  }
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i < line.size() && line[i] == '{') {
    json obj = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (obj.is_object()) return RecordFromJson(obj, NativeKeys(), receive_ns, r, extra_labels);
  }
  SetMessage(r, line);
  return Status::OK();
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
