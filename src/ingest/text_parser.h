#pragma once
// Zero-copy parser for the exposition formats a scrape or an import receives.
//
// Prometheus text format 0.0.4 (TextFormat::kPrometheus), as Prometheus 2.42's
// scrape parser (model/textparse/promparse.go) reads it:
//
//   # HELP name text / # TYPE name type    (reported to on_metadata)
//   other comments, blank lines            (skipped)
//   name{k="v",...} value [timestamp_ms]  (labels optional, trailing comma ok)
//
// Values are Go-style decimal floats (NaN, +Inf, -Inf, exponents; no hex, as
// Prometheus); label values use the \\, \" and \n escapes and must be UTF-8.
// An OpenMetrics exemplar (" # {...} v [t]") after a sample is tolerated and
// ignored. Unknown escapes in label values (\t) are kept as written, as
// Prometheus does. ParseOptions::expfmt_rules switches to the checks of
// prometheus/common's expfmt.TextParser (what `promtool check metrics` uses).
//
// OpenMetrics 1.0 (TextFormat::kOpenMetrics), as the spec and Prometheus 2.42's
// openmetricsparse.go: single spaces, no blank lines, only HELP/TYPE/UNIT/EOF
// comments, "# EOF" last, timestamps in float seconds (converted to ms as
// Prometheus does: int64(ts * 1000)), exemplars on _total/_bucket samples
// parsed, validated and skipped, metadata before the samples of its family and
// families not interleaved. _created samples are ordinary samples, as 2.42
// stores them; with ParseOptions::start_timestamps their values are also
// the start timestamps of their families' other samples.
//
// Not thread-safe; one parser per body. Views handed out point into the body
// or into the parser's scratch buffers and are valid until the next Next().

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
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
  // When the counter, histogram or summary behind the sample last started
  // (ms; 0 = unknown): OpenMetrics `_created` with
  // ParseOptions::start_timestamps, the protobuf format's created_timestamp.
  int64_t start_timestamp_ms = 0;
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
  // Optional. Called for each HELP, TYPE and UNIT line, in body order
  // (# UNIT is metadata in OpenMetrics only; the text format reports it too).
  std::function<void(const MetadataLine&)> on_metadata;
  // Text format only: follow prometheus/common's expfmt.TextParser (the
  // format's reference parser, used by `promtool check metrics`) where it
  // differs from Prometheus's scrape parser. It rejects a body not ending in
  // a newline, a second HELP or TYPE for a name, a TYPE after samples of that
  // name, a non-float "le" of a histogram or "quantile" of a summary, and
  // unknown escapes (\t) in label values and HELP; it ignores a HELP or TYPE
  // line without a name or text. known_series is not consulted in this mode.
  bool expfmt_rules = false;
  // OpenMetrics only, as Prometheus's OpenMetricsParser.StartTimestamp: in a
  // counter, histogram or summary family `foo`, the value of
  // `foo_created{labels}` (seconds; int64(v * 1000) ms) is the
  // start_timestamp_ms of the family's samples with those labels (le or
  // quantile aside, compared as written), wherever in the family it is.
  // The `_created` samples are still returned, with none. Costs one search
  // of the body for "_created" and, per family that has one, a look ahead
  // over its lines. The text format has no start timestamps.
  bool start_timestamps = false;
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
  enum class Family : uint8_t {
    kUnknown, kCounter, kGauge, kHistogram, kGaugeHistogram, kSummary, kInfo, kStateset, kUntyped, kInvalid
  };
  // OpenMetrics: the family the last metadata line or sample belongs to.
  struct FamilyState {
    std::string_view name;
    Family type = Family::kUnknown;
    bool has_samples = false;
    uint8_t seen = 0;  // 1 << MetadataLine::Kind of the metadata lines read
  };

  static Family FamilyFromType(std::string_view type, bool om);
  bool NextOpenMetrics();
  bool ParseLine(std::string_view line);
  bool ParseLabels(std::string_view line, size_t* pos);
  bool ScanLabelValue(std::string_view line, size_t* pos, std::string_view name, std::string_view* value,
                      ptrdiff_t* slot);
  bool ParseLineOpenMetrics(std::string_view line);
  bool ParseLabelsOpenMetrics(std::string_view line, size_t* pos, bool exemplar, size_t* runes);
  bool ParseExemplar(std::string_view line, size_t pos);
  bool ParseComment(std::string_view line);
  bool CheckFamilyMetadata(MetadataLine::Kind kind, std::string_view family, Family type);
  bool CheckFamilySample();
  bool CheckExpfmtSample();
  void SetStartTimestamp(size_t line_start);
  bool ReadCreatedLines(size_t line_start);
  std::string_view StartTimestampKey(std::string_view block);
  bool Fail(std::string msg);

  std::string_view body_;
  ParseOptions opts_;
  bool om_ = false;
  size_t pos_ = 0;
  size_t line_no_ = 0;
  TextSample sample_;
  std::vector<LabelRef> labels_;     // reused between lines
  std::vector<std::string> unescaped_;  // backing store for escaped values on this line
  size_t unescaped_used_ = 0;
  std::vector<std::pair<size_t, size_t>> pending_;  // (label index, unescaped_ slot) to fix up
  std::string meta_text_;            // unescaped HELP text
  Status status_;
  // OpenMetrics family checks.
  bool eof_ = false;
  FamilyState family_;
  std::unordered_map<std::string_view, uint8_t> closed_families_;  // name -> Family
  std::vector<std::string_view> exemplar_names_;
  static constexpr size_t kLinearNames = 16;
  std::vector<std::string_view> sorted_names_;  // scratch of CheckManyLabelNames
  bool NewLabelName(std::string_view name);     // false (Fail) on a duplicate among the first few
  bool CheckManyLabelNames();                   // false (Fail) on any duplicate in a long label set
  std::string_view last_name_;       // of the previous sample (both checks)
  // expfmt_rules checks: metadata flags and type per name, names of samples seen.
  std::unordered_map<std::string_view, uint8_t> expfmt_meta_;
  std::unordered_set<std::string_view> expfmt_sample_names_;
  std::string_view expfmt_float_label_;  // "le" / "quantile" when the current name needs it
  // start_timestamps: the family whose `_created` lines were read, and
  // their values in body order with their label blocks (le/quantile
  // removed, "" for none). A sample is compared with the entry after the
  // last `_created` sample passed (where exposers put its group); others
  // are looked up in an index built on the first miss.
  struct Created {
    std::string key;
    int64_t st;
  };
  std::string_view st_family_;
  std::vector<Created> created_;  // the first created_count_ are this family's (strings reused)
  size_t created_count_ = 0;
  size_t created_next_ = 0;       // the entry the next sample most likely has
  std::unordered_map<std::string_view, int64_t> created_index_;  // keys: views into created_
  size_t created_at_ = 0;         // offset of the next "_created" in the body (npos: none left)
  bool created_searched_ = false;
  std::string st_key_;           // scratch of StartTimestampKey
};

// Parses every sample of `body`, calling `fn` for each; stops at the first
// parse error or the first non-OK Status from `fn` and returns it.
using SampleFn = std::function<Status(const TextSample&)>;
Status ParseText(std::string_view body, int64_t default_ts_ms, const SampleFn& fn);

// Parses a Go-style float: decimal, exponent, NaN, [+-]Inf (any case). False
// when `s` is not entirely one number.
bool ParseGoFloat(std::string_view s, double* out);

// ParseGoFloat as the exposition parsers use it: Prometheus refuses hex floats
// and '_' ("unsupported character in float").
bool ParseExpositionFloat(std::string_view s, double* out);

}  // namespace trainwatch::ingest
