#pragma once
// Prometheus remote_write 1.0 receiver: POST /api/v1/write. The body is a
// protobuf prometheus.WriteRequest framed in the snappy block format
// (prometheus/prometheus prompb/remote.proto, types.proto). The protobuf is
// decoded by hand: only WriteRequest.timeseries and each series' labels,
// float samples and native histograms are read; exemplars, metadata and
// unknown fields are skipped. All-or-nothing like the text import: the whole body is
// decoded and validated before the first Append.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "ingest/refusals.h"
#include "ingest/series_cache.h"
#include "model/labels.h"
#include "storage/storage.h"

namespace trainwatch {
class ProtoReader;
}

namespace trainwatch::ingest {

struct RemoteWriteStats {
  uint64_t samples = 0;     // float samples
  uint64_t series = 0;      // distinct label sets (by encoded bytes) in the body
  uint64_t histograms = 0;  // native histogram samples
  uint64_t exemplars = 0;   // skipped
};

// Decodes a sorted-or-not label set from the concatenated Label submessages
// of a TimeSeries (field 1 of TimeSeries, tags included). Validates names,
// the metric name and UTF-8 values; rejects duplicate names; drops empty
// values. Exposed for tests.
Result<model::Labels> DecodeRemoteWriteLabels(std::string_view label_fields);

// Decodes one prompb Histogram message (types.proto; TimeSeries field 4)
// into *h and its timestamp *t. Integer histograms (count_int,
// zero_count_int, *_deltas) become float histograms: the deltas are summed
// into absolute counts. Errors name the field; the result is validated
// (model::FloatHistogram::Validate). `base` is the message's offset in the
// request, for error positions. With `st`, also remote write 2.0's
// start_timestamp (field 17; 0 when absent), which 1.0 does not have.
// Exposed for tests and remote read.
Status DecodeRemoteWriteHistogram(std::string_view msg, size_t base, model::FloatHistogram* h, int64_t* t,
                                  int64_t* st = nullptr);

// A decoded WriteRequest: its distinct series and their samples, ready to
// append. Not thread-safe.
class RemoteWriteBatch {
 public:
  // Snappy-decodes and parses `body`, keeping the decompressed bytes.
  // `cache` (optional) maps a series' encoded labels to its ref. A body
  // beyond `limits` fails as it is decoded.
  Status ParseSnappy(std::string_view body, SeriesCache* cache, const RequestLimits& limits = {});
  // Parses an uncompressed WriteRequest. REQUIRES: `proto` outlives the batch
  // (ParseSnappy keeps its own copy).
  Status Parse(std::string_view proto, SeriesCache* cache, const RequestLimits& limits = {});
  // Appends every sample; the caller commits or rolls back. Samples of new
  // series refused at the store's series limit are skipped and counted in
  // refusals() (check refusals().After(...) once committed).
  Status AppendTo(storage::Appender* app);
  const SeriesRefusals& refusals() const { return refusals_; }
  RemoteWriteStats stats() const { return stats_; }
  void Clear();

 private:
  // A series of the body; its cache key and ref are keys_[i] and refs_[i]
  // (apart, so that the cache is asked for all of them in one call).
  struct Series {
    model::Labels labels;  // empty while only the cached ref is known
    std::string_view label_fields;  // encoded Label submessages
    uint32_t index = 0;  // of its first TimeSeries message, and that message's offset: for errors
    size_t base = 0;
  };
  struct Entry {
    uint32_t series;
    int64_t t;
    double v;
  };
  struct HistEntry {
    uint32_t series;
    int64_t t;
    model::FloatHistogram h;
  };
  Status ParseProto(std::string_view proto, SeriesCache* cache, const RequestLimits& limits);
  Status ParseTimeSeries(std::string_view msg, size_t base, size_t index);
  // The rare fields of a TimeSeries, out of ParseTimeSeries's loop so that
  // the float path stays small enough to inline its reader's steps.
  Status ParseHistogramField(ProtoReader& r, uint32_t wire, size_t base, size_t index, size_t first_hist);
  static Status SeriesError(size_t index, size_t base, const Status& s);
  // The index in series_ of the series with these label fields and key, or
  // one past the end after adding nothing (the caller then appends it).
  uint32_t FindSeries(std::string_view fields, const SeriesCache::Key& key);
  void IndexSeries(uint32_t idx);
  // With a cache, the body's series are looked up in it together once the
  // body is parsed (SeriesCache::GetMany); those it does not know have their
  // labels decoded here.
  Status ResolveSeries();

  std::string buf_;                    // decompressed body (its front; the size is a high-water mark)
  std::deque<std::string> scratch_;    // label fields that were not contiguous
  std::vector<Series> series_;
  std::vector<Entry> samples_;
  std::vector<HistEntry> hists_;  // appended after samples_
  // Open addressing over series_ by key (index + 1; 0 is empty), at most half
  // full: the series seen in this body, without a node allocation each.
  std::vector<uint32_t> index_;
  std::vector<SeriesCache::Key> keys_;    // parallel to series_
  std::vector<storage::SeriesRef> refs_;  // parallel to series_; 0: not known yet
  RemoteWriteStats stats_;
  SeriesCache* cache_ = nullptr;
  RequestLimits limits_;
  SeriesRefusals refusals_;
};

// Decodes the snappy-framed `body` and appends it to `db` in one Commit.
// Nothing is stored when decoding or appending fails.
Result<RemoteWriteStats> RemoteWrite(std::string_view body, SeriesCache* cache, storage::Appendable& db,
                                     const RequestLimits& limits = {});

}  // namespace trainwatch::ingest
