#include "promql/promqltest/test_storage.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "storage/merge.h"

namespace trainwatch::promql::promqltest {

namespace {

void Put(TestStorage::Data& d, int64_t t, double v, std::shared_ptr<const model::FloatHistogram> h, int64_t st) {
  auto it = std::lower_bound(d.samples.begin(), d.samples.end(), t,
                             [](const model::Sample& a, int64_t t2) { return a.t < t2; });
  size_t i = static_cast<size_t>(it - d.samples.begin());
  d.has_st = d.has_st || st != 0;
  d.has_hist = d.has_hist || h != nullptr;
  if (it != d.samples.end() && it->t == t) {
    it->v = v;
    d.st[i] = st;
    d.hist[i] = std::move(h);
    return;
  }
  d.samples.insert(it, {t, v});
  d.st.insert(d.st.begin() + static_cast<std::ptrdiff_t>(i), st);
  d.hist.insert(d.hist.begin() + static_cast<std::ptrdiff_t>(i), std::move(h));
}

}  // namespace

void TestStorage::Add(const model::Labels& l, int64_t t, double v, int64_t st) { Put(series_[l], t, v, nullptr, st); }

void TestStorage::AddHistogram(const model::Labels& l, int64_t t, std::shared_ptr<const model::FloatHistogram> h,
                               int64_t st) {
  Put(series_[l], t, 0, std::move(h), st);
}

namespace {

// The counter-reset hints of a series' histograms as Prometheus's TSDB
// reads them back, which is what its test corpus expects: histograms are
// stored in chunks, a new chunk starts at a histogram after a float, at a
// counter reset (detected, or stated by the hint), at a change of schema,
// zero threshold or custom bounds, and where gauge and counter histograms
// meet; the first histogram of a chunk reads as "unknown", the others as
// "not a reset", every one of a gauge chunk as "gauge".
std::vector<std::shared_ptr<const model::FloatHistogram>> ReadBackHints(const TestStorage::Data& d) {
  using model::CounterResetHint;
  std::vector<std::shared_ptr<const model::FloatHistogram>> out(d.hist.size());
  const model::FloatHistogram* last = nullptr;  // previous sample, when a histogram of the open chunk
  bool chunk_gauge = false;
  for (size_t i = 0; i < d.hist.size(); ++i) {
    const model::FloatHistogram* h = d.hist[i].get();
    if (h == nullptr) {
      last = nullptr;
      continue;
    }
    const bool gauge = h->counter_reset_hint == CounterResetHint::kGauge;
    const bool stale = model::IsStaleNaN(h->sum);
    bool new_chunk = last == nullptr;
    if (!new_chunk && !stale) {
      const bool layout_changed = h->schema != last->schema || h->zero_threshold != last->zero_threshold ||
                                  (h->UsesCustomBuckets() && h->custom_values != last->custom_values);
      if (model::IsStaleNaN(last->sum) || gauge != chunk_gauge || layout_changed) {
        new_chunk = true;
      } else if (!gauge) {
        model::FloatHistogram probe = *h;
        if (probe.counter_reset_hint != CounterResetHint::kCounterReset) {
          probe.counter_reset_hint = CounterResetHint::kUnknown;
        }
        new_chunk = probe.DetectReset(*last);
      }
    }
    if (new_chunk) chunk_gauge = gauge;
    auto copy = std::make_shared<model::FloatHistogram>(*h);
    copy->counter_reset_hint = chunk_gauge ? CounterResetHint::kGauge
                               : new_chunk ? CounterResetHint::kUnknown
                                           : CounterResetHint::kNotCounterReset;
    out[i] = std::move(copy);
    last = h;
  }
  return out;
}

bool MatchesAll(const model::Labels& l, const model::Matchers& ms) {
  for (const auto& m : ms) {
    if (!m.Matches(l.Get(m.name()))) return false;
  }
  return true;
}

// One selected series: its samples in the querier's range, copied.
class TestSeries : public storage::Series {
 public:
  TestSeries(model::Labels l, std::vector<model::Sample> s, std::vector<int64_t> st,
             std::vector<std::shared_ptr<const model::FloatHistogram>> h)
      : labels_(std::move(l)), samples_(std::move(s)), st_(std::move(st)), hist_(std::move(h)) {}
  const model::Labels& labels() const override { return labels_; }
  std::unique_ptr<storage::SeriesIterator> Iterator() const override { return std::make_unique<It>(this); }

