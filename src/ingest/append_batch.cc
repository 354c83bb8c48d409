#include "ingest/append_batch.h"

namespace trainwatch::ingest {

Status AppendBatch(storage::Appender* app, std::vector<BatchSeries>* series, const std::vector<BatchSample>& samples,
                   const std::vector<BatchHistogram>& hists, SeriesRefusals* refusals, AppendCounts* counts) {
  for (const BatchSample& e : samples) {
    BatchSeries& s = (*series)[e.series];
    if (e.st == 0 && s.ref != 0 && app->AppendByRef(s.ref, e.t, e.v)) {
      counts->samples++;
      continue;
    }
    // No by-ref form carries a start timestamp: with labels, and the ref
    // (when the series has one) spares the store the lookup.
    auto ref = e.st == 0 ? app->Append(0, s.labels, e.t, e.v) : app->AppendST(s.ref, s.labels, e.st, e.t, e.v);
    if (!ref.ok() && refusals->Take(ref.error())) continue;
    if (!ref.ok()) return ref.error().Annotate("series " + s.labels.ToString());
    s.ref = *ref;
    counts->samples++;
  }
  for (const BatchHistogram& e : hists) {
    BatchSeries& s = (*series)[e.series];
    auto ref = e.st == 0 ? app->AppendHistogram(s.ref, s.labels, e.t, e.h)
                         : app->AppendHistogramST(s.ref, s.labels, e.st, e.t, e.h);
    if (!ref.ok() && refusals->Take(ref.error())) continue;
    if (!ref.ok()) return ref.error().Annotate("series " + s.labels.ToString());
    s.ref = *ref;
    counts->histograms++;
  }
  return Status::OK();
}

}  // namespace trainwatch::ingest
