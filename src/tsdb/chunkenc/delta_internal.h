#pragma once
// Internal: the value coding of delta chunks (docs/format/chunks.md,
// "Delta"), shared by DeltaChunk (delta.cc) and the iterator.

#include <algorithm>
#include <bit>
#include <cstdint>

#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/dense_internal.h"

namespace trainwatch::chunkenc::internal {

// Mantissas stay below 2^kDeltaMantissaBits in magnitude (differences below
// twice that), so first and second differences fit in int64. Values needing
// more digits (full-precision floats) cost less as XOR.
#ifndef TW_DELTA_MANTISSA_BITS
#define TW_DELTA_MANTISSA_BITS 50
#endif
constexpr int kDeltaMantissaBits = TW_DELTA_MANTISSA_BITS;
constexpr int64_t kDeltaMantissaMax = int64_t{1} << kDeltaMantissaBits;
constexpr double kDeltaMantissaLimit = static_cast<double>(kDeltaMantissaMax);
constexpr int64_t kDeltaDiffLimit = int64_t{2} << kDeltaMantissaBits;
constexpr int kDeltaExpBits = 5;
// bias = cost(second order) - cost(first order), clamped to +-kDeltaBiasLimit.
constexpr int32_t kDeltaBiasLimit = 1 << 20;
constexpr int64_t kPow10Int[kMaxExp + 1] = {1,
                                           10,
                                           100,
                                           1000,
                                           10000,
                                           100000,
                                           1000000,
                                           10000000,
                                           100000000,
                                           1000000000,
                                           10000000000,
                                           100000000000,
                                           1000000000000,
                                           10000000000000,
                                           100000000000000,
                                           1000000000000000,
                                           10000000000000000,
                                           100000000000000000,
                                           1000000000000000000};

inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

// v == m / 10^e bit-exactly (the dense codec's decimal formula), |m| < 2^kDeltaMantissaBits.
inline bool DecimalAt(double v, int e, int64_t* m) {
  double x = v * kPow10[e];
  if (!(x > -kDeltaMantissaLimit && x < kDeltaMantissaLimit)) return false;  // also NaN, Inf
  int64_t r = static_cast<int64_t>(x < 0 ? x - 0.5 : x + 0.5);
  if (std::bit_cast<uint64_t>(DecimalToDouble(r, e)) != std::bit_cast<uint64_t>(v)) return false;
  *m = r;
  return true;
}

// Multiplies the mantissa state by 10^by; false when it would leave the bounds.
inline bool RescaleDecimal(int64_t* m, int64_t* d, int by) {
  if (by <= 0 || by > kMaxExp) return false;
  const int64_t f = kPow10Int[by];
  int64_t m2, d2;
  if (__builtin_mul_overflow(*m, f, &m2) || __builtin_mul_overflow(*d, f, &d2)) return false;
  if (m2 <= -kDeltaMantissaMax || m2 >= kDeltaMantissaMax || d2 <= -kDeltaDiffLimit || d2 >= kDeltaDiffLimit) {
    return false;
  }
  *m = m2;
  *d = d2;
  return true;
}

inline bool FitsSignedBits(int64_t x, int nbits) {
  int64_t lim = int64_t{1} << (nbits - 1);
  return x >= -lim && x < lim;
}

// Residual classes: k one bits, a zero bit, then kResidualWidth[k] bits of
// two's complement (none for k = 0: the residual is 0). Eight one bits are
// the escape.
constexpr int kResidualClasses = 8;
constexpr int kResidualWidth[kResidualClasses] = {0, 4, 8, 12, 17, 24, 32, 64};

inline int ResidualClass(int64_t x) {
  if (x == 0) return 0;
  int k = 1;
  while (k < kResidualClasses - 1 && !FitsSignedBits(x, kResidualWidth[k])) k++;
  return k;
}

inline int ResidualBits(int64_t x) {
  int k = ResidualClass(x);
  return k + 1 + kResidualWidth[k];
}

template <typename W>
inline void WriteResidual(W* w, int64_t x) {
  const int k = ResidualClass(x);
  const uint64_t prefix = ((uint64_t{1} << k) - 1) << 1;  // k ones, then a zero
  const int width = kResidualWidth[k];
  if (width == 0) {
    w->WriteBits(prefix, k + 1);
  } else if (k + 1 + width <= 64) {
    w->WriteBits((prefix << width) | (static_cast<uint64_t>(x) & ((uint64_t{1} << width) - 1)), k + 1 + width);
  } else {
    w->WriteBits(prefix, k + 1);
    w->WriteBits(static_cast<uint64_t>(x), width);
  }
}

template <typename W>
inline void WriteEscape(W* w) {
  w->WriteBits((uint64_t{1} << kResidualClasses) - 1, kResidualClasses);
}

inline int32_t ClampBias(int32_t b) {
  return b < -kDeltaBiasLimit ? -kDeltaBiasLimit : (b > kDeltaBiasLimit ? kDeltaBiasLimit : b);
}

inline int32_t UpdateBias(int32_t bias, int64_t first, int64_t second) {
  return ClampBias(bias + ResidualBits(second) - ResidualBits(first));
}

// Residuals after the first value: adaptive Rice codes. z = zigzag(r);
// with k = RiceK(kp), q = z >> k: q one bits, a zero bit, then z's low k
// bits, while q < kRiceQMax; else kRiceQMax one bits and the residual as a
// class code above (whose escape is then the chunk's escape). kp, the
// state, follows a moving average of z's bit length in eighths of a bit
// (RiceAdapt), so k tracks the residuals' magnitude: Rice codes cost about
// log2 of the typical residual plus 1.5 bits, where the classes round up
// to their next width and spend a unary class on top (a 9-bit residual
// took 16 bits).
constexpr int kRiceQMax = 20;
constexpr int kRiceKMax = 56;
// What an exponent change costs in bits (the escape, '0', e): xbias counts
// it against decimal mode.
constexpr int kDeltaExpEscapeBits = kRiceQMax + kResidualClasses + 1 + kDeltaExpBits;

inline int RiceK(uint16_t kp) { return std::min(kp >> 3, kRiceKMax); }

// kp moves a quarter of the way to 8 x bitlen(z); all the way after a
// residual too large for a Rice code. (On the peers workload, a quarter
// beat a half and an eighth, and k = bitlen's average beat it minus a half
// or plus a half: 1.606 B a sample against 1.616-1.645.)
inline uint16_t RiceJump(uint64_t z) { return static_cast<uint16_t>(8 * std::bit_width(z)); }
inline uint16_t RiceAdapt(uint16_t kp, uint64_t z) {
  const int next = kp + ((RiceJump(z) - kp) >> 2);
  return static_cast<uint16_t>(next < 0 ? 0 : next);
}

inline int RiceBits(int64_t x, uint16_t kp) {
  const uint64_t z = ZigZagEncode(x);
  const int k = RiceK(kp);
  const uint64_t q = z >> k;
  return q < kRiceQMax ? static_cast<int>(q) + 1 + k : kRiceQMax + ResidualBits(x);
}

// Writes residual x and adapts *kp.
template <typename W>
inline void WriteRice(W* w, int64_t x, uint16_t* kp) {
  const uint64_t z = ZigZagEncode(x);
  const int k = RiceK(*kp);
  const uint64_t q = z >> k;
  if (q >= kRiceQMax) {
    w->WriteBits((uint64_t{1} << kRiceQMax) - 1, kRiceQMax);
    WriteResidual(w, x);
    *kp = RiceJump(z);
    return;
  }
  const int qn = static_cast<int>(q);
  const uint64_t prefix = ((uint64_t{1} << qn) - 1) << 1;  // q ones, then a zero
  const uint64_t low = k == 0 ? 0 : z & ((uint64_t{1} << k) - 1);
  if (qn + 1 + k <= 64) {
    w->WriteBits((prefix << k) | low, qn + 1 + k);
  } else {
    w->WriteBits(prefix, qn + 1);
    w->WriteBits(low, k);
  }
  *kp = RiceAdapt(*kp, z);
}

template <typename W>
inline void WriteRiceEscape(W* w) {
  w->WriteBits((uint64_t{1} << kRiceQMax) - 1, kRiceQMax);
  WriteEscape(w);
}

// Decimal mode turns into XOR mode (with no marker: both sides decide alike)
// before a value once at least this many values were coded and XOR would
// have cost fewer bits so far (xbias > 0).
constexpr uint32_t kDeltaMinSamplesBeforeXor = 8;

// Reads a residual (returns 1) or an escape (returns 0); -1 on short input.
inline int ReadResidual(BitReader* r, int64_t* x) {
  int k = 0;
  for (; k < kResidualClasses; k++) {
    bool bit;
    if (!r->ReadBit(&bit)) return -1;
    if (!bit) break;
  }
  if (k == kResidualClasses) return 0;
  const int width = kResidualWidth[k];
  if (width == 0) {
    *x = 0;
    return 1;
  }
  uint64_t raw;
  if (!r->ReadBits(width, &raw)) return -1;
  if (width == 64) {
    *x = static_cast<int64_t>(raw);
  } else {
    uint64_t sign = uint64_t{1} << (width - 1);
    *x = static_cast<int64_t>((raw ^ sign) - sign);
  }
  return 1;
}

// Reads a Rice-coded residual and adapts *kp (returns 1), or an escape
// (returns 0); -1 on short input.
inline int ReadRice(BitReader* r, int64_t* x, uint16_t* kp) {
  int q = 0;
  for (; q < kRiceQMax; q++) {
    bool bit;
    if (!r->ReadBit(&bit)) return -1;
    if (!bit) break;
  }
  if (q == kRiceQMax) {
    const int got = ReadResidual(r, x);
    if (got == 1) *kp = RiceJump(ZigZagEncode(*x));
    return got;
  }
  const int k = RiceK(*kp);
  uint64_t low = 0;
  if (k > 0 && !r->ReadBits(k, &low)) return -1;
  const uint64_t z = (static_cast<uint64_t>(q) << k) | low;
  *x = ZigZagDecode(z);
  *kp = RiceAdapt(*kp, z);
  return 1;
}

}  // namespace trainwatch::chunkenc::internal
