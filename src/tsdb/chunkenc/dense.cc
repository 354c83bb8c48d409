// Dense whole-chunk codec for persisted blocks (docs/format/chunks.md).
//
//   uvarint n
//   IntSeq(timestamps)
//   u8 value mode: 0 = Gorilla XOR values, 1 = decimal (u8 e, IntSeq of
//   round(v * 10^e)), 2 = IntSeq of the raw float64 bit patterns.
//
// IntSeq stores x[0..n) as x0 plus first- or second-order differences,
// divided by their common divisor, bit-packed with frame of reference in
// blocks of 128 (or one varint when all residuals are equal).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/check.h"
#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/dense_internal.h"

namespace trainwatch::chunkenc {

namespace internal {
namespace {

constexpr size_t kBlock = 128;
constexpr int kMaxExp = 18;

enum ValueMode : uint8_t { kValXor = 0, kValDecimal = 1, kValBits = 2, kValBinary = 3 };
constexpr int64_t kMaxBinaryExp = 1100;

// IntSeq header byte: bits 0-1 order, bit 2 has divisor, bit 3 packed.
constexpr uint8_t kHasDivisor = 1 << 2;
constexpr uint8_t kPacked = 1 << 3;

constexpr double kPow10[kMaxExp + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};

inline double DecimalToDouble(int64_t m, int e) {
  return e == 0 ? static_cast<double>(m) : static_cast<double>(m) / kPow10[e];
}

int BitWidth(uint64_t x) { return 64 - std::countl_zero(x); }

void PutZigZag(std::string* out, int64_t v) { PutVarint64(out, ZigZagEncode(v)); }

// Appends residuals r[0..m) (m >= 1) as constant or FOR-packed blocks;
// returns the header bit.
// Chooses a block's frame: the width w and base lo minimising the size when
// values outside [lo, lo + 2^w) are stored as exceptions (patched FOR).
struct Frame {
  int64_t lo;
  int w;
  size_t bits;  // estimated encoded size
};

Frame ChooseFrame(const int64_t* v, size_t cnt, std::vector<int64_t>* sorted) {
  std::vector<int64_t>& s = *sorted;
  s.assign(v, v + cnt);
  std::sort(s.begin(), s.end());
  int w = BitWidth(static_cast<uint64_t>(s.back()) - static_cast<uint64_t>(s.front()));
  Frame best{s.front(), w, cnt * static_cast<size_t>(w)};
  // Narrower widths by up to 3 bits, and width 0 (one value plus exceptions,
  // for mostly-constant blocks).
  for (int nw = w - 1; nw >= 0; nw = nw > w - 3 ? nw - 1 : (nw > 0 ? 0 : -1)) {
    uint64_t span = (uint64_t{1} << nw) - 1;
    size_t covered = 0, at = 0;
    for (size_t i = 0, j = 0; i < cnt; i++) {
      if (j < i) j = i;
      while (j + 1 < cnt && static_cast<uint64_t>(s[j + 1]) - static_cast<uint64_t>(s[i]) <= span) j++;
      if (j - i + 1 > covered) {
        covered = j - i + 1;
        at = i;
      }
    }
    size_t exc = cnt - covered;
    if (exc > cnt / 4) continue;
    size_t bits = cnt * static_cast<size_t>(nw) + 8;
    for (size_t i = 0; i < cnt; i++) {
      if (i >= at && i < at + covered) continue;
      bits += 8 + 8 * static_cast<size_t>(VarintLength(ZigZagEncode(
                          static_cast<int64_t>(static_cast<uint64_t>(s[i]) - static_cast<uint64_t>(s[at])))));
    }
    if (bits < best.bits) best = Frame{s[at], nw, bits};
  }
  return best;
}

// Appends residuals r[0..m) (m >= 1) as one constant or as blocks of kBlock
// (patched frame of reference); returns the header bit.
uint8_t PutResiduals(const int64_t* r, size_t m, std::string* out) {
  bool all_equal = std::all_of(r, r + m, [&](int64_t x) { return x == r[0]; });
  if (all_equal) {
    PutZigZag(out, r[0]);
    return 0;
  }
  uint64_t prev_lo = 0;
  std::vector<int64_t> sorted;
  std::vector<std::pair<uint8_t, int64_t>> exceptions;
  for (size_t b = 0; b < m; b += kBlock) {
    size_t cnt = std::min(kBlock, m - b);
    const int64_t* v = r + b;
    Frame f = ChooseFrame(v, cnt, &sorted);
    const uint64_t lo = static_cast<uint64_t>(f.lo);
    const int w = f.w;
    const uint64_t span = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    exceptions.clear();
    for (size_t i = 0; i < cnt; i++) {
      if (static_cast<uint64_t>(v[i]) - lo > span) {
        exceptions.emplace_back(static_cast<uint8_t>(i), static_cast<int64_t>(static_cast<uint64_t>(v[i]) - lo));
      }
    }
    // Block base as a difference from the previous block's.
    PutZigZag(out, static_cast<int64_t>(lo - prev_lo));
    prev_lo = lo;
    out->push_back(static_cast<char>(w | (exceptions.empty() ? 0 : 0x80)));
    if (!exceptions.empty()) out->push_back(static_cast<char>(exceptions.size()));
    if (w > 0) {
      size_t nbytes = (cnt * static_cast<size_t>(w) + 7) / 8;
      size_t start = out->size();
      out->append(nbytes, '\0');
      auto* p = reinterpret_cast<uint8_t*>(out->data() + start);
      uint64_t bitpos = 0;
      for (size_t i = 0; i < cnt; i++) {
        uint64_t x = static_cast<uint64_t>(v[i]) - lo;
        if (x > span) x = 0;  // an exception
        int left = w;
        while (left > 0) {
          size_t byte = bitpos >> 3;
          int off = static_cast<int>(bitpos & 7);
          int k = std::min(left, 8 - off);
          p[byte] = static_cast<uint8_t>(p[byte] | ((x & ((uint64_t{1} << k) - 1)) << off));
          x >>= k;
          left -= k;
          bitpos += static_cast<uint64_t>(k);
        }
      }
    }
    for (auto [idx, x] : exceptions) {
      out->push_back(static_cast<char>(idx));
      PutZigZag(out, x);
    }
  }
  return kPacked;
}

// Writes x[0..n) as differences of the given order (0..3): the head
// values d^j x[j] for j < order, then the residuals d^order x[i], i >= order,
// divided by their gcd.
void PutIntSeqOrder(const uint64_t* x, size_t n, int order, std::string* out, std::vector<int64_t>* scratch) {
  std::vector<int64_t>& a = *scratch;
  a.assign(reinterpret_cast<const int64_t*>(x), reinterpret_cast<const int64_t*>(x) + n);
  for (int lvl = 1; lvl <= order; lvl++) {
    for (size_t i = n - 1; i >= static_cast<size_t>(lvl) && i < n; i--) {
      a[i] = static_cast<int64_t>(static_cast<uint64_t>(a[i]) - static_cast<uint64_t>(a[i - 1]));
    }
  }
  size_t hdr_pos = out->size();
  out->push_back('\0');
  uint8_t hdr = static_cast<uint8_t>(order);
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) PutZigZag(out, a[j]);
  if (n > first) {
    int64_t* r = a.data() + first;
    size_t m = n - first;
    uint64_t g = 0;
    for (size_t i = 0; i < m && g != 1; i++) {
      uint64_t mag = r[i] < 0 ? uint64_t{0} - static_cast<uint64_t>(r[i]) : static_cast<uint64_t>(r[i]);
      g = std::gcd(g, mag);
    }
    if (g > 1 && g <= static_cast<uint64_t>(INT64_MAX)) {
      hdr |= kHasDivisor;
      PutVarint64(out, g);
      for (size_t i = 0; i < m; i++) r[i] /= static_cast<int64_t>(g);
    }
    hdr |= PutResiduals(r, m, out);
  }
  (*out)[hdr_pos] = static_cast<char>(hdr);
}

// Appends the smallest of the order 0..3 encodings.
void PutIntSeq(const uint64_t* x, size_t n, std::string* out) {
  std::vector<int64_t> scratch;
  size_t start = out->size();
  PutIntSeqOrder(x, n, 1, out, &scratch);
  std::string alt;
  for (int order : {0, 2, 3}) {
    if (static_cast<size_t>(order) >= n) continue;
    alt.clear();
    PutIntSeqOrder(x, n, order, &alt, &scratch);
    if (alt.size() < out->size() - start) {
      out->resize(start);
      out->append(alt);
    }
  }
}

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
  if (w <= 56) {
    // Fast path while 8 bytes can be loaded.
    for (; i < cnt; i++, bitpos += static_cast<uint64_t>(w)) {
      const uint8_t* q = p + (bitpos >> 3);
      if (end - q < 8) break;
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

bool GetIntSeq(Reader* in, size_t n, uint64_t* x) {
  uint8_t hdr;
  if (!in->Byte(&hdr) || (hdr & 0xf0) != 0) return false;
  int order = hdr & 3;
  uint64_t head[3];
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) {
    if (!in->ZigZag(&head[j])) return false;
  }
  if (n <= first) {
    if ((hdr & (kHasDivisor | kPacked)) != 0) return false;
  } else {
    uint64_t g = 1;
    if ((hdr & kHasDivisor) && !in->Uvarint(&g)) return false;
    size_t m = n - first;
    uint64_t* r = x + first;
    if (!(hdr & kPacked)) {
      uint64_t c;
      if (!in->ZigZag(&c)) return false;
      std::fill(r, r + m, c * g);
      g = 1;
    } else {
      uint64_t lo = 0;
      for (size_t b = 0; b < m; b += kBlock) {
        size_t cnt = std::min(kBlock, m - b);
        uint64_t dlo;
        uint8_t w;
        if (!in->ZigZag(&dlo) || !in->Byte(&w)) return false;
        lo += dlo;
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
    if (g != 1) {
      for (size_t i = 0; i < m; i++) r[i] *= g;
    }
  }
  // Integrate: level `order` residuals back to level 0 values.
  for (int lvl = static_cast<int>(first) - 1; lvl >= 0; lvl--) {
    x[lvl] = head[lvl];
    uint64_t acc = x[lvl];
    for (size_t i = static_cast<size_t>(lvl) + 1; i < n; i++) x[i] = acc += x[i];
  }
  return true;
}

// Finds the smallest e such that every value is DecimalToDouble(m, e) for an
// integer m; fills ms. False if there is none (NaN, Inf, -0.0, too precise).
bool ToDecimal(const double* vs, size_t n, int* e_out, std::vector<uint64_t>* ms) {
  int e = 0;
  ms->resize(n);
  auto try_at = [&](double v, int exp, int64_t* m_out) {
    double scaled = v * kPow10[exp];
    if (!(std::fabs(scaled) < 0x1p62)) return false;
    int64_t m = std::llround(scaled);
    uint64_t want = std::bit_cast<uint64_t>(v);
    for (int64_t cand : {m, m - 1, m + 1}) {
      if (std::bit_cast<uint64_t>(DecimalToDouble(cand, exp)) == want) {
        *m_out = cand;
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < n; i++) {
    int64_t m;
    while (!try_at(vs[i], e, &m)) {
      if (++e > kMaxExp) return false;
    }
  }
  // Every value must round-trip at the final e (a value exact at a smaller
  // exponent normally is at a larger one too, but verify).
  for (size_t i = 0; i < n; i++) {
    int64_t m;
    if (!try_at(vs[i], e, &m)) return false;
    (*ms)[i] = static_cast<uint64_t>(m);
  }
  *e_out = e;
  return true;
}

// Finds k such that every value is m * 2^-k for an integer |m| < 2^62
// (binary fixed point, so values straddling a power of two share one scale);
// fills ms. False for NaN, Inf, -0.0 or too wide a range.
bool ToBinary(const double* vs, size_t n, int64_t* k_out, std::vector<uint64_t>* ms) {
  int64_t low = INT64_MAX;
  for (size_t i = 0; i < n; i++) {
    uint64_t b = std::bit_cast<uint64_t>(vs[i]);
    int64_t bexp = static_cast<int64_t>((b >> 52) & 0x7ff);
    uint64_t mant = b & ((uint64_t{1} << 52) - 1);
    if (bexp == 0x7ff) return false;
    if (b == 0) continue;
    if (bexp != 0) mant |= uint64_t{1} << 52;
    int64_t lo = (bexp == 0 ? 1 : bexp) - 1075 + std::countr_zero(mant);
    low = std::min(low, lo);
  }
  int64_t k = low == INT64_MAX ? 0 : -low;
  if (k > kMaxBinaryExp || k < -kMaxBinaryExp) return false;
  const double scale = std::ldexp(1.0, static_cast<int>(-k));
  ms->resize(n);
  for (size_t i = 0; i < n; i++) {
    double scaled = std::ldexp(vs[i], static_cast<int>(k));
    if (!(std::fabs(scaled) < 0x1p62)) return false;
    int64_t m = static_cast<int64_t>(scaled);
    if (std::bit_cast<uint64_t>(static_cast<double>(m) * scale) != std::bit_cast<uint64_t>(vs[i])) return false;
    (*ms)[i] = static_cast<uint64_t>(m);
  }
  *k_out = k;
  return true;
}

void PutXorValues(const double* vs, size_t n, std::string* out) {
  uint8_t bit_pos = 0;
  BitWriter w(out, &bit_pos);
  uint64_t prev = std::bit_cast<uint64_t>(vs[0]);
  w.WriteBits(prev, 64);
  uint8_t leading = 0xff, trailing = 0;
  for (size_t i = 1; i < n; i++) {
    uint64_t cur = std::bit_cast<uint64_t>(vs[i]);
    WriteXorValue(&w, prev, cur, &leading, &trailing);
    prev = cur;
  }
}

}  // namespace

Status DecodeDense(std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs) {
  Reader in{reinterpret_cast<const uint8_t*>(data.data()), reinterpret_cast<const uint8_t*>(data.data()) + data.size()};
  uint64_t n;
  if (!in.Uvarint(&n) || n == 0 || n > kMaxDenseSamples) return Status::Corruption("dense chunk: bad sample count");
  size_t t_off = ts->size();
  ts->resize(t_off + n);
  if (!GetIntSeq(&in, n, reinterpret_cast<uint64_t*>(ts->data() + t_off))) {
    return Status::Corruption("dense chunk: bad timestamps");
  }
  uint8_t mode;
  if (!in.Byte(&mode)) return Status::Corruption("dense chunk: truncated value header");
  size_t v_off = vs->size();
  vs->resize(v_off + n);
  double* out = vs->data() + v_off;
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
      thread_local std::vector<uint64_t> scratch;
      scratch.resize(n);
      if (!GetIntSeq(&in, n, scratch.data())) return Status::Corruption("dense chunk: bad values");
      if (mode == kValBits) {
        std::memcpy(out, scratch.data(), n * sizeof(double));
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

}  // namespace internal

void EncodeDense(const int64_t* ts, const double* vs, size_t n, std::string* out) {
  CHECK(n >= 1 && n <= internal::kMaxDenseSamples, "BUG: EncodeDense sample count out of range");
  PutVarint64(out, n);
  internal::PutIntSeq(reinterpret_cast<const uint64_t*>(ts), n, out);

  std::string best;
  best.push_back(static_cast<char>(internal::kValXor));
  internal::PutXorValues(vs, n, &best);

  std::vector<uint64_t> ints;
  std::string cand;
  int e;
  if (internal::ToDecimal(vs, n, &e, &ints)) {
    cand.push_back(static_cast<char>(internal::kValDecimal));
    cand.push_back(static_cast<char>(e));
    internal::PutIntSeq(ints.data(), n, &cand);
    if (cand.size() < best.size()) best.swap(cand);
  }
  int64_t k;
  if (internal::ToBinary(vs, n, &k, &ints)) {
    cand.clear();
    cand.push_back(static_cast<char>(internal::kValBinary));
    PutVarint64(&cand, ZigZagEncode(k));
    internal::PutIntSeq(ints.data(), n, &cand);
    if (cand.size() < best.size()) best.swap(cand);
  }
  ints.resize(n);
  std::memcpy(ints.data(), vs, n * sizeof(double));
  cand.clear();
  cand.push_back(static_cast<char>(internal::kValBits));
  internal::PutIntSeq(ints.data(), n, &cand);
  if (cand.size() < best.size()) best.swap(cand);
  out->append(best);
}

}  // namespace trainwatch::chunkenc
