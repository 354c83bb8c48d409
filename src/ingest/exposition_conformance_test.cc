// Parses every file of ../shared/conformance/exposition (see its SOURCE.md):
// the real exporter captures and the upstream cases, each with the outcome
// recorded for two rule sets:
//  - the default rules, which follow Prometheus 2.42's scrape parser; the
//    sample counts below are what a real Prometheus 2.42 scraped from these
//    files (tests/e2e/exposition_e2e_test.py compares the values themselves);
//  - ParseOptions::expfmt_rules, which follow prometheus/common's
//    expfmt.TextParser, the parser whose tests the fuzz corpus comes from:
//    every from_test_parse_N parses to exactly its samples and every
//    from_test_parse_error_N fails with a message naming the line.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ingest/text_parser.h"

namespace trainwatch::ingest {
namespace {

namespace fs = std::filesystem;

fs::path Dir() {
  if (const char* s = std::getenv("TW_SHARED_DIR")) return fs::path(s) / "conformance/exposition";
  const char* src = std::getenv("TW_SOURCE_DIR");
  return fs::path(src ? src : ".") / "../shared/conformance/exposition";
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

// One sample as a comparable tuple: name, sorted labels, value bits, timestamp (-1: none).
using Sample = std::tuple<std::string, std::vector<std::pair<std::string, std::string>>, uint64_t, int64_t>;

struct Parsed {
  std::vector<Sample> samples;
  std::map<MetadataLine::Kind, size_t> meta;  // lines of each kind
  Status status;
};

Parsed Parse(const std::string& body, ParseOptions o) {
  Parsed out;
  o.on_metadata = [&](const MetadataLine& m) { out.meta[m.kind]++; };
  TextParser p(body, o);
  while (p.Next()) {
    const TextSample& s = p.sample();
    std::vector<std::pair<std::string, std::string>> labels;
    for (size_t i = 0; i < s.num_labels; i++) labels.emplace_back(s.labels[i].name, s.labels[i].value);
    std::sort(labels.begin(), labels.end());
    out.samples.emplace_back(std::string(s.name), labels, Bits(s.value), s.has_timestamp ? s.timestamp_ms : -1);
  }
  out.status = p.status();
  return out;
}

ParseOptions For(const fs::path& p) {
  std::string name = p.filename().string();
  bool om = name.find(".om.") != std::string::npos || name.find("openmetrics") != std::string::npos;
  return ParseOptions{.format = om ? TextFormat::kOpenMetrics : TextFormat::kPrometheus};
}

class ExpositionConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(Dir())) GTEST_SKIP() << "no conformance data at " << Dir();
  }
};

TEST_F(ExpositionConformance, EveryValidFileParsesWithPrometheusSampleCount) {
  // file -> samples Prometheus 2.42 scraped from it (scrape_samples_scraped),
  // and the families (TYPE lines) SOURCE.md counts.
  struct Want {
    const char* file;
    size_t samples;
    size_t types;
  };
  const std::vector<Want> files = {
      {"node_exporter_1.5.txt", 507, 283},
      {"prometheus_2.42.txt", 364, 178},
      {"python_client_0.16_ml_sample.txt", 57, 29},
      {"python_client_0.16_ml_sample.openmetrics.txt", 57, 22},
      {"upstream/common/expfmt_testdata/text", 248, 0},
      {"upstream/common/expfmt_fuzz_corpus/minimal", 1, 0},
      {"upstream/common/expfmt_fuzz_corpus/from_test_parse_0", 0, 0},
      {"upstream/common/expfmt_fuzz_corpus/from_test_parse_1", 3, 0},
      {"upstream/common/expfmt_fuzz_corpus/from_test_parse_2", 4, 2},
      {"upstream/common/expfmt_fuzz_corpus/from_test_parse_4", 7, 1},
      {"upstream/prometheus/model_textparse/alltypes.237mfs.prom.txt", 1857, 237},
      {"upstream/prometheus/model_textparse/alltypes.237mfs.nometa.prom.txt", 1857, 0},
      {"upstream/prometheus/model_textparse/alltypes.5mfs.om.txt", 53, 5},
      {"upstream/prometheus/model_textparse/1histogram.om.txt", 42, 1},
      {"upstream/prometheus/promtool/metrics-test.prom", 27, 4},
      {"upstream/prometheus/promtool/dump-openmetrics-test.prom", 10, 0},
      {"upstream/prometheus/promtool/dump-openmetrics-roundtrip-test.prom", 14, 0},
  };
  for (const Want& w : files) {
    fs::path p = Dir() / w.file;
    ASSERT_TRUE(fs::exists(p)) << p;
    Parsed r = Parse(ReadFile(p), For(p));
    ASSERT_TRUE(r.status.ok()) << w.file << ": " << r.status.ToString();
    EXPECT_EQ(r.samples.size(), w.samples) << w.file;
    if (w.types != 0) {
      EXPECT_EQ(r.meta[MetadataLine::Kind::kType], w.types) << w.file;
    }
  }
  // Every file of the folder is covered above or by the error cases below.
  size_t seen = 0;
  for (const auto& e : fs::recursive_directory_iterator(Dir())) {
    if (!e.is_regular_file() || e.path().filename() == "SOURCE.md") continue;
    seen++;
  }
  EXPECT_EQ(seen, files.size() + 1 /* from_test_parse_3 */ + 20 /* errors */);
}

