#include "logs/json_record_reference.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace trainwatch::logs::reference {

using nlohmann::json;

namespace {

// A time value: unix seconds (fraction allowed; numbers above 1e11/1e14/1e17
// are read as ms/us/ns), a numeric string likewise, or RFC 3339.
Result<int64_t> TimeFromJson(const json& v, std::string_view key) {
  // The former double -> int64 conversion, saturating where it overflowed
  // (undefined behaviour, which clang's UBSan reports): the new decoder refuses
  // such times and json_record_diff_test does not compare them.
  auto to_int = [](double y) -> int64_t {
    if (!(y < 9223372036854775808.0)) return INT64_MAX;
    if (!(y >= -9223372036854775808.0)) return INT64_MIN;
    return static_cast<int64_t>(y);
  };
  auto from_number = [&to_int](double x) -> int64_t {
    double a = std::fabs(x);
    if (a >= 1e17) return to_int(x);
    if (a >= 1e14) return to_int(x * 1e3);
    if (a >= 1e11) return to_int(x * 1e6);
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

}  // namespace

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

Result<bool> DecodeDocument(std::string_view text, const KeyNames& keys, int64_t receive_ns, Record* r,
                            std::vector<model::Label>* extra_labels) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return false;
  RETURN_IF_ERROR(RecordFromJson(doc, keys, receive_ns, r, extra_labels));
  return true;
}

bool BulkAction(std::string_view line, std::string_view default_index, std::string* action, std::string* index,
                std::string* id) {
  json a = json::parse(line, nullptr, false);
  if (!a.is_object() || a.size() != 1 || !a.begin()->is_object()) return false;
  *action = a.begin().key();
  const json& meta = *a.begin();
  auto idx = meta.find("_index");
  *index = idx != meta.end() && idx->is_string() ? idx->get<std::string>() : std::string(default_index);
  auto i = meta.find("_id");
  *id = i != meta.end() && i->is_string() ? i->get<std::string>() : std::string();
  return true;
}

}  // namespace trainwatch::logs::reference
