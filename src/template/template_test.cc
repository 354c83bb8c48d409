#include "template/template.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace trainwatch::tmpl {
namespace {

// Expands like Prometheus's Expander.Expand for template "test" (the shape of
// Prometheus's template_test.go): errors come back as their message.
std::string Expand(const std::string& text, const Value& data = Value(), const TemplateOptions& opts = {}) {
  auto t = Template::Parse("test", text);
  if (!t.ok()) return "error parsing template test: " + t.error().message();
  auto out = t->Execute(data, opts);
  if (!out.ok()) return "error executing template test: " + out.error().message();
  return *out;
}

TemplateOptions WithQuery(std::vector<Sample> result) {
  TemplateOptions o;
  o.query = [result](std::string_view) -> Result<std::vector<Sample>> { return result; };
  o.external_url = "http://testhost:9090/path/prefix";
  return o;
}

Value Floats(std::vector<double> v) {
  std::vector<Value> out;
  for (double d : v) out.push_back(Value::Float(d));
  return Value::List(out, "float64");
}
Value Strings(std::vector<std::string> v) {
  std::vector<Value> out;
  for (auto& s : v) out.push_back(Value::String(s));
  return Value::List(out, "string");
}
Value Ints(std::vector<int64_t> v) {
  std::vector<Value> out;
  for (int64_t i : v) out.push_back(Value::Int(i));
  return Value::List(out, "int64");
}
Value Uints(std::vector<uint64_t> v) {
  std::vector<Value> out;
  for (uint64_t u : v) out.push_back(Value::Uint(u));
  return Value::List(out, "uint64");
}

// Cases and expected texts from Prometheus's template/template_test.go.
TEST(TemplateTest, PrometheusTemplateTestCases) {
  struct Case {
    std::string text;
    Value input;
    std::string want;
    std::vector<Sample> query;
  };
  const std::string kNaN = "NaN";
  std::vector<Case> cases = {
      {"plain text", {}, "plain text", {}},
      {"{{ 1 }}", {}, "1", {}},
      {"{{\xc2\xa0}}", {}, "error parsing template test: template: test:1: unrecognized character in action: U+00A0",
       {}},
      {"{{ \"<b>\" }}", {}, "<b>", {}},
      {"{{define \"x\"}}{{.arg0}} {{.arg1}}{{end}}{{template \"x\" (args 1 \"2\")}}", {}, "1 2", {}},
      {"{{ query \"1.5\" | first | value }}", {}, "1.5", {{{}, 1.5}}},
      {"{{ query \"metric{instance='a'}\" | first | value }}", {}, "11",
       {{{{"__name__", "metric"}, {"instance", "a"}}, 11}}},
      {"{{ query \"metric{instance='a'}\" | first | label \"instance\" }}", {}, "a",
       {{{{"__name__", "metric"}, {"instance", "a"}}, 11}}},
      {"{{ query \"metric{__value__='a'}\" | first | strvalue }}", {}, "a",
       {{{{"__name__", "metric"}, {"__value__", "a"}}, 11}}},
      {"{{ query \"metric{instance='a'}\" | first | label \"foo\" }}", {}, "",
       {{{{"__name__", "metric"}, {"instance", "a"}}, 11}}},
      {"{{ $x := query \"metric\" | first }}{{ $x.Labels.foo }}", {}, "",
       {{{{"__name__", "metric"}, {"instance", "a"}}, 11}}},
      {"{{ range query \"metric\" | sortByLabel \"instance\" }}{{.Labels.instance}}:{{.Value}}: {{end}}", {},
       "a:11: b:21: ",
       {{{{"__name__", "metric"}, {"instance", "b"}}, 21}, {{{"__name__", "metric"}, {"instance", "a"}}, 11}}},
      {"{{ \"foo.example.com\" | stripPort }}", {}, "foo.example.com", {}},
      {"{{ \"foo.example.com:12345\" | stripPort }}", {}, "foo.example.com", {}},
      {"{{ \"192.0.2.1\" | stripPort }}", {}, "192.0.2.1", {}},
      {"{{ \"192.0.2.1:12345\" | stripPort }}", {}, "192.0.2.1", {}},
      {"{{ \"2001:0DB8::1\" | stripPort }}", {}, "2001:0DB8::1", {}},
      {"{{ \"[2001:0DB8::1]:12345\" | stripPort }}", {}, "2001:0DB8::1", {}},
      {"{{ \"[2001:0DB8::1]::12345\" | stripPort }}", {}, "[2001:0DB8::1]::12345", {}},
      {"{{ .Foo }}", {}, "<no value>", {}},
      {"{{", {}, "error parsing template test: template: test:1: unclosed action", {}},
      {"{{ query \"missing\" | first }}", {},
       "error executing template test: template: test:1:21: executing \"test\" at <first>: error calling first: "
       "first() called on vector with no elements",
       {}},
      {"{{ (query \"missing\").banana }}", {},
       "error executing template test: template: test:1:10: executing \"test\" at <\"missing\">: can't evaluate "
       "field banana in type template.queryResult",
       {}},
      {"{{ reReplaceAll \"(a)b\" \"x$1\" \"ab\" }}", {}, "xa", {}},
      {"{{ range . }}{{ humanize . }}:{{ end }}", Floats({0.0, 1.0, 1234567.0, .12}), "0:1:1.235M:120m:", {}},
      {"{{ range . }}{{ humanize . }}:{{ end }}", Strings({"0.0", "1.0", "1234567.0", ".12"}), "0:1:1.235M:120m:",
       {}},
      {"{{ humanize \"one\" }}", {},
       "error executing template test: template: test:1:3: executing \"test\" at <humanize \"one\">: error calling "
       "humanize: strconv.ParseFloat: parsing \"one\": invalid syntax",
       {}},
      {"{{ range . }}{{ humanize . }}:{{ end }}",
       Ints({0, -1, 1, 1234567, std::numeric_limits<int64_t>::max()}), "0:-1:1:1.235M:9.223E:", {}},
      {"{{ range . }}{{ humanize . }}:{{ end }}", Uints({0, 1, 1234567, std::numeric_limits<uint64_t>::max()}),
       "0:1:1.235M:18.45E:", {}},
      {"{{ range . }}{{ humanize1024 . }}:{{ end }}", Floats({0.0, 1.0, 1048576.0, .12}), "0:1:1Mi:0.12:", {}},
      {"{{ range . }}{{ humanize1024 . }}:{{ end }}", Strings({"0.0", "1.0", "1048576.0", ".12"}), "0:1:1Mi:0.12:",
       {}},
      {"{{ range . }}{{ humanize1024 . }}:{{ end }}",
       Ints({0, -1, 1, 1234567, std::numeric_limits<int64_t>::max()}), "0:-1:1:1.177Mi:8Ei:", {}},
      {"{{ range . }}{{ humanize1024 . }}:{{ end }}", Uints({0, 1, 1234567, std::numeric_limits<uint64_t>::max()}),
       "0:1:1.177Mi:16Ei:", {}},
      {"{{ range . }}{{ humanizeDuration . }}:{{ end }}",
       Floats({0, 1, 60, 3600, 86400, 86400 + 3600, -(86400 * 2 + 3600 * 3 + 60 * 4 + 5), 899.99}),
       "0s:1s:1m 0s:1h 0m 0s:1d 0h 0m 0s:1d 1h 0m 0s:-2d 3h 4m 5s:14m 59s:", {}},
      {"{{ range . }}{{ humanizeDuration . }}:{{ end }}", Strings({"0", "1", "60", "3600", "86400"}),
       "0s:1s:1m 0s:1h 0m 0s:1d 0h 0m 0s:", {}},
      {"{{ range . }}{{ humanizeDuration . }}:{{ end }}", Floats({.1, .0001, .12345, 60.1, 60.5, 1.2345, 12.345}),
       "100ms:100us:123.5ms:1m 0s:1m 0s:1.234s:12.35s:", {}},
      {"{{ range . }}{{ humanizeDuration . }}:{{ end }}", Ints({0, -1, 1, 1234567}), "0s:-1s:1s:14d 6h 56m 7s:", {}},
      {"{{ range . }}{{ humanize . }}:{{ humanize1024 . }}:{{ humanizeDuration . }}:{{humanizeTimestamp .}}:{{ end }}",
       Floats({INFINITY, -INFINITY, NAN}), "+Inf:+Inf:+Inf:+Inf:-Inf:-Inf:-Inf:-Inf:NaN:NaN:NaN:NaN:", {}},
      {"{{ range . }}{{ humanize . }}:{{ humanize1024 . }}:{{ humanizeDuration . }}:{{humanizeTimestamp .}}:{{ end }}",
       Strings({"+Inf", "-Inf", "NaN"}), "+Inf:+Inf:+Inf:+Inf:-Inf:-Inf:-Inf:-Inf:NaN:NaN:NaN:NaN:", {}},
      {"{{ -0.22222 | humanizePercentage }}:{{ 0.0 | humanizePercentage }}:{{ 0.1234567 | humanizePercentage }}:{{ "
       "1.23456 | humanizePercentage }}",
       {}, "-22.22%:0%:12.35%:123.5%", {}},
      {"{{ range . }}{{ humanizePercentage . }}:{{ end }}",
       Ints({0, -1, 1, 1234567, std::numeric_limits<int64_t>::max()}), "0%:-100%:100%:1.235e+08%:9.223e+20%:", {}},
      {"{{ \"one\" | humanizePercentage }}", {},
       "error executing template test: template: test:1:11: executing \"test\" at <humanizePercentage>: error "
       "calling humanizePercentage: strconv.ParseFloat: parsing \"one\": invalid syntax",
       {}},
      {"{{ range . }}{{ humanizeTimestamp . }}:{{ end }}", Ints({0, -1, 1, 1234567, 9223372036}),
       "1970-01-01 00:00:00 +0000 UTC:1969-12-31 23:59:59 +0000 UTC:1970-01-01 00:00:01 +0000 UTC:1970-01-15 "
       "06:56:07 +0000 UTC:2262-04-11 23:47:16 +0000 UTC:",
       {}},
      {"{{ range . }}{{ humanizeTimestamp . }}:{{ end }}",
       Ints({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}),
       "error executing template test: template: test:1:16: executing \"test\" at <humanizeTimestamp .>: error "
       "calling humanizeTimestamp: -9.223372036854776e+18 cannot be represented as a nanoseconds timestamp since it "
       "overflows int64",
       {}},
      {"{{ range . }}{{ humanizeTimestamp . }}:{{ end }}", Uints({std::numeric_limits<uint64_t>::max()}),
       "error executing template test: template: test:1:16: executing \"test\" at <humanizeTimestamp .>: error "
       "calling humanizeTimestamp: 1.8446744073709552e+19 cannot be represented as a nanoseconds timestamp since it "
       "overflows int64",
       {}},
      {"{{ 1435065584.128 | humanizeTimestamp }}", {}, "2015-06-23 13:19:44.128 +0000 UTC", {}},
      {"{{ \"1435065584.128\" | humanizeTimestamp }}", {}, "2015-06-23 13:19:44.128 +0000 UTC", {}},
      {"{{ (1435065584.128 | toTime).Format \"2006\" }}", {}, "2015", {}},
      {"{{ (\"1435065584.128\" | toTime).Format \"2006\" }}", {}, "2015", {}},
      {"{{ \"aa bb CC\" | title }}", {}, "Aa Bb CC", {}},
      {"{{ \"aa bb CC\" | toUpper }}", {}, "AA BB CC", {}},
      {"{{ \"aA bB CC\" | toLower }}", {}, "aa bb cc", {}},
      {"{{ match \"a+\" \"aa\" }} {{ match \"a+\" \"b\" }}", {}, "true false", {}},
      {"{{ graphLink \"up\" }}", {}, "/graph?g0.expr=up&g0.tab=0", {}},
      {"{{ tableLink \"up\" }}", {}, "/graph?g0.expr=up&g0.tab=1", {}},
      {"{{ pathPrefix }}", {}, "/path/prefix", {}},
      {"{{ externalURL }}", {}, "http://testhost:9090/path/prefix", {}},
      {"{{ printf \"%0.2f\" (parseDuration \"1h2m10ms\") }}", {}, "3720.01", {}},
      {"{{ \"foo.example.com\" | stripDomain }}", {}, "foo", {}},
      {"{{ \"foo.example.com:12345\" | stripDomain }}", {}, "foo:12345", {}},
      {"{{ \"192.0.2.1\" | stripDomain }}", {}, "192.0.2.1", {}},
      {"{{ \"192.0.2.1:12345\" | stripDomain }}", {}, "192.0.2.1:12345", {}},
      {"{{ \"2001:0DB8::1\" | stripDomain }}", {}, "2001:0DB8::1", {}},
      {"{{ \"[2001:0DB8::1]:12345\" | stripDomain }}", {}, "[2001:0DB8::1]:12345", {}},
      {"{{ \"[2001:0DB8::1]::12345\" | stripDomain }}", {}, "[2001:0DB8::1]::12345", {}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Expand(c.text, c.input, WithQuery(c.query)), c.want) << c.text;
  }
}

TEST(TemplateTest, ParseErrorsNameTheLine) {
  auto f = [](const std::string& text, const std::string& want) {
    auto t = Template::Parse("t", text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.error().message(), want) << text;
  };
  f("{{ end }}", "template: t:1: unexpected {{end}}");
  f("a\n{{ else }}", "template: t:2: unexpected {{else}}");
  f("{{ if }}{{ end }}", "template: t:1: missing value for if");
  f("{{ \"abc }}", "template: t:1: unterminated quoted string");
  f("{{ `abc }}", "template: t:1: unterminated raw quoted string");
  f("{{ 1x }}", "template: t:1: bad number syntax: \"1x\"");
  f("{{ (1 }}", "template: t:1: unclosed left paren");
  f("{{ 1) }}", "template: t:1: unexpected \")\" in command");
  f("{{ break }}", "template: t:1: {{break}} outside {{range}}");
  f("{{ /* x */ }}", "template: t:1: unexpected \"/\" in command");
  f("{{/* x */ 1 }}", "template: t:1: comment ends before closing delimiter");
  f("{{/* x }}", "template: t:1: unclosed comment");
  f("{{ 1.foo }}", "template: t:1: bad number syntax: \"1.f\"");
  f("{{ \"a\".foo }}", "template: t:1: unexpected . after term \"\\\"a\\\"\"");
  f("{{ $x := 1 }}{{ if true }}{{ $y := 2 }}{{ end }}{{ $y }}", "template: t:1: undefined variable \"$y\"");
  f("{{ range $a, $b, $c := . }}{{ end }}", "template: t:1: too many declarations in range");
  f("{{ printf \"%d\" 99999999999999999999 }}", "template: t:1: integer overflow: \"99999999999999999999\"");
  f("{{ template x }}", "template: t:1: unexpected \"x\" in template clause");
}

TEST(TemplateTest, TemplatesCannotReachOutside) {
  // Go's text/template has no file, env or exec functions, and neither do we.
  for (const char* fn : {"readFile", "env", "exec", "include", "tmpl", "call2"}) {
    auto t = Template::Parse("t", std::string("{{ ") + fn + " \"/etc/passwd\" }}");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().message(), std::string("template: t:1: function \"") + fn + "\" not defined");
  }
  EXPECT_EQ(Expand("{{ template \"/etc/passwd\" }}"),
            "error executing template test: template: test:1:12: executing \"test\" at <{{template "
            "\"/etc/passwd\"}}>: template \"/etc/passwd\" not defined");
  EXPECT_EQ(Expand("{{ query \"up\" }}"),
            "error executing template test: template: test:1:3: executing \"test\" at <query \"up\">: error calling "
            "query: query function not available");
}

