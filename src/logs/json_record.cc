#include "logs/json_record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "base/json.h"

namespace trainwatch::logs {

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

// Marks all but the last member of each repeated name not live (JSON
// parsers commonly keep the last; nlohmann::json did).
void MarkRepeats(std::vector<JsonMember>* ms) {
  const size_t n = ms->size();
  if (n <= 32) {
    for (size_t i = 1; i < n; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if ((*ms)[j].key == (*ms)[i].key) (*ms)[j].live = false;
      }
    }
    return;
  }
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return (*ms)[a].key < (*ms)[b].key; });
  for (size_t i = 0; i + 1 < n; ++i) {
    if ((*ms)[idx[i]].key == (*ms)[idx[i + 1]].key) (*ms)[idx[i]].live = false;
  }
}

// Appends `{"name":value,...}` of the live members.
void AppendMembers(std::string* out, const std::vector<JsonMember>& ms) {
  *out += '{';
  bool first = true;
  for (const JsonMember& m : ms) {
    if (!m.live) continue;
    if (!first) *out += ',';
    first = false;
    out->append(m.key_text);
    *out += ':';
    AppendCompactJson(out, m.value);
  }
  *out += '}';
}

// Looks up a possibly dotted key ("log.level"): flat first, then as member b
// of the object a. A nested value is copied into *storage.
bool Lookup(std::vector<JsonMember>& ms, std::string_view key, JsonValue* value, std::string* storage) {
  if (JsonMember* m = FindMember(ms, key)) {
    *value = m->value;
    return true;
  }
  size_t dot = key.find('.');
  if (dot == std::string_view::npos) return false;
  JsonMember* p = FindMember(ms, key.substr(0, dot));
  if (p == nullptr || p->value.type != JsonType::kObject) return false;
  std::vector<JsonMember> inner;
  ScanJsonObject(p->value.text, &inner);  // scanned before: valid
  if (!Lookup(inner, key.substr(dot + 1), value, storage)) return false;
  if (value->text.data() != storage->data()) {
    std::string copy(value->text);
    *storage = std::move(copy);
    value->text = *storage;
  }
  return true;
}

// Takes out the member Lookup finds, rewriting the text of the objects it
// is nested in.
void Erase(std::vector<JsonMember>& ms, std::string_view key) {
  if (JsonMember* m = FindMember(ms, key)) {
    m->live = false;
    return;
  }
  size_t dot = key.find('.');
  JsonMember* p = FindMember(ms, key.substr(0, dot));
  std::vector<JsonMember> inner;
  ScanJsonObject(p->value.text, &inner);
  Erase(inner, key.substr(dot + 1));
  std::string text;
  AppendMembers(&text, inner);  // reads views into p->replaced: assign after
  p->replaced = std::move(text);
  p->value.text = p->replaced;
  p->value.spaced = false;
}

// Unix seconds, or from magnitudes 1e11/1e14/1e17 on ms/us/ns, as ns in
// *ns; false when that does not fit in 64 bits (before 1678, after 2262).
bool NanosFromSeconds(double x, int64_t* ns) {
  double a = std::fabs(x);
  double v = a >= 1e17 ? x : a >= 1e14 ? x * 1e3 : a >= 1e11 ? x * 1e6 : x * 1e9;
  if (!(std::fabs(v) < 0x1p63)) return false;
  *ns = a >= 1e11 ? static_cast<int64_t>(v) : static_cast<int64_t>(std::llround(v));
  return true;
}

bool NanosFromInteger(int64_t x, int64_t* ns) {
  if (x >= 100000000000000000LL || x <= -100000000000000000LL) {
    *ns = x;
    return true;
  }
  return NanosFromSeconds(static_cast<double>(x), ns);
}

Status BadTime(std::string_view key, std::string got) {
  TruncateUtf8(&got, 64);
  return Status::InvalidArgument("field \"" + std::string(key) + "\": expected unix seconds or an RFC 3339 string, got " +
                                 got);
}

Status OutOfRange(std::string_view key, std::string got) {
  TruncateUtf8(&got, 64);
  return Status::InvalidArgument("field \"" + std::string(key) + "\": " + got + " is out of range (years 1678 to 2262)");
}

