#pragma once
// The protobuf wire format written without generated code, the counterpart
// of proto_reader.h: fields are appended to a string in the order called.
// A nested message is written into its own ProtoWriter and added with
// Message(), which prefixes its length.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/coding.h"

namespace trainwatch {

class ProtoWriter {
 public:
  void Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    PutVarint64(&out_, v);
  }
  void Int64(uint32_t field, int64_t v) { Varint(field, static_cast<uint64_t>(v)); }
  // sint32/sint64: zigzag-encoded.
  void SInt(uint32_t field, int64_t v) {
    Varint(field, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Double(uint32_t field, double v) {
    Tag(field, 1);
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    PutFixed64(&out_, bits);
  }
  void Bytes(uint32_t field, std::string_view v) {
    Tag(field, 2);
    PutVarint64(&out_, v.size());
    out_.append(v);
  }
  void Message(uint32_t field, const ProtoWriter& m) { Bytes(field, m.out_); }
  // A packed repeated double field (nothing when empty).
  template <typename Range>
  void PackedDoubles(uint32_t field, const Range& vs) {
    if (vs.empty()) return;
    Tag(field, 2);
    PutVarint64(&out_, 8 * vs.size());
    for (double v : vs) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      PutFixed64(&out_, bits);
    }
  }

  const std::string& data() const { return out_; }
  std::string&& Release() { return std::move(out_); }

 private:
  void Tag(uint32_t field, uint32_t wire) { PutVarint64(&out_, (uint64_t{field} << 3) | wire); }
  std::string out_;
};

}  // namespace trainwatch
