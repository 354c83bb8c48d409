// Prometheus rule files (rules/rule_file.h ParseRuleFile: YAML, PromQL
// expressions, label and annotation templates, promtool's checks) and
// promtool's duplicate-rule lint. Every error is a non-empty line; an
// accepted file has named groups whose rules are each either recording rules
// with a valid metric name or alerting rules, with an expression that parses.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/labels.h"
#include "promql/parser/parse.h"
#include "rules/rule_file.h"

namespace {
constexpr const char* kTarget = "rule_file_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rules = trainwatch::rules;
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> errors;
  rules::RuleFile f = rules::ParseRuleFile(yaml, &errors);
  if (!errors.empty()) {
    for (const std::string& e : errors) FUZZ_CHECK(!e.empty(), "empty error");
    return 0;
  }
  for (const rules::RuleGroup& g : f.groups) {
    FUZZ_CHECK(!g.name.empty(), "accepted a group without a name");
    for (const rules::Rule& r : g.rules) {
      FUZZ_CHECK(r.record.empty() != r.alert.empty(), "rule is neither or both recording and alerting");
      if (!r.is_alert()) FUZZ_CHECK(trainwatch::model::IsValidMetricName(r.record), "bad record name: " + r.record);
      auto e = trainwatch::promql::parser::ParseExpr(r.expr);
      FUZZ_CHECK(e.ok(), "accepted an expression that does not parse: " + r.expr);
    }
  }
  (void)rules::FindDuplicateRecordingRules(f);
  return 0;
}
