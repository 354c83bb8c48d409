// Runs Prometheus's PromQL test corpus and checks that no file passes fewer
// evals than recorded in testdata/conformance_baseline.txt. Set
// TW_UPDATE_BASELINE=1 to rewrite the baseline from the current results.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "promql/promqltest/test_runner.h"

namespace trainwatch::promql::promqltest {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("TW_SOURCE_DIR");
  return s ? s : ".";
}

std::string CorpusDir() {
  if (const char* s = std::getenv("TW_SHARED_DIR")) return std::string(s) + "/conformance/promql";
  return SourceDir() + "/../shared/conformance/promql";
}

std::string BaselinePath() { return SourceDir() + "/src/promql/testdata/conformance_baseline.txt"; }

std::map<std::string, int> ReadBaseline() {
  std::map<std::string, int> out;
  std::ifstream in(BaselinePath());
  std::string name;
  int n;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    if (ls >> name >> n) out[name] = n;
  }
  return out;
}

TEST(PromqlConformance, NoFileRegresses) {
  namespace fs = std::filesystem;
  std::string dir = CorpusDir();
  if (!fs::exists(dir)) GTEST_SKIP() << "corpus not found at " << dir;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".test") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  auto baseline = ReadBaseline();
  bool verbose = std::getenv("TW_CONFORMANCE_VERBOSE") != nullptr;
  std::map<std::string, int> now;
  int total_pass = 0, total_fail = 0, total_skip = 0;
  for (const auto& f : files) {
    auto r = RunFile(f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::printf("%-28s passed %4d  failed %4d  skipped %4d%s\n", r->name.c_str(), r->passed, r->failed, r->skipped,
                r->skipped ? "  (native histograms)" : "");
    if (verbose) {
      for (const auto& x : r->failures) std::printf("    FAIL %s\n", x.c_str());
    }
    total_pass += r->passed;
    total_fail += r->failed;
    total_skip += r->skipped;
    now[r->name] = r->passed;
    auto it = baseline.find(r->name);
    if (it != baseline.end()) {
      EXPECT_GE(r->passed, it->second) << r->name << " regressed below its baseline";
    }
  }
  std::printf("%-28s passed %4d  failed %4d  skipped %4d\n", "TOTAL", total_pass, total_fail, total_skip);
  EXPECT_GT(total_pass, 0);
  if (std::getenv("TW_UPDATE_BASELINE") != nullptr) {
    std::ofstream out(BaselinePath());
    out << "# file  passing-evals (ratchet: the conformance test fails if a file drops below)\n";
    for (const auto& [n, p] : now) out << n << " " << p << "\n";
  }
}

}  // namespace
}  // namespace trainwatch::promql::promqltest
