#include "promql/parser/parse.h"

#include <gtest/gtest.h>

namespace trainwatch::promql::parser {
namespace {

std::string RoundTrip(std::string_view q) {
  auto e = ParseExpr(q);
  EXPECT_TRUE(e.ok()) << q << ": " << e.status().ToString();
  return e.ok() ? (*e)->String() : "";
}

TEST(Parser, RoundTrips) {
  EXPECT_EQ(RoundTrip("foo"), "foo");
  EXPECT_EQ(RoundTrip("foo{a=\"b\", c=~\"d.*\"}"), "foo{a=\"b\", c=~\"d.*\"}");
  EXPECT_EQ(RoundTrip("rate(foo[5m])"), "rate(foo[5m])");
  EXPECT_EQ(RoundTrip("sum by (instance) (rate(x{mode!=\"idle\"}[5m]))"),
            "sum by (instance) (rate(x{mode!=\"idle\"}[5m]))");
  EXPECT_EQ(RoundTrip("sum(x) without (a)"), "sum without (a) (x)");
  EXPECT_EQ(RoundTrip("topk(3, x)"), "topk(3, x)");
  EXPECT_EQ(RoundTrip("a + on (b) group_left (c) d"), "a + on (b) group_left (c) d");
  EXPECT_EQ(RoundTrip("x offset -5m"), "x offset -5m");
  EXPECT_EQ(RoundTrip("x @ 100"), "x @ 100.000");
  EXPECT_EQ(RoundTrip("x[1h:5m] offset 1m"), "x[1h:5m] offset 1m");
  EXPECT_EQ(RoundTrip("-1"), "-1");
  EXPECT_EQ(RoundTrip("0x10"), "16");
  EXPECT_EQ(RoundTrip("Inf"), "Inf");
  EXPECT_EQ(RoundTrip("'a\\nb'"), "\"a\\nb\"");
}

TEST(Parser, Precedence) {
  EXPECT_EQ(RoundTrip("1 + 2 * 3"), "1 + 2 * 3");
  auto e = ParseExpr("1 + 2 * 3");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->op, BinOp::kAdd);
  auto p = ParseExpr("2 ^ 3 ^ 2");  // right-assoc
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->args[0]->kind, NodeKind::kNumber);
  EXPECT_EQ((*p)->args[1]->kind, NodeKind::kBinary);
  auto u = ParseExpr("-a ^ 2");  // -(a^2)
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)->kind, NodeKind::kUnary);
  auto o = ParseExpr("a or b and c");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)->op, BinOp::kOr);
}

TEST(Parser, ErrorsWithPositions) {
  auto e = ParseExpr("sum(up");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:7: parse error: unclosed left parenthesis");
  EXPECT_TRUE(e.error().IsInvalidArgument());
  e = ParseExpr("{a=~\".*\"}");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("vector selector must contain at least one non-empty matcher"), std::string::npos);
  e = ParseExpr("rate(foo)");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("expected type range vector in call to function \"rate\", got instant vector"),
            std::string::npos);
  e = ParseExpr("1 < 2");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("comparisons between scalars must use BOOL modifier"), std::string::npos);
  e = ParseExpr("foo and 1");
  ASSERT_FALSE(e.ok());
  e = ParseExpr("nosuchfn(x)");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:1: parse error: unknown function with name \"nosuchfn\"");
  e = ParseExpr("x\n  + )");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message().substr(0, 4), "2:5:");
  e = ParseExpr("(foo)[5m]");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("ranges only allowed for vector selectors"), std::string::npos);
}

TEST(Parser, Durations) {
  EXPECT_EQ(*ParseDuration("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDuration("5s500ms"), 5'500);
  EXPECT_FALSE(ParseDuration("5m1h").ok());
  EXPECT_EQ(FormatDuration(5'400'000), "1h30m");
}

}  // namespace
}  // namespace trainwatch::promql::parser
