#pragma once
// Prometheus's chunk formats as remote read's STREAMED_XOR_CHUNKS responses
// carry them (prompb Chunk.Encoding: XOR = 1, HISTOGRAM = 2,
// FLOAT_HISTOGRAM = 3; Prometheus's tsdb/chunkenc xor.go, histogram.go,
// float_histogram.go, histogram_meta.go, varbit.go). A wire format of
// Prometheus's, not one of our TSDB's encodings (tsdb/chunkenc is ours).
//
// Encoding: ChunkSeries cuts a series' samples into chunks as Prometheus's
// storage.seriesToChunkEncoder does (a new chunk when the sample type
// changes or after 120 samples) and writes histograms as its
// FloatHistogramAppender does with appendOnly = false, byte for byte: a
// counter reset, a schema / zero threshold / custom bounds change or a
// vanished non-empty bucket starts a new chunk (CounterReset header bit on
// a reset), new buckets recode the chunk with the wider layout, empty
// buckets the sample lacks are filled in, gauge histograms merge layouts
// both ways. We store float histograms only, so histograms are always
// FLOAT_HISTOGRAM chunks: exact for every count we hold, where HISTOGRAM
// would need integer counts we cannot tell from integer-valued floats.
//
// Decoding reads all three encodings with the checks of Prometheus's
// iterators, and names the problem in the error for a chunk that does not
// decode.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "model/sample.h"
#include "storage/merge.h"  // HistogramSample

namespace trainwatch::remote {

// prompb Chunk.Encoding.
enum class PromChunkEncoding : uint8_t { kXor = 1, kHistogram = 2, kFloatHistogram = 3 };

// One prompb Chunk.
struct PromChunk {
  int64_t min_time = 0, max_time = 0;  // ms, first and last sample
  PromChunkEncoding encoding = PromChunkEncoding::kXor;
  std::string data;
};

// Cuts one series into Prometheus chunks, samples given in time order.
// Not thread-safe.
class PromChunkEncoder {
 public:
  PromChunkEncoder();
  ~PromChunkEncoder();
  PromChunkEncoder(const PromChunkEncoder&) = delete;
  PromChunkEncoder& operator=(const PromChunkEncoder&) = delete;

  // REQUIRES: t greater than the previous sample's.
  void AppendFloat(int64_t t, double v);
  void AppendHistogram(int64_t t, const model::FloatHistogram& h);
  // The chunks so far and the open one; the encoder is empty afterwards.
  std::vector<PromChunk> Finish();

  struct HistogramChunk;  // the open histogram chunk and its appender state

 private:
  void Cut();
  enum class Open { kNone, kFloat, kHistogram } open_ = Open::kNone;
  int samples_ = 0;  // in the open chunk since the last cut (seriesToChunkEncoder's i)
  std::vector<int64_t> ts_;
  std::vector<double> vs_;
  HistogramChunk* hist_ = nullptr;  // owned
  std::vector<PromChunk> out_;
};

// Appends the samples of one chunk with timestamps in [mint, maxt] to
// *floats (XOR) or *hists (HISTOGRAM, FLOAT_HISTOGRAM, as float
// histograms). `encoding` is the prompb value as received. Histogram
// counter reset hints are what Prometheus's iterators give: kGauge in a
// gauge chunk, kUnknown for a chunk's first sample, kNotCounterReset after.
// Errors name the encoding and what is wrong.
Status DecodePromChunk(uint64_t encoding, std::string_view data, int64_t mint, int64_t maxt,
                       std::vector<model::Sample>* floats, std::vector<storage::HistogramSample>* hists);

}  // namespace trainwatch::remote
