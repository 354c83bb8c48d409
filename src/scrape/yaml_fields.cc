#include "scrape/yaml_fields.h"

namespace trainwatch::scrape::yaml {

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

Status CheckKeys(const YAML::Node& n, const std::string& where, const std::set<std::string, std::less<>>& allowed) {
  if (!n.IsMap()) return Err(where, "expected a mapping");
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (!allowed.contains(k)) return Err(where, "unknown field \"" + k + "\"");
  }
  return Status::OK();
}

}  // namespace trainwatch::scrape::yaml
