// Prometheus text exposition format 0.0.4 (ingest/text_parser.h), with
// Prometheus's scrape rules and with expfmt's (promtool check metrics).
// Input: one mode byte (bit 0: expfmt rules), then the body.

#include <cstddef>
#include <cstdint>

#include "exposition_check.h"

namespace {
constexpr const char* kTarget = "exposition_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  trainwatch::ingest::ParseOptions opts;
  opts.format = trainwatch::ingest::TextFormat::kPrometheus;
  opts.expfmt_rules = (data[0] & 1) != 0;
  opts.default_timestamp_ms = 1700000000000;
  // Touches every byte of the views (ASan checks they still point into live memory).
  size_t meta_bytes = 0;
  opts.on_metadata = [&](const trainwatch::ingest::MetadataLine& m) {
    for (char c : m.family) meta_bytes += static_cast<unsigned char>(c);
    for (char c : m.text) meta_bytes += static_cast<unsigned char>(c);
  };
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainwatch::fuzz::CheckExpositionBody(kTarget, body, opts);
  return 0;
}
