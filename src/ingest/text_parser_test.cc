#include "ingest/text_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace trainwatch::ingest {
namespace {

struct Parsed {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double v;
  int64_t t;
  bool has_ts;
  size_t line;
};

Result<std::vector<Parsed>> ParseAll(std::string_view body, int64_t def = 42) {
  std::vector<Parsed> out;
  Status s = ParseText(body, def, [&](const TextSample& x) {
    Parsed p{std::string(x.name), {}, x.value, x.timestamp_ms, x.has_timestamp, x.line};
    for (size_t i = 0; i < x.num_labels; i++) p.labels.emplace_back(x.labels[i].name, x.labels[i].value);
    out.push_back(std::move(p));
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

TEST(TextParserTest, ParsesNamesLabelsValuesAndTimestamps) {
  auto r = ParseAll(
      "# HELP foo A help text.\n"
      "# TYPE foo counter\n"
      "\n"
      "foo 1\n"
      "bar{a=\"x\",b=\"y\",} 2.5 1700000000000\n"
      "  baz { a = \"1\" }   -3e2   -5  \n"
      "q:r_s{} 4\r\n"
      "{__name__=\"named\",k=\"v\"} 7\n"
      "last 8");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 6u);
  const auto& v = *r;
  EXPECT_EQ(v[0].name, "foo");
  EXPECT_EQ(v[0].v, 1);
  EXPECT_EQ(v[0].t, 42);
  EXPECT_FALSE(v[0].has_ts);
  EXPECT_EQ(v[0].line, 4u);
  EXPECT_EQ(v[1].name, "bar");
  EXPECT_EQ(v[1].labels, (std::vector<std::pair<std::string, std::string>>{{"a", "x"}, {"b", "y"}}));
  EXPECT_EQ(v[1].t, 1700000000000);
  EXPECT_TRUE(v[1].has_ts);
  EXPECT_EQ(v[2].name, "baz");
  EXPECT_EQ(v[2].v, -300);
  EXPECT_EQ(v[2].t, -5);
  EXPECT_EQ(v[3].name, "q:r_s");
  EXPECT_TRUE(v[3].labels.empty());
  EXPECT_EQ(v[4].name, "named");
  EXPECT_EQ(v[4].labels.size(), 1u);
  EXPECT_EQ(v[5].name, "last");
  EXPECT_EQ(v[5].line, 9u);
}

TEST(TextParserTest, UnescapesLabelValues) {
  auto r = ParseAll("m{a=\"q\\\"uote\",b=\"back\\\\slash\",c=\"new\\nline\",d=\"plain\"} 1\n");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  const auto& l = (*r)[0].labels;
  EXPECT_EQ(l[0].second, "q\"uote");
  EXPECT_EQ(l[1].second, "back\\slash");
  EXPECT_EQ(l[2].second, "new\nline");
  EXPECT_EQ(l[3].second, "plain");
}

TEST(TextParserTest, SpecialValuesAreBitExact) {
  auto f = [](std::string_view text, uint64_t want_bits) {
    double d = 0;
    ASSERT_TRUE(ParseGoFloat(text, &d)) << text;
    EXPECT_EQ(Bits(d), want_bits) << text;
  };
  f("NaN", kNormalNaNBits);
  f("nan", kNormalNaNBits);
  f("+Inf", Bits(HUGE_VAL));
  f("Inf", Bits(HUGE_VAL));
  f("-Inf", Bits(-HUGE_VAL));
  f("+infinity", Bits(HUGE_VAL));
  f("-0", Bits(-0.0));
  f("0", Bits(0.0));
  f("1e-3", Bits(0.001));
  f("1.5E+10", Bits(1.5e10));
  f("+7", Bits(7.0));
  f(".5", Bits(0.5));
  f("0x1p-2", Bits(0.25));
  f("1e-400", Bits(0.0));
  f("2.2250738585072014e-308", Bits(2.2250738585072014e-308));
  f("1.7976931348623157e308", Bits(1.7976931348623157e308));
  f("0.1", Bits(0.1));
  for (std::string_view bad : {"", "abc", "+NaN", "--1", "+-1", "1e400", "1,5", "1 2", "0x", "Infx", "+"}) {
    double d;
    EXPECT_FALSE(ParseGoFloat(bad, &d)) << bad;
  }
}

// Issue 25: a line with 100,000 labels (a few MB) is checked for duplicate
// names in O(n log n); comparing each with all before it took minutes.
TEST(TextParserTest, ManyLabelsAreCheckedForDuplicatesWithoutQuadraticWork) {
  const int n = 100000;
  std::string labels = "m{";
  for (int i = 0; i < n; i++) labels += "l" + std::to_string(i) + "=\"v\",";
  const std::string ok_line = labels + "last=\"x\"} 1\n";
  const std::string dup_line = labels + "l77777=\"again\"} 1\n";
  for (TextFormat format : {TextFormat::kPrometheus, TextFormat::kOpenMetrics}) {
    const std::string eof = format == TextFormat::kOpenMetrics ? "# EOF\n" : "";
    const std::string ok_body = ok_line + eof, dup_body = dup_line + eof;
    TextParser ok(ok_body, ParseOptions{.format = format});
    ASSERT_TRUE(ok.Next()) << ok.status().ToString();
    EXPECT_EQ(ok.sample().num_labels, static_cast<size_t>(n) + 1);
    TextParser bad(dup_body, ParseOptions{.format = format});
    EXPECT_FALSE(bad.Next());
    EXPECT_EQ(bad.status().message(), "line 1: duplicate label name \"l77777\" for metric \"m\"");
  }
}

TEST(TextParserTest, ReportsErrorsWithLineNumbers) {
  auto f = [](std::string_view body, std::string_view want) {
    auto r = ParseAll(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_TRUE(r.error().IsInvalidArgument());
    EXPECT_EQ(r.error().message(), want) << body;
  };
  f("a 1\nb 2\nfoo abc\n", "line 3: invalid value \"abc\" for metric \"foo\"");
  f("a 1\n# c\n\n\n\n\nm{a=\"xx} 1\n", "line 7: unterminated label value");
  f("ok 1\nm{1x=\"a\"} 1\n", "line 2: invalid label name \"1x\"");
  f("1x 1\n", "line 1: invalid metric name \"1x\"");
  f("foo-bar 1\n", "line 1: invalid metric name \"foo-bar\"");
  f("foo\n", "line 1: missing value for metric \"foo\"");
  f("foo{a=\"b\"}\n", "line 1: missing value for metric \"foo\"");
  f("foo 1 12.5\n", "line 1: invalid timestamp \"12.5\" for metric \"foo\"");
  f("foo 1 2 3\n", "line 1: unexpected \"3\" after timestamp of metric \"foo\"");
  f("foo{a=\"1\",a=\"2\"} 1\n", "line 1: duplicate label name \"a\" for metric \"foo\"");
  f("foo{__name__=\"x\"} 1\n", "line 1: duplicate label name \"__name__\"");
  f("foo{a \"1\"} 1\n", "line 1: expected \"=\" after label name \"a\"");
  f("foo{a=1} 1\n", "line 1: expected quoted value for label \"a\"");
  f("foo{a=\"1\" b=\"2\"} 1\n", "line 1: expected \",\" or \"}\" after value of label \"a\"");
  f("foo{a=\"1\"\n", "line 1: unterminated label set");
  f("{a=\"1\"} 1\n", "line 1: missing metric name");
  f("foo 1\r\nbar x\r\n", "line 2: invalid value \"x\" for metric \"bar\"");
}

TEST(TextParserTest, ToleratesOpenMetricsExemplarsAndEof) {
  auto r = ParseAll("h_bucket{le=\"0.5\"} 4.0 # {trace_id=\"abc\"} 0.31 1796207177.3\nh_count 4 1000 # x\n# EOF\n");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].v, 4.0);
  EXPECT_EQ((*r)[1].t, 1000);
}

TEST(TextParserTest, CallbackErrorStopsParsing) {
  int n = 0;
  Status s = ParseText("a 1\nb 2\nc 3\n", 0, [&](const TextSample&) {
    return ++n == 2 ? Status::Cancelled("stop") : Status::OK();
  });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(n, 2);
}

TEST(TextParserTest, KnownSeriesSkipsLabelParsingButNotValidation) {
  std::vector<std::string> asked;
  ParseOptions o;
  o.known_series = [&](std::string_view text) {
    asked.emplace_back(text);
    return text == "m{a=\"}\\\"\"}";
  };
  TextParser p("m{a=\"}\\\"\"} 1 5\nm{a=\"x\"} 2 6\nplain 3\n", o);
  ASSERT_TRUE(p.Next());
  EXPECT_TRUE(p.sample().labels_skipped);
  EXPECT_EQ(p.sample().num_labels, 0u);
  EXPECT_EQ(p.sample().series, "m{a=\"}\\\"\"}");
  EXPECT_EQ(p.sample().value, 1);
  ASSERT_TRUE(p.Next());
  EXPECT_FALSE(p.sample().labels_skipped);
  ASSERT_EQ(p.sample().num_labels, 1u);
  EXPECT_EQ(p.sample().labels[0].value, "x");
  ASSERT_TRUE(p.Next());
  EXPECT_EQ(p.sample().series, "plain");
  EXPECT_FALSE(p.Next());
  EXPECT_TRUE(p.status().ok());
  EXPECT_EQ(asked.size(), 2u);
  // An unterminated label block is parsed in full and reported.
  TextParser bad("m{a=\"x 1\n", o);
  EXPECT_FALSE(bad.Next());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
}


TEST(TextParserTest, FormatFromContentTypeAsPrometheus) {
  EXPECT_EQ(FormatFromContentType("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            TextFormat::kOpenMetrics);
  EXPECT_EQ(FormatFromContentType(" Application/OpenMetrics-Text "), TextFormat::kOpenMetrics);
  EXPECT_EQ(FormatFromContentType("text/plain; version=0.0.4"), TextFormat::kPrometheus);
  EXPECT_EQ(FormatFromContentType(""), TextFormat::kPrometheus);
  EXPECT_EQ(FormatFromContentType("application/json"), TextFormat::kPrometheus);
}


struct Meta {
  MetadataLine::Kind kind;
  size_t line;
  std::string family, text;
  bool operator==(const Meta&) const = default;
};

struct Out {
  std::vector<Parsed> samples;
  std::vector<Meta> meta;
  Status status;
};

Out ParseWith(std::string_view body, ParseOptions o) {
  Out out;
  o.on_metadata = [&](const MetadataLine& m) {
    out.meta.push_back({m.kind, m.line, std::string(m.family), std::string(m.text)});
  };
  TextParser p(body, o);
  while (p.Next()) {
    const TextSample& x = p.sample();
    Parsed q{std::string(x.name), {}, x.value, x.timestamp_ms, x.has_timestamp, x.line};
    for (size_t i = 0; i < x.num_labels; i++) q.labels.emplace_back(x.labels[i].name, x.labels[i].value);
    out.samples.push_back(std::move(q));
  }
  out.status = p.status();
  return out;
}

ParseOptions OM() { return ParseOptions{.format = TextFormat::kOpenMetrics}; }
ParseOptions Expfmt() { return ParseOptions{.expfmt_rules = true}; }
using K = MetadataLine::Kind;

TEST(TextParserTest, ReportsMetadataInTextFormat) {
  Out o = ParseWith(
      "# HELP a Help with \\\\ and \\n and \\\"x\\q.\n"
      "# TYPE a counter\n"
      "#  TYPE   b   histogram  \n"
      "# UNIT a seconds\n"
      "# a comment\n"
      "#HELP not metadata\n"
      "# HELP\n"
      "# TYPE\n"
      "# HELP c\n"
      "a 1\n",
      {});
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.meta, (std::vector<Meta>{{K::kHelp, 1, "a", "Help with \\ and \n and \\\"x\\q."},
                                        {K::kType, 2, "a", "counter"},
                                        {K::kType, 3, "b", "histogram"},
                                        {K::kUnit, 4, "a", "seconds"},
                                        {K::kHelp, 9, "c", ""}}));
  EXPECT_EQ(o.samples.size(), 1u);
}

TEST(TextParserTest, TextFormatMetadataErrors) {
  auto f = [](std::string_view body, std::string_view want) {
    Out o = ParseWith(body, {});
    EXPECT_EQ(o.status.message(), want) << body;
  };
  f("a 1\n# TYPE a gaugehistogram\n", "line 2: invalid metric type \"gaugehistogram\" for \"a\"");
  f("# TYPE a Counter\n", "line 1: invalid metric type \"Counter\" for \"a\"");
  f("# TYPE a\n", "line 1: missing type for metric \"a\" in # TYPE");
  f("# TYPE met-ric counter\n", "line 1: invalid metric name \"met-ric\" in # TYPE");
  f("# HELP \n", "line 1: missing metric name in # HELP");
  f("# HELP a \xff\n", "line 1: help text of \"a\" is not valid UTF-8");
  // What Prometheus 2.42 accepts is accepted: duplicate and late metadata.
  for (std::string_view ok : {"# HELP m one\n# HELP m two\n", "m 1\n# TYPE m counter\n", "m 1"}) {
    EXPECT_TRUE(ParseWith(ok, {}).status.ok()) << ok;
  }
}

TEST(TextParserTest, ValuesAndLabelValuesAsPrometheus) {
  // Hex floats are refused ("unsupported character in float").
  EXPECT_EQ(ParseWith("m 0x1p-2\n", {}).status.message(), "line 1: invalid value \"0x1p-2\" for metric \"m\"");
  double d;
  EXPECT_FALSE(ParseExpositionFloat("0x10", &d));
  EXPECT_FALSE(ParseExpositionFloat("1_000", &d));
  EXPECT_TRUE(ParseExpositionFloat("-1.5e-3", &d));
  EXPECT_EQ(d, -1.5e-3);
  // Unknown escapes stay as written; invalid UTF-8 is an error.
  Out o = ParseWith("m{a=\"x\\ty\"} 1\n", {});
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.samples[0].labels[0].second, "x\\ty");
  EXPECT_EQ(ParseWith("m{a=\"\xc3\x28\"} 1\n", {}).status.message(), "line 1: invalid UTF-8 in value of label \"a\"");
  o = ParseWith("m{a=\"gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"} 1\n", {});
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.samples[0].labels[0].second, "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80");
  for (std::string_view bad : {"\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    std::string body = "m{a=\"" + std::string(bad) + "\"} 1\n";
    EXPECT_FALSE(ParseWith(body, {}).status.ok()) << body;
  }
}

TEST(TextParserTest, ExpfmtRules) {
  auto f = [](std::string_view body, std::string_view want) {
    Out o = ParseWith(body, Expfmt());
    EXPECT_EQ(o.status.message(), want) << body;
  };
  f("a 1", "line 1: unexpected end of input: the last line has no newline");
  f("\n# HELP m one\n# HELP m two\n", "line 3: second HELP line for metric name \"m\"");
  f("# TYPE m counter\n# TYPE m gauge\n",
    "line 2: second TYPE line for metric name \"m\", or TYPE reported after samples");
  f("m 1\n# TYPE m counter\n", "line 2: second TYPE line for metric name \"m\", or TYPE reported after samples");
  f("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"x\"} 1\n",
    "line 3: expected float as value for \"le\" label, got \"x\"");
  f("# TYPE s summary\ns{quantile=\"bla\"} 1\n", "line 2: expected float as value for \"quantile\" label, got \"bla\"");
  f("m{a=\"\\t\"} 1\n", "line 1: invalid escape sequence \"\\\\t\" in value of label \"a\"");
  f("# HELP m a\\tb\n", "line 1: invalid escape sequence \"\\\\t\" in help text of \"m\"");
  // Incomplete metadata is ignored; le of a non-histogram is any string.
  Out o = ParseWith("# HELP \n# TYPE m\n# HELP m\nm_bucket{le=\"x\"} 1\n", Expfmt());
  EXPECT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_TRUE(o.meta.empty());
}

TEST(TextParserTest, OpenMetricsSamples) {
  Out o = ParseWith(
      "# TYPE foo_seconds counter\n"
      "# UNIT foo_seconds seconds\n"
      "# HELP foo_seconds Help \\\"quoted\\\" \\\\ \\n.\n"
      "foo_seconds_total{a=\"1\"} 17.5 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67 1520879602.890\n"
      "foo_seconds_total{a=\"2\"} 1 -1.0005\n"
      "foo_seconds_created{a=\"1\"} 1520430000.123\n"
      "foo_seconds_total{a=\"3\"} 3 # {} 1\n"
      "# TYPE h histogram\n"
      "h_bucket{le=\"+Inf\"} 2 # {id=\"\\\"x\"} 1.5\n"
      "h_count 2\n"
      "h_sum 3\n"
      "bare NaN\n"
      "# EOF\n",
      OM());
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.meta, (std::vector<Meta>{{K::kType, 1, "foo_seconds", "counter"},
                                        {K::kUnit, 2, "foo_seconds", "seconds"},
                                        {K::kHelp, 3, "foo_seconds", "Help \"quoted\" \\ \n."},
                                        {K::kType, 8, "h", "histogram"}}));
  ASSERT_EQ(o.samples.size(), 8u);
  EXPECT_EQ(o.samples[0].name, "foo_seconds_total");
  EXPECT_EQ(o.samples[0].v, 17.5);
  EXPECT_EQ(o.samples[0].t, static_cast<int64_t>(1520879607.789 * 1000));  // int64(ts * 1000), as Prometheus
  EXPECT_TRUE(o.samples[0].has_ts);
  EXPECT_EQ(o.samples[1].t, -1000);  // truncated toward zero
  EXPECT_EQ(o.samples[2].name, "foo_seconds_created");
  EXPECT_EQ(o.samples[2].v, 1520430000.123);
  EXPECT_FALSE(o.samples[2].has_ts);
  EXPECT_EQ(o.samples[2].t, 42 - 42);  // default_timestamp_ms is 0 here
  EXPECT_EQ(Bits(o.samples[7].v), kNormalNaNBits);
  EXPECT_EQ(o.samples[7].line, 12u);
  // Prometheus's float conversion, bit for bit: 1700215884.373 * 1000 truncated.
  o = ParseWith("m 1 1700215884.373\n# EOF", OM());
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.samples[0].t, static_cast<int64_t>(1700215884.373 * 1000));
}

TEST(TextParserTest, OpenMetricsErrors) {
  auto f = [](std::string_view body, std::string_view want) {
    Out o = ParseWith(body, OM());
    EXPECT_EQ(o.status.message(), want) << body;
  };
  f("", "line 1: data does not end with # EOF");
  f("a 1\n", "line 2: data does not end with # EOF");
  f("a 1", "line 1: data does not end with # EOF");
  f("a 1\n# EOF\n\n", "line 3: unexpected data after # EOF");
  f("# EOF\na 1\n", "line 2: unexpected data after # EOF");
  f("a 1\n\n# EOF\n", "line 2: empty line (OpenMetrics allows no blank lines)");
  f("# hello\n# EOF\n",
    "line 1: invalid comment \"# hello\": OpenMetrics allows only # HELP, # TYPE, # UNIT and # EOF");
  f("#  HELP a x\n# EOF\n",
    "line 1: invalid comment \"#  HELP a x\": OpenMetrics allows only # HELP, # TYPE, # UNIT and # EOF");
  f("# HELP a\n# EOF\n", "line 1: expected a space and text after metric name \"a\" in # HELP");
  f("# TYPE a untyped\n# EOF\n", "line 1: invalid metric type \"untyped\" for \"a\"");
  f("# UNIT a seconds\n# EOF\n", "line 1: unit \"seconds\" is not a suffix of metric family \"a\"");
  f("# UNIT a_xseconds seconds\n# EOF\n", "line 1: unit \"seconds\" is not a suffix of metric family \"a_xseconds\"");
  f("a  1\n# EOF\n", "line 1: expected a single space before the value of metric \"a\"");
  f("a 1 \n# EOF\n", "line 1: unexpected space after the value of metric \"a\"");
  f("a 1\r\n# EOF\n", "line 1: invalid value \"1\r\" for metric \"a\"");
  f("a{b=\"1\",} 1\n# EOF\n", "line 1: unexpected \"}\" after \",\": no trailing comma in OpenMetrics");
  f("a{b = \"1\"} 1\n# EOF\n", "line 1: expected \"=\" after label name \"b\"");
  f("a{b=\"\\t\"} 1\n# EOF\n", "line 1: invalid escape sequence \"\\\\t\" in value of label \"b\"");
  f("{__name__=\"a\"} 1\n# EOF\n", "line 1: missing metric name");
  f("a{__name__=\"b\"} 1\n# EOF\n", "line 1: duplicate label name \"__name__\"");
  f("a 1 1.5e3x\n# EOF\n", "line 1: invalid timestamp \"1.5e3x\" for metric \"a\"");
  f("a 1 NaN\n# EOF\n", "line 1: invalid timestamp \"NaN\" for metric \"a\"");
  f("a 1 1 2\n# EOF\n", "line 1: unexpected \" 2\" after timestamp of metric \"a\"");
  f("a 0x1p3\n# EOF\n", "line 1: invalid value \"0x1p3\" for metric \"a\"");
  // Exemplars: only on _total and _bucket, checked in full; never an error for their length.
  f("# TYPE a gauge\na 1 # {x=\"y\"} 1\n# EOF\n", "line 2: metric name \"a\" does not support exemplars");
  f("a_total 1 # x\n# EOF\n", "line 1: expected \"{\" to start the exemplar of \"a_total\"");
  f("a_total 1 # {x=\"y\"}\n# EOF\n", "line 1: expected a space and a value after the exemplar labels of \"a_total\"");
  f("a_total 1 # {x=\"y\"} z\n# EOF\n", "line 1: invalid exemplar value \"z\" for \"a_total\"");
  f("a_total 1 # {x=\"y\"} 1 Inf\n# EOF\n", "line 1: invalid exemplar timestamp \"Inf\" for \"a_total\"");
  f("a_total 1 # {x=\"y\"} 1 2 3\n# EOF\n", "line 1: unexpected \" 3\" after exemplar timestamp of \"a_total\"");
  f("a_total 1 # {x=\"y\",x=\"z\"} 1\n# EOF\n", "line 1: duplicate label name \"x\" in exemplar");
  std::string long_ex = "a_total 1 # {id=\"" + std::string(127, 'x') + "\"} 1\n# EOF\n";
  EXPECT_TRUE(ParseWith(long_ex, OM()).status.ok()) << ParseWith(long_ex, OM()).status.ToString();
  // Multi-byte characters in exemplar labels.
  std::string runes = "a_total 1 # {id=\"";
  for (int i = 0; i < 42; i++) runes += "\xe2\x82\xac";
  runes += "\"} 1\n# EOF\n";
  EXPECT_TRUE(ParseWith(runes, OM()).status.ok()) << ParseWith(runes, OM()).status.ToString();
  // Families: metadata first, not interleaved, not repeated.
  f("a 1\n# TYPE a gauge\n# EOF\n", "line 2: # TYPE for metric family \"a\" after its samples");
  f("# HELP a x\n# HELP a y\n# EOF\n", "line 2: second # HELP for metric family \"a\"");
  f("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n# EOF\n",
    "line 5: sample \"a\" of metric family \"a\" after other families: families must not be interleaved");
  f("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nx 1\nh_count 1\n# EOF\n",
    "line 4: sample \"h_count\" of metric family \"h\" after other families: families must not be interleaved");
  f("a 1\nb 1\n# TYPE a gauge\n# EOF\n",
    "line 3: metadata for metric family \"a\" after other families: families must not be interleaved");
  // A gauge "a" and an unrelated family "a_total" are fine.
  EXPECT_TRUE(ParseWith("# TYPE a gauge\na 1\na_total 1\n# EOF\n", OM()).status.ok());
}

TEST(TextParserTest, OpenMetricsKnownSeries) {
  ParseOptions o = OM();
  int asked = 0;
  o.known_series = [&](std::string_view text) {
    asked++;
    return text == "m{a=\"1\"}";
  };
  TextParser p("m{a=\"1\"} 1\nm{a=\"2\"} 2\n# EOF\n", o);
  ASSERT_TRUE(p.Next());
  EXPECT_TRUE(p.sample().labels_skipped);
  ASSERT_TRUE(p.Next());
  EXPECT_FALSE(p.sample().labels_skipped);
  EXPECT_EQ(p.sample().labels[0].value, "2");
  EXPECT_FALSE(p.Next());
  EXPECT_TRUE(p.status().ok()) << p.status().ToString();
  EXPECT_EQ(asked, 2);
}

// Each sample's series text (as written) and start timestamp; with `known`,
// every series is "known" (labels skipped), as a scrape's cache does.
std::vector<std::pair<std::string, int64_t>> StartTimestamps(std::string_view body, ParseOptions o, bool known = false) {
  if (known) o.known_series = [](std::string_view) { return true; };
  TextParser p(body, o);
  std::vector<std::pair<std::string, int64_t>> out;
  while (p.Next()) out.emplace_back(std::string(p.sample().series), p.sample().start_timestamp_ms);
  EXPECT_TRUE(p.status().ok()) << p.status().ToString();
  return out;
}

// `foo_created` is the start timestamp of family foo's samples with the
// same labels (le and quantile aside), before or after them in the family;
// the _created samples themselves are kept, without one.
TEST(TextParserTest, OpenMetricsCreatedLinesAreStartTimestamps) {
  const std::string body =
      "# TYPE foo counter\n"
      "foo_total{a=\"1\"} 17 # {id=\"x_created\"} 1\n"
      "foo_created{a=\"1\"} 1520430000.123\n"
      "foo_created{a=\"2\"} 1520430001\n"
      "foo_total{a=\"2\"} 1\n"
      "foo_total{a=\"3\"} 3\n"
      "# TYPE h histogram\n"
      "h_bucket{x=\"y\",le=\"0.5\",z=\"w\"} 1\n"
      "h_bucket{x=\"y\",le=\"+Inf\",z=\"w\"} 2\n"
      "h_count{x=\"y\",z=\"w\"} 2\n"
      "h_sum{x=\"y\",z=\"w\"} 3\n"
      "h_created{x=\"y\",z=\"w\"} 1500000000.5\n"
      "h_bucket{le=\"+Inf\"} 0\n"
      "h_count 0\n"
      "h_created 1500000001\n"
      "# TYPE s summary\n"
      "s{quantile=\"0.5\"} 0.2\n"
      "s_count 4\n"
      "s_sum 1\n"
      "s_created 1600000000\n"
      "# TYPE g gauge\n"
      "g 1\n"
      "g_created 1600000000\n"
      "# TYPE c counter\n"
      "c_total 1\n"
      "c_created 0\n"
      "u_total 1\n"
      "u_created 5\n"
      "# EOF\n";
  ParseOptions o = OM();
  o.start_timestamps = true;
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"foo_total{a=\"1\"}", 1520430000123},
      {"foo_created{a=\"1\"}", 0},
      {"foo_created{a=\"2\"}", 0},
      {"foo_total{a=\"2\"}", 1520430001000},
      {"foo_total{a=\"3\"}", 0},
      {"h_bucket{x=\"y\",le=\"0.5\",z=\"w\"}", 1500000000500},
      {"h_bucket{x=\"y\",le=\"+Inf\",z=\"w\"}", 1500000000500},
      {"h_count{x=\"y\",z=\"w\"}", 1500000000500},
      {"h_sum{x=\"y\",z=\"w\"}", 1500000000500},
      {"h_created{x=\"y\",z=\"w\"}", 0},
      {"h_bucket{le=\"+Inf\"}", 1500000001000},
      {"h_count", 1500000001000},
      {"h_created", 0},
      {"s{quantile=\"0.5\"}", 1600000000000},
      {"s_count", 1600000000000},
      {"s_sum", 1600000000000},
      {"s_created", 0},
      {"g", 0},          // a gauge: g_created is a family of its own
      {"g_created", 0},
      {"c_total", 0},    // 0 is unknown
      {"c_created", 0},
      {"u_total", 0},    // no TYPE: unknown families have none
      {"u_created", 0},
  };
  EXPECT_EQ(StartTimestamps(body, o), want);
  EXPECT_EQ(StartTimestamps(body, o, true), want);  // labels skipped: the same
  // Off by default; never in the text format, where _created is a gauge.
  for (const auto& [series, st] : StartTimestamps(body, OM())) EXPECT_EQ(st, 0) << series;
  ParseOptions text;
  text.start_timestamps = true;
  const std::string text_body = "# TYPE foo counter\nfoo_total 1\nfoo_created 1520430000\n";
  for (const auto& [series, st] : StartTimestamps(text_body, text)) EXPECT_EQ(st, 0) << series;
}