TEST(TemplateTest, OutputIsBounded) {
  std::vector<Sample> many(1000, Sample{{{"instance", std::string(200, 'x')}}, 1});
  TemplateOptions o = WithQuery(many);
  o.limits.max_output_bytes = 100'000;
  std::string out = Expand("{{ range query \"x\" }}{{ .Labels.instance }}{{ end }}", {}, o);
  EXPECT_NE(out.find("template output exceeds 100000 bytes"), std::string::npos) << out.substr(0, 200);
}

TEST(TemplateTest, WorkIsBounded) {
  std::vector<Sample> many(1000, Sample{{}, 1});
  TemplateOptions o = WithQuery(many);
  o.limits.max_steps = 100'000;
  std::string out =
      Expand("{{ $q := query \"x\" }}{{ range $q }}{{ range $q }}{{ range $q }}{{ end }}{{ end }}{{ end }}", {}, o);
  EXPECT_NE(out.find("template evaluation exceeds 100000 steps"), std::string::npos) << out;
}

TEST(TemplateTest, RecursionIsBounded) {
  std::string out = Expand("{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}");
  EXPECT_NE(out.find("exceeded maximum template depth (100)"), std::string::npos) << out;
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto t = Template::Parse("t", deep);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message(), "template: t:1: max expression depth exceeded");
}

