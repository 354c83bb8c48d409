#pragma once
// Prometheus rule files (rulefmt, as of Prometheus 2.42): groups with name,
// interval, limit and rules; recording rules (record, expr, labels) and
// alerting rules (alert, expr, for, keep_firing_for, labels, annotations).
// Loading validates like `promtool check rules`: unknown keys, bad durations,
// duplicate or empty group names, record/alert both or neither set, invalid
// metric and label names, unparsable expressions and templates. Each error
// reads like promtool's, e.g.
//   rules.yml: 9:13: group "g", rule 2, "x": invalid recording rule name: x y
// (line:column of the YAML value, when there is one).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trainwatch::rules {

struct Rule {
  std::string record;  // set for a recording rule
  std::string alert;   // set for an alerting rule
  std::string expr;
  int64_t for_ms = 0;
  int64_t keep_firing_for_ms = 0;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  int line = 0;  // 1-based line of the rule in its file

  bool is_alert() const { return !alert.empty(); }
  const std::string& name() const { return is_alert() ? alert : record; }
};

struct RuleGroup {
  std::string name;
  int64_t interval_ms = 0;  // 0: the global evaluation interval
  int limit = 0;            // 0: no limit on alerts / series per evaluation
  std::vector<Rule> rules;
};

struct RuleFile {
  std::vector<RuleGroup> groups;
  size_t RuleCount() const;
};

// Parses and validates rule-file YAML. Errors (promtool's wording, without
// a file prefix) go to *errors; the result is meaningful only when it is empty.
RuleFile ParseRuleFile(std::string_view content, std::vector<std::string>* errors);

// Reads and parses `path`; each error is prefixed with "path: ".
RuleFile LoadRuleFile(const std::string& path, std::vector<std::string>* errors);

// promtool's duplicate-rules lint: recording rules with the same name and
// labels. One entry per duplicate, "Metric: NAME\nLabel(s):\n\tk: v\n...".
std::vector<std::string> FindDuplicateRecordingRules(const RuleFile& file);

}  // namespace trainwatch::rules
