#include "rules/rule_file.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace trainwatch::rules {
namespace {

std::vector<std::string> Errors(const std::string& yaml) {
  std::vector<std::string> errs;
  ParseRuleFile(yaml, &errs);
  return errs;
}

TEST(RuleFileTest, ParsesGroupsAndRules) {
  std::vector<std::string> errs;
  RuleFile f = ParseRuleFile(R"(groups:
- name: g
  interval: 30s
  limit: 10
  rules:
  - record: job:up:sum
    expr: sum by (job) (up)
    labels: {team: infra}
  - alert: Down
    expr: up == 0
    for: 5m
    keep_firing_for: 1m
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.instance }} is down'
- name: empty
  rules: []
)",
                             &errs);
  ASSERT_TRUE(errs.empty()) << errs[0];
  ASSERT_EQ(f.groups.size(), 2u);
  EXPECT_EQ(f.RuleCount(), 2u);
  const RuleGroup& g = f.groups[0];
  EXPECT_EQ(g.name, "g");
  EXPECT_EQ(g.interval_ms, 30000);
  EXPECT_EQ(g.limit, 10);
  EXPECT_EQ(g.rules[0].record, "job:up:sum");
  EXPECT_EQ(g.rules[0].labels.at("team"), "infra");
  EXPECT_FALSE(g.rules[0].is_alert());
  const Rule& a = g.rules[1];
  EXPECT_TRUE(a.is_alert());
  EXPECT_EQ(a.name(), "Down");
  EXPECT_EQ(a.expr, "up == 0");
  EXPECT_EQ(a.for_ms, 300000);
  EXPECT_EQ(a.keep_firing_for_ms, 60000);
  EXPECT_EQ(a.annotations.at("summary"), "{{ $labels.instance }} is down");
  EXPECT_EQ(a.line, 9);
}

TEST(RuleFileTest, EmptyFileHasNoRules) {
  std::vector<std::string> errs;
  EXPECT_EQ(ParseRuleFile("", &errs).RuleCount(), 0u);
  EXPECT_TRUE(errs.empty());
  EXPECT_TRUE(Errors("# only a comment\n").empty());
}

// Expected texts are what `promtool check rules` 2.42 prints for the same input.
TEST(RuleFileTest, ValidationErrorsReadLikePromtool) {
  auto errs = Errors(R"(groups:
- name: g1
  interval: 1m
  rules:
  - alert: A
    record: r
    expr: up
  - expr: up
  - record: "bad name"
    expr: up
    annotations:
      x: y
    for: 5m
  - alert: B
    expr: up ==
    labels:
      __name__: x
      "bad-label": y
    annotations:
      summary: "{{ $labels.x "
      "bad-ann": "{{ foo }}"
  - alert: C
    expr: ""
    keep_firing_for: 5m
- name: g1
  rules: []
- name: ""
  rules: []
)");
  std::vector<std::string> want = {
      "6:13: 5:12: group \"g1\", rule 1, \"A\": only one of 'record' and 'alert' must be set",
      "0:0: group \"g1\", rule 2, \"\": one of 'record' or 'alert' must be set",
      "9:13: group \"g1\", rule 3, \"bad name\": invalid field 'annotations' in recording rule",
      "9:13: group \"g1\", rule 3, \"bad name\": invalid field 'for' in recording rule",
      "9:13: group \"g1\", rule 3, \"bad name\": invalid recording rule name: bad name",
      "15:11: group \"g1\", rule 4, \"B\": could not parse expression: 1:6: parse error: unexpected end of input",
      "group \"g1\", rule 4, \"B\": invalid label name: __name__",
      "group \"g1\", rule 4, \"B\": invalid label name: bad-label",
      "group \"g1\", rule 4, \"B\": invalid annotation name: bad-ann",
      "group \"g1\", rule 4, \"B\": annotation \"bad-ann\": template: __alert_B:1: function \"foo\" not defined",
      "group \"g1\", rule 4, \"B\": annotation \"summary\": template: __alert_B:1: unclosed action",
      "23:11: group \"g1\", rule 5, \"C\": field 'expr' must be set in rule",
      "25:3: groupname: \"g1\" is repeated in the same file",
      "27:3: Groupname must not be empty",
  };
  EXPECT_EQ(errs, want);
}

