#pragma once
// Little-endian fixed-width and LEB128 varint encoding, leveldb style.
// Decoders take a [p, limit) range and return nullptr when the input is short
// or malformed; they never read past `limit`.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace trainwatch {

inline void EncodeFixed32(char* dst, uint32_t v) { std::memcpy(dst, &v, 4); }
inline void EncodeFixed64(char* dst, uint64_t v) { std::memcpy(dst, &v, 8); }
inline uint32_t DecodeFixed32(const char* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t DecodeFixed64(const char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

void PutFixed32(std::string* dst, uint32_t v);
void PutFixed64(std::string* dst, uint64_t v);
void PutVarint32(std::string* dst, uint32_t v);
void PutVarint64(std::string* dst, uint64_t v);
// Zig-zag signed varint.
void PutVarsint64(std::string* dst, int64_t v);
// Varint length followed by the bytes.
void PutLengthPrefixed(std::string* dst, std::string_view s);

// Writes a varint to dst (at least 10 bytes) and returns one past its end.
char* EncodeVarint64(char* dst, uint64_t v);
int VarintLength(uint64_t v);

const char* GetVarint32Ptr(const char* p, const char* limit, uint32_t* v);
const char* GetVarint64PtrSlow(const char* p, const char* limit, uint64_t* v);
// Inline for the one-byte case (most deltas and symbol ids): a call per
// varint was a fifth of decoding an index's series blocks.
inline const char* GetVarint64Ptr(const char* p, const char* limit, uint64_t* v) {
  if (p < limit && (static_cast<unsigned char>(*p) & 0x80) == 0) {
    *v = static_cast<unsigned char>(*p);
    return p + 1;
  }
  return GetVarint64PtrSlow(p, limit, v);
}

inline uint64_t ZigZagEncode(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t ZigZagDecode(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Cursor-style decoding over a string_view: each Get* consumes from *in and
// returns false (leaving *in unspecified) when the input is short or malformed.
bool GetFixed32(std::string_view* in, uint32_t* v);
bool GetFixed64(std::string_view* in, uint64_t* v);
bool GetVarint32(std::string_view* in, uint32_t* v);
bool GetVarint64(std::string_view* in, uint64_t* v);
bool GetVarsint64(std::string_view* in, int64_t* v);
bool GetLengthPrefixed(std::string_view* in, std::string_view* out);

}  // namespace trainwatch
