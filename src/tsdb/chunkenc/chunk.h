#pragma once
// Chunk encodings. Head chunks use Gorilla's XOR scheme (delta-of-delta
// timestamps, XOR'd floats), appendable one sample at a time. Persisted blocks
// may use a denser, whole-chunk codec (see docs/format/chunks.md).
// Every encoding round-trips any float64 bit-exactly (NaN payloads incl. the
// stale marker, ±Inf, -0.0).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/sample.h"

namespace trainwatch::chunkenc {

namespace internal {
class BitReader;

// A dense chunk's samples, decoded whole (dense.cc): the arrays are reused
// from chunk to chunk and not zeroed before they are written.
struct DenseBuffer {
  std::unique_ptr<int64_t[]> t;
  std::unique_ptr<double[]> v, c;
  size_t tcap = 0, vcap = 0, ccap = 0, n = 0;
  Status Decode(std::string_view data);
  // Into c: the values of another dense chunk of the n points just decoded
  // (a tier block's count part beside its value part); its timestamps are
  // skipped, their number checked.
  Status DecodeCounts(std::string_view data);
};
}  // namespace internal

enum class Encoding : uint8_t {
  kXor = 1,    // Gorilla, appendable
  kDense = 2,  // whole-chunk codec for persisted blocks
  // Delta chunks as written before 2026-12-08 (every timestamp's bits,
  // class-coded residuals): read only, from chunk logs written then.
  kDelta1 = 3,
  // Float native histograms (tsdb/chunkenc/histogram.h): appendable, in the
  // head, the chunk log and blocks. Iterator and DecodeAll refuse it
  // (NotSupported): FloatHistogramIterator reads it.
  kFloatHistogram = 4,
  // Another chunk with its samples' start timestamps (tsdb/chunkenc/st.h).
  // Iterator and DecodeAll read the chunk inside and ignore them.
  kStartTimes = 5,
  // Several chunks of the same samples, one per value ("part": a tier
  // block's min, max, sum, count and last; tsdb/chunkenc/parts.h). Iterator
  // and DecodeAll refuse it (NotSupported): UnwrapPart takes one out.
  kParts = 6,
  // Appendable, decimal-aware: the head's open chunks, and closed ones that
  // the dense codec does not make smaller (head and chunk log only).
  kDelta = 7,
};

inline bool IsHistogramEncoding(Encoding e) { return e == Encoding::kFloatHistogram; }
inline bool IsDeltaEncoding(Encoding e) { return e == Encoding::kDelta || e == Encoding::kDelta1; }

// An appendable Gorilla XOR chunk held in memory. Not thread-safe; the head
// guards each series with its own lock.
// Layout: see docs/format/chunks.md. Bytes() is a complete, decodable chunk at
// any point between appends.
class XorChunk {
 public:
  XorChunk();
  ~XorChunk();
  XorChunk(const XorChunk& o);
  XorChunk& operator=(const XorChunk& o);
  XorChunk(XorChunk&& o) noexcept;
  XorChunk& operator=(XorChunk&& o) noexcept;
  // REQUIRES: t is greater than the last appended timestamp.
  void Append(int64_t t, double v);
  uint32_t NumSamples() const;
  std::string_view Bytes() const;
  size_t MemoryBytes() const;  // heap bytes held
  int64_t MinTime() const;     // REQUIRES: NumSamples() > 0
  int64_t MaxTime() const;     // last appended timestamp
  // Releases spare capacity after the chunk is closed.
  void Shrink();

 private:
  // The buffer as BitWriter sees it: bytes appended one at a time, within
  // capacity reserved beforehand.
  struct Buf {
    XorChunk* c;
    void push_back(char ch) { c->buf_[c->size_++] = ch; }
    char& back() { return c->buf_[c->size_ - 1]; }
  };
  void Grow(size_t need);

