#include "model/labels.h"

#include <gtest/gtest.h>

namespace trainwatch::model {
namespace {

TEST(LabelsTest, SortsAndPrintsLikePrometheus) {
  Labels l{{"job", "node"}, {"__name__", "up"}, {"instance", "a\"b"}};
  EXPECT_EQ(l.pairs()[0].name, "__name__");
  EXPECT_EQ(l.ToString(), "up{instance=\"a\\\"b\", job=\"node\"}");
  EXPECT_EQ(l.MetricName(), "up");
}

TEST(LabelsTest, AssignReplacesInPlaceAndSortsWhenOutOfOrder) {
  Labels l{{"__name__", "up"}, {"instance", "a:9100"}, {"job", "node"}};
  std::vector<std::pair<std::string_view, std::string_view>> in = {{"a", "1"}, {"b", "2"}};
  l.Assign(in.size(), [&](size_t i) { return in[i]; });
  EXPECT_EQ(l, (Labels{{"a", "1"}, {"b", "2"}}));
  in = {{"z", "26"}, {"__name__", "m"}, {"k", "11"}};
  l.Assign(in.size(), [&](size_t i) { return in[i]; });
  EXPECT_EQ(l, (Labels{{"__name__", "m"}, {"k", "11"}, {"z", "26"}}));
  l.Assign(0, [&](size_t i) { return in[i]; });
  EXPECT_TRUE(l.empty());
}

TEST(LabelsTest, FromUnsortedRejectsDuplicatesAndDropsEmptyValues) {
  auto r = Labels::FromUnsorted({{"a", "1"}, {"b", ""}, {"a", "2"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("duplicate label name \"a\""), std::string::npos);
  auto ok = Labels::FromUnsorted({{"b", "2"}, {"c", ""}, {"a", "1"}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 2u);
}

TEST(LabelsTest, HashDistinguishesNameValueBoundaries) {
  Labels a{{"ab", "c"}}, b{{"a", "bc"}};
  EXPECT_NE(a.Hash(), b.Hash());
  std::pair<std::string_view, std::string_view> p[] = {{"ab", "c"}};
  EXPECT_EQ(HashLabelPairs(p, 1), a.Hash());
}

TEST(LabelsTest, ValidNames) {
  EXPECT_TRUE(IsValidMetricName("a:b_c1"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_TRUE(IsValidLabelName("_x9"));
}

TEST(LabelsTest, AppendLabelsJsonInLabelOrder) {
  std::string out;
  AppendLabelsJson(&out, Labels{{"job", "a\"b"}, {"__name__", "up"}});
  EXPECT_EQ(out, "{\"__name__\":\"up\",\"job\":\"a\\\"b\"}");
  out.clear();
  AppendLabelsJson(&out, Labels());
  EXPECT_EQ(out, "{}");
}

}  // namespace
}  // namespace trainwatch::model

namespace trainwatch::model {
namespace {

TEST(EncodedLabelsTest, RoundTripsAndRejectsMalformedInput) {
  for (const Labels& l : {Labels{}, Labels{{"__name__", "up"}},
                          Labels{{"__name__", "gpu_util"}, {"gpu", "0"}, {"k", std::string("v\0\xff", 3)},
                                 {"long", std::string(300, 'x')}}}) {
    std::string enc;
    AppendEncodedLabels(l, &enc);
    Labels got{{"stale", "x"}};
    ASSERT_TRUE(DecodeEncodedLabels(enc, &got)) << l.ToString();
    EXPECT_EQ(got, l);
    for (size_t cut = 0; cut < enc.size(); cut++) EXPECT_FALSE(DecodeEncodedLabels(enc.substr(0, cut), &got)) << cut;
    EXPECT_FALSE(DecodeEncodedLabels(enc + "x", &got));
  }
}

}  // namespace
}  // namespace trainwatch::model
