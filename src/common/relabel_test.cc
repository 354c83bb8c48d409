// Relabeling: cases and expected values from Prometheus's own
// model/relabel/relabel_test.go (TestRelabel, TestRelabelValidate,
// TestTargetLabelValidity), configs written as YAML as a user would.
#include "common/relabel.h"

#include <gtest/gtest.h>

#include <map>

namespace trainwatch::common {
namespace {

LabelSet FromMap(const std::map<std::string, std::string>& m) {
  std::vector<model::Label> v;
  for (const auto& [k, val] : m) v.push_back({k, val});
  return LabelSet(std::move(v));
}

std::vector<RelabelConfig> Parse(const std::string& yaml) {
  auto r = ParseRelabelConfigs(YAML::Load(yaml), "relabel_configs");
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return r.ok() ? *r : std::vector<RelabelConfig>{};
}

struct Case {
  std::map<std::string, std::string> input;
  std::string config;
  std::map<std::string, std::string> output;
  bool drop = false;
};

TEST(Relabel, PrometheusCases) {
  const Case kCases[] = {
      {{{"a", "foo"}, {"b", "bar"}, {"c", "baz"}},
       "[{source_labels: [a], regex: 'f(.*)', target_label: d, separator: ';', replacement: 'ch${1}-ch${1}', action: replace}]",
       {{"a", "foo"}, {"b", "bar"}, {"c", "baz"}, {"d", "choo-choo"}}},
      {{{"a", "foo"}, {"b", "bar"}, {"c", "baz"}},
       "[{source_labels: [a, b], regex: 'f(.*);(.*)r', target_label: a, replacement: 'b${1}${2}m'},"
       " {source_labels: [c, a], regex: '(b).*b(.*)ba(.*)', target_label: d, replacement: '$1$2$2$3'}]",
       {{"a", "boobam"}, {"b", "bar"}, {"c", "baz"}, {"d", "boooom"}}},
      {{{"a", "foo"}},
       "[{source_labels: [a], regex: '.*o.*', action: drop},"
       " {source_labels: [a], regex: 'f(.*)', target_label: d, replacement: 'ch$1-ch$1'}]",
       {},
       true},
      {{{"a", "foo"}, {"b", "bar"}}, "[{source_labels: [a], regex: '.*o.*', action: drop}]", {}, true},
      {{{"a", "abc"}},
       "[{source_labels: [a], regex: '.*(b).*', target_label: d, replacement: '$1'}]",
       {{"a", "abc"}, {"d", "b"}}},
      {{{"a", "foo"}}, "[{source_labels: [a], regex: 'no-match', action: drop}]", {{"a", "foo"}}},
      {{{"a", "foo"}}, "[{source_labels: [a], regex: 'f|o', action: drop}]", {{"a", "foo"}}},
      {{{"a", "foo"}}, "[{source_labels: [a], regex: 'no-match', action: keep}]", {}, true},
      {{{"a", "foo"}}, "[{source_labels: [a], regex: 'f.*', action: keep}]", {{"a", "foo"}}},
      // No replacement must be applied if there is no match.
      {{{"a", "boo"}}, "[{source_labels: [a], regex: 'f', target_label: b, replacement: bar}]", {{"a", "boo"}}},
      {{{"a", "foo"}, {"b", "bar"}, {"c", "baz"}},
       "[{source_labels: [c], target_label: d, action: hashmod, modulus: 1000}]",
       {{"a", "foo"}, {"b", "bar"}, {"c", "baz"}, {"d", "976"}}},
      {{{"a", "foo\nbar"}},
       "[{source_labels: [a], target_label: b, action: hashmod, modulus: 1000}]",
       {{"a", "foo\nbar"}, {"b", "734"}}},
      {{{"a", "foo"}, {"b1", "bar"}, {"b2", "baz"}},
       "[{regex: '(b.*)', replacement: 'bar_${1}', action: labelmap}]",
       {{"a", "foo"}, {"b1", "bar"}, {"b2", "baz"}, {"bar_b1", "bar"}, {"bar_b2", "baz"}}},
      {{{"a", "foo"}, {"__meta_my_bar", "aaa"}, {"__meta_my_baz", "bbb"}, {"__meta_other", "ccc"}},
       "[{regex: '__meta_(my.*)', replacement: '${1}', action: labelmap}]",
       {{"a", "foo"}, {"__meta_my_bar", "aaa"}, {"__meta_my_baz", "bbb"}, {"__meta_other", "ccc"}, {"my_bar", "aaa"},
        {"my_baz", "bbb"}}},
      {{{"a", "some-name-value"}},
       "[{source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${2}', target_label: '${1}'}]",
       {{"a", "some-name-value"}, {"name", "value"}}},
      {{{"a", "some-name-value"}},
       "[{source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${3}', target_label: '${1}'}]",
       {{"a", "some-name-value"}}},
      {{{"a", "some-name-0"}},
       "[{source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${1}', target_label: '${3}'},"
       " {source_labels: [a], regex: 'some-([^-]+)(-[^,]+)', replacement: '${1}', target_label: '${3}'}]",
       {{"a", "some-name-0"}}},
      {{{"__meta_sd_tags", "path:/secret,job:some-job,label:foo=bar"}},
       "[{source_labels: [__meta_sd_tags], regex: '(?:.+,|^)path:(/[^,]+).*', replacement: '${1}', target_label: __metrics_path__},"
       " {source_labels: [__meta_sd_tags], regex: '(?:.+,|^)job:([^,]+).*', replacement: '${1}', target_label: job},"
       " {source_labels: [__meta_sd_tags], regex: '(?:.+,|^)label:([^=]+)=([^,]+).*', replacement: '${2}', target_label: '${1}'}]",
       {{"__meta_sd_tags", "path:/secret,job:some-job,label:foo=bar"}, {"__metrics_path__", "/secret"},
        {"job", "some-job"}, {"foo", "bar"}}},
      {{{"__meta_kubernetes_pod_container_port_name", "foo"}, {"__meta_kubernetes_pod_annotation_XXX_metrics_port", "9091"}},
       "[{regex: '^__meta_kubernetes_pod_container_port_name$', action: labeldrop},"
       " {source_labels: [__meta_kubernetes_pod_annotation_XXX_metrics_port], regex: '(.+)', replacement: metrics,"
       "  target_label: __meta_kubernetes_pod_container_port_name},"
       " {source_labels: [__meta_kubernetes_pod_container_port_name], regex: '^metrics$', action: keep}]",
       {{"__meta_kubernetes_pod_annotation_XXX_metrics_port", "9091"},
        {"__meta_kubernetes_pod_container_port_name", "metrics"}}},
      {{{"a", "foo"}, {"b1", "bar"}, {"b2", "baz"}}, "[{regex: '(b.*)', action: labelkeep}]",
       {{"b1", "bar"}, {"b2", "baz"}}},
      {{{"a", "foo"}, {"b1", "bar"}, {"b2", "baz"}}, "[{regex: '(b.*)', action: labeldrop}]", {{"a", "foo"}}},
      {{{"foo", "bAr123Foo"}},
       "[{source_labels: [foo], action: uppercase, target_label: foo_uppercase},"
       " {source_labels: [foo], action: lowercase, target_label: foo_lowercase}]",
       {{"foo", "bAr123Foo"}, {"foo_lowercase", "bar123foo"}, {"foo_uppercase", "BAR123FOO"}}},
      {{{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}},
       "[{source_labels: [__tmp_port], action: keepequal, target_label: __port1}]",
       {{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}}},
      {{{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}},
       "[{source_labels: [__tmp_port], action: dropequal, target_label: __port1}]",
       {},
       true},
      {{{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}},
       "[{source_labels: [__tmp_port], action: dropequal, target_label: __port2}]",
       {{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}}},
      {{{"__tmp_port", "1234"}, {"__port1", "1234"}, {"__port2", "5678"}},
       "[{source_labels: [__tmp_port], action: keepequal, target_label: __port2}]",
       {},
       true},
  };
  int i = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE("case " + std::to_string(i++) + ": " + c.config);
    LabelSet ls = FromMap(c.input);
    bool keep = Relabel(Parse(c.config), &ls);
    EXPECT_EQ(keep, !c.drop);
    if (keep) {
      EXPECT_EQ(ls, FromMap(c.output));
    }
  }
}

TEST(Relabel, ValidateErrors) {
  const std::pair<std::string, std::string> kCases[] = {
      {"{action: replace, target_label: ''}", "requires 'target_label' value"},
      {"{action: lowercase}", "requires 'target_label' value"},
      {"{action: lowercase, target_label: '${3}'}", "\"${3}\" is invalid 'target_label'"},
      {"{source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${1}', target_label: '0${3}'}",
       "\"0${3}\" is invalid 'target_label'"},
      {"{source_labels: [a], regex: 'some-([^-]+)-([^,]+)', replacement: '${1}', target_label: '-${3}'}",
       "\"-${3}\" is invalid 'target_label' for replace action"},
      {"{action: hashmod, target_label: x}", "requires non-zero modulus"},
      {"{action: labeldrop, regex: a, target_label: x}", "requires only 'regex', and no other fields"},
      {"{action: keepequal, source_labels: [a], target_label: b, regex: x}", "requires only 'source_labels'"},
      {"{action: explode}", "unknown relabel action \"explode\""},
      {"{regex: '(', target_label: x}", "invalid regular expression"},
      {"{target_label: x, colour: red}", "unknown field \"colour\""},
  };
  for (const auto& [yaml, want] : kCases) {
    auto r = ParseRelabelConfig(YAML::Load(yaml), "job.relabel_configs[0]");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << yaml << " -> " << r.error().message();
    EXPECT_NE(r.error().message().find("job.relabel_configs[0]"), std::string::npos) << r.error().message();
  }
  // Valid: a template target that expands to an invalid name at run time.
  EXPECT_TRUE(ParseRelabelConfig(YAML::Load("{source_labels: [a], regex: 'x(.*)', target_label: '${3}'}"), "r").ok());
  // Action names are case-insensitive, as Prometheus.
  EXPECT_TRUE(ParseRelabelConfig(YAML::Load("{source_labels: [a], regex: x, action: Keep}"), "r").ok());
}

TEST(Relabel, TargetLabelValidity) {
  const std::pair<std::string, bool> kCases[] = {
      {"-label", false}, {"label", true},  {"label${1}", true}, {"${1}label", true},     {"${1}", true},
      {"${", false},     {"$", false},     {"${}", false},      {"foo${", false},       {"$1", true},
      {"asd$2asd", true}, {"-foo${1}bar-", false}, {"_${1}_", true}, {"foo${bar}foo", true},
  };
  for (const auto& [s, valid] : kCases) {
    auto r = ParseRelabelConfig(YAML::Load("{source_labels: [a], target_label: '" + s + "'}"), "r");
    EXPECT_EQ(r.ok(), valid) << s;
  }
}

TEST(Relabel, GoTemplateExpansion) {
  re2::RE2 re("^(?:(?P<first>a+)(b*))$");
  std::vector<std::string_view> g = {"aabb", "aa", "bb"};
  EXPECT_EQ(ExpandTemplate(re, "$1-$2", g), "aa-bb");
  EXPECT_EQ(ExpandTemplate(re, "${first}x", g), "aax");
  EXPECT_EQ(ExpandTemplate(re, "$firstx", g), "");       // name "firstx" does not exist
  EXPECT_EQ(ExpandTemplate(re, "$1x", g), "");           // name "1x" is not a number
  EXPECT_EQ(ExpandTemplate(re, "$$1", g), "$1");
  EXPECT_EQ(ExpandTemplate(re, "a$-b", g), "a$-b");       // malformed: literal
  EXPECT_EQ(ExpandTemplate(re, "${9}", g), "");
}

}  // namespace
}  // namespace trainwatch::common