TEST(TemplateTest, AlertFieldShowsErrorsAsPrometheus) {
  AlertData d;
  d.labels = {{"instance", "a:1"}};
  d.value = 0.5;
  TemplateOptions o;
  EXPECT_EQ(ExpandAlertField("HighLoad", "{{ $labels.instance }} at {{ $value | humanizePercentage }}", d, o),
            "a:1 at 50%");
  EXPECT_EQ(ExpandAlertField("HighLoad", "{{ $value | toUpper }}", d, o),
            "<error expanding template: error executing template __alert_HighLoad: template: __alert_HighLoad:1:124: "
            "executing \"__alert_HighLoad\" at <toUpper>: wrong type for value; expected string; got float64>");
  EXPECT_EQ(ExpandAlertField("HighLoad", "{{ if }}", d, o),
            "<error expanding template: error parsing template __alert_HighLoad: template: __alert_HighLoad:1: "
            "missing value for if>");
  d.external_labels = {{"cluster", "c1"}};
  d.external_url = "http://tw:9800";
  EXPECT_EQ(ExpandAlertField("X", "{{ $externalLabels.cluster }} {{ $externalURL }} {{ .ExternalURL }}", d, o),
            "c1 http://tw:9800 http://tw:9800");
}

TEST(TemplateTest, RegexpErrors) {
  EXPECT_NE(Expand("{{ reReplaceAll \"(\" \"x\" \"y\" }}").find("error calling reReplaceAll: regexp: Compile(`(`): "
                                                                 "error parsing regexp: "),
            std::string::npos);
  EXPECT_NE(Expand("{{ match \"[\" \"y\" }}").find("error calling match: error parsing regexp: "), std::string::npos);
}