TEST(RuleFileTest, KeepFiringForOnRecordingRule) {
  EXPECT_EQ(Errors("groups:\n- name: g\n  rules:\n  - record: x\n    expr: up\n    keep_firing_for: 1m\n"),
            std::vector<std::string>{"4:13: group \"g\", rule 1, \"x\": invalid field 'keep_firing_for' in recording rule"});
}

TEST(RuleFileTest, UnknownFieldsAreRejectedWithTheirLine) {
  EXPECT_EQ(Errors("groups:\n- name: g\n  unknown: 1\n  rules:\n  - alert: A\n    expr: up\n    bogus: 2\n"),
            std::vector<std::string>{"yaml: unmarshal errors:\n  line 3: field unknown not found in type "
                                     "rulefmt.RuleGroup\n  line 7: field bogus not found in type rulefmt.RuleNode"});
  EXPECT_EQ(Errors("group:\n- name: g\n"),
            std::vector<std::string>{"yaml: unmarshal errors:\n  line 1: field group not found in type rulefmt.RuleGroups"});
}

TEST(RuleFileTest, BadDurations) {
  EXPECT_EQ(Errors("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    for: 5x\n"),
            std::vector<std::string>{"not a valid duration string: \"5x\""});
  EXPECT_EQ(Errors("groups:\n- name: g\n  interval: soon\n  rules: []\n"),
            std::vector<std::string>{"not a valid duration string: \"soon\""});
}

TEST(RuleFileTest, WrongTypes) {
  EXPECT_EQ(Errors("groups: 3\n"),
            std::vector<std::string>{"yaml: unmarshal errors:\n  line 1: cannot unmarshal !!int `3` into []rulefmt.RuleGroup"});
  EXPECT_EQ(Errors("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: [up]\n"),
            std::vector<std::string>{"5:11: group \"g\", rule 1, \"A\": field 'expr' must be set in rule"});
  EXPECT_EQ(Errors("groups:\n- name: g\n  limit: many\n  rules: []\n"),
            std::vector<std::string>{"yaml: unmarshal errors:\n  line 3: cannot unmarshal !!str `many` into int"});
}

TEST(RuleFileTest, YamlSyntaxErrorNamesTheLine) {
  auto errs = Errors("groups:\n- name: g\n  rules: [\n");
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rfind("yaml: line ", 0), 0u) << errs[0];
}

TEST(RuleFileTest, LoadPrefixesThePath) {
  std::vector<std::string> errs;
  LoadRuleFile("/nonexistent/rules.yml", &errs);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "/nonexistent/rules.yml: open /nonexistent/rules.yml: No such file or directory");
}

TEST(RuleFileTest, DuplicateRecordingRulesLint) {
  std::vector<std::string> errs;
  RuleFile f = ParseRuleFile(R"(groups:
- name: g
  rules:
  - record: a
    expr: up
    labels: {x: "1"}
  - record: a
    expr: up
    labels: {x: "1"}
  - record: a
    expr: up
)",
                             &errs);
  ASSERT_TRUE(errs.empty());
  EXPECT_EQ(FindDuplicateRecordingRules(f), std::vector<std::string>{"Metric: a\nLabel(s):\n\tx: 1\n"});
}

// The shipped training rule pack loads without errors.
TEST(RuleFileTest, TrainingRulePackIsValid) {
  const char* dir = std::getenv("TW_SOURCE_DIR");
  std::vector<std::string> errs;
  RuleFile f = LoadRuleFile(std::string(dir ? dir : ".") + "/rules/training.rules.yml", &errs);
  ASSERT_TRUE(errs.empty()) << errs[0];
  EXPECT_GE(f.RuleCount(), 12u);
  for (const auto& g : f.groups) {
    for (const auto& r : g.rules) {
      if (!r.is_alert()) continue;
      EXPECT_TRUE(r.annotations.count("summary")) << r.alert;
      EXPECT_TRUE(r.annotations.count("description")) << r.alert;
      EXPECT_TRUE(r.annotations.count("runbook")) << r.alert;
    }
  }
}

}  // namespace
}  // namespace trainwatch::rules