  // Header (sample count) + bitstream in one malloc'ed buffer (no separate
  // std::string object: the head keeps one open chunk per series). The
  // header is written by Bytes(), not by Append: appends then touch only the
  // tail of the buffer, one cache miss less per sample in a big head.
  char* buf_ = nullptr;
  uint32_t size_ = 0, cap_ = 0;
  // Appender state.
  int64_t t_ = 0, t_delta_ = 0, t_first_ = 0;
  uint64_t v_bits_ = 0;
  uint16_t n_ = 0;  // samples appended
  uint8_t leading_ = 0xff, trailing_ = 0;
  uint8_t bit_pos_ = 0;  // bits used in the last byte (0 = byte full / none)
};

// An appendable chunk for the head's open chunks (Encoding::kDelta, layout in
// docs/format/chunks.md): Gorilla timestamps; values that are decimals
// (m / 10^e, bit-exact) coded as bucketed differences of the integer m, of
// first or second order as has been cheaper so far in the chunk; anything
// else falls back to Gorilla XOR for the rest of the chunk. About half of
// XOR's bytes on integer and few-decimal metrics, the same on full-precision
// floats. Not thread-safe.
class DeltaChunk {
 public:
  static constexpr Encoding kEncoding = Encoding::kDelta;
  DeltaChunk();
  ~DeltaChunk();
  DeltaChunk(const DeltaChunk& o);
  DeltaChunk& operator=(const DeltaChunk& o);
  DeltaChunk(DeltaChunk&& o) noexcept;
  DeltaChunk& operator=(DeltaChunk&& o) noexcept;
  // REQUIRES: t is greater than the last appended timestamp.
  void Append(int64_t t, double v);
  // Room for `bytes` of encoding without growing: Append grows in small
  // steps (a head keeps an open chunk per series), which costs a realloc
  // every few samples where a whole chunk is written at once (WAL replay).
  void Reserve(size_t bytes) {
    if (bytes > cap_) Grow(bytes);
  }
  uint32_t NumSamples() const { return n_; }
  std::string_view Bytes() const;
  size_t MemoryBytes() const;  // heap bytes held
  int64_t MinTime() const;                       // REQUIRES: NumSamples() > 0
  int64_t MaxTime() const { return t_; }        // last appended timestamp

 private:
  // The bit writer's sink: grows the buffer when a byte would not fit, in
  // steps of an eighth (at least 16 bytes), so a chunk holds no headroom for
  // a worst-case sample and reallocates every 7-15 samples, not 4-12.
  struct Buf {
    DeltaChunk* c;
    void push_back(char ch) {
      if (c->size_ == c->cap_) [[unlikely]] c->GrowStep();
      c->buf_[c->size_++] = ch;
    }
    char& back() { return c->buf_[c->size_ - 1]; }
  };
  void Grow(size_t need);
  void GrowStep();

  char* buf_ = nullptr;  // u16 count, u16 regular timestamps, bitstream
  uint32_t size_ = 0, cap_ = 0;
  int64_t t_ = 0, t_delta_ = 0;
  // Value state. Decimal mode: m_ = previous mantissa, d_ = previous
  // difference, bias_ = cost(second order) - cost(first order) so far.
  // XOR mode: m_ holds the previous value's bits.
  // xbias_ = bits spent in decimal mode - bits XOR would have spent (a
  // shadow XOR window in leading_/trailing_ is kept up to date).
  int64_t m_ = 0, d_ = 0;
  int32_t bias_ = 0, xbias_ = 0;
  uint16_t n_ = 0;
  uint16_t reg_ = 0;  // leading samples with regular timestamps (no bits past the second)
  uint16_t kp_ = 0;   // the Rice parameter's state (delta_internal.h)
  uint8_t xor_mode_ = 0, e_ = 0;
  uint8_t leading_ = 0xff, trailing_ = 0;
  uint8_t bit_pos_ = 0;
};

// Decodes any chunk (XOR, dense or delta), forward only, with a sticky error.
class Iterator {
 public:
  Iterator() = default;
  // `data` must outlive the iterator.
  Iterator(Encoding enc, std::string_view data);
  void Reset(Encoding enc, std::string_view data);
  // Advances; false at end or on corrupt data (then Err() is not OK).
  bool Next();
  // Advances to the first sample with timestamp >= t; false if none.
  bool Seek(int64_t t);
  int64_t t() const { return t_; }
  double v() const { return v_; }
  const Status& Err() const { return err_; }
  // Appends the current sample and those after it with t <= maxt, stopping
  // on the first one after maxt; false when the chunk ran out (or on corrupt
  // data). REQUIRES: on a sample (the last Next or Seek returned true).
  bool AppendUntil(int64_t maxt, std::vector<model::Sample>* out) { return AppendCountedUntil(maxt, out, nullptr); }

