// POST /api/v1/write: Prometheus remote_write 1.0 receiver (2.0: api_write2.cc).
#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "ingest/import.h"
#include "ingest/remote_write.h"
#include "ingest/remote_write2.h"

namespace trainwatch::http {

Response Api::Write(const Request& req) {
  // The message type is the Content-Type's proto parameter (remote write 2.0 spec).
  const ingest::RemoteWriteProto proto = ingest::RemoteWriteProtoOf(req.content_type);
  if (proto == ingest::RemoteWriteProto::kV2) return WriteV2(req);
  if (proto == ingest::RemoteWriteProto::kUnknown) {
    return Text(415, "remote write: Content-Type \"" + req.content_type.substr(0, 100) +
                         "\": expected application/x-protobuf;proto=prometheus.WriteRequest or "
                         "io.prometheus.write.v2.Request");
  }
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