// ---- template sets, named types and Alertmanager's function set ----

std::string RunSet(const Result<Template>& t, const Value& data = Value(), const TemplateOptions& opts = {}) {
  if (!t.ok()) return "parse: " + t.error().message();
  auto out = t->Execute(data, opts);
  return out.ok() ? *out : "exec: " + out.error().message();
}

TEST(TemplateSetTest, ExtendSeesEarlierDefinitionsAndReplacesNonEmptyOnes) {
  auto base = Template::Parse("", "{{ define \"a\" }}A1{{ end }}{{ define \"b\" }}B{{ end }}", FuncSet::kAlertmanager);
  ASSERT_TRUE(base.ok()) << base.error().ToString();
  auto file = base->Extend("f.tmpl", "{{ define \"a\" }}A2{{ end }}\n{{ define \"b\" }} \n{{ end }}\n");
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  EXPECT_TRUE(file->Defines("a"));
  EXPECT_TRUE(file->Defines("f.tmpl"));
  EXPECT_FALSE(base->Defines("f.tmpl"));  // a copy: the base set is unchanged
  // A non-empty redefinition replaces; a blank one keeps the earlier body (Go's associate).
  EXPECT_EQ(RunSet(file->Extend("", "{{ template \"a\" }}{{ template \"b\" }}")), "A2B");
  EXPECT_EQ(RunSet(base->Extend("", "{{ template \"a\" }}")), "A1");
  // The text itself may define templates, and a blank text still runs.
  EXPECT_EQ(RunSet(file->Extend("", "{{ define \"c\" }}C{{ end }}{{ template \"c\" }}")), "C");
  EXPECT_EQ(RunSet(file->Extend("", "  ")), "  ");
  // Parse errors carry the line of the newest token read, as Go's (EOF after the newline: line 2).
  EXPECT_EQ(RunSet(Template::Parse("f.tmpl", "{{ range . }}\n", FuncSet::kAlertmanager)),
            "parse: template: f.tmpl:2: unexpected EOF");
  // Within one parse a second non-empty definition is still an error.
  EXPECT_EQ(RunSet(file->Extend("", "{{ define \"d\" }}1{{ end }}{{ define \"d\" }}2{{ end }}")),
            "parse: template: :1: template: multiple definition of template \"d\"");
}

