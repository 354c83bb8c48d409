#pragma once
// Prometheus remote write 2.0 receiver: POST /api/v1/write with
// Content-Type application/x-protobuf;proto=io.prometheus.write.v2.Request,
// snappy block format (prometheus/prometheus prompb/io/prometheus/write/v2/
// types.proto; the spec at prometheus.io/docs/specs/prw/remote_write_spec_2_0).
//
// Request{symbols=4, timeseries=5}; TimeSeries{labels_refs=1 (name, value
// pairs of indexes into symbols), samples=2, histograms=3, exemplars=4,
// metadata=5}; Sample{value=1, timestamp=2, start_timestamp=3}. Histograms
// are the 1.0 message (DecodeRemoteWriteHistogram) plus start_timestamp=17.
// Stored: float samples and native histograms, each with its start
// timestamp (Appender::AppendST; 0 = unknown); a sample without one takes
// the older drafts' TimeSeries.created_timestamp=6 when the series has it.
// Validated, then dropped: exemplars (no exemplar store), metadata (the
// metadata API serves what scrapes saw). All-or-nothing like 1.0: a malformed
// request (errors name the field: a symbol ref out of range, an odd number
// of label refs, symbols[0] not "", a series without samples) stores
// nothing, where Prometheus stores the valid series and answers 400.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "ingest/append_batch.h"
#include "ingest/refusals.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch::ingest {

// The remote write message a Content-Type names: application/x-protobuf
// (or none) with no proto parameter or proto=prometheus.WriteRequest is
// 1.0; proto=io.prometheus.write.v2.Request is 2.0; anything else is
// unknown (415).
enum class RemoteWriteProto { kV1, kV2, kUnknown };
RemoteWriteProto RemoteWriteProtoOf(std::string_view content_type);

struct RemoteWrite2Stats {
  uint64_t series = 0;      // distinct label sets
  uint64_t samples = 0;     // float samples decoded
  uint64_t histograms = 0;  // native histogram samples decoded
  uint64_t exemplars = 0;   // decoded and dropped
  // What AppendTo appended (the X-Prometheus-Remote-Write-*-Written headers).
  uint64_t samples_written = 0;
  uint64_t histograms_written = 0;
};

// One decoded io.prometheus.write.v2.Request. Not thread-safe.
class RemoteWrite2Batch {
 public:
  // Snappy-decodes `body`, then Parse. Beyond `limits` fails as decoded.
  Status ParseSnappy(std::string_view body, const RequestLimits& limits = {});
  // Parses an uncompressed Request; errors (InvalidArgument) name the field.
  Status Parse(std::string_view proto, const RequestLimits& limits = {});
  // Appends every sample and histogram; the caller commits or rolls back.
  // Samples of new series refused at the store's series limit are skipped
  // and counted in refusals().
  Status AppendTo(storage::Appender* app);
  const SeriesRefusals& refusals() const { return refusals_; }
  const RemoteWrite2Stats& stats() const { return stats_; }

 private:
  using Series = BatchSeries;
  using Sample = BatchSample;
  using HistSample = BatchHistogram;
  Status ParseTimeSeries(std::string_view msg, size_t base, size_t index, const std::vector<std::string_view>& symbols,
                         const RequestLimits& limits);

  std::string buf_;  // the decompressed body
  std::vector<Series> series_;
  std::vector<Sample> samples_;
  std::vector<HistSample> hists_;
  std::unordered_map<std::string, uint32_t> index_;  // encoded labels -> series_, while parsing
  RemoteWrite2Stats stats_;
  SeriesRefusals refusals_;
};

}  // namespace trainwatch::ingest
