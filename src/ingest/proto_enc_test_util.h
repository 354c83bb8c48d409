#pragma once
// A tiny protobuf encoder for building requests by hand in tests
// (remote_write_test.cc, otlp_test.cc).

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainwatch::ingest {

// Appends fields in the wire format; each returns *this to chain.
struct Enc {
  std::string b;
  Enc& Varint(uint64_t v) {
    while (v >= 0x80) {
      b += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    b += static_cast<char>(v);
    return *this;
  }
  Enc& Tag(uint32_t field, uint32_t wire) { return Varint((uint64_t{field} << 3) | wire); }
  Enc& Len(uint32_t field, std::string_view payload) {
    Tag(field, 2).Varint(payload.size());
    b += payload;
    return *this;
  }
  Enc& Fixed64(uint32_t field, uint64_t v) {
    Tag(field, 1);
    for (int i = 0; i < 8; i++) b += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  Enc& Double(uint32_t field, double v) { return Fixed64(field, std::bit_cast<uint64_t>(v)); }
  Enc& Fixed32(uint32_t field, uint32_t v) {
    Tag(field, 5);
    for (int i = 0; i < 4; i++) b += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
};

}  // namespace trainwatch::ingest
