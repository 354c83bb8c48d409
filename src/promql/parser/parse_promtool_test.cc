// Parse errors against the real Prometheus parser: Debian's promtool (2.42)
// checks a rule file per malformed query, and its "could not parse
// expression" text must equal ours (position and wording).

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "promql/parser/parse.h"

namespace trainwatch::promql::parser {
namespace {

const char* kPromtool = "/usr/bin/promtool";

// The parse error promtool reports for `expr`, or "" when it parses.
std::string PromtoolError(const std::string& expr, const std::string& dir) {
  std::string path = dir + "/rules.yml";
  {
    std::ofstream f(path);
    std::string quoted;
    for (char c : expr) {
      if (c == '\'') quoted += "''";
      else quoted += c;
    }
    f << "groups:\n- name: g\n  rules:\n  - record: r\n    expr: '" << quoted << "'\n";
  }
  std::string cmd = std::string(kPromtool) + " check rules " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  const std::string marker = "could not parse expression: ";
  size_t at = out.find(marker);
  if (at == std::string::npos) return "";
  std::string msg = out.substr(at + marker.size());
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

TEST(ParserVsPromtool, SameErrorTexts) {
  if (!std::filesystem::exists(kPromtool)) GTEST_SKIP() << "promtool not installed";
  std::string dir = testing::TempDir() + "/tw_promtool_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const char* queries[] = {
      "sum(up",
      "up)",
      "1 +",
      "foo{a=\"b\"",
      "foo{a=\"b\",}}",
      "foo{a}",
      "foo{a=b}",
      "rate(foo)",
      "rate(foo[5m], 1)",
      "nosuchfunc(foo)",
      "foo[5m",
      "foo offset 1m offset 2m",
      "foo @ 1 @ 2",
      "1 < 2",
      "foo and 1",
      "sum by (a) (foo) by (b)",
      "topk(foo)",
      "{}",
      "{a=~\".*\"}",
      "foo + on(a) group_left(a) bar",
      "(foo)[5m]",
      "foo[5m][5m]",
      "-\"a\"",
      "foo == bool",
      "count_values(1, foo)",
      "quantile(\"a\", foo)",
      "label_replace(foo, \"a\", \"b\", \"c\")",
      "foo[5m:1m:1m]",
      "foo{__name__=\"bar\"}",
      "1 and 1",
  };
  int compared = 0;
  for (const char* q : queries) {
    std::string want = PromtoolError(q, dir);
    auto got = ParseExpr(q);
    if (want.empty()) {
      EXPECT_TRUE(got.ok()) << q << ": promtool accepts it, we say " << got.status().ToString();
      continue;
    }
    ASSERT_FALSE(got.ok()) << q << ": promtool says " << want;
    EXPECT_EQ(got.error().message(), want) << q;
    ++compared;
  }
  EXPECT_GT(compared, 20);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainwatch::promql::parser
