#include "tsdb/index/postings.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace trainwatch::index {
namespace {

Postings RandomList(std::mt19937_64& rng, size_t n, uint64_t range) {
  std::set<uint64_t> s;
  for (size_t i = 0; i < n; ++i) s.insert(rng() % range);
  return Postings(s.begin(), s.end());
}

TEST(PostingsTest, AlgebraMatchesStdSet) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 2000; ++iter) {
    const int k = 1 + static_cast<int>(rng() % 5);
    const uint64_t range = 1 + rng() % 2000;
    std::vector<Postings> lists;
    for (int i = 0; i < k; ++i) {
      // Mix of empty, small and large lists so galloping paths are taken.
      size_t n = rng() % 4 == 0 ? 0 : (rng() % 2 ? rng() % 10 : rng() % 1500);
      lists.push_back(RandomList(rng, n, range));
    }
    if (iter % 7 == 0) lists.push_back(lists[0]);  // identical lists
    std::set<uint64_t> inter(lists[0].begin(), lists[0].end()), uni;
    for (const auto& l : lists) {
      std::set<uint64_t> s(l.begin(), l.end()), t;
      for (uint64_t v : inter) if (s.count(v)) t.insert(v);
      inter = t;
      uni.insert(l.begin(), l.end());
    }
    EXPECT_EQ(Intersect(lists), Postings(inter.begin(), inter.end()));
    EXPECT_EQ(Union(lists), Postings(uni.begin(), uni.end()));
    std::set<uint64_t> b(lists.back().begin(), lists.back().end()), diff;
    for (uint64_t v : lists[0]) if (!b.count(v)) diff.insert(v);
    EXPECT_EQ(Without(lists[0], lists.back()), Postings(diff.begin(), diff.end()));
    std::set<uint64_t> a(lists[0].begin(), lists[0].end()), i2;
    for (uint64_t v : lists.back()) if (a.count(v)) i2.insert(v);
    EXPECT_EQ(Intersect(lists[0], lists.back()), Postings(i2.begin(), i2.end()));
  }
}

TEST(PostingsTest, EdgeCases) {
  Postings a{1, 2, 3}, e;
  EXPECT_TRUE(Intersect(std::vector<Postings>{}).empty());
  EXPECT_TRUE(Union(std::vector<Postings>{}).empty());
  EXPECT_EQ(Intersect(std::vector<Postings>{a}), a);
  EXPECT_EQ(Union(std::vector<Postings>{a}), a);
  EXPECT_TRUE(Intersect(a, e).empty());
  EXPECT_EQ(Union(a, e), a);
  EXPECT_EQ(Without(a, e), a);
  EXPECT_TRUE(Without(e, a).empty());
  EXPECT_TRUE(Without(a, a).empty());
  EXPECT_TRUE(Intersect(Postings{1, 2}, Postings{3, 4}).empty());
  EXPECT_EQ(Union(Postings{1, 2}, Postings{3, 4}), (Postings{1, 2, 3, 4}));
  // Very skewed sizes (gallop path), with hits at both ends.
  Postings big;
  for (uint64_t i = 0; i < 100000; ++i) big.push_back(i * 2);
  EXPECT_EQ(Intersect(Postings{0, 3, 199998, 200000}, big), (Postings{0, 199998}));
  EXPECT_EQ(Without(Postings{0, 3, 199998, 200000}, big), (Postings{3, 200000}));
}