// A time value: unix seconds (fraction allowed; see NanosFromSeconds), a
// numeric string likewise (18 digits or more without a point: an integer,
// taken as is), or an RFC 3339 string.
Result<int64_t> TimeFromValue(const JsonValue& v, std::string_view key, std::string* buf) {
  if (v.type == JsonType::kNumber) {
    const char* b = v.text.data();
    const char* e = b + v.text.size();
    int64_t ns;
    if (v.integer) {
      // As a JSON parser types it: int64, else uint64 (taken modulo 2^64),
      // else a double.
      bool fits = false;
      if (*b == '-') {
        int64_t x;
        if (std::from_chars(b, e, x).ec == std::errc()) fits = true, ns = x;
      } else {
        uint64_t u;
        if (std::from_chars(b, e, u).ec == std::errc()) fits = true, ns = static_cast<int64_t>(u);
      }
      if (fits) {
        if (NanosFromInteger(ns, &ns)) return ns;
        return OutOfRange(key, std::string(v.text));
      }
    }
    double x = 0;
    if (std::from_chars(b, e, x).ec != std::errc()) x = 0;  // an underflow; the scanner refused overflows
    if (!(std::fabs(x) < 9e18)) return BadTime(key, std::string(v.text));
    if (NanosFromSeconds(x, &ns)) return ns;
    return OutOfRange(key, std::string(v.text));
  }
  if (v.type == JsonType::kString) {
    std::string_view s = JsonScalarText(v, buf);
    bool numeric = !s.empty() && s.find_first_not_of("0123456789.-") == std::string_view::npos;
    if (!numeric) {
      auto t = ParseRfc3339(s);
      if (t.ok()) return *t;
      return Status::InvalidArgument("field \"" + std::string(key) + "\": " + t.error().message());
    }
    if (s.find('.') == std::string_view::npos && s.size() >= 18) {
      int64_t x;
      auto r = std::from_chars(s.data(), s.data() + s.size(), x);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return x;
    } else {
      std::string z(s);  // strtod for the forms it takes ("5.", ".5")
      char* end = nullptr;
      double x = std::strtod(z.c_str(), &end);
      if (end == z.c_str() + z.size() && std::isfinite(x)) {
        int64_t ns;
        if (NanosFromSeconds(x, &ns)) return ns;
        std::string got;
        AppendJsonQuoted(&got, s);
        return OutOfRange(key, std::move(got));
      }
    }
    std::string got;
    AppendJsonQuoted(&got, s);
    return BadTime(key, std::move(got));
  }
  std::string got;
  AppendCompactJson(&got, v);
  return BadTime(key, std::move(got));
}

// Sets the message from valid UTF-8.
void SetValidMessage(Record* r, std::string_view s) {
  if (s.size() <= kMaxMessageBytes) {
    r->message.assign(s);
    return;
  }
  r->message.assign(s.substr(0, kMaxMessageBytes + 1));
  TruncateUtf8(&r->message, kMaxMessageBytes);
  r->truncated = true;
}

bool IsLabelValue(JsonType t) {
  return t == JsonType::kString || t == JsonType::kNumber || t == JsonType::kTrue || t == JsonType::kFalse;
}

}  // namespace

bool ScanJsonObject(std::string_view text, std::vector<JsonMember>* out) {
  out->clear();
  JsonScanner sc(text);
  sc.SkipBom();
  sc.SkipSpace();
  if (!sc.Consume('{')) return false;
  sc.SkipSpace();
  bool escaped_keys = false;
  if (!sc.Consume('}')) {
    for (;;) {
      if (!sc.Peek('"')) return false;
      JsonMember& m = out->emplace_back();
      JsonValue k;
      if (!sc.String(&k)) return false;
      m.key_text = k.text;
      if (k.escaped) {
        AppendJsonStringContent(&m.key_buf, k.text);
        escaped_keys = true;
      } else {
        m.key = k.text.substr(1, k.text.size() - 2);
      }
      sc.SkipSpace();
      if (!sc.Consume(':')) return false;
      sc.SkipSpace();
      if (!sc.Value(&m.value)) return false;
      sc.SkipSpace();
      if (sc.Consume(',')) {
        sc.SkipSpace();
        continue;
      }
      if (sc.Consume('}')) break;
      return false;
    }
  }
  sc.SkipSpace();
  if (!sc.AtEnd()) return false;
  if (escaped_keys) {
    // Only now: growing the vector moved the buffers.
    for (JsonMember& m : *out) {
      if (!m.key_buf.empty()) m.key = m.key_buf;
    }
  }
  MarkRepeats(out);
  return true;
}

JsonMember* FindMember(std::vector<JsonMember>& members, std::string_view key) {
  for (JsonMember& m : members) {
    if (m.live && m.key == key) return &m;
  }
  return nullptr;
}

std::string_view JsonScalarText(const JsonValue& v, std::string* buf) {
  if (v.type == JsonType::kString) {
    if (!v.escaped) return v.text.substr(1, v.text.size() - 2);
    buf->clear();
    AppendJsonStringContent(buf, v.text);
    return *buf;
  }
  if (!v.spaced) return v.text;
  buf->clear();
  AppendCompactJson(buf, v);
  return *buf;
}