  // As Reset, each sample with a count from `counts`, another chunk of the
  // same points (a tier block's count part beside its value part). Two
  // dense chunks: the counts' timestamps are skipped, their number checked;
  // others are decoded whole and their timestamps compared. Unequal is
  // Corruption.
  void ResetCounted(Encoding enc, std::string_view data, Encoding counts_enc, std::string_view counts);
  // The current sample's count. REQUIRES: ResetCounted, on a sample.
  double count() const { return counts_[i_ - 1]; }
  // As AppendUntil, with each sample's count appended to *counts when that
  // is not null. REQUIRES: ResetCounted when it is not.
  bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts);

 private:
  bool NextXor();
  bool NextDelta();
  bool FinishDelta(const internal::BitReader& r);
  bool Fail(const char* what);  // sets a corruption error, returns false

  // implementation-defined state
  Encoding enc_ = Encoding::kXor;
  std::string_view data_;
  uint64_t pos_ = 0;  // bit position for XOR; index for dense
  uint32_t n_ = 0, i_ = 0;
  int64_t t_ = 0, t_delta_ = 0;
  double v_ = 0;
  uint64_t v_bits_ = 0;
  uint8_t leading_ = 0, trailing_ = 0;
  bool valid_ = false;  // the current sample (t_, v_) is valid
  // Delta chunks' value state (see DeltaChunk).
  bool xor_mode_ = false;
  uint8_t e_ = 0;
  int32_t bias_ = 0, xbias_ = 0;
  uint32_t reg_ = 0;  // samples with regular timestamps
  uint16_t kp_ = 0;   // the Rice parameter's state
  int64_t m_ = 0, d_ = 0;
  internal::DenseBuffer dense_;
  // A dense chunk's samples: dense_'s, or other_'s (ResetCounted of chunks
  // that are not both dense).
  const int64_t* dt_ = nullptr;
  const double* dv_ = nullptr;
  const double* counts_ = nullptr;  // ResetCounted: a count a sample
  struct {
    std::vector<int64_t> t, ct;
    std::vector<double> v, c;
  } other_;
  Status err_;
};

// Encodes samples (REQUIRES: strictly increasing timestamps, n >= 1) with the
// dense codec for persisted blocks. Appends to *out.
void EncodeDense(const int64_t* ts, const double* vs, size_t n, std::string* out);
// What the dense encoder chose for a chunk (timestamp order, value mode and
// order) in a byte, to encode the next chunks of the same series without its
// search: a series' data keeps its character from chunk to chunk.
struct DenseChoice {
  uint8_t bits = 0;  // 0: none yet
};
// How much of the encoder's search EncodeDenseLike does: none (the choices
// as they are), the values' difference order (the timestamps' order and the
// value mode kept: a choice from another series of the same metric), all.
enum class DenseSearch : uint8_t { kNone, kOrders, kAll };
// EncodeDense, but searching only as `search` says when *choice holds
// choices that fit the values (the mode's conversion succeeds), all of it
// otherwise. Keeps what it chose in *choice. Valid dense chunks either way;
// with choices made for other samples, a few percent larger.
void EncodeDenseLike(const int64_t* ts, const double* vs, size_t n, std::string* out, DenseChoice* choice,
                     DenseSearch search);
// Encodes with Gorilla XOR in one go (same bytes as XorChunk).
void EncodeXor(const int64_t* ts, const double* vs, size_t n, std::string* out);

// Decodes a whole chunk into the vectors (appending). Corruption -> error.
Status DecodeAll(Encoding enc, std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs);

}  // namespace trainwatch::chunkenc
