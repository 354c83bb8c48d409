#include "common/yaml.h"

#include <charconv>

#include "base/units.h"

namespace trainwatch::common::yaml {

Status Err(const std::string& where, const std::string& msg) { return Status::InvalidArgument(where + ": " + msg); }

Result<std::string> Str(const YAML::Node& n, const std::string& where) {
  if (n.IsNull()) return std::string();
  if (!n.IsScalar()) return Err(where, "expected a string");
  return n.Scalar();
}

Result<bool> Bool(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) return Err(where, "expected true or false");
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return Err(where, "invalid boolean \"" + s + "\"");
}

Result<uint64_t> Uint(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) return Err(where, "expected a non-negative integer");
  uint64_t v = 0;
  const std::string& s = n.Scalar();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return Err(where, "invalid integer \"" + s + "\"");
  return v;
}

Result<int64_t> Dur(const YAML::Node& n, const std::string& where) {
  ASSIGN_OR_RETURN(std::string s, Str(n, where));
  auto d = ParseDurationMs(s);
  if (!d.ok()) return Err(where, d.error().message());
  return *d;
}

Status CheckKeys(const YAML::Node& n, const std::string& where, const std::set<std::string, std::less<>>& allowed) {
  if (!n.IsMap()) return Err(where, "expected a mapping");
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (!allowed.contains(k)) return Err(where, "unknown field \"" + k + "\"");
  }
  return Status::OK();
}

}  // namespace trainwatch::common::yaml