 private:
  class It : public storage::SeriesIterator {
   public:
    explicit It(const TestSeries* s) : s_(s) {}
    bool Next() override { return ++i_ < s_->samples_.size(); }
    bool Seek(int64_t t) override {
      if (i_ == SIZE_MAX) i_ = 0;
      while (i_ < s_->samples_.size() && s_->samples_[i_].t < t) ++i_;
      return i_ < s_->samples_.size();
    }
    model::Sample At() const override { return s_->samples_[i_]; }
    bool AtIsHistogram() const override { return !s_->hist_.empty() && s_->hist_[i_] != nullptr; }
    const model::FloatHistogram* AtHistogram() const override { return s_->hist_[i_].get(); }
    bool HasHistograms() const override { return !s_->hist_.empty(); }
    int64_t AtST() const override { return s_->st_.empty() ? 0 : s_->st_[i_]; }
    bool HasST() const override { return !s_->st_.empty(); }
    Status Err() const override { return Status::OK(); }

   private:
    const TestSeries* s_;
    size_t i_ = SIZE_MAX;  // before the first sample
  };
  model::Labels labels_;
  std::vector<model::Sample> samples_;
  std::vector<int64_t> st_;                                      // empty: none
  std::vector<std::shared_ptr<const model::FloatHistogram>> hist_;  // empty: no histograms
};

class TestQuerier : public storage::Querier {
 public:
  TestQuerier(const TestStorage* s, int64_t mint, int64_t maxt) : s_(s), mint_(mint), maxt_(maxt) {}
  std::unique_ptr<storage::SeriesSet> Select(bool, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    int64_t lo = std::max(mint_, hints.start), hi = std::min(maxt_, hints.end);
    std::vector<std::shared_ptr<storage::Series>> out;
    for (const auto& [l, d] : s_->series()) {
      if (!MatchesAll(l, matchers)) continue;
      std::vector<model::Sample> sel;
      std::vector<int64_t> st;
      std::vector<std::shared_ptr<const model::FloatHistogram>> hist;
      std::vector<std::shared_ptr<const model::FloatHistogram>> read_back;
      if (d.has_hist) read_back = ReadBackHints(d);
      for (size_t i = 0; i < d.samples.size(); ++i) {
        if (d.samples[i].t < lo || d.samples[i].t > hi) continue;
        sel.push_back(d.samples[i]);
        if (d.has_st) st.push_back(d.st[i]);
        if (d.has_hist) hist.push_back(read_back[i]);
      }
      if (sel.empty()) continue;
      out.push_back(std::make_shared<TestSeries>(l, std::move(sel), std::move(st), std::move(hist)));
    }
    return storage::ListSeriesSet(std::move(out));
  }
  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& ms) override {
    std::set<std::string> vals;
    for (const auto& [l, d] : s_->series()) {
      if (MatchesAll(l, ms) && l.Has(name)) vals.insert(std::string(l.Get(name)));
    }
    return std::vector<std::string>(vals.begin(), vals.end());
  }
  Result<std::vector<std::string>> LabelNames(const model::Matchers& ms) override {
    std::set<std::string> names;
    for (const auto& [l, d] : s_->series()) {
      if (!MatchesAll(l, ms)) continue;
      for (const auto& p : l) names.insert(p.name);
    }
    return std::vector<std::string>(names.begin(), names.end());
  }

 private:
  const TestStorage* s_;
  int64_t mint_, maxt_;
};

}  // namespace

Result<std::unique_ptr<storage::Querier>> TestStorage::NewQuerier(int64_t mint, int64_t maxt) {
  return std::unique_ptr<storage::Querier>(new TestQuerier(this, mint, maxt));
}

}  // namespace trainwatch::promql::promqltest
