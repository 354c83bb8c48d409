#pragma once
// Samples and the special float values the TSDB must keep bit-exact.

#include <cstdint>
#include <cstring>

namespace trainwatch::model {

struct Sample {
  int64_t t = 0;  // unix milliseconds
  double v = 0;
};

// Prometheus's staleness marker: a NaN with this exact bit pattern.
inline constexpr uint64_t kStaleNaNBits = 0x7ff0000000000002ull;

inline double StaleNaN() {
  double d;
  std::memcpy(&d, &kStaleNaNBits, 8);
  return d;
}

inline bool IsStaleNaN(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b == kStaleNaNBits;
}

inline constexpr int64_t kMinTime = INT64_MIN / 2;
inline constexpr int64_t kMaxTime = INT64_MAX / 2;

}  // namespace trainwatch::model
