#include "ingest/text_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  f("foo{a=\"\\t\"} 1\n", "line 1: invalid escape sequence \"\\\\t\" in value of label \"a\"");
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

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Sample lines: neither blank nor comments.
size_t CountSampleLines(const std::string& body) {
  size_t n = 0;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    size_t i = line.find_first_not_of(" \t\r");
    if (i != std::string::npos && line[i] != '#') n++;
  }
  return n;
}

TEST(TextParserTest, ConformanceExpositionFilesParse) {
  std::filesystem::path dir = "/work/shared/conformance/exposition";
  if (const char* d = std::getenv("TW_CONFORMANCE_DIR")) dir = std::filesystem::path(d) / "exposition";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no conformance data at " << dir;
  int files = 0;
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".txt") paths.push_back(e.path());
  }
  // Valid text-format inputs from prometheus/common's parser tests.
  for (int i = 0; i <= 4; i++) paths.push_back(dir / "upstream/common/expfmt_fuzz_corpus" / ("from_test_parse_" + std::to_string(i)));
  paths.push_back(dir / "upstream/common/expfmt_testdata/text");
  paths.push_back(dir / "upstream/prometheus/model_textparse/alltypes.237mfs.prom.txt");
  for (const auto& p : paths) {
    if (!std::filesystem::exists(p)) continue;
    std::string body = ReadFile(p);
    auto r = ParseAll(body);
    ASSERT_TRUE(r.ok()) << p << ": " << r.error().ToString();
    EXPECT_EQ(r->size(), CountSampleLines(body)) << p;
    files++;
  }
  EXPECT_GE(files, 4);
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

}  // namespace
}  // namespace trainwatch::ingest
