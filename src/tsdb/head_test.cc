#include "tsdb/head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "model/matcher.h"

namespace trainwatch::tsdb {
namespace {

using model::Labels;

std::vector<model::Sample> Read(Head* head, const model::Matchers& ms, int64_t mint = model::kMinTime,
                                int64_t maxt = model::kMaxTime) {
  auto q = head->NewQuerier(mint, maxt);
  auto set = (*q)->Select(true, {}, ms);
  std::vector<model::Sample> out;
  while (set->Next()) {
    auto it = set->At().Iterator();
    while (it->Next()) out.push_back(it->At());
  }
  return out;
}

model::Matcher Eq(const std::string& n, const std::string& v) {
  return *model::Matcher::Make(model::MatchType::kEqual, n, v);
}

TEST(HeadTest, ChunksAreCutAtSampleCountAndBlockBoundary) {
  HeadOptions o;
  o.block_duration_ms = 100000;
  o.samples_per_chunk = 10;
  Head head(o);
  auto app = head.NewAppender();
  Labels l{{"__name__", "x"}};
  for (int64_t t = 0; t < 250000; t += 1000) ASSERT_TRUE(app->Append(0, l, t, static_cast<double>(t)).ok());
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_EQ(head.NumChunks(), 25u);
  auto set = head.SnapshotForPersist(100000, false);
  ASSERT_EQ(set.series.size(), 1u);
  for (auto& c : set.series[0].second.chunks) EXPECT_LT(c.maxt, 100000);
  EXPECT_EQ(set.series[0].second.chunks.size(), 10u);
  head.Truncate(set);
  auto rest = Read(&head, {Eq("__name__", "x")});
  ASSERT_EQ(rest.size(), 150u);
  EXPECT_EQ(rest.front().t, 100000);
}

TEST(HeadTest, PersistSetIsSortedByLabels) {
  // Label sets that are prefixes of one another, share prefixes, differ in
  // names before values, and were created in an unrelated order.
  std::vector<Labels> want = {
      Labels{{"Hostname", "b"}},
      Labels{{"__name__", "m"}, {"a", "1"}},
      Labels{{"__name__", "m"}, {"a", "1"}, {"b", "2"}},
      Labels{{"__name__", "m"}, {"a", "10"}},
      Labels{{"__name__", "m"}, {"b", "0"}},
      Labels{{"__name__", "n"}},
      Labels{{"a", "x"}, {"z", "z"}},
  };
  Head head(HeadOptions{});
  auto app = head.NewAppender();
  for (size_t i : {4u, 2u, 6u, 0u, 5u, 1u, 3u}) ASSERT_TRUE(app->Append(0, want[i], 1000, 1).ok());
  ASSERT_TRUE(app->Commit().ok());
  std::sort(want.begin(), want.end());
  auto set = head.SnapshotForPersist(INT64_MAX, true);
  ASSERT_EQ(set.series.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(head.LabelsOf(set.series[i].first), want[i]) << i;
}

TEST(HeadTest, MatchersSelectSeries) {
  Head head(HeadOptions{});
  auto app = head.NewAppender();
  for (int i = 0; i < 10; i++) {
    Labels l{{"__name__", "x"}, {"i", std::to_string(i)}, {"even", i % 2 ? "" : "yes"}};
    ASSERT_TRUE(app->Append(0, l, 1000, i).ok());
  }
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_EQ(Read(&head, {Eq("__name__", "x")}).size(), 10u);
  EXPECT_EQ(Read(&head, {Eq("even", "yes")}).size(), 5u);
  EXPECT_EQ(Read(&head, {Eq("__name__", "x"), Eq("even", "")}).size(), 5u);
  auto re = *model::Matcher::Make(model::MatchType::kRegex, "i", "1|3|5");
  EXPECT_EQ(Read(&head, {re}).size(), 3u);
  auto nre = *model::Matcher::Make(model::MatchType::kNotRegex, "i", "[0-4]");
  EXPECT_EQ(Read(&head, {Eq("__name__", "x"), nre}).size(), 5u);
}

TEST(HeadTest, ConcurrentAppendersLoseNothing) {
  Head head(HeadOptions{});
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; th++) {
    threads.emplace_back([&, th] {
      for (int batch = 0; batch < 50; batch++) {
        auto app = head.NewAppender();
        for (int s = 0; s < 20; s++) {
          Labels l{{"__name__", "x"}, {"s", std::to_string(s)}};
          ASSERT_TRUE(app->Append(0, l, (batch * 4 + th) * 1000, 1).ok());
        }
        ASSERT_TRUE(app->Commit().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(head.NumSeries(), 20u);
  EXPECT_EQ(Read(&head, {Eq("__name__", "x")}).size(), 20u * 200);
}

}  // namespace
}  // namespace trainwatch::tsdb
