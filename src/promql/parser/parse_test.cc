#include "promql/parser/parse.h"

#include <cstdint>
#include <string>

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
  EXPECT_EQ(RoundTrip("info(m, {data=~\".*\"})"), "info(m, {data=~\".*\"})");
  // UTF-8 label names (Prometheus 3) stay quoted in groupings and matchings
  // (the PromQL fuzzer's find: `by ("$1")` printed as `by ($1)`).
  EXPECT_EQ(RoundTrip("sum by (up, \"$1\", \"a b\") (x)"), "sum by (up, \"$1\", \"a b\") (x)");
  EXPECT_EQ(RoundTrip("a + on (\"k.8s\") group_left (\"$x\") b"), "a + on (\"k.8s\") group_left (\"$x\") b");
  EXPECT_EQ(RoundTrip("sum without (\"x-y\") (x)"), "sum without (\"x-y\") (x)");
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
  e = ParseExpr("foo @ 1 @ 2");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:1: parse error: @ <timestamp> may not be set multiple times");
  e = ParseExpr("foo offset 1m offset 2m");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:1: parse error: offset may not be set multiple times");
  e = ParseExpr("foo{a=\"b\"");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:10: parse error: unexpected end of input inside braces");
  e = ParseExpr("(foo)[5m]");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("ranges only allowed for vector selectors"), std::string::npos);
}

// `q` parses; printed, it parses again and prints the same (the promql
// fuzzer's invariant).
void ExpectPrintedParsesAgain(const char* q) {
  auto e = ParseExpr(q);
  ASSERT_TRUE(e.ok()) << q << ": " << e.error().ToString();
  std::string printed = (*e)->String();
  auto again = ParseExpr(printed);
  ASSERT_TRUE(again.ok()) << q << " printed as " << printed << ": " << again.error().ToString();
  EXPECT_EQ((*again)->String(), printed);
}

// Found by fuzz/promql_fuzz.cc: a name given as {__name__="..."} that is no
// identifier outside braces stays inside them when printed.
TEST(Parser, NameFromMatcherPrintsSoItParsesAgain) {
  for (const char* q : {"{__name__=\"info_metric\xce\"}", "{__name__=\"sum\"}", "{__name__=\"a.b\", x=\"1\"}",
                        "{__name__=\"inf\"} offset 1m", "info({job=\"w\"}, {__name__=\"by\"})"}) {
    ASSERT_NO_FATAL_FAILURE(ExpectPrintedParsesAgain(q));
  }
  EXPECT_EQ((*ParseExpr("{__name__=\"up\", job=\"x\"}"))->String(), "up{job=\"x\"}");
}

// Found by the fuzz campaign: a quoted label name that is not a legacy name
// ({"\r"="1"}, {"a.b"="1"}) was printed bare and did not parse again.
TEST(Parser, QuotedLabelNamesPrintQuoted) {
  for (const char* q : {"metric{\"\r\"=\"1\"}", "m{\"a.b\"=\"1\", job=\"x\"}", "{\"\u00e9t\u00e9\"!~\"x\", __name__=\"m\"}"}) {
    ASSERT_NO_FATAL_FAILURE(ExpectPrintedParsesAgain(q));
  }
  EXPECT_EQ((*ParseExpr("m{\"a.b\"=\"1\", job=\"x\"}"))->String(), "m{\"a.b\"=\"1\", job=\"x\"}");
}

// Found by fuzz/promql_fuzz.cc: a ':' inside braces made the lexer emit empty
// identifiers without advancing, forever (a query could hang a server thread).
TEST(Parser, ColonInsideBracesIsAnError) {
  for (const char* q : {"up{:a=\"1\"}", "up{a:b=\"1\"}", "(x{g=\"c\"} + 1) or x{:i=\"1\"}", "{:}"}) {
    auto e = ParseExpr(q);
    ASSERT_FALSE(e.ok()) << q;
    EXPECT_NE(e.error().message().find("unexpected character: ':'"), std::string::npos) << q << ": " << e.error().message();
  }
  EXPECT_TRUE(ParseExpr("up{a=\"x:y\"} + a:b:c").ok());
}