TEST(TemplateSetTest, ErrorsNameTheParseThatHoldsTheNode) {
  auto set = Template::Parse("", "", FuncSet::kAlertmanager)->Extend("f.tmpl", "{{ define \"x\" }}\n  {{ .Nope }}{{ end }}");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(RunSet(set->Extend("", "{{ template \"x\" . }}"), Value::Int(1)),
            "exec: template: f.tmpl:2:5: executing \"x\" at <.Nope>: can't evaluate field Nope in type int");
  EXPECT_EQ(RunSet(set->Extend("", "{{ template \"y\" . }}")),
            "exec: template: :1:12: executing \"\" at <{{template \"y\" .}}>: template \"y\" not defined");
}

TEST(TemplateSetTest, FunctionSets) {
  EXPECT_EQ(RunSet(Template::Parse("", "{{ humanize 1 }}", FuncSet::kAlertmanager)),
            "parse: template: :1: function \"humanize\" not defined");
  EXPECT_EQ(RunSet(Template::Parse("", "{{ join \",\" . }}")), "parse: template: :1: function \"join\" not defined");
  auto am = [](const std::string& text, const Value& dot = Value()) {
    return RunSet(Template::Parse("", text, FuncSet::kAlertmanager), dot);
  };
  EXPECT_EQ(am("{{ join \", \" (stringSlice \"a\" \"b\") }}|{{ stringSlice }}|{{ . | join \"-\" }}", Strings({"x", "y"})),
            "a, b|[]|x-y");
  EXPECT_EQ(am("{{ join \",\" \"ab\" }}"), "exec: template: :1:12: executing \"\" at <\"ab\">: can't handle \"ab\" for arg of type []string");
  EXPECT_EQ(am("{{ join \",\" . }}", Value::Int(3)),
            "exec: template: :1:12: executing \"\" at <.>: wrong type for value; expected []string; got int");
  // cases.Title: first letter of each word upper, the rest lower; Prometheus's title keeps the rest.
  EXPECT_EQ(am("{{ title \"hELLO wORLD it's x.y foo_bar 3dx\" }}"), "Hello World It's X.y Foo_bar 3Dx");
  EXPECT_EQ(Expand("{{ title \"hELLO\" }}"), "HELLO");
  EXPECT_EQ(am("{{ toUpper \"ab\" }}{{ toLower \"CD\" }}{{ match \"^a\" \"abc\" }}{{ reReplaceAll \"(b)\" \"<$1>\" \"abc\" }}"),
            "ABcdtruea<b>c");
}

