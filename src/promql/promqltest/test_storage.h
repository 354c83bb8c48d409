#pragma once
// In-memory storage::Queryable for tests: series kept sorted by labels.

#include <map>
#include <memory>
#include <vector>

#include "storage/storage.h"

namespace trainwatch::promql::promqltest {

class TestStorage : public storage::Queryable {
 public:
  // Adds (or overwrites at equal timestamp) one sample.
  void Add(const model::Labels& l, int64_t t, double v);
  void Clear() { series_.clear(); }
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;
  const std::map<model::Labels, std::vector<model::Sample>>& series() const { return series_; }

 private:
  std::map<model::Labels, std::vector<model::Sample>> series_;
};

}  // namespace trainwatch::promql::promqltest