TEST_F(ExpositionConformance, SameDataInEveryRendering) {
  // The 237-family benchmark input with and without HELP/TYPE lines.
  auto dir = Dir() / "upstream/prometheus/model_textparse";
  Parsed a = Parse(ReadFile(dir / "alltypes.237mfs.prom.txt"), {});
  Parsed b = Parse(ReadFile(dir / "alltypes.237mfs.nometa.prom.txt"), {});
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(a.samples, b.samples);
  // The python client's registry in both formats: the same samples (the text
  // format writes _created, info and stateset samples as gauges, under the same names).
  Parsed t = Parse(ReadFile(Dir() / "python_client_0.16_ml_sample.txt"), {});
  Parsed o = Parse(ReadFile(Dir() / "python_client_0.16_ml_sample.openmetrics.txt"),
                   {.format = TextFormat::kOpenMetrics});
  ASSERT_TRUE(t.status.ok() && o.status.ok()) << t.status.ToString() << o.status.ToString();
  // process_* describe the live process between the two fetches.
  std::multiset<Sample> ts, os;
  for (const Sample& x : t.samples) {
    if (!std::get<0>(x).starts_with("process_")) ts.insert(x);
  }
  for (const Sample& x : o.samples) {
    if (!std::get<0>(x).starts_with("process_")) os.insert(x);
  }
  EXPECT_EQ(ts.size(), 51u);
  EXPECT_EQ(ts, os);
  EXPECT_EQ(o.meta[MetadataLine::Kind::kUnit], 2u);
}

using L = std::vector<std::pair<std::string, std::string>>;
const uint64_t kNaN = kNormalNaNBits;

TEST_F(ExpositionConformance, ExpfmtValidCasesGiveExactlyTheirSamples) {
  // The samples prometheus/common's text_parse_test.go expects for these inputs.
  const std::map<std::string, std::vector<Sample>> want = {
      {"from_test_parse_0", {}},
      {"from_test_parse_1",
       {{"minimal_metric", {}, Bits(1.234), -1}, {"another_metric", {}, Bits(-3e3), 103948}, {"no_labels", {}, Bits(3), -1}}},
      {"from_test_parse_2",
       {{"name", L{{"basename", "basevalue"}, {"labelname", "val1"}}, kNaN, -1},
        {"name", L{{"basename", "base\"v\\al\nue"}, {"labelname", "val2"}}, Bits(0.23), 1234567890},
        {"name2", L{{"basename", "basevalue2"}, {"labelname", "val2"}}, Bits(HUGE_VAL), 54321},
        {"name2", L{{"labelname", "val1"}}, Bits(-HUGE_VAL), -1}}},
      {"from_test_parse_3",
       {{"my_summary", L{{"n1", "val1"}, {"quantile", "0.5"}}, Bits(110), -1},
        {"decoy", {}, Bits(-1), -2},
        {"my_summary", L{{"n1", "val1"}, {"quantile", "0.9"}}, Bits(140), 1},
        {"my_summary_count", L{{"n1", "val1"}}, Bits(42), -1},
        {"my_summary_sum", L{{"n1", "val1"}}, Bits(4711), 2},
        {"fake_sum", L{{"n1", "val1"}}, Bits(2001), -1},
        {"another_summary_count", L{{"n1", "val1"}, {"n2", "val2"}}, Bits(20), -1},
        {"my_summary_count", L{{"n1", "val1"}, {"n2", "val2"}}, Bits(5), 5},
        {"another_summary", L{{"n1", "val1"}, {"n2", "val2"}, {"quantile", ".3"}}, Bits(-1.2), -1},
        {"my_summary_sum", L{{"n1", "val2"}}, Bits(8), 15},
        {"my_summary", L{{"n1", "val3"}, {"quantile", "0.2"}}, Bits(4711), -1},
        {"my_summary", L{{"n1", "val1"}, {"n2", "val2"}, {"quantile", "-12.34"}}, kNaN, -1}}},
      {"from_test_parse_4",
       {{"request_duration_microseconds_bucket", L{{"le", "100"}}, Bits(123), -1},
        {"request_duration_microseconds_bucket", L{{"le", "120"}}, Bits(412), -1},
        {"request_duration_microseconds_bucket", L{{"le", "144"}}, Bits(592), -1},
        {"request_duration_microseconds_bucket", L{{"le", "172.8"}}, Bits(1524), -1},
        {"request_duration_microseconds_bucket", L{{"le", "+Inf"}}, Bits(2693), -1},
        {"request_duration_microseconds_sum", {}, Bits(1.7560473e+06), -1},
        {"request_duration_microseconds_count", {}, Bits(2693), -1}}},
      {"minimal", {{"m", {}, Bits(0), -1}}},
  };
  for (const auto& [file, samples] : want) {
    std::string body = ReadFile(Dir() / "upstream/common/expfmt_fuzz_corpus" / file);
    Parsed r = Parse(body, {.expfmt_rules = true});
    ASSERT_TRUE(r.status.ok()) << file << ": " << r.status.ToString();
    EXPECT_EQ(r.samples, samples) << file;
  }
  // Prometheus 2.42 refuses from_test_parse_3 (at line 4, "decoy -1 -2": it
  // reads only digits as a timestamp). Our default rules accept negative
  // timestamps but refuse it too, at "# HELP " (Prometheus: "expected metric
  // name after HELP").
  Parsed r = Parse(ReadFile(Dir() / "upstream/common/expfmt_fuzz_corpus/from_test_parse_3"), {});
  EXPECT_EQ(r.status.message(), "line 19: missing metric name in # HELP");
  // The decoder test input, and promtool's check-metrics input, under expfmt rules too.
  for (const char* f : {"upstream/common/expfmt_testdata/text", "upstream/prometheus/promtool/metrics-test.prom"}) {
    Parsed e = Parse(ReadFile(Dir() / f), {.expfmt_rules = true});
    EXPECT_TRUE(e.status.ok()) << f << ": " << e.status.ToString();
  }
}

