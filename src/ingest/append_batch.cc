#include "ingest/append_batch.h"

namespace trainwatch::ingest {

Status AppendBatch(storage::Appender* app, std::vector<BatchSeries>* series, const std::vector<BatchSample>& samples,
                   const std::vector<BatchHistogram>& hists, SeriesRefusals* refusals, AppendCounts* counts) {
  for (const BatchSample& e : samples) {
    BatchSeries& s = (*series)[e.series];
    if (s.ref != 0 && app->AppendByRef(s.ref, e.t, e.v)) {
      counts->samples++;
      continue;
    }
    auto ref = app->Append(0, s.labels, e.t, e.v);
    if (!ref.ok() && refusals->Take(ref.error())) continue;
    if (!ref.ok()) return ref.error().Annotate("series " + s.labels.ToString());
    s.ref = *ref;
    counts->samples++;
  }
  for (const BatchHistogram& e : hists) {
    BatchSeries& s = (*series)[e.series];
    auto ref = app->AppendHistogram(s.ref, s.labels, e.t, e.h);
    if (!ref.ok() && refusals->Take(ref.error())) continue;
    if (!ref.ok()) return ref.error().Annotate("series " + s.labels.ToString());
    s.ref = *ref;
    counts->histograms++;
  }
  return Status::OK();
}

}  // namespace trainwatch::ingest
