// POST /api/v1/import/prometheus.
#include <cmath>

#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "ingest/import.h"
#include "ingest/text_parser.h"

namespace trainwatch::http {
namespace {

// VictoriaMetrics's `timestamp` arg: unix seconds or milliseconds (values
// below 1e11 are taken as seconds: 1e11 s is the year 5138).
Result<int64_t> TimestampArg(std::string_view s) {
  double v;
  if (!ingest::ParseGoFloat(s, &v) || !std::isfinite(v) || std::fabs(v) > 9e15) {
    return Status::InvalidArgument("cannot parse \"timestamp\" query arg \"" + std::string(s) + "\"");
  }
  if (std::fabs(v) < 1e11) return static_cast<int64_t>(std::llround(v * 1000));
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace

Response Api::Import(const Request& req) {
  ingest::ImportOptions opts;
  opts.default_timestamp_ms = req.receive_time_ms;
  opts.cache = &series_cache_;
  opts.limits = deps_.request_limits;
  if (std::string_view ts = req.Param("timestamp"); !ts.empty()) {
    auto t = TimestampArg(ts);
    if (!t.ok()) return Text(400, t.error().message());
    opts.default_timestamp_ms = *t;
  }
  for (std::string_view e : req.Params("extra_label")) {
    auto l = ingest::ParseExtraLabel(e);
    if (!l.ok()) return Text(400, l.error().message());
    opts.extra_labels.push_back(std::move(*l));
  }
  // Parse the whole body before the first Append: a bad body stores nothing.
  int64_t t0 = MonoNanos();
  // Reused across requests, like the body buffer (see server.cc).
  auto lease = import_batches_.Acquire();
  ingest::ImportBatch& batch = *lease;
  Status s = batch.Parse(req.body, opts);
  int64_t t1 = MonoNanos();
  if (s.ok() && batch.stats().samples > 0) {
    s = ingest::AppendAndCommit(appendable(), [&](storage::Appender* app) { return batch.AppendTo(app); });
    // Committed; samples of new series beyond --storage.max-series: a 400 naming them.
    if (s.ok()) {
      metrics_.AddImported(batch.stats().samples - batch.refusals().samples());
      s = batch.refusals().After(batch.stats().samples);
    }
  }
  ingest::ImportStats stats = batch.stats();
  batch.Clear();
  if (!s.ok()) return IngestError("import", s);
  TW_LOG(Debug, "import: {} samples, {} series texts, {} bytes: parse {} ms, append+commit {} ms", stats.samples,
         stats.series, req.body.size(), (t1 - t0) / 1000000, (MonoNanos() - t1) / 1000000);
  return NoContent();
}

}  // namespace trainwatch::http
