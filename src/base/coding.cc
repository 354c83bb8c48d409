#include "base/coding.h"

namespace trainwatch {

void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, 4);
}

void PutFixed64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64(buf, v);
  dst->append(buf, 8);
}

char* EncodeVarint64(char* dst, uint64_t v) {
  auto* p = reinterpret_cast<unsigned char*>(dst);
  while (v >= 0x80) {
    *p++ = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<unsigned char>(v);
  return reinterpret_cast<char*>(p);
}

int VarintLength(uint64_t v) {
  int len = 1;
  while (v >= 0x80) {
    v >>= 7;
    len++;
  }
  return len;
}

void PutVarint32(std::string* dst, uint32_t v) { PutVarint64(dst, v); }

void PutVarint64(std::string* dst, uint64_t v) {
  char buf[10];
  char* end = EncodeVarint64(buf, v);
  dst->append(buf, end - buf);
}

void PutVarsint64(std::string* dst, int64_t v) { PutVarint64(dst, ZigZagEncode(v)); }

void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}

const char* GetVarint64PtrSlow(const char* p, const char* limit, uint64_t* v) {
  uint64_t result = 0;
  for (uint32_t shift = 0; shift <= 63 && p < limit; shift += 7) {
    uint64_t byte = static_cast<unsigned char>(*p++);
    if (shift == 63 && byte > 1) return nullptr;  // overflows 64 bits
    if (byte & 0x80) {
      result |= (byte & 0x7f) << shift;
    } else {
      result |= byte << shift;
      *v = result;
      return p;
    }
  }
  return nullptr;
}

const char* GetVarint32Ptr(const char* p, const char* limit, uint32_t* v) {
  uint64_t r;
  const char* q = GetVarint64Ptr(p, limit, &r);
  if (q == nullptr || r > UINT32_MAX) return nullptr;
  *v = static_cast<uint32_t>(r);
  return q;
}

bool GetFixed32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = DecodeFixed32(in->data());
  in->remove_prefix(4);
  return true;
}

bool GetFixed64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  *v = DecodeFixed64(in->data());
  in->remove_prefix(8);
  return true;
}

bool GetVarint64(std::string_view* in, uint64_t* v) {
  const char* end = in->data() + in->size();
  const char* q = GetVarint64Ptr(in->data(), end, v);
  if (q == nullptr) return false;
  in->remove_prefix(q - in->data());
  return true;
}

bool GetVarint32(std::string_view* in, uint32_t* v) {
  uint64_t r;
  if (!GetVarint64(in, &r) || r > UINT32_MAX) return false;
  *v = static_cast<uint32_t>(r);
  return true;
}

bool GetVarsint64(std::string_view* in, int64_t* v) {
  uint64_t r;
  if (!GetVarint64(in, &r)) return false;
  *v = ZigZagDecode(r);
  return true;
}

bool GetLengthPrefixed(std::string_view* in, std::string_view* out) {
  uint64_t len;
  if (!GetVarint64(in, &len) || len > in->size()) return false;
  *out = in->substr(0, len);
  in->remove_prefix(len);
  return true;
}

}  // namespace trainwatch
