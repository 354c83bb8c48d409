#include "common/yaml.h"

#include <algorithm>
#include <charconv>

#include "base/units.h"

namespace trainwatch::common::yaml {

std::string LinePrefix(const YAML::Node& n) {
  if (!n.IsDefined() || n.Mark().line < 0) return "";
  return "line " + std::to_string(n.Mark().line + 1) + ": ";
}

Status Err(const YAML::Node& n, std::string_view where, std::string_view msg) {
  return Status::InvalidArgument(LinePrefix(n) + std::string(where) + ": " + std::string(msg));
}

Status Err(std::string_view where, std::string_view msg) {
  return Status::InvalidArgument(std::string(where) + ": " + std::string(msg));
}

Result<std::string> Str(const YAML::Node& n, std::string_view where) {
  if (!n || n.IsNull()) return std::string();
  if (!n.IsScalar()) return Err(n, where, "expected a string");
  return n.Scalar();
}

Result<bool> Bool(const YAML::Node& n, std::string_view where) {
  if (!n.IsScalar()) return Err(n, where, "expected true or false");
  static const KeySet kTrue = {"true", "True", "TRUE", "yes", "Yes", "YES", "y", "Y", "on", "On", "ON"};
  static const KeySet kFalse = {"false", "False", "FALSE", "no", "No", "NO", "n", "N", "off", "Off", "OFF"};
  const std::string& s = n.Scalar();
  if (kTrue.contains(s)) return true;
  if (kFalse.contains(s)) return false;
  return Err(n, where, "invalid boolean \"" + s + "\"");
}

namespace {

// A whole scalar as an integer of type T; `expected` names what a non-scalar is not.
template <typename T>
Result<T> Integer(const YAML::Node& n, std::string_view where, std::string_view expected) {
  if (!n.IsScalar()) return Err(n, where, expected);
  T v = 0;
  const std::string& s = n.Scalar();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return Err(n, where, "invalid integer \"" + s + "\"");
  return v;
}

}  // namespace

Result<uint64_t> Uint(const YAML::Node& n, std::string_view where) {
  return Integer<uint64_t>(n, where, "expected a non-negative integer");
}

Result<int64_t> Int(const YAML::Node& n, std::string_view where) { return Integer<int64_t>(n, where, "expected an integer"); }

Result<int64_t> Dur(const YAML::Node& n, std::string_view where) {
  ASSIGN_OR_RETURN(std::string s, Str(n, where));
  auto d = ParseDurationMs(s);
  if (!d.ok()) return Err(n, where, d.error().message());
  return *d;
}

Result<std::vector<std::string>> StrList(const YAML::Node& n, std::string_view where) {
  std::vector<std::string> out;
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return Err(n, where, "expected a list of strings");
  for (size_t i = 0; i < n.size(); i++) {
    ASSIGN_OR_RETURN(std::string s, Str(n[i], std::string(where) + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(s));
  }
  return out;
}

Result<bool> Map(const YAML::Node& n, std::string_view where) {
  if (!n || n.IsNull()) return false;
  if (!n.IsMap()) return Err(n, where, "expected a mapping");
  return true;
}

namespace {

// Levenshtein distance of a and b, stopping early above `cap`.
size_t EditDistance(std::string_view a, std::string_view b, size_t cap) {
  if (a.size() > b.size() + cap || b.size() > a.size() + cap) return cap + 1;
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) prev[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// ` (did you mean "x"?)` for the allowed key nearest a misspelt one, when
// it is within two edits.
std::string Suggestion(std::string_view key, const KeySet& allowed) {
  size_t best = 3;
  std::string_view near;
  for (const std::string& a : allowed) {
    size_t d = EditDistance(key, a, 2);
    if (d < best) {
      best = d;
      near = a;
    }
  }
  return near.empty() ? "" : " (did you mean \"" + std::string(near) + "\"?)";
}

}  // namespace

Status CheckKeys(const YAML::Node& n, std::string_view where, const KeySet& allowed, const KeySet& unsupported) {
  if (!n.IsMap()) return Err(n, where, "expected a mapping");
  KeySet seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return Err(kv.first, where, "keys must be strings");
    const std::string& k = kv.first.Scalar();
    std::string field = where.empty() ? k : std::string(where) + "." + k;
    if (unsupported.contains(k)) return Err(kv.first, field, "not supported by trainwatch; remove it");
    if (!allowed.contains(k)) {
      return Err(kv.first, where.empty() ? "top level" : where, "unknown field \"" + k + "\"" + Suggestion(k, allowed));
    }
    // yaml.v2 refuses a key given twice; yaml-cpp would keep one silently.
    if (!seen.insert(k).second) return Err(kv.first, field, "given twice");
  }
  return Status::OK();
}

Status OptStr(const YAML::Node& parent, std::string_view key, std::string_view where, std::string* out) {
  const YAML::Node n = parent[std::string(key)];
  if (!n || n.IsNull()) return Status::OK();
  ASSIGN_OR_RETURN(*out, Str(n, std::string(where) + "." + std::string(key)));
  return Status::OK();
}

Status OptBool(const YAML::Node& parent, std::string_view key, std::string_view where, bool* out) {
  const YAML::Node n = parent[std::string(key)];
  if (!n || n.IsNull()) return Status::OK();
  ASSIGN_OR_RETURN(*out, Bool(n, std::string(where) + "." + std::string(key)));
  return Status::OK();
}

Status OptDur(const YAML::Node& parent, std::string_view key, std::string_view where, int64_t* out) {
  const YAML::Node n = parent[std::string(key)];
  if (!n || n.IsNull()) return Status::OK();
  ASSIGN_OR_RETURN(*out, Dur(n, std::string(where) + "." + std::string(key)));
  return Status::OK();
}

}  // namespace trainwatch::common::yaml