TEST(MemPostingsTest, AddGetDelete) {
  MemPostings mp;
  mp.Add(3, model::Labels{{"__name__", "up"}, {"job", "a"}});
  mp.Add(1, model::Labels{{"__name__", "up"}, {"job", "b"}});  // out of order
  mp.Add(5, model::Labels{{"__name__", "cpu"}, {"job", "a"}});
  mp.Add(5, model::Labels{{"__name__", "cpu"}, {"job", "a"}});  // duplicate
  EXPECT_EQ(Postings(mp.Get("__name__", "up").begin(), mp.Get("__name__", "up").end()), (Postings{1, 3}));
  EXPECT_EQ(*mp.AllPostings(), (Postings{1, 3, 5}));
  EXPECT_EQ(mp.LabelNames(), (std::vector<std::string>{"__name__", "job"}));
  EXPECT_EQ(*mp.LabelValues("job"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(mp.Get("job", "zzz").empty());
  EXPECT_TRUE(mp.Get("nope", "a").empty());
  EXPECT_EQ(mp.NumPairs(), 4u);
  std::vector<MemPostings::Pair> aff{{"__name__", "up"}, {"job", "b"}};
  mp.Delete(std::vector<SeriesRef>{1}, aff);
  EXPECT_EQ(*mp.AllPostings(), (Postings{3, 5}));
  EXPECT_EQ(*mp.LabelValues("job"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(*mp.Postings("__name__", "up"), (Postings{3}));
}

// A cut dropping many series at once: the lists keep exactly the others,
// whatever the order of the pairs given, and emptied lists go.
TEST(MemPostingsTest, DeletingManySeriesKeepsExactlyTheOthers) {
  MemPostings mp;
  for (SeriesRef ref = 1; ref <= 3000; ref++) {
    mp.Add(ref, model::Labels{{"__name__", "up"}, {"job", std::to_string(ref % 3)}, {"i", std::to_string(ref)}});
  }
  std::vector<SeriesRef> dead;
  std::vector<std::string> names;
  for (SeriesRef ref = 2; ref <= 3000; ref += 2) {
    dead.push_back(ref);
    names.push_back(std::to_string(ref));
  }
  std::vector<MemPostings::Pair> pairs{{"job", "2"}, {"__name__", "up"}, {"job", "1"}, {"job", "0"}};
  for (const std::string& n : names) pairs.emplace_back("i", n);
  mp.Delete(dead, pairs);
  Postings odd, job1;
  for (SeriesRef ref = 1; ref <= 3000; ref += 2) {
    odd.push_back(ref);
    if (ref % 3 == 1) job1.push_back(ref);
  }
  EXPECT_EQ(*mp.AllPostings(), odd);
  EXPECT_EQ(*mp.Postings("__name__", "up"), odd);
  EXPECT_EQ(*mp.Postings("job", "1"), job1);
  EXPECT_TRUE(mp.Get("i", "2").empty());
  EXPECT_EQ(*mp.Postings("i", "3"), (Postings{3}));
  EXPECT_EQ(mp.SortedLabelValues("i").size(), 1500u);
}

// Prometheus's head statistics (/api/v1/status/tsdb): the `limit` largest
// of each list, by count then name; lists emptied by Delete count for nothing.
TEST(MemPostingsTest, CardinalityStats) {
  MemPostings mp;
  SeriesRef ref = 1;
  for (const char* job : {"a", "b", "c"}) {
    for (int i = 0; i < 3; i++) mp.Add(ref++, model::Labels{{"__name__", "up"}, {"job", job}, {"i", std::to_string(i)}});
  }
  mp.Add(ref++, model::Labels{{"__name__", "gpu_util"}, {"job", "trainer-long-name"}});
  mp.Add(ref, model::Labels{{"__name__", "gone"}, {"job", "x"}});
  std::vector<MemPostings::Pair> gone{{"__name__", "gone"}, {"job", "x"}};
  mp.Delete(std::vector<SeriesRef>{ref}, gone);
  using Top = MemPostings::Cardinality::Top;
  MemPostings::Cardinality c = mp.Stats("__name__", 2);
  EXPECT_EQ(c.series_by_metric_name, (Top{{"up", 9}, {"gpu_util", 1}}));
  EXPECT_EQ(c.label_value_count_by_name, (Top{{"job", 4}, {"i", 3}}));
  // Bytes of values times their series: job 9 x 1 + 17, __name__ 9 x 2 + 8.
  EXPECT_EQ(c.memory_by_label_name, (Top{{"__name__", 26}, {"job", 26}}));
  EXPECT_EQ(c.series_by_label_pair, (Top{{"__name__=up", 9}, {"i=0", 3}}));
  EXPECT_EQ(c.num_label_pairs, 2u + 4u + 3u);
  EXPECT_EQ(mp.Stats("__name__", 100).series_by_label_pair.size(), 9u);
  EXPECT_TRUE(mp.Stats("__name__", 0).series_by_metric_name.empty());
}

std::vector<model::Labels> RandomSeries(std::mt19937_64& rng, size_t n) {
  const char* names[] = {"a", "b", "c", "d"};
  const char* vals[] = {"x", "y", "z", "xy", "foo"};
  std::set<model::Labels> out;
  while (out.size() < n) {
    std::vector<model::Label> ls{{"__name__", "m" + std::to_string(rng() % 3)}};
    for (const char* nm : names) {
      if (rng() % 3 != 0) ls.push_back({nm, vals[rng() % 5]});
    }
    out.insert(model::Labels(std::move(ls)));
  }
  return {out.begin(), out.end()};
}

model::Matcher RandomMatcher(std::mt19937_64& rng) {
  const char* names[] = {"a", "b", "c", "d", "e", "__name__"};
  const char* eq_vals[] = {"x", "y", "", "foo", "m1", "nope"};
  const char* re_vals[] = {"x|y", ".*", ".+", "x.*", "", "x|", "y", "m0|m2", "(x|foo)", "f.+", "nope|"};
  auto type = static_cast<model::MatchType>(rng() % 4);
  const bool re = type == model::MatchType::kRegex || type == model::MatchType::kNotRegex;
  std::string v = re ? re_vals[rng() % 11] : eq_vals[rng() % 6];
  return *model::Matcher::Make(type, names[rng() % 6], v);
}

}  // namespace

// Shared with index_test.cc through a declaration there.
void CheckMatchersAgainstBruteForce(const PostingsProvider& ix, const std::vector<model::Labels>& series,
                                    std::mt19937_64& rng, int iters) {
  for (int it = 0; it < iters; ++it) {
    model::Matchers ms;
    const int k = static_cast<int>(rng() % 4);
    for (int i = 0; i < k; ++i) ms.push_back(RandomMatcher(rng));
    Postings want;
    if (!ms.empty()) {
      for (size_t s = 0; s < series.size(); ++s) {
        bool ok = true;
        for (const auto& m : ms) ok = ok && m.Matches(series[s].Get(m.name()));
        if (ok) want.push_back(s);
      }
    }
    auto got = PostingsForMatchers(ix, ms);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::string desc;
    for (const auto& m : ms) desc += m.ToString() + " ";
    ASSERT_EQ(*got, want) << desc;
  }
}

namespace {

TEST(PostingsForMatchersTest, MemPostingsBruteForce) {
  std::mt19937_64 rng(7);
  auto series = RandomSeries(rng, 300);
  MemPostings mp;
  for (size_t i = 0; i < series.size(); ++i) mp.Add(i, series[i]);
  CheckMatchersAgainstBruteForce(mp, series, rng, 3000);
}

TEST(PostingsForMatchersTest, Semantics) {
  MemPostings mp;
  std::vector<model::Labels> s{model::Labels{{"a", "x"}}, model::Labels{{"a", "y"}}, model::Labels{{"b", "x"}}};
  for (size_t i = 0; i < s.size(); ++i) mp.Add(i, s[i]);
  auto q = [&](model::MatchType t, const char* n, const char* v) {
    return *PostingsForMatchers(mp, {*model::Matcher::Make(t, n, v)});
  };
  EXPECT_EQ(q(model::MatchType::kNotEqual, "a", "x"), (Postings{1, 2}));
  EXPECT_EQ(q(model::MatchType::kEqual, "a", ""), (Postings{2}));
  EXPECT_EQ(q(model::MatchType::kNotEqual, "a", ""), (Postings{0, 1}));
  EXPECT_EQ(q(model::MatchType::kRegex, "a", ".+"), (Postings{0, 1}));
  EXPECT_EQ(q(model::MatchType::kRegex, "a", "x|"), (Postings{0, 2}));
  EXPECT_EQ(q(model::MatchType::kNotRegex, "a", "x|y"), (Postings{2}));
  EXPECT_EQ(q(model::MatchType::kEqual, "zz", "x"), Postings{});
  EXPECT_TRUE(PostingsForMatchers(mp, {})->empty());
}

}  // namespace
}  // namespace trainwatch::index
