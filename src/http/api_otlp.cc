// POST /api/v1/otlp/v1/metrics: OpenTelemetry metrics (OTLP/HTTP), protobuf
// or JSON, translated as Prometheus 3 does (ingest/otlp.h).
#include "base/clock.h"
#include "base/log.h"
#include "http/api.h"
#include "ingest/import.h"
#include "ingest/otlp.h"

namespace trainwatch::http {

Response Api::Otlp(const Request& req) {
  // The media type without parameters; OTLP/HTTP senders always set it.
  std::string_view type = req.content_type;
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  const bool json = type == "application/json";
  if (!json && type != "application/x-protobuf" && type != "application/protobuf") {
    return Text(415, "otlp: Content-Type \"" + std::string(type).substr(0, 100) +
                         "\": expected application/x-protobuf or application/json");
  }
  ingest::OtlpBatch batch(deps_.otlp_options ? deps_.otlp_options() : ingest::OtlpOptions{});
  const int64_t now = NowMillis();
  Status s = json ? batch.ParseJson(req.body, now, deps_.request_limits, &otlp_deltas_)
                  : batch.ParseProto(req.body, now, deps_.request_limits, &otlp_deltas_);
  if (s.ok() && batch.stats().samples > 0) {
    s = ingest::AppendAndCommit(appendable(), [&](storage::Appender* app) { return batch.AppendTo(app); });
    if (s.ok()) {
      batch.Committed(now);
      metrics_.AddImported(batch.stats().samples - batch.refusals().samples());
      s = batch.refusals().After(batch.stats().samples);
    }
  }
  if (!s.ok()) return IngestError("otlp", s, "otlp: ");
  const ingest::OtlpStats& st = batch.stats();
  if (st.rejected_points > 0) {
    TW_LOG(Debug, "otlp: {} of {} points rejected: {}", st.rejected_points, st.points, st.first_rejection);
  }
  // ExportMetricsServiceResponse, in the request's encoding; partial_success
  // names what was left out.
  Response resp;
  resp.content_type = json ? "application/json" : "application/x-protobuf";
  resp.body = json ? ingest::OtlpResponseJson(st) : ingest::OtlpResponseProto(st);
  return resp;
}

}  // namespace trainwatch::http
