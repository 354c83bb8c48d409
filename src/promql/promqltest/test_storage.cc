#include "promql/promqltest/test_storage.h"

#include <algorithm>
#include <set>

#include "storage/merge.h"

namespace trainwatch::promql::promqltest {

void TestStorage::Add(const model::Labels& l, int64_t t, double v, int64_t st) {
  Data& d = series_[l];
  auto it = std::lower_bound(d.samples.begin(), d.samples.end(), t,
                             [](const model::Sample& a, int64_t t2) { return a.t < t2; });
  size_t i = static_cast<size_t>(it - d.samples.begin());
  if (it != d.samples.end() && it->t == t) {
    it->v = v;
    d.st[i] = st;
  } else {
    d.samples.insert(it, {t, v});
    d.st.insert(d.st.begin() + static_cast<std::ptrdiff_t>(i), st);
  }
  d.has_st = d.has_st || st != 0;
}

namespace {

bool MatchesAll(const model::Labels& l, const model::Matchers& ms) {
  for (const auto& m : ms) {
    if (!m.Matches(l.Get(m.name()))) return false;
  }
  return true;
}

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
      for (size_t i = 0; i < d.samples.size(); ++i) {
        if (d.samples[i].t < lo || d.samples[i].t > hi) continue;
        sel.push_back(d.samples[i]);
        if (d.has_st) st.push_back(d.st[i]);
      }
      if (sel.empty()) continue;
      out.push_back(std::make_shared<storage::ListSeries>(l, std::move(sel), std::move(st)));
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
