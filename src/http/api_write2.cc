// POST /api/v1/write with proto=io.prometheus.write.v2.Request: Prometheus
// remote write 2.0 receiver (ingest/remote_write2.h). Answers 204 with the
// X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written headers
// the spec asks for; exemplars are not stored, so 0 of them.
#include "base/log.h"
#include "http/api.h"
#include "ingest/import.h"
#include "ingest/remote_write2.h"

namespace trainwatch::http {

Response Api::WriteV2(const Request& req) {
  ingest::RemoteWrite2Batch batch;
  Status s = batch.ParseSnappy(req.body, deps_.request_limits);
  const uint64_t total = batch.stats().samples + batch.stats().histograms;
  bool committed = false;  // the written counts hold only then
  if (s.ok() && total > 0) {
    s = ingest::AppendAndCommit(appendable(), [&](storage::Appender* app) { return batch.AppendTo(app); });
    committed = s.ok();
    if (s.ok()) {
      metrics_.AddImported(total - batch.refusals().samples());
      s = batch.refusals().After(total);
    }
  }
  const ingest::RemoteWrite2Stats& st = batch.stats();
  Response resp = s.ok() ? NoContent() : IngestError("remote write 2.0", s, "remote write 2.0: ");
  resp.headers.emplace_back("X-Prometheus-Remote-Write-Samples-Written", std::to_string(committed ? st.samples_written : 0));
  resp.headers.emplace_back("X-Prometheus-Remote-Write-Histograms-Written",
                            std::to_string(committed ? st.histograms_written : 0));
  resp.headers.emplace_back("X-Prometheus-Remote-Write-Exemplars-Written", "0");
  if (s.ok()) {
    TW_LOG(Debug, "remote write 2.0: {} samples, {} histograms, {} series, {} exemplars dropped", st.samples,
           st.histograms, st.series, st.exemplars);
  }
  return resp;
}

}  // namespace trainwatch::http
