#include "remote/proto.h"

#include <snappy.h>

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
