// Gorilla XOR head chunk. Layout (docs/format/chunks.md): 2-byte big-endian
// sample count, then a MSB-first bitstream: t0 as zigzag varint, v0 as 64
// bits; t1-t0 as uvarint, v1 XOR'd; then per sample a delta-of-delta bucket
// ('0' | '10'+14 | '110'+17 | '1110'+20 | '1111'+64 bits) and an XOR'd value.

#include <algorithm>
#include <bit>
#include <cstring>

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

bool FitsSigned(int64_t x, int nbits) {
  int64_t lim = int64_t{1} << (nbits - 1);
  return x >= -lim && x < lim;
}

}  // namespace

XorChunk::XorChunk() { b_.assign(kHeaderSize, '\0'); }

uint32_t XorChunk::NumSamples() const { return n_; }

std::string_view XorChunk::Bytes() const {
  b_[0] = static_cast<char>(n_ >> 8);
  b_[1] = static_cast<char>(n_ & 0xff);
  return b_;
}

size_t XorChunk::MemoryBytes() const {
  // libstdc++ keeps up to 15 bytes inline; above that the heap block holds
  // capacity()+1 bytes.
  return b_.capacity() > 15 ? b_.capacity() + 1 : 0;
}

int64_t XorChunk::MinTime() const { return t_first_; }
int64_t XorChunk::MaxTime() const { return t_; }

void XorChunk::Shrink() {
  if (b_.capacity() > b_.size() && b_.capacity() > 15) {
    std::string exact(b_);  // a fresh copy is allocated at exactly size()
    b_.swap(exact);
  }
}

void XorChunk::Append(int64_t t, double v) {
  uint32_t n = NumSamples();
  CHECK(n < kMaxXorSamples, "BUG: XorChunk::Append on a full chunk (65535 samples)");
  CHECK(n == 0 || t > t_, "BUG: XorChunk::Append with non-increasing timestamp");
  // Grow in small steps (~1/8) instead of std::string's doubling: the head
  // keeps one open chunk per series.
  if (b_.capacity() < b_.size() + kMaxSampleBytes) {
    size_t cap = b_.size() + kMaxSampleBytes + std::max<size_t>(32, b_.size() / 8);
    std::string grown;
    grown.reserve(cap);
    grown.append(b_);
    b_.swap(grown);
  }
  internal::BitWriter w(&b_, &bit_pos_);
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
