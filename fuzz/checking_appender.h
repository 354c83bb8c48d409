#pragma once
// An Appender for the push decoders' fuzz targets: it stores nothing and
// fails the target when the decoder hands it what the head would refuse (a
// label set model::CheckSeriesLabels rejects, a histogram Validate rejects),
// with or without a start timestamp (any value: the head drops one after its
// sample); it counts what it was given.

#include <cstdint>

#include "fuzz_util.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::fuzz {

class CheckingAppender final : public storage::Appender {
 public:
  explicit CheckingAppender(const char* target) : target_(target) {}

  uint64_t samples = 0;
  uint64_t histograms = 0;
  uint64_t with_st = 0;  // of both, those given a start timestamp (not 0)

  Result<storage::SeriesRef> Append(storage::SeriesRef, const model::Labels& labels, int64_t, double) override {
    CheckLabels(labels);
    samples++;
    return storage::SeriesRef{0};
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef, const model::Labels& labels, int64_t,
                                             const model::FloatHistogram& h) override {
    CheckLabels(labels);
    if (Status v = h.Validate(); !v.ok()) Fail(target_, "accepted a histogram the head refuses: " + v.ToString());
    histograms++;
    return storage::SeriesRef{0};
  }
  Result<storage::SeriesRef> AppendST(storage::SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t,
                                      double v) override {
    with_st += st != 0;
    return Append(ref, labels, t, v);
  }
  Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t,
                                               const model::FloatHistogram& h) override {
    with_st += st != 0;
    return AppendHistogram(ref, labels, t, h);
  }
  Status Commit() override { return Status::OK(); }
  void Rollback() override {}

 private:
  void CheckLabels(const model::Labels& labels) const {
    if (!model::CheckSeriesLabels(labels).ok()) Fail(target_, "accepted labels the head refuses: " + labels.ToString());
  }
  const char* target_;
};

}  // namespace trainwatch::fuzz
