#pragma once
// Internal: the dense codec (docs/format/chunks.md, "Dense chunks"), shared by
// dense.cc (decoder), dense_encode.cc (encoder), the iterator and tests.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::chunkenc::internal {

// Upper bound on samples in one dense chunk; larger counts are corruption.
// Bounds what a corrupt header can make a decoder allocate.
constexpr uint64_t kMaxDenseSamples = uint64_t{1} << 20;

// IntSeq residuals are packed in blocks of this many values.
constexpr size_t kDenseBlock = 128;

// Largest decimal exponent e (value mode 1) and |k| (value mode 3).
constexpr int kMaxExp = 18;
constexpr int64_t kMaxBinaryExp = 1100;

enum ValueMode : uint8_t { kValXor = 0, kValDecimal = 1, kValBits = 2, kValBinary = 3 };

// IntSeq header byte: bits 0-1 order, bit 2 has divisor, bit 3 packed,
// bit 4 adds 4 to the order (orders 4..7; chunks written before it exist
// use orders 0..3 only).
constexpr uint8_t kHasDivisor = 1 << 2;
constexpr uint8_t kPacked = 1 << 3;
constexpr uint8_t kOrderHigh = 1 << 4;
constexpr int kMaxOrder = 7;

// Block width byte: 0..64 = frame of reference with that bit width;
// kRiceBase + k (k = 0..kMaxRiceK) = Rice-coded block with parameter k.
constexpr uint8_t kRiceBase = 65;
constexpr int kMaxRiceK = 62;

constexpr double kPow10[kMaxExp + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};

// The decimal-mode decode formula; the encoder uses it to verify round trips.
inline double DecimalToDouble(int64_t m, int e) {
  return e == 0 ? static_cast<double>(m) : static_cast<double>(m) / kPow10[e];
}

// Appends the decoded samples. Corruption -> error (the vectors then hold
// unspecified extra elements).
Status DecodeDense(std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs);
// The number of samples of a dense chunk (its first field); 0 when that is
// malformed.
size_t DenseSamples(std::string_view data);
// Decodes into ts[0..n) and vs[0..n), n = DenseSamples(data) > 0.
Status DecodeDense(std::string_view data, int64_t* ts, double* vs);

// Like EncodeDense, but encodes every value mode and difference order and
// keeps the smallest (the pre-estimation encoder). For tests: EncodeDense
// must stay within a few bytes of it.
void EncodeDenseExhaustive(const int64_t* ts, const double* vs, size_t n, std::string* out);

// Value bits of n >= 1 values in the XOR value coding (64 for the first,
// then WriteXorValue's cost for each next one).
uint64_t XorValueBits(const double* vs, size_t n);

}  // namespace trainwatch::chunkenc::internal
