#pragma once
// In-memory storage::Queryable for tests: series kept sorted by labels.

#include <map>
#include <memory>
#include <vector>

#include "storage/storage.h"

namespace trainwatch::promql::promqltest {

class TestStorage : public storage::Queryable {
 public:
  struct Data {
    std::vector<model::Sample> samples;  // increasing t
    std::vector<int64_t> st;             // start timestamp per sample (0 = unknown)
    // Per sample: the native histogram, or null for a float sample.
    std::vector<std::shared_ptr<const model::FloatHistogram>> hist;
    bool has_st = false;    // some sample has a start timestamp
    bool has_hist = false;  // some sample is a histogram
  };
  // Adds (or overwrites at equal timestamp) one sample; `st` is its start
  // timestamp, 0 when unknown.
  void Add(const model::Labels& l, int64_t t, double v, int64_t st = 0);
  // The same for a native histogram sample.
  void AddHistogram(const model::Labels& l, int64_t t, std::shared_ptr<const model::FloatHistogram> h,
                    int64_t st = 0);
  void Clear() { series_.clear(); }
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;
  const std::map<model::Labels, Data>& series() const { return series_; }

 private:
  std::map<model::Labels, Data> series_;
};

}  // namespace trainwatch::promql::promqltest
