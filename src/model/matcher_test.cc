#include "model/matcher.h"

#include <gtest/gtest.h>

namespace trainwatch::model {
namespace {

TEST(MatcherTest, RegexIsFullyAnchoredAndDotMatchesNewline) {
  auto m = Matcher::Make(MatchType::kRegex, "job", "no.e");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->Matches("node"));
  EXPECT_TRUE(m->Matches("no\ne"));
  EXPECT_FALSE(m->Matches("xnode"));
  EXPECT_FALSE(m->Matches("nodes"));
}

TEST(MatcherTest, MatchesEmptyTellsWhetherAbsentLabelMatches) {
  EXPECT_TRUE(Matcher::Make(MatchType::kNotEqual, "a", "x")->MatchesEmpty());
  EXPECT_FALSE(Matcher::Make(MatchType::kEqual, "a", "x")->MatchesEmpty());
  EXPECT_TRUE(Matcher::Make(MatchType::kRegex, "a", ".*")->MatchesEmpty());
  EXPECT_FALSE(Matcher::Make(MatchType::kNotRegex, "a", ".*")->MatchesEmpty());
}

TEST(MatcherTest, LiteralAlternationExposesSet) {
  auto m = Matcher::Make(MatchType::kRegex, "a", "x|y|z");
  EXPECT_EQ(m->SetMatches().size(), 3u);
  EXPECT_TRUE(Matcher::Make(MatchType::kRegex, "a", "x.*|y")->SetMatches().empty());
}

TEST(MatcherTest, BadRegexNamesTheProblem) {
  auto m = Matcher::Make(MatchType::kRegex, "a", "(");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("invalid regular expression \"(\""), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::model
