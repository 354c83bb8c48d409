#include "storage/merge.h"

#include <gtest/gtest.h>

namespace trainwatch::storage {
namespace {

using model::Labels;
using model::Sample;

std::vector<Sample> Drain(SeriesIterator* it) {
  std::vector<Sample> out;
  while (it->Next()) out.push_back(it->At());
  EXPECT_TRUE(it->Err().ok());
  return out;
}

TEST(MergeTest, EarlierSourceWinsTimestampTies) {
  std::vector<Sample> a{{1, 10}, {3, 30}}, b{{2, 20}, {3, 99}, {4, 40}};
  std::vector<std::unique_ptr<SeriesIterator>> its;
  its.push_back(VectorIterator(&a));
  its.push_back(VectorIterator(&b));
  auto m = MergeIterators(std::move(its));
  auto got = Drain(m.get());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[2].t, 3);
  EXPECT_EQ(got[2].v, 30);
}

TEST(MergeTest, SeekThenNextContinuesMerge) {
  std::vector<Sample> a{{1, 1}, {5, 5}}, b{{2, 2}, {6, 6}};
  std::vector<std::unique_ptr<SeriesIterator>> its;
  its.push_back(VectorIterator(&a));
  its.push_back(VectorIterator(&b));
  auto m = MergeIterators(std::move(its));
  ASSERT_TRUE(m->Seek(3));
  EXPECT_EQ(m->At().t, 5);
  ASSERT_TRUE(m->Next());
  EXPECT_EQ(m->At().t, 6);
  EXPECT_FALSE(m->Next());
}

TEST(MergeTest, SeriesSetsJoinEqualLabels) {
  auto mk = [](std::vector<std::pair<Labels, std::vector<Sample>>> in) {
    std::vector<std::shared_ptr<Series>> s;
    for (auto& [l, v] : in) s.push_back(std::make_shared<ListSeries>(l, v));
    return ListSeriesSet(std::move(s));
  };
  Labels x{{"__name__", "x"}}, y{{"__name__", "y"}}, z{{"__name__", "z"}};
  std::vector<std::unique_ptr<SeriesSet>> sets;
  sets.push_back(mk({{x, {{1, 1}}}, {z, {{1, 1}}}}));
  sets.push_back(mk({{x, {{2, 2}}}, {y, {{1, 1}}}}));
  auto m = MergeSeriesSets(std::move(sets));
  std::vector<std::string> names;
  std::vector<size_t> counts;
  while (m->Next()) {
    names.emplace_back(m->At().labels().MetricName());
    auto it = m->At().Iterator();
    counts.push_back(Drain(it.get()).size());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(counts, (std::vector<size_t>{2, 1, 1}));
}

}  // namespace
}  // namespace trainwatch::storage
