// Runs Prometheus's PromQL test corpus (with promqltest's implicit @ and
// range-query re-runs of every instant eval), prints per file how many evals
// passed and failed, and checks that none fails and that no file passes
// fewer evals than recorded in testdata/conformance_baseline.txt. Without the
// corpus the test is skipped, and ctest reports it as skipped (see
// CMakeLists.txt). Set TW_UPDATE_BASELINE=1 to rewrite the baseline from the
// current results.

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
  if (!fs::exists(dir)) GTEST_SKIP() << "PromQL corpus not found at " << dir;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".test") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  auto baseline = ReadBaseline();
  std::map<std::string, int> now;
  int total_pass = 0, total_fail = 0;
  for (const auto& f : files) {
    auto r = RunFile(f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::printf("%-28s passed %4d  failed %4d\n", r->name.c_str(), r->passed, r->failed);
    for (const auto& x : r->failures) std::printf("    FAIL %s\n", x.c_str());
    total_pass += r->passed;
    total_fail += r->failed;
    now[r->name] = r->passed;
    auto it = baseline.find(r->name);
    if (it != baseline.end()) {
      EXPECT_GE(r->passed, it->second) << r->name << " regressed below its baseline";
    }
  }
  std::printf("%-28s passed %4d  failed %4d\n", "TOTAL", total_pass, total_fail);
  EXPECT_GT(total_pass, 0);
  // Every eval passes, native histograms included.
  EXPECT_EQ(total_fail, 0) << "the FAIL lines above name each failing eval";
  if (std::getenv("TW_UPDATE_BASELINE") != nullptr) {
    std::ofstream out(BaselinePath());
    out << "# file  passing-evals (ratchet: the conformance test fails if a file drops below)\n";
    for (const auto& [n, p] : now) out << n << " " << p << "\n";
  }
}

}  // namespace
}  // namespace trainwatch::promql::promqltest
