// OpenMetrics 1.0 text (ingest/text_parser.h, TextFormat::kOpenMetrics):
// metadata order, exemplars, "# EOF", float-second timestamps, `_created`
// lines as the start timestamps of their families' samples.

#include <cstddef>
#include <cstdint>

#include "exposition_check.h"

namespace {
constexpr const char* kTarget = "openmetrics_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainwatch::ingest::ParseOptions opts;
  opts.format = trainwatch::ingest::TextFormat::kOpenMetrics;
  opts.default_timestamp_ms = 1700000000000;
  opts.start_timestamps = true;
  opts.on_metadata = [](const trainwatch::ingest::MetadataLine& m) {
    if (m.family.empty()) trainwatch::fuzz::Fail(kTarget, "metadata line without a family name");
  };
  std::string_view body(reinterpret_cast<const char*>(data), size);
  trainwatch::fuzz::CheckExpositionBody(kTarget, body, opts);
  return 0;
}
