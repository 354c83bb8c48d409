#pragma once
// Internal: big-endian (MSB-first) bit streams for the Gorilla XOR format, and
// the XOR value coder shared by XorChunk and the dense codec's float fallback.
// BitReader never reads past its input; every read reports short input.

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace trainwatch::chunkenc::internal {

// Appends bits MSB-first to a byte buffer S (std::string, or any type with
// push_back(char) and back()). `*bit_pos` is the number of bits used in the
// last byte (0 = the last byte is full, or there is none).
template <typename S = std::string>
class BitWriter {
 public:
  BitWriter(S* s, uint8_t* bit_pos) : s_(s), bit_pos_(bit_pos) {}

  void WriteBit(bool bit) { WriteBits(bit ? 1 : 0, 1); }

  // Writes the low `n` bits of v (1 <= n <= 64), most significant first.
  void WriteBits(uint64_t v, int n) {
    while (n > 0) {
      if (*bit_pos_ == 0) s_->push_back('\0');
      int free = 8 - *bit_pos_;
      int k = n < free ? n : free;
      uint64_t bits = (v >> (n - k)) & ((uint64_t{1} << k) - 1);
      s_->back() = static_cast<char>(static_cast<uint8_t>(s_->back()) | (bits << (free - k)));
      n -= k;
      *bit_pos_ = static_cast<uint8_t>((*bit_pos_ + k) & 7);
    }
  }

  void WriteUvarint(uint64_t v) {
    while (v >= 0x80) {
      WriteBits((v & 0x7f) | 0x80, 8);
      v >>= 7;
    }
    WriteBits(v, 8);
  }

 private:
  S* s_;
  uint8_t* bit_pos_;
};

class BitReader {
 public:
  BitReader() = default;
  BitReader(const uint8_t* p, size_t size, uint64_t pos) : p_(p), size_(size), pos_(pos) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return uint64_t{size_} * 8 - pos_; }

  bool ReadBit(bool* bit) {
    if (pos_ >= uint64_t{size_} * 8) return false;
    *bit = (p_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1;
    pos_++;
    return true;
  }

  // Reads n bits (1 <= n <= 64).
  bool ReadBits(int n, uint64_t* out) {
    if (static_cast<uint64_t>(n) > remaining()) return false;
    size_t byte = pos_ >> 3;
    int off = static_cast<int>(pos_ & 7);
    uint64_t w;
    if (byte + 8 <= size_) {
      std::memcpy(&w, p_ + byte, 8);
      if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
    } else {
      w = 0;
      for (size_t i = 0; byte + i < size_; i++) w |= uint64_t{p_[byte + i]} << (56 - 8 * i);
    }
    uint64_t r = w << off;
    int got = 64 - off;
    uint64_t v = r >> (64 - n);
    if (n > got) v |= uint64_t{p_[byte + 8]} >> (8 - (n - got));
    *out = v;
    pos_ += static_cast<uint64_t>(n);
    return true;
  }

  bool ReadUvarint(uint64_t* out) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      uint64_t b;
      if (!ReadBits(8, &b)) return false;
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = result;
        return true;
      }
    }
    return false;
  }

 private:
  const uint8_t* p_ = nullptr;
  size_t size_ = 0;
  uint64_t pos_ = 0;
};

// Gorilla XOR value coding with leading/trailing-zero window reuse, as in
// Prometheus: '0' same value; '10' + bits inside the previous window;
// '11' + 5-bit leading zeros + 6-bit significant bit count (0 = 64) + bits.
// `leading` is 0xff until a window exists. W is BitWriter or any writer with
// WriteBit and WriteBits(v, n).
template <typename W>
inline void WriteXorValue(W* w, uint64_t prev, uint64_t cur, uint8_t* leading, uint8_t* trailing) {
  uint64_t x = prev ^ cur;
  if (x == 0) {
    w->WriteBit(false);
    return;
  }
  w->WriteBit(true);
  int nl = std::countl_zero(x);
  int nt = std::countr_zero(x);
  if (nl >= 32) nl = 31;
  if (*leading != 0xff && nl >= *leading && nt >= *trailing) {
    w->WriteBit(false);
    w->WriteBits(x >> *trailing, 64 - *leading - *trailing);
    return;
  }
  *leading = static_cast<uint8_t>(nl);
  *trailing = static_cast<uint8_t>(nt);
  int sig = 64 - nl - nt;
  w->WriteBit(true);
  w->WriteBits(static_cast<uint64_t>(nl), 5);
  w->WriteBits(static_cast<uint64_t>(sig & 63), 6);  // 64 is written as 0
  w->WriteBits(x >> nt, sig);
}

// The bits WriteXorValue would write, with the same window update.
inline int XorValueCost(uint64_t prev, uint64_t cur, uint8_t* leading, uint8_t* trailing) {
  uint64_t x = prev ^ cur;
  if (x == 0) return 1;
  int nl = std::countl_zero(x);
  int nt = std::countr_zero(x);
  if (nl >= 32) nl = 31;
  if (*leading != 0xff && nl >= *leading && nt >= *trailing) return 2 + 64 - *leading - *trailing;
  *leading = static_cast<uint8_t>(nl);
  *trailing = static_cast<uint8_t>(nt);
  return 2 + 5 + 6 + (64 - nl - nt);
}

// Decoder side; `leading`/`trailing` start at 0/0. False on short or invalid
// input.
inline bool ReadXorValue(BitReader* r, uint64_t* v_bits, uint8_t* leading, uint8_t* trailing) {
  bool bit;
  if (!r->ReadBit(&bit)) return false;
  if (!bit) return true;
  if (!r->ReadBit(&bit)) return false;
  if (bit) {
    uint64_t nl, sig;
    if (!r->ReadBits(5, &nl) || !r->ReadBits(6, &sig)) return false;
    if (sig == 0) sig = 64;
    if (nl + sig > 64) return false;
    *leading = static_cast<uint8_t>(nl);
    *trailing = static_cast<uint8_t>(64 - nl - sig);
  }
  int sig = 64 - *leading - *trailing;
  if (sig <= 0) return false;
  uint64_t bits;
  if (!r->ReadBits(sig, &bits)) return false;
  *v_bits ^= bits << *trailing;
  return true;
}

}  // namespace trainwatch::chunkenc::internal
