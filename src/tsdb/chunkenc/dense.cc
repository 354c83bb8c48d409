// Dense whole-chunk codec for persisted blocks: the decoder
// (docs/format/chunks.md; the encoder is dense_encode.cc).
//
//   uvarint n
//   IntSeq(timestamps)
//   u8 value mode: 0 = Gorilla XOR values, 1 = decimal (u8 e, IntSeq of
//   round(v * 10^e)), 2 = IntSeq of the raw float64 bit patterns,
//   3 = binary fixed point (varint k, IntSeq of v * 2^k).
//
// IntSeq stores x[0..n) as head values plus differences of order 0..7,
// divided by their common divisor, in blocks of 128 bit-packed with frame of
// reference or Rice-coded (or one varint when all residuals are equal).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/dense_internal.h"

namespace trainwatch::chunkenc {

namespace internal {
namespace {

constexpr size_t kBlock = kDenseBlock;

// Cursor over the dense chunk bytes.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;

  bool Byte(uint8_t* v) {
    if (p >= end) return false;
    *v = *p++;
    return true;
  }
  bool Uvarint(uint64_t* v) {
    const char* q = GetVarint64Ptr(reinterpret_cast<const char*>(p), reinterpret_cast<const char*>(end), v);
    if (q == nullptr) return false;
    p = reinterpret_cast<const uint8_t*>(q);
    return true;
  }
  bool ZigZag(uint64_t* v) {
    uint64_t u;
    if (!Uvarint(&u)) return false;
    *v = static_cast<uint64_t>(ZigZagDecode(u));
    return true;
  }
};

// Unpacks cnt values of width w (1..64) from p, LSB-first, adding lo.
// Bytes up to `end` may be read (and ignored) beyond the block.
void Unpack(const uint8_t* p, const uint8_t* end, size_t cnt, int w, uint64_t lo, uint64_t* out) {
  const uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  uint64_t bitpos = 0;
  size_t i = 0;
  if (w <= 56 && end - p >= 8) {
    // Fast path for the values whose 8 bytes from their first can be
    // loaded: value i starts in byte i * w / 8, which is at most end - p - 8
    // up to i = ((end - p - 8) * 8 + 7) / w (w is 1..56 here).
    const uint64_t last = (static_cast<uint64_t>(end - p - 8) * 8 + 7) / static_cast<uint64_t>(w);
    const size_t fast = static_cast<size_t>(std::min<uint64_t>(cnt, last + 1));
    for (; i < fast; i++, bitpos += static_cast<uint64_t>(w)) {
      const uint8_t* q = p + (bitpos >> 3);
      uint64_t word;
      std::memcpy(&word, q, 8);
      if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
      out[i] = ((word >> (bitpos & 7)) & mask) + lo;
    }
  }
  for (; i < cnt; i++, bitpos += static_cast<uint64_t>(w)) {
    uint64_t v = 0;
    int got = 0;
    uint64_t bp = bitpos;
    while (got < w) {
      int off = static_cast<int>(bp & 7);
      int k = std::min(w - got, 8 - off);
      uint64_t bits = (uint64_t{p[bp >> 3]} >> off) & ((uint64_t{1} << k) - 1);
      v |= bits << got;
      got += k;
      bp += static_cast<uint64_t>(k);
    }
    out[i] = v + lo;
  }
}

// Bits [pos, pos + k) of the LSB-first stream at p, 1 <= k <= 62; the
// caller guarantees they lie before `end`.
inline uint64_t LoadBits(const uint8_t* p, const uint8_t* end, uint64_t pos, int k) {
  const uint8_t* q = p + (pos >> 3);
  const int off = static_cast<int>(pos & 7);
  if (end - q >= 9) {
    uint64_t word;
    std::memcpy(&word, q, 8);
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    word >>= off;
    if (k + off > 64) word |= uint64_t{q[8]} << (64 - off);
    return word & ((uint64_t{1} << k) - 1);
  }
  uint64_t v = 0;
  for (int got = 0; got < k;) {
    const int bit = static_cast<int>((pos + static_cast<uint64_t>(got)) & 7);
    const int n = std::min(k - got, 8 - bit);
    v |= ((uint64_t{p[(pos + static_cast<uint64_t>(got)) >> 3]} >> bit) & ((uint64_t{1} << n) - 1)) << got;
    got += n;
  }
  return v;
}

// Reads a Rice-coded block of cnt values from p (at most `end`): the cnt
// low parts of k bits (packed like a frame-of-reference block), then the
// quotients in unary (q zero bits, then a one; LSB-first). out[i] = lo +
// unzigzag((q << k) | low). Advances *p past the block.
// Kept out of line so that GetIntSeq's frame-of-reference path stays as tight
// as before.
[[gnu::noinline]] bool GetRiceBlock(const uint8_t** p, const uint8_t* end, size_t cnt, int k, uint64_t lo,
                                     uint64_t* out) {
  const size_t low_bytes = (cnt * static_cast<size_t>(k) + 7) / 8;
  if (static_cast<size_t>(end - *p) < low_bytes) return false;
  const uint8_t* low = *p;
  const uint8_t* u = low + low_bytes;
  // The unary part a word at a time: each one bit ends a quotient; the low
  // bits of the same value are read beside it.
  const size_t avail = static_cast<size_t>(end - u);
  size_t i = 0;
  uint64_t acc = 0, low_pos = 0;
  for (size_t off = 0; off < avail; off += 8) {
    uint64_t word = 0;
    const size_t have = std::min<size_t>(8, avail - off);
    if (have == 8) {
      std::memcpy(&word, u + off, 8);
      if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    } else {
      for (size_t j = 0; j < have; j++) word |= uint64_t{u[off + j]} << (8 * j);
    }
    const auto ones = static_cast<size_t>(std::popcount(word));
    if (ones >= cnt - i) {
      // The block ends in this word: drop the bits after its last one.
      for (size_t extra = ones - (cnt - i); extra > 0; extra--) {
        word &= ~(uint64_t{1} << (63 - std::countl_zero(word)));
      }
    }
    int next = 0;  // first bit of the word not yet counted
    for (; word != 0; word &= word - 1) {
      const int tz = std::countr_zero(word);
      uint64_t z = (acc + static_cast<uint64_t>(tz - next)) << k;
      if (k != 0) {
        z |= LoadBits(low, end, low_pos, k);
        low_pos += static_cast<uint64_t>(k);
      }
      out[i++] = lo + ((z >> 1) ^ (uint64_t{0} - (z & 1)));
      acc = 0;
      next = tz + 1;
    }
    if (i == cnt) {
      *p = u + off + static_cast<size_t>(next - 1) / 8 + 1;
      return true;
    }
    acc += static_cast<uint64_t>(64 - next);
  }
  return false;
}

// Level `first` residuals x[first, n), each times g, back to level 0 values
// (x[0, first) from head). Order 2 (sums, drifting counters) in one pass:
// the same modular sums as level by level, one load and store a value
// instead of two.
template <bool kScaled>
void Integrate(uint64_t* x, size_t n, size_t first, const uint64_t* head, uint64_t g) {
  auto residual = [g](uint64_t r) { return kScaled ? r * g : r; };
  if (first == 2) {
    uint64_t a1 = head[1], a0 = head[0] + head[1];
    x[0] = head[0];
    x[1] = a0;
    for (size_t i = 2; i < n; i++) {
      a1 += residual(x[i]);
      a0 += a1;
      x[i] = a0;
    }
    return;
  }
  for (int lvl = static_cast<int>(first) - 1; lvl >= 0; lvl--) {
    x[lvl] = head[lvl];
    uint64_t acc = x[lvl];
    if (static_cast<size_t>(lvl) + 1 == first) {
      for (size_t i = first; i < n; i++) x[i] = acc += residual(x[i]);
    } else {
      for (size_t i = static_cast<size_t>(lvl) + 1; i < n; i++) x[i] = acc += x[i];
    }
  }
}

bool GetIntSeq(Reader* in, size_t n, uint64_t* x) {
  uint8_t hdr;
  if (!in->Byte(&hdr) || (hdr & 0xe0) != 0) return false;
  int order = (hdr & 3) | ((hdr & kOrderHigh) ? 4 : 0);
  uint64_t head[kMaxOrder];
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) {
    if (!in->ZigZag(&head[j])) return false;
  }
  uint64_t g = 1;
  if (n <= first) {
    if ((hdr & (kHasDivisor | kPacked)) != 0) return false;
  } else {
    if ((hdr & kHasDivisor) && !in->Uvarint(&g)) return false;
    size_t m = n - first;
    uint64_t* r = x + first;
    if (!(hdr & kPacked)) {
      uint64_t c;
      if (!in->ZigZag(&c)) return false;
      c *= g;
      // One residual for all: regular timestamps (order 1 or 2), constant
      // counts (order 0). Orders 1 and 2 in closed form, each value on its
      // own: integrating is a chain of dependent adds, a cycle a value per
      // order, and was most of a tier query's decoding. Modular arithmetic
      // as the integration's; i * (i - 1) is even, so halving it is exact.
      if (order == 1) {
        // Four a round from one product: the loop was 9 instructions a
        // value (head[0] read again after each store, which may alias it).
        const uint64_t h = head[0];
        size_t i = 0;
        for (; i + 4 <= n; i += 4) {
          const uint64_t b = h + i * c;
          x[i] = b;
          x[i + 1] = b + c;
          x[i + 2] = b + 2 * c;
          x[i + 3] = b + 3 * c;
        }
        for (; i < n; i++) x[i] = h + i * c;
        return true;
      }
      if (order == 2) {
        for (size_t i = 0; i < n; i++) x[i] = head[0] + i * head[1] + c * (i * (i - 1) / 2);
        return true;
      }
      std::fill(r, r + m, c);
      g = 1;
    } else {
      uint64_t lo = 0;
      for (size_t b = 0; b < m; b += kBlock) {
        size_t cnt = std::min(kBlock, m - b);
        uint64_t dlo;
        uint8_t w;
        if (!in->ZigZag(&dlo) || !in->Byte(&w)) return false;
        lo += dlo;
        if (w >= kRiceBase && w <= kRiceBase + kMaxRiceK) {
          if (!GetRiceBlock(&in->p, in->end, cnt, w - kRiceBase, lo, r + b)) return false;
          continue;
        }
        uint8_t nexc = 0;
        if ((w & 0x80) && (!in->Byte(&nexc) || nexc == 0)) return false;
        w &= 0x7f;
        if (w > 64) return false;
        if (w == 0) {
          std::fill(r + b, r + b + cnt, lo);
        } else {
          size_t nbytes = (cnt * w + 7) / 8;
          if (static_cast<size_t>(in->end - in->p) < nbytes) return false;
          Unpack(in->p, in->end, cnt, w, lo, r + b);
          in->p += nbytes;
        }
        for (uint8_t e = 0; e < nexc; e++) {
          uint8_t idx;
          uint64_t x;
          if (!in->Byte(&idx) || idx >= cnt || !in->ZigZag(&x)) return false;
          r[b + idx] = lo + x;
        }
      }
    }
    if (g != 1 && first == 0) {
      for (size_t i = 0; i < m; i++) r[i] *= g;
    }
  }
  // Otherwise the divisor multiplies the residuals as they are integrated.
  if (g == 1) {
    Integrate<false>(x, n, first, head, 1);
  } else {
    Integrate<true>(x, n, first, head, g);
  }
  return true;
}

// Room for n values that are written before they are read: a vector's
// resize zeroed every decoded chunk's arrays first (a tenth of a tier
// query's instructions).
template <typename T>
T* Room(std::unique_ptr<T[]>* buf, size_t* cap, size_t n) {
  if (*cap < n) {
    buf->reset(new T[n]);
    *cap = n;
  }
  return buf->get();
}

// The thread's scratch integers: a sequence skipped, or values before they
// are converted to doubles (one use at a time).
uint64_t* Scratch(size_t n) {
  thread_local std::unique_ptr<uint64_t[]> buf;
  thread_local size_t cap = 0;
  return Room(&buf, &cap, n);
}

// Moves past an IntSeq of n values: a sequence of one residual (regular
// timestamps) is read as its header, any other decoded into scratch.
bool SkipIntSeq(Reader* in, size_t n) {
  Reader peek = *in;
  uint8_t hdr;
  if (!peek.Byte(&hdr) || (hdr & 0xe0) != 0) return false;
  const int order = (hdr & 3) | ((hdr & kOrderHigh) ? 4 : 0);
  const size_t first = std::min(n, static_cast<size_t>(order));
  if (n > first && !(hdr & kPacked)) {
    uint64_t x;
    for (size_t j = 0; j < first; j++) {
      if (!peek.ZigZag(&x)) return false;
    }
    if ((hdr & kHasDivisor) && !peek.Uvarint(&x)) return false;
    if (!peek.ZigZag(&x)) return false;
    *in = peek;
    return true;
  }
  return GetIntSeq(in, n, Scratch(n));
}

// The values of a dense chunk, `in` at their header (after the timestamps).
Status DecodeDenseValues(Reader in, size_t n, double* out) {
  uint8_t mode;
  if (!in.Byte(&mode)) return Status::Corruption("dense chunk: truncated value header");
  switch (mode) {
    case kValXor: {
      BitReader r(in.p, static_cast<size_t>(in.end - in.p), 0);
      uint64_t bits;
      if (!r.ReadBits(64, &bits)) return Status::Corruption("dense chunk: truncated values");
      out[0] = std::bit_cast<double>(bits);
      uint8_t leading = 0, trailing = 0;
      for (size_t i = 1; i < n; i++) {
        if (!ReadXorValue(&r, &bits, &leading, &trailing)) return Status::Corruption("dense chunk: bad xor values");
        out[i] = std::bit_cast<double>(bits);
      }
      if (r.remaining() >= 8) return Status::Corruption("dense chunk: trailing bytes");
      return Status::OK();
    }
    case kValDecimal:
    case kValBits:
    case kValBinary: {
      uint8_t e = 0;
      if (mode == kValDecimal && (!in.Byte(&e) || e > kMaxExp)) return Status::Corruption("dense chunk: bad exponent");
      uint64_t zk = 0;
      if (mode == kValBinary) {
        if (!in.ZigZag(&zk)) return Status::Corruption("dense chunk: bad binary exponent");
        int64_t k = static_cast<int64_t>(zk);
        if (k > kMaxBinaryExp || k < -kMaxBinaryExp) return Status::Corruption("dense chunk: bad binary exponent");
      }
      // Decode the integers into the value slots, then convert in place.
      static_assert(sizeof(double) == sizeof(uint64_t));
      uint64_t* scratch = Scratch(n);
      if (!GetIntSeq(&in, n, scratch)) return Status::Corruption("dense chunk: bad values");
      if (mode == kValBits) {
        std::memcpy(out, scratch, n * sizeof(double));
      } else if (mode == kValBinary) {
        const double scale = std::ldexp(1.0, static_cast<int>(-static_cast<int64_t>(zk)));
        for (size_t i = 0; i < n; i++) out[i] = static_cast<double>(static_cast<int64_t>(scratch[i])) * scale;
      } else if (e == 0) {
        for (size_t i = 0; i < n; i++) out[i] = static_cast<double>(static_cast<int64_t>(scratch[i]));
      } else {
        const double p = kPow10[e];
        for (size_t i = 0; i < n; i++) out[i] = static_cast<double>(static_cast<int64_t>(scratch[i])) / p;
      }
      if (in.p != in.end) return Status::Corruption("dense chunk: trailing bytes");
      return Status::OK();
    }
    default:
      return Status::Corruption("dense chunk: unknown value mode");
  }
}

Status DecodeDenseInto(Reader in, size_t n, int64_t* ts, double* out) {
  if (!GetIntSeq(&in, n, reinterpret_cast<uint64_t*>(ts))) return Status::Corruption("dense chunk: bad timestamps");
  return DecodeDenseValues(in, n, out);
}

}  // namespace

