// Delta head chunk (docs/format/chunks.md, "Delta"): Gorilla timestamps as
// in xor.cc; values as bucketed first or second differences of their decimal
// mantissa, with a fallback to XOR for the rest of the chunk.

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
#include "tsdb/chunkenc/delta_internal.h"

namespace trainwatch::chunkenc {

namespace {

// u16 sample count, u16 samples with regular timestamps (see Append).
constexpr size_t kHeaderSize = 4;
constexpr uint32_t kMaxSamples = 0xffff;

}  // namespace

DeltaChunk::DeltaChunk() {
  Grow(kHeaderSize);
  size_ = kHeaderSize;
  std::memset(buf_, 0, kHeaderSize);
}

DeltaChunk::~DeltaChunk() { std::free(buf_); }

DeltaChunk::DeltaChunk(const DeltaChunk& o)
    : t_(o.t_), t_delta_(o.t_delta_), m_(o.m_), d_(o.d_), bias_(o.bias_), xbias_(o.xbias_), n_(o.n_), reg_(o.reg_),
      kp_(o.kp_), xor_mode_(o.xor_mode_), e_(o.e_), leading_(o.leading_), trailing_(o.trailing_), bit_pos_(o.bit_pos_) {
  Grow(o.size_);
  std::memcpy(buf_, o.buf_, o.size_);
  size_ = o.size_;
}

DeltaChunk& DeltaChunk::operator=(const DeltaChunk& o) {
  if (this != &o) *this = DeltaChunk(o);
  return *this;
}

DeltaChunk::DeltaChunk(DeltaChunk&& o) noexcept
    : buf_(std::exchange(o.buf_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)),
      t_(o.t_), t_delta_(o.t_delta_), m_(o.m_), d_(o.d_), bias_(o.bias_), xbias_(o.xbias_), n_(o.n_), reg_(o.reg_),
      kp_(o.kp_), xor_mode_(o.xor_mode_), e_(o.e_), leading_(o.leading_), trailing_(o.trailing_), bit_pos_(o.bit_pos_) {}

DeltaChunk& DeltaChunk::operator=(DeltaChunk&& o) noexcept {
  if (this != &o) {
    std::free(buf_);
    buf_ = std::exchange(o.buf_, nullptr);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
    t_ = o.t_;
    t_delta_ = o.t_delta_;
    m_ = o.m_;
    d_ = o.d_;
    bias_ = o.bias_;
    xbias_ = o.xbias_;
    n_ = o.n_;
    reg_ = o.reg_;
    kp_ = o.kp_;
    xor_mode_ = o.xor_mode_;
    e_ = o.e_;
    leading_ = o.leading_;
    trailing_ = o.trailing_;
    bit_pos_ = o.bit_pos_;
  }
  return *this;
}

void DeltaChunk::Grow(size_t need) {
  CHECK(need <= UINT32_MAX, "BUG: DeltaChunk over 4 GiB");
  char* p = static_cast<char*>(std::realloc(buf_, need));
  CHECK(p != nullptr, "out of memory");
  buf_ = p;
  cap_ = static_cast<uint32_t>(std::min<size_t>(::malloc_usable_size(p), UINT32_MAX));
}

void DeltaChunk::GrowStep() { Grow(size_ + std::max<size_t>(16, size_ / 8)); }

std::string_view DeltaChunk::Bytes() const {
  buf_[0] = static_cast<char>(n_ >> 8);
  buf_[1] = static_cast<char>(n_ & 0xff);
  buf_[2] = static_cast<char>(reg_ >> 8);
  buf_[3] = static_cast<char>(reg_ & 0xff);
  return std::string_view(buf_, size_);
}

int64_t DeltaChunk::MinTime() const {
  // The first timestamp: a zigzag varint at the stream's start (written
  // byte-aligned).
  uint64_t u = 0;
  GetVarint64Ptr(buf_ + kHeaderSize, buf_ + size_, &u);
  return ZigZagDecode(u);
}

size_t DeltaChunk::MemoryBytes() const { return buf_ != nullptr ? ::malloc_usable_size(buf_) : 0; }

void DeltaChunk::Append(int64_t t, double v) {
  CHECK(n_ < kMaxSamples, "BUG: DeltaChunk::Append on a full chunk (65535 samples)");
  CHECK(n_ == 0 || t > t_, "BUG: DeltaChunk::Append with non-increasing timestamp");
  Buf b{this};
  internal::BitWriter<Buf> w(&b, &bit_pos_);
  // Timestamps: while they are regular (t_i = t_0 + i * (t_1 - t_0)), only
  // t_0 and the delta are written and reg_ counts the samples; from the
  // first other one, every sample's delta of delta. Exactly periodic
  // scrapes and remote writes cost no timestamp bits past the second.
  const bool regular = reg_ == n_;
  if (n_ == 0) {
    w.WriteUvarint(ZigZagEncode(t));
    reg_++;
  } else if (n_ == 1) {
    uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(t_);
    w.WriteUvarint(delta);
    t_delta_ = static_cast<int64_t>(delta);
    reg_++;
  } else if (regular && static_cast<uint64_t>(t) - static_cast<uint64_t>(t_) == static_cast<uint64_t>(t_delta_)) {
    reg_++;
  } else {
    uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(t_);
    int64_t dod = static_cast<int64_t>(delta - static_cast<uint64_t>(t_delta_));
    uint64_t udod = static_cast<uint64_t>(dod);
    if (dod == 0) {
      w.WriteBit(false);
    } else if (internal::FitsSignedBits(dod, 14)) {
      w.WriteBits((uint64_t{0b10} << 14) | (udod & 0x3fff), 16);
    } else if (internal::FitsSignedBits(dod, 17)) {
      w.WriteBits((uint64_t{0b110} << 17) | (udod & 0x1ffff), 20);
    } else if (internal::FitsSignedBits(dod, 20)) {
      w.WriteBits((uint64_t{0b1110} << 20) | (udod & 0xfffff), 24);
    } else {
      w.WriteBits(0b1111, 4);
      w.WriteBits(udod, 64);
    }
    t_delta_ = static_cast<int64_t>(delta);
  }

  const uint64_t vb = std::bit_cast<uint64_t>(v);
  int64_t m = 0;
  if (n_ == 0) {
    // Value 0: '0' + e + residual(m) starts decimal mode; '1' + 64 bits XOR mode.
    for (int e = 0; e <= internal::kMaxExp; e++) {
      if (internal::DecimalAt(v, e, &m)) {
        w.WriteBits(static_cast<uint64_t>(e), 1 + internal::kDeltaExpBits);  // leading '0'
        internal::WriteResidual(&w, m);
        m_ = m;
        d_ = 0;
        e_ = static_cast<uint8_t>(e);
        t_ = t;
        n_++;
        return;
      }
    }
    w.WriteBit(true);
    w.WriteBits(vb, 64);
    m_ = static_cast<int64_t>(vb);
    xor_mode_ = 1;
  } else {
    if (xor_mode_ == 0 && n_ >= internal::kDeltaMinSamplesBeforeXor && xbias_ > 0) {
      // XOR has been cheaper on this series: switch (no marker).
      m_ = static_cast<int64_t>(std::bit_cast<uint64_t>(internal::DecimalToDouble(m_, e_)));
      xor_mode_ = 1;
    }
    if (xor_mode_ != 0) {
      internal::WriteXorValue(&w, static_cast<uint64_t>(m_), vb, &leading_, &trailing_);
      m_ = static_cast<int64_t>(vb);
      t_ = t;
      n_++;
      return;
    }
    const uint64_t prev = std::bit_cast<uint64_t>(internal::DecimalToDouble(m_, e_));
    int cost = 0;
    bool ok = internal::DecimalAt(v, e_, &m);
    if (!ok) {
      // A finer decimal exponent (escape '0' + e), or XOR from here on
      // (escape '1' + XOR value against the previous value).
      for (int e = e_ + 1; e <= internal::kMaxExp; e++) {
        if (!internal::DecimalAt(v, e, &m)) continue;
        int64_t m2 = m_, d2 = d_;
        if (!internal::RescaleDecimal(&m2, &d2, e - e_)) break;
        internal::WriteRiceEscape(&w);
        w.WriteBits(static_cast<uint64_t>(e), 1 + internal::kDeltaExpBits);  // '0' + e
        cost = internal::kDeltaExpEscapeBits;
        m_ = m2;
        d_ = d2;
        e_ = static_cast<uint8_t>(e);
        ok = true;
        break;
      }
    }
    if (ok) {
      int64_t dm = internal::WrapSub(m, m_), dod = internal::WrapSub(dm, d_);
      const int64_t res = bias_ < 0 ? dod : dm;
      cost += internal::RiceBits(res, kp_);
      internal::WriteRice(&w, res, &kp_);
      bias_ = internal::UpdateBias(bias_, dm, dod);
      xbias_ = internal::ClampBias(xbias_ + cost - internal::XorValueCost(prev, vb, &leading_, &trailing_));
      d_ = dm;
      m_ = m;
    } else {
      internal::WriteRiceEscape(&w);
      w.WriteBit(true);
      internal::WriteXorValue(&w, prev, vb, &leading_, &trailing_);
      m_ = static_cast<int64_t>(vb);
      xor_mode_ = 1;
    }
  }
  t_ = t;
  n_++;
}

}  // namespace trainwatch::chunkenc
