#include "storage/merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tsdb/chunkenc/histogram_testing.h"

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

TEST(MergeTest, StartTimestampsFollowTheSampleThatWon) {
  // A source with start timestamps (winning the tie at t=3) and one without.
  ListSeries a(Labels{{"__name__", "c"}}, {{1, 10}, {3, 30}}, {0, 2});
  ListSeries b(Labels{{"__name__", "c"}}, {{2, 20}, {3, 99}, {4, 40}});
  EXPECT_TRUE(a.Iterator()->HasST());
  EXPECT_FALSE(b.Iterator()->HasST());
  std::vector<std::unique_ptr<SeriesIterator>> its;
  its.push_back(a.Iterator());
  its.push_back(b.Iterator());
  auto m = MergeIterators(std::move(its));
  EXPECT_TRUE(m->HasST());
  std::vector<std::pair<int64_t, int64_t>> got;  // t, st
  while (m->Next()) got.emplace_back(m->At().t, m->AtST());
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {2, 0}, {3, 2}, {4, 0}}));
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

TEST(MergeTest, MatchesAReferenceMergeUnderNextAndSeek) {
  // Sources that overlap, touch, tie and run disjoint (as blocks and the
  // head do), read by a random mix of Next and Seek: the merge is the
  // time-ordered union, the lowest source winning a timestamp.
  uint64_t seed = 7;
  auto rnd = [&](uint64_t n) { return ((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % n; };
  for (int round = 0; round < 300; round++) {
    size_t k = 1 + rnd(4);
    std::vector<std::vector<Sample>> src(k);
    for (size_t i = 0; i < k; i++) {
      int64_t t = static_cast<int64_t>(rnd(2) ? rnd(50) : i * 40);  // disjoint ranges half the time
      for (int n = static_cast<int>(rnd(30)); n > 0; n--) {
        t += 1 + static_cast<int64_t>(rnd(3));
        src[i].push_back({t, static_cast<double>(i * 1000 + t)});
      }
    }
    std::vector<Sample> want;  // reference: union by t, first source wins
    for (const auto& v : src) want.insert(want.end(), v.begin(), v.end());
    std::stable_sort(want.begin(), want.end(), [](const Sample& a, const Sample& b) { return a.t < b.t; });
    want.erase(std::unique(want.begin(), want.end(), [](const Sample& a, const Sample& b) { return a.t == b.t; }), want.end());
    std::vector<std::unique_ptr<SeriesIterator>> its;
    for (const auto& v : src) its.push_back(VectorIterator(&v));
    auto m = MergeIterators(std::move(its));
    size_t pos = SIZE_MAX;  // index in want of the merge's current sample
    for (int step = 0; step < 80; step++) {
      bool ok;
      if (rnd(4) == 0) {
        int64_t t = static_cast<int64_t>(rnd(200));
        ok = m->Seek(t);
        size_t from = pos == SIZE_MAX ? 0 : pos;
        if (pos != SIZE_MAX && pos < want.size() && want[pos].t >= t) {
          // stays put
        } else {
          pos = from;
          while (pos < want.size() && want[pos].t < t) pos++;
        }
      } else {
        ok = m->Next();
        pos = pos == SIZE_MAX ? 0 : pos + 1;
      }
      ASSERT_EQ(ok, pos < want.size()) << "round " << round << " step " << step;
      if (!ok) break;
      ASSERT_EQ(m->At().t, want[pos].t) << "round " << round << " step " << step;
      ASSERT_EQ(m->At().v, want[pos].v) << "round " << round << " step " << step;
    }
  }
}

// Samples with counts (as a downsampled tier's points carry), over a vector.
class CountedVec : public SeriesIterator {
 public:
  CountedVec(const std::vector<Sample>* s, const std::vector<double>* c) : s_(s), c_(c) {}
  bool Next() override { return ++i_ < s_->size(); }
  bool Seek(int64_t t) override {
    if (i_ == SIZE_MAX) i_ = 0;
    while (i_ < s_->size() && (*s_)[i_].t < t) ++i_;
    return i_ < s_->size();
  }
  Sample At() const override { return (*s_)[i_]; }
  double AtCount() const override { return (*c_)[i_]; }
  bool HasCounts() const override { return true; }
  Status Err() const override { return Status::OK(); }

 private:
  const std::vector<Sample>* s_;
  const std::vector<double>* c_;
  size_t i_ = SIZE_MAX;
};

TEST(MergeTest, AppendUntilInBulkReadsWhatNextReads) {
  // The merge's AppendUntil and AppendCountedUntil take a source's run in one
  // call: the samples, counts and the position they stop at are Next's,
  // whatever the sources' overlaps and ties and the bounds asked for.
  uint64_t seed = 11;
  auto rnd = [&](uint64_t n) { return ((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % n; };
  for (int round = 0; round < 300; round++) {
    const size_t k = 1 + rnd(4);
    std::vector<std::vector<Sample>> src(k);
    std::vector<std::vector<double>> cnt(k);
    for (size_t i = 0; i < k; i++) {
      int64_t t = static_cast<int64_t>(rnd(2) ? rnd(50) : i * 40);
      for (int n = static_cast<int>(rnd(30)); n > 0; n--) {
        t += 1 + static_cast<int64_t>(rnd(3));
        src[i].push_back({t, static_cast<double>(i * 1000 + t)});
        cnt[i].push_back(static_cast<double>(1 + rnd(9)));
      }
    }
    auto make = [&] {
      std::vector<std::unique_ptr<SeriesIterator>> its;
      for (size_t i = 0; i < k; i++) its.push_back(std::make_unique<CountedVec>(&src[i], &cnt[i]));
      return MergeIterators(std::move(its));
    };
    std::vector<Sample> want;
    std::vector<double> want_counts;
    auto ref = make();
    while (ref->Next()) {
      want.push_back(ref->At());
      want_counts.push_back(ref->AtCount());
    }
    for (bool counted : {false, true}) {
      auto m = make();
      std::vector<Sample> got;
      std::vector<double> got_counts;
      bool more = m->Seek(0);
      while (more) {
        // Up to a bound from just before the current sample (nothing to
        // read) to 40 past it.
        const int64_t maxt = m->At().t - 1 + static_cast<int64_t>(rnd(41));
        const size_t before = got.size();
        more = counted ? m->AppendCountedUntil(maxt, &got, &got_counts) : m->AppendUntil(maxt, &got);
        for (size_t i = before; i < got.size(); i++) ASSERT_LE(got[i].t, maxt) << "round " << round;
        if (more) {
          // Stopped on the next sample Next would give.
          ASSERT_GT(m->At().t, maxt) << "round " << round;
          ASSERT_LT(got.size(), want.size()) << "round " << round;
          ASSERT_EQ(m->At().t, want[got.size()].t) << "round " << round;
        }
      }
      ASSERT_EQ(got.size(), want.size()) << "round " << round << " counted " << counted;
      for (size_t i = 0; i < want.size(); i++) {
        ASSERT_EQ(got[i].t, want[i].t) << "round " << round << " sample " << i;
        ASSERT_EQ(got[i].v, want[i].v) << "round " << round << " sample " << i;
        if (counted) {
          ASSERT_EQ(got_counts[i], want_counts[i]) << "round " << round << " sample " << i;
        }
      }
    }
  }
}

// One sample as read: t, and the histogram or the float value.
struct Read {
  int64_t t;
  bool hist;
  double v;
  model::FloatHistogram h;
};

std::vector<Read> DrainMixed(SeriesIterator* it) {
  std::vector<Read> out;
  while (it->Next()) {
    Read r{it->At().t, it->AtIsHistogram(), it->At().v, {}};
    if (r.hist) {
      EXPECT_NE(it->AtHistogram(), nullptr);
      r.h = *it->AtHistogram();
    }
    out.push_back(std::move(r));
  }
  EXPECT_TRUE(it->Err().ok());
  return out;
}

TEST(MergeTest, MixedVectorIteratorInterleavesFloatsAndHistograms) {
  std::vector<Sample> f{{1, 10}, {4, 40}, {5, 50}};
  std::vector<HistogramSample> h{{2, testing_hist::ExpHistogram(2)}, {4, testing_hist::ExpHistogram(4)},
                                 {6, testing_hist::CustomHistogram(6)}};
  auto it = MixedVectorIterator(&f, &h);
  EXPECT_TRUE(it->HasHistograms());
  auto got = DrainMixed(it.get());
  ASSERT_EQ(got.size(), 5u);
  std::vector<int64_t> ts;
  for (const auto& r : got) ts.push_back(r.t);
  EXPECT_EQ(ts, (std::vector<int64_t>{1, 2, 4, 5, 6}));
  EXPECT_FALSE(got[0].hist);
  EXPECT_EQ(got[0].v, 10);
  EXPECT_TRUE(got[1].hist);
  testing_hist::ExpectSameHistogram(testing_hist::ExpHistogram(2), got[1].h);
  EXPECT_FALSE(got[2].hist);  // the float wins the tie at 4
  EXPECT_EQ(got[2].v, 40);
  testing_hist::ExpectSameHistogram(testing_hist::CustomHistogram(6), got[4].h);
  auto s = MixedVectorIterator(&f, &h);
  ASSERT_TRUE(s->Seek(5));
  EXPECT_FALSE(s->AtIsHistogram());
  ASSERT_TRUE(s->Seek(6));
  EXPECT_TRUE(s->AtIsHistogram());
  EXPECT_FALSE(s->Seek(7));
  std::vector<HistogramSample> none;
  EXPECT_FALSE(MixedVectorIterator(&f, &none)->HasHistograms());
}

TEST(MergeTest, OverlappingSeriesWithHistogramsMerge) {
  using model::CounterResetHint;
  // Block-like source: histograms at 10, 20, 30 (a reset hint at 20); head
  // source: a float at 15, a histogram at 20 (loses the tie), a stale
  // histogram at 40.
  auto h10 = testing_hist::ExpHistogram(1), h20 = testing_hist::ExpHistogram(0, CounterResetHint::kCounterReset),
       h30 = testing_hist::CustomHistogram(3, CounterResetHint::kGauge);
  MixedListSeries a(Labels{{"__name__", "h"}}, {}, {{10, h10}, {20, h20}, {30, h30}});
  MixedListSeries b(Labels{{"__name__", "h"}}, {{15, 1.5}},
                    {{20, testing_hist::ExpHistogram(9)}, {40, testing_hist::StaleHistogram()}});
  std::vector<std::shared_ptr<Series>> sa{std::make_shared<MixedListSeries>(a)},
      sb{std::make_shared<MixedListSeries>(b)};
  std::vector<std::unique_ptr<SeriesSet>> sets;
  sets.push_back(ListSeriesSet(sa));
  sets.push_back(ListSeriesSet(sb));
  auto m = MergeSeriesSets(std::move(sets));
  ASSERT_TRUE(m->Next());
  auto it = m->At().Iterator();
  EXPECT_TRUE(it->HasHistograms());
  auto got = DrainMixed(it.get());
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].t, 10);
  testing_hist::ExpectSameHistogram(h10, got[0].h);
  EXPECT_EQ(got[1].t, 15);
  EXPECT_FALSE(got[1].hist);
  EXPECT_EQ(got[1].v, 1.5);
  EXPECT_EQ(got[2].t, 20);
  testing_hist::ExpectSameHistogram(h20, got[2].h);  // the earlier source wins
  testing_hist::ExpectSameHistogram(h30, got[3].h);
  EXPECT_EQ(got[4].t, 40);
  ASSERT_TRUE(got[4].hist);
  EXPECT_TRUE(model::IsStaleNaN(got[4].h.sum));
  EXPECT_FALSE(m->Next());

  // AppendUntil copies floats and stops on a histogram (At() is on it).
  std::vector<std::unique_ptr<SeriesIterator>> its;
  its.push_back(a.Iterator());
  its.push_back(b.Iterator());
  auto mi = MergeIterators(std::move(its));
  ASSERT_TRUE(mi->Seek(11));
  ASSERT_FALSE(mi->AtIsHistogram());
  std::vector<Sample> buf;
  EXPECT_TRUE(mi->AppendUntil(100, &buf));
  ASSERT_EQ(buf.size(), 1u);
  EXPECT_EQ(buf[0].t, 15);
  EXPECT_TRUE(mi->AtIsHistogram());
  EXPECT_EQ(mi->At().t, 20);
  // A float-only merge reports no histograms.
  ListSeries c(Labels{{"__name__", "c"}}, {{1, 1}}), d(Labels{{"__name__", "c"}}, {{2, 2}});
  std::vector<std::unique_ptr<SeriesIterator>> fits;
  fits.push_back(c.Iterator());
  fits.push_back(d.Iterator());
  EXPECT_FALSE(MergeIterators(std::move(fits))->HasHistograms());
}

}  // namespace
}  // namespace trainwatch::storage
