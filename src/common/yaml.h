#pragma once
// Typed reads of YAML config fields (prometheus.yml's sections, alertmanager.yml,
// the web and token files) with one error format that names the line and the
// field: "line 3: scrape_configs[0] (job \"x\").sample_limit: invalid integer \"-1\"".
// The line is the offending node's; a node without a mark (built in code)
// gives the message without it. Booleans are Go's yaml.v2 ones, which
// Prometheus, Alertmanager and the exporter toolkit decode with.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"

namespace trainwatch::common::yaml {

using KeySet = std::set<std::string, std::less<>>;

// InvalidArgument "line N: <where>: <msg>", N the 1-based line of `n`.
Status Err(const YAML::Node& n, std::string_view where, std::string_view msg);
// InvalidArgument "<where>: <msg>": for a check that spans several fields.
Status Err(std::string_view where, std::string_view msg);
// "line N: " for `n`, or "" when it has no mark.
std::string LinePrefix(const YAML::Node& n);

// A scalar as text; null or absent is "".
Result<std::string> Str(const YAML::Node& n, std::string_view where);
// yaml.v2's booleans: true, True, TRUE, yes, Yes, YES, y, Y, on, On, ON and their false forms.
Result<bool> Bool(const YAML::Node& n, std::string_view where);
Result<uint64_t> Uint(const YAML::Node& n, std::string_view where);
Result<int64_t> Int(const YAML::Node& n, std::string_view where);
// A Prometheus duration ("30s", "1h30m"), in milliseconds.
Result<int64_t> Dur(const YAML::Node& n, std::string_view where);
// A list of scalars; null or absent is empty. Errors name the entry: "<where>[2]".
Result<std::vector<std::string>> StrList(const YAML::Node& n, std::string_view where);
// A mapping; false for null or absent.
Result<bool> Map(const YAML::Node& n, std::string_view where);

// `n` is a mapping whose keys are strings in `allowed`, each given once.
// `unsupported`: keys of the format that trainwatch refuses by name (so a
// setting is never silently ignored).
Status CheckKeys(const YAML::Node& n, std::string_view where, const KeySet& allowed,
                 const KeySet& unsupported = {});

// Sets *out when parent[key] is present and not null; the error names "<where>.<key>".
Status OptStr(const YAML::Node& parent, std::string_view key, std::string_view where, std::string* out);
Status OptBool(const YAML::Node& parent, std::string_view key, std::string_view where, bool* out);
Status OptDur(const YAML::Node& parent, std::string_view key, std::string_view where, int64_t* out);

}  // namespace trainwatch::common::yaml
