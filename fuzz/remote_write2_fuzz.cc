// Prometheus remote write 2.0 receiver (ingest/remote_write2.h): snappy
// block decoding, then the hand-written io.prometheus.write.v2.Request
// decoder (symbols, label refs, samples, histograms, exemplars, metadata).
// Input: a mode byte, then the body. Mode bit 0 clear: the body as sent
// (snappy-framed); set: the uncompressed protobuf.
// Invariants: an error explains itself; an accepted body appends exactly
// stats().samples floats and stats().histograms histograms, each series'
// labels pass model::CheckSeriesLabels and each histogram Validate().

#include <cstddef>
#include <cstdint>
#include <string>

#include "checking_appender.h"
#include "fuzz_util.h"
#include "ingest/remote_write2.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace {
constexpr const char* kTarget = "remote_write2_fuzz";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool raw = (data[0] & 1) != 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainwatch::ingest::RequestLimits limits;
  limits.max_samples = 100000;  // the fuzzer's memory, not the decoder's
  limits.max_decoded_bytes = 1 << 20;
  trainwatch::ingest::RemoteWrite2Batch batch;
  trainwatch::Status s = raw ? batch.Parse(body, limits) : batch.ParseSnappy(body, limits);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  trainwatch::fuzz::CheckingAppender app(kTarget);
  s = batch.AppendTo(&app);
  FUZZ_CHECK(s.ok(), "AppendTo failed after a successful parse: " + s.ToString());
  FUZZ_CHECK(app.samples == batch.stats().samples && app.samples == batch.stats().samples_written,
             "floats appended differ from stats()");
  FUZZ_CHECK(app.histograms == batch.stats().histograms && app.histograms == batch.stats().histograms_written,
             "histograms appended differ from stats()");
  return 0;
}
