// Gorilla XOR head chunk. Layout (docs/format/chunks.md): 2-byte big-endian
// sample count, then a MSB-first bitstream: t0 as zigzag varint, v0 as 64
// bits; t1-t0 as uvarint, v1 XOR'd; then per sample a delta-of-delta bucket
// ('0' | '10'+14 | '110'+17 | '1110'+20 | '1111'+64 bits) and an XOR'd value.

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::chunkenc {

namespace {

constexpr size_t kHeaderSize = 2;
constexpr uint32_t kMaxXorSamples = 0xffff;
// Worst case bits per sample: dod '1111'+64 plus value '11'+5+6+64 = 145.
constexpr size_t kMaxSampleBytes = 19;

uint64_t DoubleBits(double v) { return std::bit_cast<uint64_t>(v); }

// |x| < 2^(nbits-1): the range that this reader (two's complement,
// -2^(n-1)..2^(n-1)-1) and Prometheus's (-(2^(n-1)-1)..2^(n-1)) decode
// alike, so the chunks we write are Prometheus XOR chunks bit for bit in
// meaning (remote read sends them as they are).
bool FitsSigned(int64_t x, int nbits) {
  int64_t lim = int64_t{1} << (nbits - 1);
  return x > -lim && x < lim;
}

}  // namespace

XorChunk::XorChunk() { Grow(kHeaderSize); size_ = kHeaderSize; buf_[0] = buf_[1] = 0; }

XorChunk::~XorChunk() { std::free(buf_); }

XorChunk::XorChunk(const XorChunk& o)
    : t_(o.t_), t_delta_(o.t_delta_), t_first_(o.t_first_), v_bits_(o.v_bits_), n_(o.n_), leading_(o.leading_),
      trailing_(o.trailing_), bit_pos_(o.bit_pos_) {
  Grow(o.size_);
  std::memcpy(buf_, o.buf_, o.size_);
  size_ = o.size_;
}

XorChunk& XorChunk::operator=(const XorChunk& o) {
  if (this != &o) *this = XorChunk(o);
  return *this;
}

XorChunk::XorChunk(XorChunk&& o) noexcept
    : buf_(std::exchange(o.buf_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)),
      t_(o.t_), t_delta_(o.t_delta_), t_first_(o.t_first_), v_bits_(o.v_bits_), n_(o.n_), leading_(o.leading_),
      trailing_(o.trailing_), bit_pos_(o.bit_pos_) {}

XorChunk& XorChunk::operator=(XorChunk&& o) noexcept {
  if (this != &o) {
    std::free(buf_);
    buf_ = std::exchange(o.buf_, nullptr);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
    t_ = o.t_;
    t_delta_ = o.t_delta_;
    t_first_ = o.t_first_;
    v_bits_ = o.v_bits_;
    n_ = o.n_;
    leading_ = o.leading_;
    trailing_ = o.trailing_;
    bit_pos_ = o.bit_pos_;
  }
  return *this;
}

// Grows the buffer to hold at least `need` bytes, using all of what malloc
// hands out (its size classes round up anyway).
void XorChunk::Grow(size_t need) {
  CHECK(need <= UINT32_MAX, "BUG: XorChunk over 4 GiB");
  char* p = static_cast<char*>(std::realloc(buf_, need));
  CHECK(p != nullptr, "out of memory");
  buf_ = p;
  cap_ = static_cast<uint32_t>(std::min<size_t>(::malloc_usable_size(p), UINT32_MAX));
}

uint32_t XorChunk::NumSamples() const { return n_; }

std::string_view XorChunk::Bytes() const {
  buf_[0] = static_cast<char>(n_ >> 8);
  buf_[1] = static_cast<char>(n_ & 0xff);
  return std::string_view(buf_, size_);
}

size_t XorChunk::MemoryBytes() const { return buf_ != nullptr ? ::malloc_usable_size(buf_) : 0; }

int64_t XorChunk::MinTime() const { return t_first_; }
int64_t XorChunk::MaxTime() const { return t_; }

void XorChunk::Shrink() {
  if (cap_ > size_) Grow(size_);
}

void XorChunk::Append(int64_t t, double v) {
  uint32_t n = NumSamples();
  CHECK(n < kMaxXorSamples, "BUG: XorChunk::Append on a full chunk (65535 samples)");
  CHECK(n == 0 || t > t_, "BUG: XorChunk::Append with non-increasing timestamp");
  // Grow in small steps (~1/16) instead of doubling: the head keeps one open
  // chunk per series. realloc often extends in place.
  if (cap_ < size_ + kMaxSampleBytes) Grow(size_ + kMaxSampleBytes + std::max<size_t>(8, size_ / 16));
  Buf b{this};
  internal::BitWriter<Buf> w(&b, &bit_pos_);
  uint64_t vb = DoubleBits(v);
  if (n == 0) {
    w.WriteUvarint(ZigZagEncode(t));
    w.WriteBits(vb, 64);
    t_first_ = t;
  } else if (n == 1) {
    uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(t_);
    w.WriteUvarint(delta);
    internal::WriteXorValue(&w, v_bits_, vb, &leading_, &trailing_);
    t_delta_ = static_cast<int64_t>(delta);
  } else {
    uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(t_);
    int64_t dod = static_cast<int64_t>(delta - static_cast<uint64_t>(t_delta_));
    uint64_t udod = static_cast<uint64_t>(dod);
    if (dod == 0) {
      w.WriteBit(false);
    } else if (FitsSigned(dod, 14)) {
      w.WriteBits(0b10, 2);
      w.WriteBits(udod & ((uint64_t{1} << 14) - 1), 14);
    } else if (FitsSigned(dod, 17)) {
      w.WriteBits(0b110, 3);
      w.WriteBits(udod & ((uint64_t{1} << 17) - 1), 17);
    } else if (FitsSigned(dod, 20)) {
      w.WriteBits(0b1110, 4);
      w.WriteBits(udod & ((uint64_t{1} << 20) - 1), 20);
    } else {
      w.WriteBits(0b1111, 4);
      w.WriteBits(udod, 64);
    }
    internal::WriteXorValue(&w, v_bits_, vb, &leading_, &trailing_);
    t_delta_ = static_cast<int64_t>(delta);
  }
  t_ = t;
  v_bits_ = vb;
  n_ = static_cast<uint16_t>(n + 1);
}

void EncodeXor(const int64_t* ts, const double* vs, size_t n, std::string* out) {
  CHECK(n <= kMaxXorSamples, "BUG: EncodeXor with more than 65535 samples");
  XorChunk c;
  for (size_t i = 0; i < n; i++) c.Append(ts[i], vs[i]);
  out->append(c.Bytes());
}

}  // namespace trainwatch::chunkenc