Result<bool> RecordDecoder::Decode(std::string_view text, const KeyNames& keys, int64_t receive_ns, Record* r,
                                   std::vector<model::Label>* extra_labels) {
  if (!ScanJsonObject(text, &members_)) {
    // Not a JSON object, unless it failed only for its depth: say so.
    if (Status d = CheckJsonDepth(text); !d.ok()) return Status::InvalidArgument(d.message());
    return false;
  }
  r->time_ns = receive_ns;
  JsonValue v;
  for (std::string_view k : keys.time) {
    if (!Lookup(members_, k, &v, &found_)) continue;
    if (v.type == JsonType::kNull) break;
    ASSIGN_OR_RETURN(r->time_ns, TimeFromValue(v, k, &text_));
    Erase(members_, k);
    break;
  }
  for (std::string_view k : keys.level) {
    if (!Lookup(members_, k, &v, &found_)) continue;
    r->level = NormalizeLevel(JsonScalarText(v, &text_));
    Erase(members_, k);
    break;
  }
  for (std::string_view k : keys.message) {
    if (!Lookup(members_, k, &v, &found_)) continue;
    SetValidMessage(r, JsonScalarText(v, &text_));
    Erase(members_, k);
    break;
  }
  for (std::string_view k : keys.label_keys) {
    JsonMember* m = FindMember(members_, k);
    if (m == nullptr || !(m->value.type == JsonType::kString || m->value.type == JsonType::kNumber)) continue;
    std::string name = k == "hostname" ? "host" : std::string(k);
    std::string value(JsonScalarText(m->value, &text_));
    // rsyslog's syslogtag ends with ':'; keep the program name only.
    if (k == "syslogtag") {
      name = "program";
      while (!value.empty() && (value.back() == ':' || value.back() == ' ')) value.pop_back();
      size_t br = value.find('[');
      if (br != std::string::npos) value.resize(br);
    }
    if (!value.empty()) extra_labels->push_back({std::move(name), std::move(value)});
    m->live = false;
  }
  if (keys.labels_object) {
    if (JsonMember* m = FindMember(members_, "labels")) {
      if (m->value.type != JsonType::kObject) {
        return Status::InvalidArgument("field \"labels\": expected an object of strings");
      }
      ScanJsonObject(m->value.text, &labels_);
      const JsonMember* bad = nullptr;  // of the unusable ones, the first by name (as a sorted map reports)
      for (const JsonMember& l : labels_) {
        if (l.live && (!model::IsValidLabelName(l.key) || !IsLabelValue(l.value.type)) &&
            (bad == nullptr || l.key < bad->key)) {
          bad = &l;
        }
      }
      if (bad != nullptr) {
        if (!model::IsValidLabelName(bad->key)) {
          return Status::InvalidArgument("field \"labels\": invalid label name \"" + std::string(bad->key) + "\"");
        }
        return Status::InvalidArgument("field \"labels\": label \"" + std::string(bad->key) + "\" must be a string");
      }
      for (const JsonMember& l : labels_) {
        if (l.live) extra_labels->push_back({std::string(l.key), std::string(JsonScalarText(l.value, &text_))});
      }
      m->live = false;
    }
  }
  if (std::any_of(members_.begin(), members_.end(), [](const JsonMember& m) { return m.live; })) {
    size_t size = 1;
    for (const JsonMember& m : members_) size += m.live ? m.key_text.size() + m.value.text.size() + 2 : 0;
    std::string& f = r->fields;
    f.clear();
    f.reserve(size);
    AppendMembers(&f, members_);
    if (f.size() > kMaxMessageBytes) {
      // Too large to index as fields: kept, flagged, as text in "_fields".
      std::string all = std::move(f);
      TruncateUtf8(&all, kMaxMessageBytes);
      f = "{\"_fields\":";
      AppendJsonQuoted(&f, all);
      f += '}';
      r->truncated = true;
    }
  }
  return true;
}

Status RecordDecoder::NativeLine(std::string_view line, int64_t receive_ns, Record* r,
                                 std::vector<model::Label>* extra_labels) {
  r->time_ns = receive_ns;
  if (line.size() > kMaxLineBytes) {
    SetMessage(r, line);
    r->truncated = true;
    return Status::OK();
  }
  size_t i = line.find_first_not_of(" \t");
  if (i != std::string_view::npos && line[i] == '{') {
    ASSIGN_OR_RETURN(bool decoded, Decode(line, NativeKeys(), receive_ns, r, extra_labels));
    if (decoded) return Status::OK();
  }
  SetMessage(r, line);
  return Status::OK();
}

}  // namespace trainwatch::logs