TEST(Parser, FillModifiersAndDurationExpressions) {
  EXPECT_EQ(RoundTrip("a + fill(0) b"), "a + fill(0) b");
  EXPECT_EQ(RoundTrip("a + fill_left(1) fill_right(-Inf) b"), "a + fill_left(1) fill_right(-Inf) b");
  EXPECT_EQ(RoundTrip("a + on (x) group_left (y) fill_right(NaN) b"), "a + on (x) group_left (y) fill_right(NaN) b");
  EXPECT_EQ(RoundTrip("a == bool fill(3) b"), "a == bool fill(3) b");
  // A metric called fill is still a metric.
  EXPECT_EQ(RoundTrip("other + fill"), "other + fill");
  EXPECT_EQ(RoundTrip("fill + fill(0) fill"), "fill + fill(0) fill");
  auto e = ParseExpr("a and fill(0) b");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("fill modifiers are not allowed for set operator"), std::string::npos);
  e = ParseExpr("1 + fill(0) b");
  ASSERT_FALSE(e.ok());
  // Constant duration expressions fold at parse time.
  EXPECT_EQ(RoundTrip("rate(x[2m * (10 + 5)])"), "rate(x[30m])");
  EXPECT_EQ(RoundTrip("x[29s+1s:5s+5s]"), "x[30s:10s]");
  EXPECT_EQ(RoundTrip("x offset (2 * 2)"), "x offset 4s");
  EXPECT_EQ(RoundTrip("x offset -4"), "x offset -4s");
  // offset binds one operand: `x offset 2 ^ 2` is `(x offset 2) ^ 2`.
  auto p = ParseExpr("x offset 2 ^ 2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->kind, NodeKind::kBinary);
  EXPECT_EQ((*p)->args[0]->offset_ms, 2000);
  // step()/range() stay symbolic (case-insensitive, as in Prometheus).
  EXPECT_EQ(RoundTrip("count_over_time(x[STep() + 1])"), "count_over_time(x[step() + 1])");
  EXPECT_EQ(RoundTrip("x offset -min_of(step(), 1s)"), "x offset -min_of(step(), 1)");
  EXPECT_EQ(RoundTrip("x offset -(step() * 2)"), "x offset -(step() * 2)");
  e = ParseExpr("x[5m * ]");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:8: parse error: unexpected right bracket \"]\" in duration expression, expected duration");
  e = ParseExpr("x offset foo");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:10: parse error: unexpected identifier \"foo\" in offset, expected duration");
  e = ParseExpr("x[1m - 1m]");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("duration must be greater than 0"), std::string::npos);
}

TEST(Parser, AnchoredAndSmoothed) {
  EXPECT_EQ(RoundTrip("increase(x[1m] anchored)"), "increase(x[1m] anchored)");
  EXPECT_EQ(RoundTrip("rate(x[5m] offset 1m smoothed)"), "rate(x[5m] offset 1m smoothed)");
  EXPECT_EQ(RoundTrip("x @ 100 smoothed + 0"), "x @ 100.000 smoothed + 0");
  auto e = ParseExpr("x[1m] anchored smoothed");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:16: parse error: anchored or smoothed may not be set multiple times");
  // Still a metric name elsewhere.
  EXPECT_EQ(RoundTrip("smoothed + anchored"), "smoothed + anchored");
}

TEST(Parser, NestingDepthLimit) {
  std::string ok = std::string(200, '(') + "x" + std::string(200, ')');
  EXPECT_TRUE(ParseExpr(ok).ok());
  std::string deep = std::string(10'000, '(') + "x" + std::string(10'000, ')');
  auto e = ParseExpr(deep);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "1:257: parse error: expression nesting depth exceeds the maximum of 256");
  std::string neg(10'000, '-');
  EXPECT_FALSE(ParseExpr(neg + "1").ok());
  // A ^ chain recurses per operator: refused at the depth limit, not after
  // recursing through all of it (100k deep overflowed the stack).
  std::string pow = "x";
  for (int i = 0; i < 100'000; ++i) pow += "^x";
  EXPECT_FALSE(ParseExpr(pow).ok());
  std::string dpow = "x[1s";
  for (int i = 0; i < 100'000; ++i) dpow += "^1";
  EXPECT_FALSE(ParseExpr(dpow + "]").ok());
  std::string dur = "x[1s";
  for (int i = 0; i < 10'000; ++i) dur += "+1s";
  EXPECT_FALSE(ParseExpr(dur + "]").ok());
}

TEST(Parser, Durations) {
  EXPECT_EQ(*ParseDuration("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDuration("5s500ms"), 5'500);
  EXPECT_FALSE(ParseDuration("5m1h").ok());
  EXPECT_EQ(FormatDuration(5'400'000), "1h30m");
  EXPECT_EQ(FormatDuration(-90'000), "-1m30s");
  EXPECT_EQ(FormatDuration(INT64_MIN), "-292471208y35w2d7h12m55s808ms");
}

// A unitless step or range is seconds; one too large for int64 milliseconds is
// an error (found by the fuzzing campaign: it converted out of range).
TEST(Parser, NumberDurationOutOfRange) {
  auto r = ParseExpr("absent_over_time(rate(m[5m])[5m:" + std::string(80, '4') + "])");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("duration out of range"), std::string::npos) << r.error().message();
  EXPECT_FALSE(ParseExpr("m[1e300]").ok());
  auto ok = ParseExpr("rate(m[5m])[300:15]");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ((*ok)->String(), "rate(m[5m])[5m:15s]");
}

}  // namespace
}  // namespace trainwatch::promql::parser
