#include "remote/proto.h"

#include <snappy.h>

#include <cmath>
#include <cstring>

#include "base/coding.h"

namespace trainwatch::remote {
namespace {

// Protobuf tags: (field << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited).
constexpr char kTagTimeSeries = (1 << 3) | 2;  // WriteRequest.timeseries
constexpr char kTagLabel = (1 << 3) | 2;       // TimeSeries.labels
constexpr char kTagSample = (2 << 3) | 2;      // TimeSeries.samples
constexpr char kTagName = (1 << 3) | 2;        // Label.name
constexpr char kTagValue = (2 << 3) | 2;       // Label.value
constexpr char kTagDouble = (1 << 3) | 1;      // Sample.value
constexpr char kTagTimestamp = (2 << 3) | 0;   // Sample.timestamp

size_t LenField(size_t n) { return 1 + static_cast<size_t>(VarintLength(n)) + n; }

size_t LabelSize(const model::Label& l) { return LenField(l.name.size()) + LenField(l.value.size()); }

size_t SampleSize(const model::Sample& s) {
  return 1 + 8 + 1 + static_cast<size_t>(VarintLength(static_cast<uint64_t>(s.t)));
}

void PutLen(std::string* out, char tag, size_t n) {
  out->push_back(tag);
  PutVarint64(out, n);
}

}  // namespace

void AppendLabelFields(const model::Labels& labels, std::string* out) {
  for (const model::Label& l : labels) {
    PutLen(out, kTagLabel, LabelSize(l));
    PutLen(out, kTagName, l.name.size());
    out->append(l.name);
    PutLen(out, kTagValue, l.value.size());
    out->append(l.value);
  }
}

void AppendTimeSeriesEncoded(std::string_view label_fields, const model::Sample* samples, size_t n, std::string* out) {
  size_t size = label_fields.size();
  for (size_t i = 0; i < n; i++) size += LenField(SampleSize(samples[i]));
  PutLen(out, kTagTimeSeries, size);
  out->append(label_fields);
  for (size_t i = 0; i < n; i++) {
    PutLen(out, kTagSample, SampleSize(samples[i]));
    out->push_back(kTagDouble);
    uint64_t bits;
    std::memcpy(&bits, &samples[i].v, 8);  // bit-exact: the stale-marker NaN survives
    PutFixed64(out, bits);
    out->push_back(kTagTimestamp);
    PutVarint64(out, static_cast<uint64_t>(samples[i].t));  // int64: negative times are 10-byte varints
  }
}

namespace {

void PutDoubleField(std::string* out, uint32_t field, double v) {
  out->push_back(static_cast<char>((field << 3) | 1));
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  PutFixed64(out, bits);
}

void PutVarintField(std::string* out, uint32_t field, uint64_t v) {
  out->push_back(static_cast<char>(field << 3));
  PutVarint64(out, v);
}

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

void PutSpans(std::string* out, uint32_t field, const std::vector<model::Span>& spans) {
  std::string span;
  for (const model::Span& s : spans) {
    span.clear();
    if (s.offset != 0) PutVarintField(&span, 1, ZigZag(s.offset));
    if (s.length != 0) PutVarintField(&span, 2, s.length);
    PutLen(out, static_cast<char>((field << 3) | 2), span.size());
    out->append(span);
  }
}

void PutPackedDoubles(std::string* out, uint32_t field, const std::vector<double>& v) {
  if (v.empty()) return;
  PutVarint32(out, (field << 3) | 2);  // field 16 needs a two-byte tag
  PutVarint64(out, 8 * v.size());
  for (double d : v) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    PutFixed64(out, bits);
  }
}

}  // namespace

void AppendHistogramMessage(const model::FloatHistogram& h, int64_t t, std::string* out) {
  PutDoubleField(out, 2, h.count);  // count_float, always: it makes this a float histogram
  if (!(h.sum == 0 && !std::signbit(h.sum))) PutDoubleField(out, 3, h.sum);
  if (h.schema != 0) PutVarintField(out, 4, ZigZag(h.schema));
  if (h.zero_threshold != 0) PutDoubleField(out, 5, h.zero_threshold);
  if (h.zero_count != 0) PutDoubleField(out, 7, h.zero_count);  // zero_count_float
  PutSpans(out, 8, h.negative_spans);
  PutPackedDoubles(out, 10, h.negative_buckets);  // negative_counts
  PutSpans(out, 11, h.positive_spans);
  PutPackedDoubles(out, 13, h.positive_buckets);  // positive_counts
  if (h.counter_reset_hint != model::CounterResetHint::kUnknown) {
    PutVarintField(out, 14, static_cast<uint64_t>(h.counter_reset_hint));
  }
  if (t != 0) PutVarintField(out, 15, static_cast<uint64_t>(t));
  PutPackedDoubles(out, 16, h.custom_values);
}

void AppendTimeSeriesEncoded(std::string_view label_fields, const model::Sample* samples, size_t n,
                             const HistogramRef* hists, size_t nh, std::string* out) {
  if (nh == 0) return AppendTimeSeriesEncoded(label_fields, samples, n, out);
  // The floats are encoded as a TimeSeries of their own, then its length
  // prefix is rewritten to cover the histograms too.
  std::string ts;
  AppendTimeSeriesEncoded(label_fields, samples, n, &ts);
  std::string_view body(ts);
  body.remove_prefix(1);
  uint64_t len = 0;
  const char* p = GetVarint64Ptr(body.data(), body.data() + body.size(), &len);
  body = std::string_view(p, static_cast<size_t>(body.data() + body.size() - p));
  std::string hs, msg;
  for (size_t i = 0; i < nh; i++) {
    msg.clear();
    AppendHistogramMessage(*hists[i].h, hists[i].t, &msg);
    PutLen(&hs, static_cast<char>((4 << 3) | 2), msg.size());  // TimeSeries.histograms
    hs.append(msg);
  }
  PutLen(out, kTagTimeSeries, body.size() + hs.size());
  out->append(body);
  out->append(hs);
}

void AppendTimeSeries(const model::Labels& labels, const model::Sample* samples, size_t n, std::string* out) {
  std::string fields;
  AppendLabelFields(labels, &fields);
  AppendTimeSeriesEncoded(fields, samples, n, out);
}

void SnappyCompress(std::string_view in, std::string* out) {
  out->clear();
  snappy::Compress(in.data(), in.size(), out);
}

}  // namespace trainwatch::remote