// A struct type with a field and a method taking []string, as Alertmanager's types.
Value Person() {
  auto t = std::make_shared<GoType>();
  t->name = "test.Person";
  t->methods["Greet"] = Method{{Param::kStringSlice}, false, Param::kAny,
                                     [](const Value& self, std::vector<Value>& a) {
                                       std::string out = self.Field("Name")->str() + ":";
                                       for (const Value& v : a[0].list()) out += " " + v.str();
                                       return Value::String(out);
                                     }};
  t->methods["Fail"] = Method{{}, false, Param::kAny, [](const Value&, std::vector<Value>&) -> Value {
                                      throw FuncError{"no luck"};
                                    }};
  return Value::Struct(t, {{"Name", Value::String("ann")}, {"Age", Value::Int(7)}, {"Tags", Strings({"a", "b"})}});
}

TEST(TemplateSetTest, StructsAndMethods) {
  auto run = [](const std::string& text) { return RunSet(Template::Parse("", text, FuncSet::kAlertmanager), Person()); };
  EXPECT_EQ(run("{{ . }}|{{ printf \"%+v\" . }}|{{ .Name }}"), "{ann 7 [a b]}|{Name:ann Age:7 Tags:[a b]}|ann");
  EXPECT_EQ(run("{{ .Greet .Tags }}|{{ .Tags | .Greet }}|{{ .Greet (stringSlice) }}"), "ann: a b|ann: a b|ann:");
  EXPECT_EQ(run("{{ .Greet }}"), "exec: template: :1:3: executing \"\" at <.Greet>: wrong number of args for Greet: want 1 got 0");
  EXPECT_EQ(run("{{ .Name 1 }}"),
            "exec: template: :1:3: executing \"\" at <.Name>: Name has arguments but cannot be invoked as function");
  EXPECT_EQ(run("{{ .Nope }}"), "exec: template: :1:3: executing \"\" at <.Nope>: can't evaluate field Nope in type test.Person");
  EXPECT_EQ(run("{{ .Fail }}"), "exec: template: :1:3: executing \"\" at <.Fail>: error calling Fail: no luck");
  EXPECT_EQ(run("{{ len . }}"), "exec: template: :1:3: executing \"\" at <len .>: error calling len: len of type test.Person");
  EXPECT_EQ(run("{{ if . }}yes{{ end }}"), "yes");
}

