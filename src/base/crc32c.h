#pragma once
// CRC-32C (Castagnoli), as used by the WAL and on-disk blocks. Uses the SSE4.2
// instruction when the CPU has it, a table otherwise; both give equal results.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trainwatch::crc32c {

// Extends `crc` (the CRC of some prefix) with data[0, n).
uint32_t Extend(uint32_t crc, const char* data, size_t n);
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

}  // namespace trainwatch::crc32c
