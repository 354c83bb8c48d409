#pragma once
// Parser for Prometheus's protobuf exposition format: a body of
// varint-length-delimited io.prometheus.client.MetricFamily messages
// (Content-Type application/vnd.google.protobuf;
// proto=io.prometheus.client.MetricFamily; encoding=delimited), as
// Prometheus 3's model/textparse/protobufparse.go reads it.
//
// Counters, gauges and untyped metrics yield one sample named after the
// family. Summaries yield name_count, name_sum and name{quantile="q"}.
// Histograms are native when they have a span, a zero threshold > 0 or a
// zero count > 0 (Prometheus's isNativeHistogram); a native one yields one
// FloatHistogram sample (integer deltas turned into absolute counts,
// Compact(0), hint kGauge for GAUGE_HISTOGRAM). A classic histogram yields
// name_count, name_sum and name_bucket{le="b"} up to and including +Inf
// (added with the count when absent); a native one also yields these when
// ProtoParseOptions::keep_classic is set. "le" and "quantile" values are
// formatted as Prometheus does there (Go's %g, ".0" added: "1.0", "0.25",
// "+Inf"). A timestamp_ms of 0 means none. A metric's created_timestamp
// (Counter 3, Summary 4, Histogram 15: when it last started; Prometheus 3
// calls it start_timestamp) is the start_timestamp_ms of each of its
// samples, as Prometheus's ProtobufParser.StartTimestamp (seconds*1e3 +
// nanos/1e6); gauges and untyped metrics have none. Exemplars and unknown
// fields are skipped.
//
// Errors are InvalidArgument naming the byte offset in the body and what
// was wrong: "protobuf: offset 12: truncated varint", "metric family at
// offset 0: invalid metric name \"\"". Not thread-safe; views handed out
// are valid until the next Next().

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ingest/text_parser.h"
#include "model/histogram.h"

namespace trainwatch::ingest {

inline constexpr std::string_view kProtoMediaType = "application/vnd.google.protobuf";

// True when a response's Content-Type names the delimited MetricFamily
// protobuf format (the media type, as Prometheus's textparse.New decides).
bool IsProtobufContentType(std::string_view content_type);

struct ProtoParseOptions {
  int64_t default_timestamp_ms = 0;
  // False: every histogram is read as a classic one (its _count, _sum and
  // buckets), as a scrape with native histograms off does.
  bool native_histograms = true;
  // Native histograms that also have classic buckets yield those series
  // too (always_scrape_classic_histograms); with convert_nhcb, so do the
  // converted classic histograms.
  bool keep_classic = false;
  // A histogram read as classic (not native, or native_histograms off)
  // yields one native histogram with custom buckets (schema -53, hint
  // kGauge for GAUGE_HISTOGRAM) named after the family instead of its
  // classic series (after them with keep_classic), converted as
  // Prometheus's util/convertnhcb (model/nhcb.h); one that does not convert
  // (buckets not cumulative, _count not the +Inf bucket's) is an error, as
  // in Prometheus's ProtobufParser (convert_classic_histograms_to_nhcb).
  bool convert_nhcb = false;
  // Optional: each family's HELP, TYPE and UNIT (when set), as the text
  // parser reports them. Views are valid only during the call.
  std::function<void(const MetadataLine&)> on_metadata;
};

class ProtoParser {
 public:
  ProtoParser(std::string_view body, ProtoParseOptions opts);

  // Advances to the next sample; false at the end or on the first error,
  // then status() says which.
  bool Next();
  // The sample: name, labels (as exposed, plus "le"/"quantile"), series key
  // (unique per label set within a body), value, timestamp. `line` is the
  // 1-based number of the sample in the body.
  const TextSample& sample() const { return sample_; }
  // True when the sample is a native histogram: histogram() holds it and
  // sample().value is meaningless.
  bool is_histogram() const { return is_histogram_; }
  const model::FloatHistogram& histogram() const { return histogram_; }
  const Status& status() const { return status_; }

 private:
  struct Pending {
    size_t metric = 0;       // index into metrics_
    int kind = 0;            // 0 plain, 1 native histogram, 2 _count, 3 _sum, 4 bucket/quantile
    std::string suffix;      // "", "_count", "_sum", "_bucket"
    std::string magic_name;  // "le" / "quantile" or empty
    std::string magic_value;
    double value = 0;
    size_t hist = 0;         // index into hists_ for kind 1
  };
  struct Metric {
    std::vector<LabelRef> labels;
    int64_t timestamp_ms = 0;
    int64_t st = 0;  // created_timestamp, ms; 0: none
  };

  Status ReadFamily();
  Status ReadMetric(std::string_view msg, size_t at, int type);
  void Emit();

  std::string_view body_;
  ProtoParseOptions opts_;
  size_t pos_ = 0;
  size_t count_ = 0;
  std::string_view family_;
  std::vector<Metric> metrics_;
  std::vector<model::FloatHistogram> hists_;
  std::vector<Pending> pending_;
  size_t next_ = 0;
  TextSample sample_;
  std::vector<LabelRef> labels_;
  std::string name_;
  std::string key_;
  bool is_histogram_ = false;
  model::FloatHistogram histogram_;
  Status status_;
};

// Go's strconv.FormatFloat(f, 'g', -1, 64) with ".0" appended when the
// result has neither '.' nor 'e' (Prometheus's formatOpenMetricsFloat).
std::string FormatOpenMetricsFloat(double f);

}  // namespace trainwatch::ingest
