#pragma once
// The append step of a push once its request is decoded (OTLP, remote write
// 2.0): series resolved once, floats appended by ref where the series has
// one, then histograms; what the store refuses at a series limit is
// skipped and counted, any other error stops the batch. A value with a
// start timestamp goes through Appender::AppendST / AppendHistogramST.

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "ingest/refusals.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::ingest {

struct BatchSeries {
  model::Labels labels;
  storage::SeriesRef ref = 0;  // 0 until its first append
};
struct BatchSample {
  uint32_t series;  // index into the batch's series
  int64_t t;
  double v;
  int64_t st = 0;  // start timestamp, ms; 0: unknown
};
struct BatchHistogram {
  uint32_t series;
  int64_t t;
  model::FloatHistogram h;
  int64_t st = 0;
};
struct AppendCounts {
  uint64_t samples = 0;
  uint64_t histograms = 0;
};

// Appends `samples`, then `hists`, of `series`. A value the store refuses at
// one of its series limits is skipped and counted in *refusals; another
// error is returned naming the series. *counts: what was stored.
Status AppendBatch(storage::Appender* app, std::vector<BatchSeries>* series, const std::vector<BatchSample>& samples,
                   const std::vector<BatchHistogram>& hists, SeriesRefusals* refusals, AppendCounts* counts);

}  // namespace trainwatch::ingest