size_t DenseSamples(std::string_view data) {
  Reader in{reinterpret_cast<const uint8_t*>(data.data()), reinterpret_cast<const uint8_t*>(data.data()) + data.size()};
  uint64_t n;
  if (!in.Uvarint(&n) || n == 0 || n > kMaxDenseSamples) return 0;
  return static_cast<size_t>(n);
}

Status DecodeDense(std::string_view data, int64_t* ts, double* vs) {
  Reader in{reinterpret_cast<const uint8_t*>(data.data()), reinterpret_cast<const uint8_t*>(data.data()) + data.size()};
  uint64_t n;
  if (!in.Uvarint(&n) || n == 0 || n > kMaxDenseSamples) return Status::Corruption("dense chunk: bad sample count");
  return DecodeDenseInto(in, static_cast<size_t>(n), ts, vs);
}

Status DecodeDense(std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs) {
  const size_t n = DenseSamples(data);
  if (n == 0) return Status::Corruption("dense chunk: bad sample count");
  const size_t t_off = ts->size(), v_off = vs->size();
  ts->resize(t_off + n);
  vs->resize(v_off + n);
  return DecodeDense(data, ts->data() + t_off, vs->data() + v_off);
}

Status DenseBuffer::DecodeCounts(std::string_view data) {
  Reader in{reinterpret_cast<const uint8_t*>(data.data()), reinterpret_cast<const uint8_t*>(data.data()) + data.size()};
  uint64_t m;
  if (!in.Uvarint(&m) || m != n) {
    return Status::Corruption("dense chunk: a count part of " + std::to_string(m) + " points beside values of " +
                              std::to_string(n));
  }
  if (!SkipIntSeq(&in, n)) return Status::Corruption("dense chunk: bad timestamps");
  return DecodeDenseValues(in, n, Room(&c, &ccap, n));
}

Status DenseBuffer::Decode(std::string_view data) {
  n = DenseSamples(data);
  if (n == 0) return Status::Corruption("dense chunk: bad sample count");
  return DecodeDense(data, Room(&t, &tcap, n), Room(&v, &vcap, n));
}

}  // namespace internal

}  // namespace trainwatch::chunkenc
