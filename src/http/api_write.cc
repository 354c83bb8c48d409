// POST /api/v1/write: Prometheus remote_write 1.0 receiver.
#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "ingest/remote_write.h"

namespace trainwatch::http {
namespace {

Response Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  if (!r.body.empty() && r.body.back() != '\n') r.body += '\n';
  return r;
}

}  // namespace

Response Api::Write(const Request& req) {
  // Decode and validate the whole body before the first Append: a bad body
  // stores nothing. 400s are not retried by senders; 5xx are.
  int64_t t0 = MonoNanos();
  // Reused per worker thread, like the body buffer (see server.cc).
  thread_local ingest::RemoteWriteBatch batch;
  Status s = batch.ParseSnappy(req.body, &series_cache_);
  int64_t t1 = MonoNanos();
  int64_t t2 = t1;
  if (s.ok() && batch.stats().samples > 0) {
    std::unique_ptr<storage::Appender> app = deps_.db->NewAppender();
    s = batch.AppendTo(app.get());
    t2 = MonoNanos();
    if (s.ok()) {
      s = app->Commit();  // durable per the WAL sync policy before we answer 204
    } else {
      app->Rollback();
    }
  }
  if (!s.ok()) {
    batch.Clear();
    if (s.IsInvalidArgument()) return Text(400, "remote write: " + s.message());
    TW_LOG(Error, "remote write: {}", s.ToString());
    return Text(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kResourceExhausted ? 503 : 500,
                s.message());
  }
  ingest::RemoteWriteStats stats = batch.stats();
  batch.Clear();
  TW_LOG(Debug, "remote write: {} samples, {} series, {} histograms skipped, {} bytes: decode {} ms, append {} ms, "
         "commit {} ms", stats.samples, stats.series, stats.histograms, req.body.size(), (t1 - t0) / 1000000,
         (t2 - t1) / 1000000, (MonoNanos() - t2) / 1000000);
  metrics_.AddImported(stats.samples);
  Response resp;
  resp.status = 204;
  resp.content_type.clear();
  return resp;
}

}  // namespace trainwatch::http