TEST_F(ExpositionConformance, ExpfmtErrorCasesFailNamingTheLine) {
  // from_test_parse_error_N -> the line expfmt reports, and whether Prometheus
  // 2.42's scrape parser (our default rules) also refuses it: measured by
  // scraping each file with the real Prometheus ("up" 0 or 1).
  struct Case {
    int n;
    size_t line;
    bool prometheus_refuses;
    const char* why;
  };
  const std::vector<Case> cases = {
      {0, 1, false, "no newline at the end"},
      {1, 1, false, "\\t escape in a label value"},
      {2, 2, false, "raw newline in a label value (Prometheus 2.42 accepts it; we refuse)"},
      {3, 1, true, "invalid label name"},
      {4, 1, true, "__name__ as a label"},
      {5, 1, true, "invalid label name"},
      {6, 1, true, "unquoted label value"},
      {7, 3, false, "quantile not a float"},
      {8, 1, true, "junk after a label value"},
      {9, 1, true, "float timestamp"},
      {10, 1, true, "two timestamps"},
      {11, 1, true, "invalid value"},
      {12, 3, false, "second HELP"},
      {13, 3, false, "second TYPE"},
      {14, 3, false, "TYPE after samples"},
      {15, 2, true, "unknown type"},
      {16, 2, true, "invalid name in TYPE"},
      {17, 1, true, "invalid metric name"},
      {18, 1, true, "no metric name"},
      {19, 3, false, "le not a float"},
  };
  for (const Case& c : cases) {
    std::string file = "from_test_parse_error_" + std::to_string(c.n);
    std::string body = ReadFile(Dir() / "upstream/common/expfmt_fuzz_corpus" / file);
    Parsed e = Parse(body, {.expfmt_rules = true});
    EXPECT_FALSE(e.status.ok()) << file << " (" << c.why << ")";
    EXPECT_TRUE(e.status.IsInvalidArgument()) << file;
    std::string prefix = "line " + std::to_string(c.line) + ": ";
    EXPECT_EQ(e.status.message().substr(0, prefix.size()), prefix) << file << ": " << e.status.ToString();

    Parsed d = Parse(body, {});
    bool refuses = !d.status.ok();
    bool want_refuse = c.prometheus_refuses || c.n == 2;
    EXPECT_EQ(refuses, want_refuse) << file << " (" << c.why << "): " << d.status.ToString();
    if (refuses) {
      EXPECT_EQ(d.status.message().substr(0, prefix.size()), prefix) << file << ": " << d.status.ToString();
    }
  }
}

}  // namespace
}  // namespace trainwatch::ingest
