#include "logs/query.h"

#include <gtest/gtest.h>

namespace trainwatch::logs {
namespace {

Record Rec(std::string msg, std::string level = "INFO", std::string fields = "",
           model::Labels labels = {{"project", "p"}, {"run", "r1"}, {"rank", "0"}}) {
  Record r;
  r.message = std::move(msg);
  r.level = std::move(level);
  r.fields = std::move(fields);
  r.labels = std::move(labels);
  return r;
}

TEST(QueryTest, ParsesSelectorAndFilters) {
  auto q = Query::Parse(R"({project="p", run=~"r.*"} level=error status>=500 CUDA "out of memory" -oom |~ "step \d+")");
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(q->matchers.size(), 2u);
  ASSERT_EQ(q->levels.size(), 1u);
  EXPECT_EQ(q->levels[0].value, "ERROR");
  ASSERT_EQ(q->fields.size(), 1u);
  EXPECT_TRUE(q->fields[0].numeric);
  ASSERT_EQ(q->texts.size(), 3u);
  EXPECT_EQ(q->texts[1].tokens, (std::vector<std::string>{"out", "of", "memory"}));
  EXPECT_TRUE(q->texts[2].negate);
  EXPECT_EQ(q->FtsTokens(), R"("cuda" AND "out" AND "of" AND "memory")");
  ASSERT_EQ(q->lines.size(), 1u);
}

TEST(QueryTest, ErrorsNamePosition) {
  auto f = [](std::string_view q, std::string_view want) {
    auto r = Query::Parse(q);
    ASSERT_FALSE(r.ok()) << q;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
  };
  f(R"({project="p")", "expected , or }");
  f(R"(or b)", "expected a filter before \"or\"");
  f(R"(a or or b)", "expected a filter before \"or\"");
  f(R"(a or)", "expected a filter after \"or\"");
  f(R"(status>=abc)", "need a number");
  f(R"(|~ "(")", "invalid regex");
  f(R"(level>LOUD)", "has no order");
  f(R"("unterminated)", "unterminated string");
}

TEST(QueryTest, MatchesInMemory) {
  auto m = [](std::string_view q, const Record& r) {
    auto p = Query::Parse(q);
    EXPECT_TRUE(p.ok()) << q;
    return p->Matches(r);
  };
  Record err = Rec("RuntimeError: CUDA error: out of memory at step 12", "ERROR", R"({"status":503,"gpu":"a"})");
  EXPECT_TRUE(m(R"({project="p"} level=ERROR cuda)", err));
  EXPECT_TRUE(m(R"(level>=WARNING "out of memory")", err));
  EXPECT_FALSE(m(R"(level<ERROR)", err));
  EXPECT_TRUE(m(R"(status>=500 gpu=a rank=0)", err));  // rank: the stream label
  EXPECT_FALSE(m(R"(status<500)", err));
  EXPECT_FALSE(m(R"(missing=1)", err));
  EXPECT_TRUE(m(R"(missing!=1)", err));
  EXPECT_TRUE(m(R"(|~ "step \d+" != "NCCL")", err));
  EXPECT_FALSE(m(R"(-cuda)", err));
  EXPECT_TRUE(m(R"(mem*)", err));
  EXPECT_FALSE(m(R"("memory out")", err));
  EXPECT_FALSE(m(R"({run="r2"})", err));
  EXPECT_TRUE(m(R"(mem*)", err));
}

TEST(QueryTest, OrSeparatesAlternatives) {
  auto q = Query::Parse(R"({project="p"} level=ERROR nccl or level=ERROR cuda OR oom*)");
  ASSERT_TRUE(q.ok()) << q.error().message();
  ASSERT_EQ(q->alternatives.size(), 2u);
  EXPECT_EQ(q->Alternatives().size(), 3u);
  EXPECT_EQ(q->alternatives[0].FtsTokens(), R"("cuda")");
  EXPECT_EQ(q->alternatives[1].FtsTokens(), R"("oom"*)");
  EXPECT_TRUE(q->alternatives[0].matchers.empty());  // the selector is shared
  EXPECT_TRUE(q->Matches(Rec("CUDA error", "ERROR")));
  EXPECT_TRUE(q->Matches(Rec("NCCL timeout", "ERROR")));
  EXPECT_TRUE(q->Matches(Rec("OOMKilled", "INFO")));
  EXPECT_FALSE(q->Matches(Rec("CUDA error", "INFO")));  // and binds tighter than or
  EXPECT_FALSE(q->Matches(Rec("CUDA error", "ERROR", "", {{"project", "other"}})));
}

}  // namespace
}  // namespace trainwatch::logs
