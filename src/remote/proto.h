#pragma once
// Encoding of Prometheus remote_write 1.0 requests: a prometheus.WriteRequest
// protobuf (prompb/remote.proto, types.proto) compressed in snappy's block
// format. Timeseries with labels, float samples and native histograms (as
// float histograms) are written; the decoder on the other side is
// ingest/remote_write.h.

#include <cstddef>
#include <string>
#include <string_view>

#include "model/histogram.h"
#include "model/labels.h"
#include "model/sample.h"

namespace trainwatch::remote {

// Appends one WriteRequest.timeseries entry (field 1) holding `labels` (in
// their sorted order) and samples[0, n) to *out, which is a WriteRequest
// being built; an empty *out plus N calls is a WriteRequest of N series.
void AppendTimeSeries(const model::Labels& labels, const model::Sample* samples, size_t n, std::string* out);

// The TimeSeries.labels fields of `labels`, encoded once per series so each
// batch copies bytes instead of encoding labels again.
void AppendLabelFields(const model::Labels& labels, std::string* out);
// AppendTimeSeries with labels already encoded by AppendLabelFields.
void AppendTimeSeriesEncoded(std::string_view label_fields, const model::Sample* samples, size_t n, std::string* out);

// A histogram sample to encode; the histogram is borrowed.
struct HistogramRef {
  int64_t t = 0;
  const model::FloatHistogram* h = nullptr;
};

// Appends the prompb Histogram message (types.proto) of `h` at `t` to *out,
// without a tag: float counts (count_float, zero_count_float,
// positive_counts, negative_counts), spans, schema, zero threshold, sum,
// reset hint and custom_values, every double bit-exact.
void AppendHistogramMessage(const model::FloatHistogram& h, int64_t t, std::string* out);

// AppendTimeSeriesEncoded with histogram samples too (TimeSeries.histograms,
// after the float samples).
void AppendTimeSeriesEncoded(std::string_view label_fields, const model::Sample* samples, size_t n,
                             const HistogramRef* hists, size_t nh, std::string* out);

// Replaces *out with `in` compressed in the snappy block format.
void SnappyCompress(std::string_view in, std::string* out);

}  // namespace trainwatch::remote
