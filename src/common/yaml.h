#pragma once
// Typed reads of prometheus.yml fields with errors that name the field
// ("scrape_configs[0] (job \"x\").sample_limit: invalid integer \"-1\""),
// shared by the sections parsed in scrape/, remote/ and rules/.

#include <cstdint>
#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace trainwatch::common::yaml {

// InvalidArgument "<where>: <msg>".
Status Err(const std::string& where, const std::string& msg);
// A scalar as text; null is "".
Result<std::string> Str(const YAML::Node& n, const std::string& where);
// true/True/TRUE or false/False/FALSE.
Result<bool> Bool(const YAML::Node& n, const std::string& where);
Result<uint64_t> Uint(const YAML::Node& n, const std::string& where);
// A Prometheus duration ("30s", "1h30m"), in milliseconds.
Result<int64_t> Dur(const YAML::Node& n, const std::string& where);
// Every key of mapping `n` is in `allowed`.
Status CheckKeys(const YAML::Node& n, const std::string& where, const std::set<std::string, std::less<>>& allowed);

}  // namespace trainwatch::common::yaml
