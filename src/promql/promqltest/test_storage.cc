#include "promql/promqltest/test_storage.h"

#include <algorithm>
#include <set>

#include "storage/merge.h"

namespace trainwatch::promql::promqltest {

void TestStorage::Add(const model::Labels& l, int64_t t, double v) {
  auto& s = series_[l];
  auto it = std::lower_bound(s.begin(), s.end(), t, [](const model::Sample& a, int64_t t2) { return a.t < t2; });
  if (it != s.end() && it->t == t) {
    it->v = v;
  } else {
    s.insert(it, {t, v});
  }
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
    for (const auto& [l, samples] : s_->series()) {
      if (!MatchesAll(l, matchers)) continue;
      std::vector<model::Sample> sel;
      for (const auto& smp : samples) {
        if (smp.t >= lo && smp.t <= hi) sel.push_back(smp);
      }
      if (sel.empty()) continue;
      out.push_back(std::make_shared<storage::ListSeries>(l, std::move(sel)));
    }
    return storage::ListSeriesSet(std::move(out));
  }
  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& ms) override {
    std::set<std::string> vals;
    for (const auto& [l, samples] : s_->series()) {
      if (MatchesAll(l, ms) && l.Has(name)) vals.insert(std::string(l.Get(name)));
    }
    return std::vector<std::string>(vals.begin(), vals.end());
  }
  Result<std::vector<std::string>> LabelNames(const model::Matchers& ms) override {
    std::set<std::string> names;
    for (const auto& [l, samples] : s_->series()) {
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