// Bodies whose only "_created" is elsewhere (a label value, another family)
// and malformed _created lines: no start timestamps, and the parse proper
// reports the error.
TEST(TextParserTest, OpenMetricsCreatedLookaheadEdges) {
  ParseOptions o = OM();
  o.start_timestamps = true;
  auto sts = [&](std::string_view body) {
    std::vector<int64_t> out;
    for (const auto& [series, st] : StartTimestamps(body, o)) out.push_back(st);
    return out;
  };
  EXPECT_EQ(sts("# TYPE a counter\na_total{p=\"/_created\"} 1\n# TYPE b counter\nb_total 1\nb_created 2\n# EOF\n"),
            (std::vector<int64_t>{0, 2000, 0}));
  EXPECT_EQ(sts("# TYPE a counter\na_total 1\n# HELP b_created x\nb_created 2\n# EOF\n"), (std::vector<int64_t>{0, 0}));
  // Families "a_b..." after counter "a" end a's lines.
  EXPECT_EQ(sts("# TYPE a counter\na_total 1\na_b_created 3\n# EOF\n"), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(sts("# TYPE a counter\na_total 1\n# TYPE a_b counter\na_b_total 2\na_b_created 3\n# EOF\n"),
            (std::vector<int64_t>{0, 3000, 0}));
  EXPECT_EQ(sts("# TYPE h histogram\nh_bucket{le=\"1\",a=\"\\\"\"} 1\nh_created{a=\"\\\"\"} 4\n# EOF\n"),
            (std::vector<int64_t>{4000, 0}));
  TextParser p("# TYPE a counter\na_total 1\na_created{x=\"1\" 5\n# EOF\n", o);
  ASSERT_TRUE(p.Next());
  EXPECT_EQ(p.sample().start_timestamp_ms, 0);
  EXPECT_FALSE(p.Next());
  EXPECT_FALSE(p.status().ok());
  TextParser q("# TYPE a counter\na_total 1\na_created NaN\na_created{b=\"1\"} x\n# EOF\n", o);
  ASSERT_TRUE(q.Next());
  EXPECT_EQ(q.sample().start_timestamp_ms, 0);
}

}  // namespace
}  // namespace trainwatch::ingest
