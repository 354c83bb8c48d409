#pragma once
// Float native-histogram chunks (Encoding::kFloatHistogram, layout in
// docs/format/chunks.md): the layout (schema, zero threshold, spans, bucket
// counts, custom bounds) once per chunk, then per sample delta-of-delta
// timestamps as in XOR chunks, the counter-reset hint (one bit when
// unchanged) and every float (count, zero count, sum, each bucket) XOR'd
// against the same field of the previous sample, each field with its own
// leading/trailing-zero window. A histogram with another layout starts a
// new chunk. Every field round-trips bit-exactly, hints included.
//
// Only plain data of model::FloatHistogram is used here (no arithmetic).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::chunkenc {

// Cut points for histogram chunks, in the head and in blocks: whichever
// comes first.
inline constexpr uint32_t kHistogramChunkSamples = 120;
inline constexpr size_t kHistogramChunkBytes = 4096;

// Whether a and b can share a chunk: equal schema, zero threshold (bits),
// spans, bucket counts and custom bounds (bits).
bool SameLayout(const model::FloatHistogram& a, const model::FloatHistogram& b);

// Bit-exact equality of every field (sum and counts compared as bits, so a
// stale marker equals only a stale marker); for tests and deduplication.
bool IdenticalHistograms(const model::FloatHistogram& a, const model::FloatHistogram& b);

// An appendable histogram chunk. Not thread-safe.
class FloatHistogramChunk {
 public:
  static constexpr Encoding kEncoding = Encoding::kFloatHistogram;
  static constexpr uint32_t kMaxSamples = 0xffff;

  // True when h may be appended: the chunk is empty, or h has its layout
  // and it holds fewer than kMaxSamples.
  bool CanAppend(const model::FloatHistogram& h) const;
  // REQUIRES: CanAppend(h), t greater than MaxTime() (when not empty).
  void Append(int64_t t, const model::FloatHistogram& h);
  uint32_t NumSamples() const { return n_; }
  // A complete, decodable chunk at any point between appends.
  std::string_view Bytes() const { return buf_; }
  size_t MemoryBytes() const;
  int64_t MinTime() const { return t_first_; }  // REQUIRES: NumSamples() > 0
  int64_t MaxTime() const { return t_; }

 private:
  struct Field {
    uint64_t bits = 0;
    uint8_t leading = 0xff, trailing = 0;
  };
  std::string buf_;
  uint8_t bit_pos_ = 0;
  uint16_t n_ = 0;
  model::CounterResetHint hint_ = model::CounterResetHint::kUnknown;
  int64_t t_ = 0, t_delta_ = 0, t_first_ = 0;
  model::FloatHistogram layout_;  // the layout fields of the first sample
  std::vector<Field> fields_;     // count, zero count, sum, positive, negative buckets
};

// Decodes a histogram chunk, forward only, with a sticky error.
class FloatHistogramIterator {
 public:
  FloatHistogramIterator() = default;
  // `data` must outlive the iterator.
  explicit FloatHistogramIterator(std::string_view data) { Reset(data); }
  void Reset(std::string_view data);
  // Advances; false at the end or on corrupt data (then Err() is not OK).
  bool Next();
  // Advances to the first sample with timestamp >= t; false if none.
  bool Seek(int64_t t);
  int64_t t() const { return t_; }
  // The current histogram; valid until the next Next/Seek/Reset.
  const model::FloatHistogram& h() const { return h_; }
  const Status& Err() const { return err_; }
  uint32_t NumSamples() const { return n_; }

 private:
  bool Fail(const std::string& what);
  std::string_view data_;
  uint64_t pos_ = 0;  // bit position
  uint32_t n_ = 0, i_ = 0;
  int64_t t_ = 0, t_delta_ = 0;
  bool valid_ = false;  // on a sample
  model::FloatHistogram h_;
  std::vector<uint64_t> bits_;  // per field, as in FloatHistogramChunk
  std::vector<uint8_t> leading_, trailing_;
  Status err_;
};

// Decodes a whole histogram chunk, appending to the vectors. Corruption -> error.
Status DecodeAllHistograms(std::string_view data, std::vector<int64_t>* ts, std::vector<model::FloatHistogram>* hs);

}  // namespace trainwatch::chunkenc
