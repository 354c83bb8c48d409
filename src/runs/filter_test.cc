#include "runs/filter.h"

#include <gtest/gtest.h>

#include <string>

namespace trainwatch::runs {
namespace {

runs::Run MakeRun() {
  runs::Run r;
  r.id = "r1";
  r.project = "llama";
  r.name = "lr-sweep-3";
  r.status = "running";
  r.config = Json::parse(R"({"lr": 0.0003, "batch": 256, "opt": {"name": "adamw", "beta2": 0.95}, "fp16": true})");
  r.tags = Json::parse(R"(["llama", "sweep"])");
  r.summary = Json::parse(R"({"loss": 0.41, "acc": "NaN"})");
  r.step = 1200;
  r.total_steps = 20000;
  r.start_time_ms = 1796218600123;
  r.host = "gpu-node-3";
  return r;
}

TEST(FilterTest, Evaluates) {
  runs::Run r = MakeRun();
  auto f = [&](std::string_view expr, bool want) {
    auto flt = Filter::Parse(expr);
    ASSERT_TRUE(flt.ok()) << expr << ": " << flt.error().ToString();
    EXPECT_EQ(flt->Matches(r), want) << expr;
  };
  f("", true);
  f("   ", true);
  f(R"(config.lr > 1e-4 and tags contains "llama" and metrics.loss < 0.5 and status = "running")", true);
  f("config.lr > 1e-3", false);
  f("config.lr >= 0.0003 and config.lr <= 3e-4", true);
  f("config.batch = 256", true);
  f("config.batch != 256", false);
  f("config.batch == 256", true);
  f("config.opt.name = 'adamw'", true);
  f("config.opt.beta2 < 0.99", true);
  f("config.fp16 = true", true);
  f("config.fp16 = false", false);
  f("config.missing = 1", false);
  f("config.missing != 1", true);   // != is "not =": true for an absent field
  f("config.missing = null", true);
  f("config.missing > 0", false);
  f("config.opt.name > 1", false);  // a string is not ordered against a number
  f("summary.loss < 0.5 and metrics.loss < 0.5", true);
  f("summary.acc = 'NaN'", true);
  f("summary.acc < 1", false);     // NaN is not ordered
  f("status = \"running\" and not (step < 1000)", true);
  f("not status = 'running' or name =~ 'lr-.*'", true);
  f("name =~ 'lr-'", false);       // anchored
  f("name =~ 'LR-.*'", false);
  f("name contains 'sweep'", true);
  f("tags contains 'gpt'", false);
  f("tags = 'sweep'", true);       // = on tags is membership too
  f("tags =~ 'sw.*'", true);
  f("project = 'llama' AND (status = 'failed' OR step >= 1200)", true);
  f("step > 1199 and step < 1201", true);
  f("start_time > 1796218600 and start_time < 1796218601", true);
  f("host contains 'node'", true);
  f("config.lr > -1 and config.batch > +255", true);
}

// Parsing, evaluating and freeing a filter recurse: nesting and chains
// deeper than 256 are an error naming the position, never a stack overflow.
TEST(FilterTest, NestingDepthIsBounded) {
  runs::Run r = MakeRun();
  auto repeat = [](std::string_view s, int n) {
    std::string out;
    for (int i = 0; i < n; i++) out += s;
    return out;
  };
  // At the bound: parses and evaluates.
  auto ok = Filter::Parse(repeat("(", 255) + "status = 'running'" + repeat(")", 255));
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_TRUE(ok->Matches(r));
  ok = Filter::Parse(repeat("not ", 254) + "status = 'running'");
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_TRUE(ok->Matches(r));
  ok = Filter::Parse("status = 'running'" + repeat(" and step > 1", 255));
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_TRUE(ok->Matches(r));
  // Far beyond it: 200,000 parentheses, `not`s, and a million-term chain.
  for (const std::string& hostile :
       {repeat("(", 200000) + "status = 'running'" + repeat(")", 200000), repeat("not ", 200000) + "step > 1",
        "step > 1" + repeat(" and step > 1", 1000000), "step > 1" + repeat(" or step > 1", 1000000)}) {
    auto f = Filter::Parse(hostile);
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(f.error().IsInvalidArgument());
    EXPECT_NE(f.error().message().find("filter nested deeper than 256 levels"), std::string::npos)
        << f.error().message();
  }
}

TEST(FilterTest, ErrorsNameThePosition) {
  auto f = [](std::string_view expr, std::string_view want) {
    auto flt = Filter::Parse(expr);
    ASSERT_FALSE(flt.ok()) << expr;
    EXPECT_TRUE(flt.error().IsInvalidArgument());
    EXPECT_NE(flt.error().message().find(want), std::string::npos) << expr << ": " << flt.error().message();
  };
  f("config.lr >", "position 12: expected a value");
  f("config.lr 0.1", "position 11: expected an operator");
  f("bogus = 1", "position 1: unknown field \"bogus\"");
  f("status = running", "position 10: expected a value");
  f("(status = 'x'", "position 14: expected \")\" to close \"(\" at position 1");
  f("status = 'x')", "position 13: unexpected \")\"");
  f("status = 'x", "position 10: unterminated string");
  f("status = 'x' and", "position 17: expected a field");
  f("name =~ '('", "position 9: invalid regular expression");
  f("step > 1.2.3", "position 8: invalid number");
  f("step # 1", "position 6: unexpected character '#'");
  f("status = 'a' xor status = 'b'", "position 14: unexpected \"xor\"");
}

}  // namespace
}  // namespace trainwatch::runs
