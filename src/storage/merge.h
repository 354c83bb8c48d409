#pragma once
// Merging of data from several sources (persisted blocks, the head): series
// with equal labels are joined and samples with equal timestamps deduplicated,
// the earlier source winning. Used by tsdb's DB querier and by compaction.

#include <memory>
#include <vector>

#include "storage/storage.h"

namespace trainwatch::storage {

// Merges sorted SeriesSets. Sets earlier in `sets` win timestamp ties.
// REQUIRES: each input set is sorted by labels.
std::unique_ptr<SeriesSet> MergeSeriesSets(std::vector<std::unique_ptr<SeriesSet>> sets);

// Merges iterators of one series; earlier iterators win timestamp ties.
std::unique_ptr<SeriesIterator> MergeIterators(std::vector<std::unique_ptr<SeriesIterator>> its);

// One native-histogram sample, for in-memory series and buffers.
struct HistogramSample {
  int64_t t = 0;
  model::FloatHistogram h;
  int64_t st = 0;  // start timestamp (0: unknown)
};

// Iterator over borrowed, time-sorted vectors of float and histogram
// samples (unique timestamps within each; a float wins a tie).
// REQUIRES: the vectors outlive it. HasHistograms() is !hists->empty().
// `float_st` is null or holds the floats' start timestamps (parallel to
// floats); histograms carry theirs.
std::unique_ptr<SeriesIterator> MixedVectorIterator(const std::vector<model::Sample>* floats,
                                                    const std::vector<HistogramSample>* hists,
                                                    const std::vector<int64_t>* float_st = nullptr);

// An in-memory series of floats and histograms, for tests and small results.
class MixedListSeries : public Series {
 public:
  MixedListSeries(model::Labels labels, std::vector<model::Sample> floats, std::vector<HistogramSample> hists)
      : labels_(std::move(labels)), floats_(std::move(floats)), hists_(std::move(hists)) {}
  const model::Labels& labels() const override { return labels_; }
  std::unique_ptr<SeriesIterator> Iterator() const override { return MixedVectorIterator(&floats_, &hists_); }

 private:
  model::Labels labels_;
  std::vector<model::Sample> floats_;
  std::vector<HistogramSample> hists_;
};

// An in-memory series, for tests and small results. `st` is empty or holds
// one start timestamp per sample (0 = unknown).
class ListSeries : public Series {
 public:
  ListSeries(model::Labels labels, std::vector<model::Sample> samples, std::vector<int64_t> st = {});
  const model::Labels& labels() const override { return labels_; }
  std::unique_ptr<SeriesIterator> Iterator() const override;
  const std::vector<model::Sample>& samples() const { return samples_; }

 private:
  model::Labels labels_;
  std::vector<model::Sample> samples_;
  std::vector<int64_t> st_;
};

// A SeriesSet over owned series, in the given order.
std::unique_ptr<SeriesSet> ListSeriesSet(std::vector<std::shared_ptr<Series>> series);

// Iterator over a borrowed vector of samples. REQUIRES: the vector outlives it.
std::unique_ptr<SeriesIterator> VectorIterator(const std::vector<model::Sample>* samples);

}  // namespace trainwatch::storage
