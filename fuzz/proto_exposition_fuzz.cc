// Prometheus's protobuf exposition format (ingest/proto_parser.h): delimited
// MetricFamily messages, native histograms included. Input: one mode byte
// (bit 0: native histograms, bit 1: keep classic series, bit 2: classic
// histograms converted to NHCB), then the body.
// Every sample's views are read and every native histogram must validate.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "ingest/proto_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  trainwatch::ingest::ProtoParseOptions opts;
  opts.native_histograms = (data[0] & 1) != 0;
  opts.keep_classic = (data[0] & 2) != 0;
  opts.convert_nhcb = (data[0] & 4) != 0;
  opts.default_timestamp_ms = 1700000000000;
  size_t bytes = 0;
  opts.on_metadata = [&](const trainwatch::ingest::MetadataLine& m) { bytes += m.family.size() + m.text.size(); };
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  trainwatch::ingest::ProtoParser p(body, std::move(opts));
  while (p.Next()) {
    const auto& s = p.sample();
    for (char c : s.series) bytes += static_cast<unsigned char>(c);
    for (size_t i = 0; i < s.num_labels; i++) bytes += s.labels[i].name.size() + s.labels[i].value.size();
    if (s.name.empty()) abort();  // names are checked non-empty
    if (p.is_histogram() && !p.histogram().Validate().ok()) abort();  // the parser validates what it yields
  }
  (void)bytes;
  return 0;
}
