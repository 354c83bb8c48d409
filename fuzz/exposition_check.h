#pragma once
// Shared by exposition_fuzz.cc and openmetrics_fuzz.cc: parses a body twice,
// the second time as the import's series cache does (ParseOptions::known_series
// saying "known" for every series text the first pass parsed), and checks both
// passes agree: same samples (line, name, value bits, timestamp, start
// timestamp) and the same outcome; an error names its line.

#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "fuzz_util.h"
#include "ingest/text_parser.h"

namespace trainwatch::fuzz {

struct ExpoSample {
  size_t line;
  std::string name;
  uint64_t value_bits;
  int64_t t;
  bool has_t;
  int64_t st;
  bool operator==(const ExpoSample&) const = default;
};

inline void CheckExpositionBody(const char* kTarget, std::string_view body, ingest::ParseOptions opts) {
  std::unordered_set<std::string> series;
  std::vector<ExpoSample> first;
  Status first_status;
  {
    ingest::TextParser p(body, opts);
    while (p.Next()) {
      const ingest::TextSample& s = p.sample();
      FUZZ_CHECK(!s.labels_skipped, "labels skipped without known_series");
      FUZZ_CHECK(!s.name.empty(), "sample without a metric name");
      for (size_t i = 0; i < s.num_labels; i++) FUZZ_CHECK(!s.labels[i].name.empty(), "empty label name");
      uint64_t bits;
      std::memcpy(&bits, &s.value, 8);
      FUZZ_CHECK(opts.start_timestamps || s.start_timestamp_ms == 0, "start timestamp without start_timestamps");
      first.push_back({s.line, std::string(s.name), bits, s.timestamp_ms, s.has_timestamp, s.start_timestamp_ms});
      if (!s.series.empty()) series.emplace(s.series);
    }
    first_status = p.status();
    if (!first_status.ok()) {
      FUZZ_CHECK_ERROR(first_status);
      FUZZ_CHECK(first_status.message().starts_with("line "), "error without its line: " + first_status.message());
    }
  }
  if (opts.expfmt_rules) return;  // known_series is not consulted in that mode
  opts.known_series = [&](std::string_view s) { return series.contains(std::string(s)); };
  ingest::TextParser p(body, opts);
  size_t i = 0;
  while (p.Next()) {
    const ingest::TextSample& s = p.sample();
    uint64_t bits;
    std::memcpy(&bits, &s.value, 8);
    ExpoSample got{s.line, std::string(s.name), bits, s.timestamp_ms, s.has_timestamp, s.start_timestamp_ms};
    FUZZ_CHECK(i < first.size(), "known_series pass returned more samples");
    FUZZ_CHECK(got == first[i], "known_series pass differs at sample " + std::to_string(i) + " (line " +
                                    std::to_string(s.line) + ")");
    i++;
  }
  FUZZ_CHECK(i == first.size(), "known_series pass returned fewer samples: " + p.status().ToString());
  FUZZ_CHECK(p.status().ToString() == first_status.ToString(),
             "known_series pass: " + p.status().ToString() + " vs " + first_status.ToString());
}

}  // namespace trainwatch::fuzz
