#pragma once
// Readers for YAML config fields with Prometheus's error texts, shared by
// scrape_configs, the HTTP client config and rules' `alerting:` parser.
// Each error is "<where>: <message>".

#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace trainwatch::scrape::yaml {

Status Err(const std::string& where, const std::string& msg);
// A scalar as text; null is "".
Result<std::string> Str(const YAML::Node& n, const std::string& where);
// true / True / TRUE, false / False / FALSE, as Go's YAML.
Result<bool> Bool(const YAML::Node& n, const std::string& where);
// Every key of the mapping `n` is in `allowed`; else "unknown field \"k\"".
Status CheckKeys(const YAML::Node& n, const std::string& where, const std::set<std::string, std::less<>>& allowed);

}  // namespace trainwatch::scrape::yaml
