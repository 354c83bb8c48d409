#pragma once
// Fast non-cryptographic 64-bit hashing (wyhash-style mixing) for series
// label sets and symbol tables. Not stable across versions: never persist it.

#include <cstdint>
#include <cstring>
#include <string_view>

namespace trainwatch {

inline uint64_t HashMix(uint64_t a, uint64_t b) {
  __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t HashBytes(const char* p, size_t n, uint64_t seed = 0x9e3779b97f4a7c15ull) {
  constexpr uint64_t k1 = 0xa0761d6478bd642full, k2 = 0xe7037ed1a0b428dbull;
  uint64_t h = seed ^ (n * k1);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = HashMix(h ^ w, k2);
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  if (n > 0) std::memcpy(&tail, p, n);
  return HashMix(h ^ tail ^ k1, k2 ^ n);
}

inline uint64_t HashString(std::string_view s, uint64_t seed = 0x9e3779b97f4a7c15ull) {
  return HashBytes(s.data(), s.size(), seed);
}

}  // namespace trainwatch
