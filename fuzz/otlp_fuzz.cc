// OTLP metrics receiver (ingest/otlp.h): the hand-written protobuf decoder
// and the OTLP/JSON reader, both into Prometheus 3's translation.
// Input: a mode byte, then the body. Mode bit 0 clear: protobuf; set: JSON.
// Bit 1 set: with a delta accumulator (committed after each input). Bit 2
// set: convert_histograms_to_nhcb.
// Invariants: an error explains itself; an accepted body appends exactly
// stats().samples samples (native histograms included, each valid), every
// series' labels pass
// model::CheckSeriesLabels (what the head checks), and it never rejects
// more points than it read.

#include <cstddef>
#include <cstdint>
#include <string>

#include "checking_appender.h"
#include "fuzz_util.h"
#include "ingest/otlp.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace {
constexpr const char* kTarget = "otlp_fuzz";

trainwatch::ingest::OtlpDeltas* Deltas() {
  static auto* d = new trainwatch::ingest::OtlpDeltas;
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool json = (data[0] & 1) != 0;
  trainwatch::ingest::OtlpDeltas* deltas = (data[0] & 2) != 0 ? Deltas() : nullptr;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainwatch::ingest::RequestLimits limits;
  limits.max_samples = 100000;  // the fuzzer's memory, not the decoder's
  trainwatch::ingest::OtlpBatch batch({.convert_histograms_to_nhcb = (data[0] & 4) != 0});
  trainwatch::Status s = json ? batch.ParseJson(body, 1000, limits, deltas) : batch.ParseProto(body, 1000, limits, deltas);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  trainwatch::fuzz::CheckingAppender app(kTarget);
  s = batch.AppendTo(&app);
  FUZZ_CHECK(s.ok(), "AppendTo failed after a successful parse: " + s.ToString());
  FUZZ_CHECK(app.samples + app.histograms == batch.stats().samples, "stats().samples differs from the samples appended");
  FUZZ_CHECK(batch.stats().rejected_points <= batch.stats().points, "rejected more points than were read");
  FUZZ_CHECK((batch.stats().rejected_points == 0) == batch.stats().first_rejection.empty(),
             "a rejection without its reason (or a reason without one)");
  batch.Committed(1000);
  return 0;
}
