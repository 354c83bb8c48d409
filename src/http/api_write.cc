// POST /api/v1/write: Prometheus remote_write 1.0 receiver.
#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "ingest/import.h"
#include "ingest/remote_write.h"

namespace trainwatch::http {

Response Api::Write(const Request& req) {
  // Decode and validate the whole body before the first Append: a bad body
  // stores nothing. 400s are not retried by senders; 5xx are.
  int64_t t0 = MonoNanos();
  // Reused across requests, like the body buffer (see server.cc).
  auto lease = write_batches_.Acquire();
  ingest::RemoteWriteBatch& batch = *lease;
  Status s = batch.ParseSnappy(req.body, &series_cache_, deps_.request_limits);
  int64_t t1 = MonoNanos();
  const uint64_t total = batch.stats().samples + batch.stats().histograms;
  if (s.ok() && total > 0) {
    s = ingest::AppendAndCommit(appendable(), [&](storage::Appender* app) { return batch.AppendTo(app); });
    // Committed; samples of new series beyond --storage.max-series: a 400 naming them.
    if (s.ok()) {
      metrics_.AddImported(total - batch.refusals().samples());
      s = batch.refusals().After(total);
    }
  }
  ingest::RemoteWriteStats stats = batch.stats();
  batch.Clear();
  if (!s.ok()) return IngestError("remote write", s, "remote write: ");
  TW_LOG(Debug, "remote write: {} samples, {} series, {} histograms, {} bytes: decode {} ms, append+commit {} ms",
         stats.samples, stats.series, stats.histograms, req.body.size(), (t1 - t0) / 1000000,
         (MonoNanos() - t1) / 1000000);
  return NoContent();
}

}  // namespace trainwatch::http