TEST(TemplateSetTest, TimeValuesAndGoZeroTime) {
  auto run = [](const std::string& text, const Value& v) { return RunSet(Template::Parse("", text, FuncSet::kAlertmanager), v); };
  Value zero = Value::TimeValue(Value::kGoZeroTimeSecs, 0);
  EXPECT_EQ(run("{{ . }}|{{ .IsZero }}|{{ .Unix }}|{{ .Format \"2006-01-02\" }}", zero),
            "0001-01-01 00:00:00 +0000 UTC|true|-62135596800|0001-01-01");
  Value t = Value::TimeValue(1714557600, 123000000);
  EXPECT_EQ(run("{{ . }}|{{ .IsZero }}|{{ .UnixMilli }}|{{ .Foo }}", t),
            "exec: template: :1:42: executing \"\" at <.Foo>: can't evaluate field Foo in type time.Time");
  EXPECT_EQ(run("{{ . }}|{{ .IsZero }}|{{ .UnixMilli }}", t), "2024-05-01 10:00:00.123 +0000 UTC|false|1714557600123");
}

TEST(TemplateSetTest, HtmlEscapingSparesSafeHtml) {
  TemplateOptions o;
  o.escape_html = true;
  auto t = Template::Parse("", "<p title=\"{{ . }}\">{{ . }} {{ safeHtml \"<b>\" }}</p>", FuncSet::kAlertmanager);
  EXPECT_EQ(RunSet(t, Value::String("a+b <c> & 'd' \"e\""), o),
            "<p title=\"a&#43;b &lt;c&gt; &amp; &#39;d&#39; &#34;e&#34;\">a&#43;b &lt;c&gt; &amp; &#39;d&#39; &#34;e&#34; <b></p>");
}

}  // namespace
}  // namespace trainwatch::tmpl
