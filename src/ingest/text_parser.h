#pragma once
// Zero-copy parser for the Prometheus text exposition format (0.0.4), as
// POST /api/v1/import/prometheus receives it:
//
//   # HELP / # TYPE / other comments      (skipped)
//   name{k="v",...} value [timestamp_ms]  (labels optional, trailing comma ok)
//
// Values are Go-style floats (NaN, +Inf, -Inf, exponents); label values use
// the \\, \" and \n escapes. An OpenMetrics exemplar (" # {...} v [t]") after
// the sample is tolerated and ignored; full OpenMetrics is a separate mode
// (ParseOptions::format) added later.
//
// Not thread-safe; one parser per body. Views handed out point into the body
// or into the parser's scratch buffers and are valid until the next Next().

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trainwatch::ingest {

// NaN as Go's strconv.ParseFloat returns it (Prometheus's value.NormalNaN).
inline constexpr uint64_t kNormalNaNBits = 0x7ff8000000000001ull;

struct LabelRef {
  std::string_view name;
  std::string_view value;  // unescaped
};

struct TextSample {
  size_t line = 0;              // 1-based line number in the body
  std::string_view series;      // "name{...}" exactly as written: a cache key
  std::string_view name;        // metric name
  const LabelRef* labels = nullptr;  // as written (unsorted), without __name__ unless name is empty
  size_t num_labels = 0;
  double value = 0;
  int64_t timestamp_ms = 0;     // the default timestamp when the line has none
  bool has_timestamp = false;
  bool labels_skipped = false;  // ParseOptions::known_series said to skip them
};

enum class TextFormat { kPrometheus, kOpenMetrics };

// The parser a scrape uses for a response's Content-Type, as Prometheus picks
// it: "application/openmetrics-text" is OpenMetrics, anything else (text/plain,
// empty, unknown) the Prometheus text format.
TextFormat FormatFromContentType(std::string_view content_type);

// One "# HELP", "# TYPE" or "# UNIT" line, as ParseOptions::on_metadata
// receives it. Views are valid only during the call.
struct MetadataLine {
  enum class Kind { kHelp, kType, kUnit };
  Kind kind;
  size_t line = 0;            // 1-based line number in the body
  std::string_view family;    // the metric family name
  std::string_view text;      // help (unescaped), type ("counter", ...) or unit
};

struct ParseOptions {
  TextFormat format = TextFormat::kPrometheus;
  int64_t default_timestamp_ms = 0;  // used for samples without a timestamp
  // Optional. Called with the series text ("name{...}", up to the closing
  // brace) of lines that have a metric name and a label block; returning true
  // skips parsing the labels: the caller knows this series already (the text
  // was parsed before). Malformed label blocks always get the full parse.
  std::function<bool(std::string_view series)> known_series;
  // Optional. Called for each HELP, TYPE and UNIT line, in body order.
  std::function<void(const MetadataLine&)> on_metadata;
};

class TextParser {
 public:
  TextParser(std::string_view body, ParseOptions opts);

  // Advances to the next sample. False at the end of the body or on the first
  // error; then status() says which (OK at the end). Errors are
  // InvalidArgument "line N: <reason>".
  bool Next();
  const TextSample& sample() const { return sample_; }
  const Status& status() const { return status_; }

 private:
  bool ParseLine(std::string_view line);
  bool ParseLabels(std::string_view line, size_t* pos);
  bool Fail(std::string msg);

  std::string_view body_;
  ParseOptions opts_;
  size_t pos_ = 0;
  size_t line_no_ = 0;
  TextSample sample_;
  std::vector<LabelRef> labels_;     // reused between lines
  std::vector<std::string> unescaped_;  // backing store for escaped values on this line
  size_t unescaped_used_ = 0;
  std::vector<std::pair<size_t, size_t>> pending_;  // (label index, unescaped_ slot) to fix up
  Status status_;
};

// Parses every sample of `body`, calling `fn` for each; stops at the first
// parse error or the first non-OK Status from `fn` and returns it.
using SampleFn = std::function<Status(const TextSample&)>;
Status ParseText(std::string_view body, int64_t default_ts_ms, const SampleFn& fn);

// Parses a Go-style float: decimal, exponent, NaN, [+-]Inf (any case). False
// when `s` is not entirely one number.
bool ParseGoFloat(std::string_view s, double* out);

}  // namespace trainwatch::ingest
