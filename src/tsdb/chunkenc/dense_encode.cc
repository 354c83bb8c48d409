// Dense whole-chunk codec: the encoder (docs/format/chunks.md; the decoder
// is dense.cc).
//
// The smallest encoding is one of up to 4 value modes x 4 difference orders
// (x 4 more for the timestamps). Rather than encoding all of them, the encoder
// bounds every candidate's size in one pass over its differences (Bounds:
// plain frame-of-reference blocks above, a histogram bound on what patched
// blocks could save below), sizes exactly only candidates whose lower bound
// beats the best size so far (PickSmallest), and encodes the winner once.
// The result is the exhaustive encoder's size (EncodeDenseExhaustive, kept
// for tests) up to a byte or two of block-base varint.

#include <algorithm>
#include <bit>
#include <climits>
#include <cstddef>
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

constexpr size_t kBlock = kDenseBlock;

int BitWidth(uint64_t x) { return 64 - std::countl_zero(x); }

size_t ZigZagLength(int64_t v) { return static_cast<size_t>(BitWidth(ZigZagEncode(v) | 1) + 6) / 7; }

void PutZigZag(std::string* out, int64_t v) { PutVarint64(out, ZigZagEncode(v)); }

// A block's frame: the width w and base lo minimising the size when values
// outside [lo, lo + 2^w) are stored as exceptions (patched FOR); or, with
// w = kRiceBase + k, a Rice block around lo.
struct Frame {
  int64_t lo;
  int w;
  size_t bits;  // packed bits + exception bytes (x 8), without the base
};

// Scratch buffers reused across one EncodeDense call.
struct Scratch {
  std::vector<int64_t> diffs;   // residuals of the order being planned/encoded
  std::vector<int64_t> sorted;  // one block, sorted (ChooseFrame)
  std::vector<int64_t> diffs1;   // order 0 while planning
  std::vector<std::pair<int64_t, int64_t>> ranges;  // per-block min, max (Bounds)
  std::vector<std::pair<Frame, uint64_t>> rice;  // per-block Rice frame and its divisor (0: none)
  std::vector<uint64_t> dec, bin;  // value candidates (decimal, binary modes)
  std::vector<struct Candidate> cands;
};

// Exact division and divisibility by a fixed g = odd * 2^s through the
// inverse of odd modulo 2^64 (a multiply instead of a divide).
class ExactDivider {
 public:
  // g = 0 is allowed: then only 0 divides (gcd(0, x) = x).
  explicit ExactDivider(uint64_t g)
      : s_(g == 0 ? 63 : std::countr_zero(g)), odd_(g == 0 ? 1 : g >> s_), inv_(odd_) {
    for (int i = 0; i < 5; i++) inv_ *= 2 - odd_ * inv_;  // Newton: 3 -> 96 correct bits
    lim_ = g == 0 ? 0 : ~uint64_t{0} / odd_;
  }
  bool Divides(uint64_t mag) const { return (mag & ((uint64_t{1} << s_) - 1)) == 0 && (mag >> s_) * inv_ <= lim_; }
  // REQUIRES: x is a multiple of g.
  int64_t Divide(int64_t x) const { return static_cast<int64_t>(static_cast<uint64_t>(x >> s_) * inv_); }
  uint64_t Divide(uint64_t x) const { return (x >> s_) * inv_; }
  bool IsOne() const { return s_ == 0 && odd_ == 1; }

 private:
  int s_;
  uint64_t odd_, inv_, lim_;
};

// The divisor the encoder applies to residuals r[0..m): their gcd, or 1 when
// that is 0 or does not fit int64. Most residuals are multiples of the gcd
// so far, which is tested without a division.
uint64_t Divisor(const int64_t* r, size_t m) {
  uint64_t g = 0;
  size_t i = 0;
  for (; i < m && g == 0; i++) g = r[i] < 0 ? uint64_t{0} - static_cast<uint64_t>(r[i]) : static_cast<uint64_t>(r[i]);
  while (i < m && g != 1) {
    ExactDivider div(g);
    for (; i < m; i++) {
      uint64_t mag = r[i] < 0 ? uint64_t{0} - static_cast<uint64_t>(r[i]) : static_cast<uint64_t>(r[i]);
      if (!div.Divides(mag)) {
        g = std::gcd(g, mag);
        i++;
        break;
      }
    }
  }
  return g > 1 && g <= static_cast<uint64_t>(INT64_MAX) ? g : 1;
}


// Candidate widths below the full width w: w-1..w-3, then 0 (one value plus
// exceptions, for mostly-constant blocks). Returns -1 after the last.
int NextNarrowWidth(int nw, int w) { return nw > w - 3 ? nw - 1 : (nw > 0 ? 0 : -1); }

// A lower bound on ChooseFrame's bits for a block whose values v[i] / g
// (v[i] multiples of g) span width w from mn / g: an upper bound on the
// values any window of 2^nw can cover, from a 32-bucket histogram, gives a
// lower bound on the exceptions and their cost (>= 2 bytes each). Equal to
// cnt * w when no narrower frame can win.
size_t PatchLowerBits(const int64_t* v, size_t cnt, int64_t mn, int w, const ExactDivider& div) {
  constexpr int kBucketBits = 5, kBuckets = 1 << kBucketBits;
  const size_t plain = cnt * static_cast<size_t>(w);
  if (w == 0) return 0;
  const int shift = std::max(w - kBucketBits, 0);
  uint32_t hist[kBuckets] = {};
  if (div.IsOne()) {
    for (size_t i = 0; i < cnt; i++) hist[(static_cast<uint64_t>(v[i]) - static_cast<uint64_t>(mn)) >> shift]++;
  } else {
    for (size_t i = 0; i < cnt; i++) {
      hist[div.Divide(static_cast<uint64_t>(v[i]) - static_cast<uint64_t>(mn)) >> shift]++;
    }
  }
  size_t lower = plain;
  for (int nw = w - 1; nw >= 0; nw = NextNarrowWidth(nw, w)) {
    // A window [a, a + 2^nw) meets at most 2^(nw - shift) + 1 buckets; a
    // single value (nw = 0) meets one.
    int k = nw == 0 ? 1 : std::min(kBuckets, (1 << std::max(nw - shift, 0)) + 1);
    uint32_t sum = 0, covered = 0;
    for (int b = 0; b < kBuckets; b++) {
      sum += hist[b];
      if (b >= k) sum -= hist[b - k];
      covered = std::max(covered, sum);
    }
    size_t exc = cnt - std::min<size_t>(covered, cnt);
    if (exc > cnt / 4) continue;
    lower = std::min(lower, cnt * static_cast<size_t>(nw) + 8 + 16 * exc);
  }
  return lower;
}

uint64_t ZigZagFrom(int64_t x, int64_t c) {
  return ZigZagEncode(static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(c)));
}

// The Rice-coded frame of v[0..cnt) (cnt >= 1): values as zigzag(v - c)
// around the block's mean c, with the parameter k among the three around
// log2 of the mean zigzag value (where the optimum of a geometric or
// bell-shaped block lies) that gives the fewest bits, skipping any k that
// would leave a quotient of 2^8 or more. bits = both byte-padded parts.
Frame RiceFrame(const int64_t* v, size_t cnt, int64_t mn, int64_t mx) {
  const uint64_t span = static_cast<uint64_t>(mx) - static_cast<uint64_t>(mn);
  // Below 2^45 every sum here (of at most kBlock values under 2^46) is exact
  // in integers and in a double alike, so integers give the double's result;
  // the sum of v wraps, but sum(v - mn) = sum(v) - cnt * mn modulo 2^64.
  static_assert(kBlock <= 128);
  const bool exact = span < (uint64_t{1} << 45);
  double sum = 0;
  if (exact) {
    uint64_t wsum = 0;
    for (size_t i = 0; i < cnt; i++) wsum += static_cast<uint64_t>(v[i]);
    sum = static_cast<double>(wsum - static_cast<uint64_t>(cnt) * static_cast<uint64_t>(mn));
  } else {
    for (size_t i = 0; i < cnt; i++) {
      sum += static_cast<double>(static_cast<uint64_t>(v[i]) - static_cast<uint64_t>(mn));
    }
  }
  const auto off = static_cast<uint64_t>(std::min(sum / static_cast<double>(cnt) + 0.5, 0x1p63));
  const int64_t c = static_cast<int64_t>(static_cast<uint64_t>(mn) + std::min(off, span));
  uint64_t z[kBlock];
  uint64_t zor = 0, zisum = 0;  // BitWidth(max z) is BitWidth(z | z' | ...)
  double zsum = 0;
  for (size_t i = 0; i < cnt; i++) {
    z[i] = ZigZagFrom(v[i], c);
    zor |= z[i];
    zisum += z[i];
  }
  if (exact) {
    zsum = static_cast<double>(zisum);
  } else {
    for (size_t i = 0; i < cnt; i++) zsum += static_cast<double>(z[i]);
  }
  const int kmax = BitWidth(zor);
  const double zmean = zsum / static_cast<double>(cnt);
  const int kc = zmean >= 0x1p63 ? 63 : BitWidth(static_cast<uint64_t>(zmean)) - 1;
  Frame best{c, kRiceBase, SIZE_MAX};
  // The (at most three) parameters' unary lengths in one pass.
  const int k0 = std::max({0, kc - 1, kmax - 8}), k1 = std::min({kc + 1, kmax, kMaxRiceK});
  if (k0 > k1) return best;
  size_t unary[3] = {cnt, cnt, cnt};
  const int k1c = std::min(k0 + 1, 63), k2c = std::min(k0 + 2, 63);
  for (size_t i = 0; i < cnt; i++) {
    unary[0] += static_cast<size_t>(z[i] >> k0);
    unary[1] += static_cast<size_t>(z[i] >> k1c);
    unary[2] += static_cast<size_t>(z[i] >> k2c);
  }
  for (int k = k0; k <= k1; k++) {
    size_t bits = 8 * ((cnt * static_cast<size_t>(k) + 7) / 8 + (unary[k - k0] + 7) / 8);
    if (bits < best.bits) best = Frame{c, kRiceBase + k, bits};
  }
  return best;
}

// Rice blocks cost about a nanosecond more per value to decode than frame-
// of-reference ones, so they are used only where they save at least
// 1/kRiceMinGain bit per value (cnt values): on the peers workload that
// keeps three quarters of what they could save at half the decode cost (always
// taking the smaller: 1.275 B/sample, decode -28 %; this: 1.287, -11..-14 %).
constexpr size_t kRiceMinGain = 2;
bool RiceWorthIt(size_t rice_bits, size_t for_bits, size_t cnt) {
  for_bits = (for_bits + 7) / 8 * 8;  // plain frames are compared as written, byte-rounded
  return rice_bits < for_bits && for_bits - rice_bits > cnt / kRiceMinGain;  // rice_bits may be SIZE_MAX
}

Frame ChooseFrame(const int64_t* v, size_t cnt, std::vector<int64_t>* sorted) {
  auto [mn_it, mx_it] = std::minmax_element(v, v + cnt);
  int w = BitWidth(static_cast<uint64_t>(*mx_it) - static_cast<uint64_t>(*mn_it));
  Frame best{*mn_it, w, cnt * static_cast<size_t>(w)};
  if (w >= 2) {
    Frame rice = RiceFrame(v, cnt, *mn_it, *mx_it);
    if (RiceWorthIt(rice.bits, best.bits, cnt)) best = rice;
  }
  if (w == 0 || PatchLowerBits(v, cnt, *mn_it, w, ExactDivider(1)) >= best.bits) return best;
  // A frame leaves at most e = cnt/4 exceptions, so it spans s[e] and
  // s[cnt-1-e] of the sorted block; only the e+1 smallest and e+1 largest
  // values need sorting.
  const size_t e = cnt / 4;
  std::vector<int64_t>& s = *sorted;
  s.assign(v, v + cnt);
  if (cnt >= 2 * e + 2) {
    std::nth_element(s.begin(), s.begin() + static_cast<ptrdiff_t>(e), s.end());
    std::sort(s.begin(), s.begin() + static_cast<ptrdiff_t>(e));
    std::nth_element(s.begin() + static_cast<ptrdiff_t>(e + 1), s.end() - static_cast<ptrdiff_t>(e + 1), s.end());
    std::sort(s.end() - static_cast<ptrdiff_t>(e), s.end());
  } else {
    std::sort(s.begin(), s.end());
  }
  for (int nw = w - 1; nw >= 0; nw = NextNarrowWidth(nw, w)) {
    uint64_t span = (uint64_t{1} << nw) - 1;
    // The widest window [s[i], s[i] + span] with i <= e (first on ties).
    size_t covered = 0, at = 0;
    for (size_t i = 0, j = cnt - 1 - e; i <= e; i++) {
      if (static_cast<uint64_t>(s[j]) - static_cast<uint64_t>(s[i]) > span) continue;
      while (j + 1 < cnt && static_cast<uint64_t>(s[j + 1]) - static_cast<uint64_t>(s[i]) <= span) j++;
      if (j - i + 1 > covered) {
        covered = j - i + 1;
        at = i;
      }
    }
    if (covered == 0) continue;
    size_t exc = cnt - covered;
    if (exc > cnt / 4) continue;
    size_t bits = cnt * static_cast<size_t>(nw) + 8;
    auto exc_bits = [&](size_t i) {
      return 8 + 8 * ZigZagLength(static_cast<int64_t>(static_cast<uint64_t>(s[i]) - static_cast<uint64_t>(s[at])));
    };
    for (size_t i = 0; i < at; i++) bits += exc_bits(i);
    for (size_t i = at + covered; i < cnt; i++) bits += exc_bits(i);
    if (bits < best.bits) best = Frame{s[at], nw, bits};
  }
  return best;
}

// Replaces a[i] by a[i] - a[i-1] for i >= lvl (one more difference order;
// a[0..lvl) keep the head values).
void DiffInPlace(int64_t* a, size_t n, size_t lvl) {
  for (size_t i = n; i-- > lvl;) {
    a[i] = static_cast<int64_t>(static_cast<uint64_t>(a[i]) - static_cast<uint64_t>(a[i - 1]));
  }
}

// Encoded size of an IntSeq of the given order whose differences are a[0..n).
size_t IntSeqSize(const int64_t* a, size_t n, int order, std::vector<int64_t>* sorted) {
  size_t bytes = 1;
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) bytes += ZigZagLength(a[j]);
  if (n <= first) return bytes;
  const int64_t* r = a + first;
  size_t m = n - first;
  const uint64_t g = Divisor(r, m);
  const ExactDivider div(g);
  if (g > 1) bytes += static_cast<size_t>(VarintLength(g));
  if (std::all_of(r, r + m, [&](int64_t x) { return x == r[0]; })) return bytes + ZigZagLength(div.Divide(r[0]));
  int64_t block[kBlock];
  int64_t prev_lo = 0;
  for (size_t b = 0; b < m; b += kBlock) {
    size_t cnt = std::min(kBlock, m - b);
    const int64_t* v = r + b;
    if (g > 1) {
      for (size_t i = 0; i < cnt; i++) block[i] = div.Divide(v[i]);
      v = block;
    }
    Frame f = ChooseFrame(v, cnt, sorted);
    bytes += ZigZagLength(static_cast<int64_t>(static_cast<uint64_t>(f.lo) - static_cast<uint64_t>(prev_lo)));
    bytes += 1 + (f.bits + 7) / 8;
    prev_lo = f.lo;
  }
  return bytes;
}

// Bounds on the encoded size of an IntSeq.
struct SizeBounds {
  size_t plain = SIZE_MAX;  // with plain blocks (exceptions found by ChooseFrame only shrink
                            // blocks, up to a byte or two of base varint)
  size_t lower = SIZE_MAX;  // a lower bound on the exact size
};

// Bounds for the IntSeq of the given order whose differences are a[0..n), in
// one pass that finds the divisor along the way. Returns {SIZE_MAX, SIZE_MAX}
// as soon as the lower bound exceeds `limit` (bounds under the divisor so
// far are lower bounds for any final divisor, which divides it).
SizeBounds Bounds(const int64_t* a, size_t n, int order, size_t limit, Scratch* sc) {
  size_t bytes = 1;
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) bytes += ZigZagLength(a[j]);
  if (n <= first) return {bytes, bytes};
  const int64_t* r = a + first;
  const size_t m = n - first;
  std::vector<std::pair<int64_t, int64_t>>& ranges = sc->ranges;
  ranges.clear();
  sc->rice.clear();
  uint64_t g = 0;
  ExactDivider div(0);
  size_t lower = bytes;
  bool constant = true;  // a constant sequence still may become one varint
  for (size_t b = 0; b < m; b += kBlock) {
    const size_t cnt = std::min(kBlock, m - b);
    int64_t mn = r[b], mx = r[b];
    for (size_t i = b; i < b + cnt; i++) {
      mn = std::min(mn, r[i]);
      mx = std::max(mx, r[i]);
      uint64_t mag = r[i] < 0 ? uint64_t{0} - static_cast<uint64_t>(r[i]) : static_cast<uint64_t>(r[i]);
      if (!div.Divides(mag)) [[unlikely]] {
        g = std::gcd(g, mag);
        div = ExactDivider(g);
      }
    }
    ranges.emplace_back(mn, mx);
    sc->rice.emplace_back(Frame{}, 0);
    constant = constant && mn == r[0] && mx == r[0];
    if (constant) continue;
    // A block costs 2 bytes at least (base, width), 3 when its values
    // differ (a byte of bits or of unary codes): a candidate already over
    // the limit stops before its block is sized.
    if (lower + 2 + (mn != mx ? 1 : 0) > limit) return {};
    int w = BitWidth(div.Divide(static_cast<uint64_t>(mx) - static_cast<uint64_t>(mn)));
    size_t block_bits = PatchLowerBits(r + b, cnt, mn, w, div);
    if (w >= 2) {
      // Rice sizes under the divisor so far (the final one divides it and
      // leaves residuals no narrower), an estimate rather than a strict bound.
      int64_t q[kBlock];
      const int64_t* v = r + b;
      if (!div.IsOne()) {
        for (size_t i = 0; i < cnt; i++) q[i] = div.Divide(v[i]);
        v = q;
      }
      sc->rice.back() = {RiceFrame(v, cnt, div.Divide(mn), div.Divide(mx)), g};
      block_bits = std::min(block_bits, sc->rice.back().first.bits);
    }
    lower += 2 + (block_bits + 7) / 8;
    if (lower > limit) return {};
  }
  if (g <= 1 || g > static_cast<uint64_t>(INT64_MAX)) {
    g = 1;
    div = ExactDivider(1);
  } else {
    bytes += static_cast<size_t>(VarintLength(g));
  }
  if (constant) {
    bytes += ZigZagLength(div.Divide(r[0]));
    return {bytes, bytes};
  }
  lower = std::min(lower, bytes);  // the divisor may be dropped in the end
  int64_t prev_lo = 0;
  for (size_t b = 0; b < ranges.size(); b++) {
    auto [mn, mx] = ranges[b];
    const size_t cnt = std::min(kBlock, m - b * kBlock);
    int64_t lo = div.Divide(mn);
    int w = BitWidth(div.Divide(static_cast<uint64_t>(mx) - static_cast<uint64_t>(mn)));
    size_t block_bytes = (cnt * static_cast<size_t>(w) + 7) / 8;
    if (w >= 2) {
      // The first pass's frame, unless the divisor changed after it.
      Frame rice = sc->rice[b].first;
      if (sc->rice[b].second != g) {
        int64_t q[kBlock];
        const int64_t* v = r + b * kBlock;
        for (size_t i = 0; i < cnt; i++) q[i] = div.Divide(v[i]);
        rice = RiceFrame(q, cnt, div.Divide(mn), div.Divide(mx));
      }
      if (RiceWorthIt(rice.bits, block_bytes * 8, cnt)) {
        block_bytes = rice.bits / 8;
        lo = rice.lo;
      }
    }
    bytes += ZigZagLength(static_cast<int64_t>(static_cast<uint64_t>(lo) - static_cast<uint64_t>(prev_lo)));
    bytes += 1 + block_bytes;
    prev_lo = lo;
  }
  return {bytes, std::min(lower, bytes)};
}

// Candidate encodings of one integer sequence (or the XOR values): orders
// with their bounds, and `extra` bytes before the IntSeq (mode, parameter).
struct Candidate {
  int order = 0;
  ValueMode mode = kValXor;
  int64_t param = 0;
  size_t extra = 0;
  const uint64_t* ints = nullptr;  // nullptr: XOR values, sized exactly
  SizeBounds size;
};

// Adds the orders of x[0..n) (order 1 first, as the likeliest winner) whose
// lower bound does not exceed the best plain size so far (+2 for base
// varints); updates *best_plain.
void AddOrders(const uint64_t* x, size_t n, Candidate proto, Scratch* sc, std::vector<Candidate>* out,
               size_t* best_plain) {
  auto limit = [&] {
    size_t lim = *best_plain == SIZE_MAX ? SIZE_MAX : *best_plain + 2;
    return lim > proto.extra ? lim - proto.extra : 0;
  };
  auto add = [&](const int64_t* a, int order) {
    SizeBounds b = Bounds(a, n, order, limit(), sc);
    if (b.plain == SIZE_MAX) return;
    proto.order = order;
    proto.size = {b.plain + proto.extra, b.lower + proto.extra};
    out->push_back(proto);
    *best_plain = std::min(*best_plain, proto.size.plain);
  };
  std::vector<int64_t>& a = sc->diffs;
  std::vector<int64_t>& a0 = sc->diffs1;
  a.assign(reinterpret_cast<const int64_t*>(x), reinterpret_cast<const int64_t*>(x) + n);
  a0 = a;
  DiffInPlace(a.data(), n, 1);
  add(a.data(), 1);
  add(a0.data(), 0);
  // Orders 2 and 3 always; higher ones (smooth curves, whose differences
  // keep shrinking) only while the residuals' summed bit widths (a size
  // proxy that does not depend on the bound) shrink from order to order.
  auto widths = [&](size_t order) {
    size_t bits = 0;
    for (size_t i = order; i < n; i++) bits += static_cast<size_t>(BitWidth(ZigZagEncode(a[i])));
    return bits;
  };
  size_t prev = SIZE_MAX;
  for (int order = 2; order <= kMaxOrder && static_cast<size_t>(order) < n; order++) {
    DiffInPlace(a.data(), n, static_cast<size_t>(order));
    add(a.data(), order);
    size_t w = widths(static_cast<size_t>(order));
    if (order >= 3 && w >= prev) break;
    prev = w;
  }
}

// Exact size of x[0..n) as an IntSeq of one order.
size_t IntSeqOrderSize(const uint64_t* x, size_t n, int order, Scratch* sc) {
  std::vector<int64_t>& a = sc->diffs;
  a.assign(reinterpret_cast<const int64_t*>(x), reinterpret_cast<const int64_t*>(x) + n);
  for (int lvl = 1; lvl <= order; lvl++) DiffInPlace(a.data(), n, static_cast<size_t>(lvl));
  return IntSeqSize(a.data(), n, order, &sc->sorted);
}

// Picks the smallest candidate: branch and bound over the lower bounds,
// sizing candidates exactly (ChooseFrame per block) only while one could still
// beat the best so far.
const Candidate& PickSmallest(std::vector<Candidate>* cands, size_t n, Scratch* sc) {
  std::vector<Candidate>& c = *cands;
  std::stable_sort(c.begin(), c.end(),
                   [](const Candidate& x, const Candidate& y) { return x.size.lower < y.size.lower; });
  size_t best = 0, best_bytes = SIZE_MAX;
  for (size_t i = 0; i < c.size(); i++) {
    if (c[i].size.lower >= best_bytes) break;
    // A lone contender (everything else bounded at or above its plain
    // size) needs no exact size.
    bool lone = i == 0 && (c.size() == 1 || c[1].size.lower >= c[0].size.plain);
    if (lone) return c[0];
    size_t bytes = c[i].ints == nullptr ? c[i].size.plain : c[i].extra + IntSeqOrderSize(c[i].ints, n, c[i].order, sc);
    if (bytes < best_bytes) {
      best = i;
      best_bytes = bytes;
    }
  }
  return c[best];
}

// Appends x[0..cnt) as w bits each (1 <= w <= 64), LSB-first.
template <typename Fn>
void PutPacked(size_t cnt, int w, Fn x_at, std::string* out) {
  size_t nbytes = (cnt * static_cast<size_t>(w) + 7) / 8;
  size_t start = out->size();
  out->append(nbytes, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out->data() + start);
  uint64_t acc = 0;
  int nacc = 0;
  size_t pos = 0;
  for (size_t i = 0; i < cnt; i++) {
    uint64_t x = x_at(i);
    acc |= x << nacc;
    if (nacc + w >= 64) {
      for (int k = 0; k < 8; k++) p[pos++] = static_cast<uint8_t>(acc >> (8 * k));
      acc = nacc == 0 ? 0 : x >> (64 - nacc);
      nacc = nacc + w - 64;
    } else {
      nacc += w;
    }
  }
  for (; nacc > 0; nacc -= 8, acc >>= 8) p[pos++] = static_cast<uint8_t>(acc);
}

// A Rice-coded block (after its base and width byte): the low k bits of
// each z = zigzag(v - c) packed, then each z >> k in unary (zeros, then a
// one), LSB-first and byte-padded.
void PutRiceBlock(const int64_t* v, size_t cnt, int64_t c, int k, std::string* out) {
  const uint64_t mask = k == 0 ? 0 : (k == 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1);
  if (k > 0) PutPacked(cnt, k, [&](size_t i) { return ZigZagFrom(v[i], c) & mask; }, out);
  uint8_t cur = 0;
  int nbits = 0;
  for (size_t i = 0; i < cnt; i++) {
    for (uint64_t q = ZigZagFrom(v[i], c) >> k; q > 0; q--) {
      if (++nbits == 8) {
        out->push_back(static_cast<char>(cur));
        cur = 0;
        nbits = 0;
      }
    }
    cur = static_cast<uint8_t>(cur | (1u << nbits));
    if (++nbits == 8) {
      out->push_back(static_cast<char>(cur));
      cur = 0;
      nbits = 0;
    }
  }
  if (nbits > 0) out->push_back(static_cast<char>(cur));
}

// Appends residuals r[0..m) (m >= 1) as one constant or as blocks of kBlock
// (patched frame of reference); returns the header bit.
uint8_t PutResiduals(const int64_t* r, size_t m, std::string* out, std::vector<int64_t>* sorted) {
  bool all_equal = std::all_of(r, r + m, [&](int64_t x) { return x == r[0]; });
  if (all_equal) {
    PutZigZag(out, r[0]);
    return 0;
  }
  uint64_t prev_lo = 0;
  std::pair<uint8_t, int64_t> exceptions[kBlock];
  for (size_t b = 0; b < m; b += kBlock) {
    size_t cnt = std::min(kBlock, m - b);
    const int64_t* v = r + b;
    Frame f = ChooseFrame(v, cnt, sorted);
    const uint64_t lo = static_cast<uint64_t>(f.lo);
    if (f.w >= kRiceBase) {
      PutZigZag(out, static_cast<int64_t>(lo - prev_lo));
      prev_lo = lo;
      out->push_back(static_cast<char>(f.w));
      PutRiceBlock(v, cnt, f.lo, f.w - kRiceBase, out);
      continue;
    }
    const int w = f.w;
    const uint64_t span = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    size_t nexc = 0;
    for (size_t i = 0; i < cnt; i++) {
      if (static_cast<uint64_t>(v[i]) - lo > span) {
        exceptions[nexc++] = {static_cast<uint8_t>(i), static_cast<int64_t>(static_cast<uint64_t>(v[i]) - lo)};
      }
    }
    // Block base as a difference from the previous block's.
    PutZigZag(out, static_cast<int64_t>(lo - prev_lo));
    prev_lo = lo;
    out->push_back(static_cast<char>(w | (nexc == 0 ? 0 : 0x80)));
    if (nexc != 0) out->push_back(static_cast<char>(nexc));
    if (w > 0) {
      PutPacked(
          cnt, w,
          [&](size_t i) {
            uint64_t x = static_cast<uint64_t>(v[i]) - lo;
            return x > span ? 0 : x;  // an exception is stored as 0
          },
          out);
    }
    for (size_t e = 0; e < nexc; e++) {
      out->push_back(static_cast<char>(exceptions[e].first));
      PutZigZag(out, exceptions[e].second);
    }
  }
  return kPacked;
}

// Writes x[0..n) as differences of the given order (0..3): the head
// values d^j x[j] for j < order, then the residuals d^order x[i], i >= order,
// divided by their gcd.
void PutIntSeqOrder(const uint64_t* x, size_t n, int order, std::string* out, Scratch* sc) {
  std::vector<int64_t>& a = sc->diffs;
  a.assign(reinterpret_cast<const int64_t*>(x), reinterpret_cast<const int64_t*>(x) + n);
  for (int lvl = 1; lvl <= order; lvl++) DiffInPlace(a.data(), n, static_cast<size_t>(lvl));
  size_t hdr_pos = out->size();
  out->push_back('\0');
  uint8_t hdr = static_cast<uint8_t>((order & 3) | (order >= 4 ? kOrderHigh : 0));
  size_t first = std::min(n, static_cast<size_t>(order));
  for (size_t j = 0; j < first; j++) PutZigZag(out, a[j]);
  if (n > first) {
    int64_t* r = a.data() + first;
    size_t m = n - first;
    uint64_t g = Divisor(r, m);
    if (g > 1) {
      hdr |= kHasDivisor;
      PutVarint64(out, g);
      const ExactDivider div(g);
      for (size_t i = 0; i < m; i++) r[i] = div.Divide(r[i]);
    }
    hdr |= PutResiduals(r, m, out, &sc->sorted);
  }
  (*out)[hdr_pos] = static_cast<char>(hdr);
}

// Finds the smallest e such that every value is DecimalToDouble(m, e) for an
// integer m; fills ms. False if there is none (NaN, Inf, -0.0, too precise).
bool ToDecimal(const double* vs, size_t n, int* e_out, std::vector<uint64_t>* ms) {
  auto try_at = [](double v, int exp, int64_t* m_out) {
    double scaled = v * kPow10[exp];
    if (!(std::fabs(scaled) < 0x1p62)) return false;
    // Round half away from zero like llround; the neighbours cover any
    // rounding difference.
    auto m = static_cast<int64_t>(scaled + std::copysign(0.5, scaled));
    uint64_t want = std::bit_cast<uint64_t>(v);
    for (int64_t cand : {m, m - 1, m + 1}) {
      if (std::bit_cast<uint64_t>(DecimalToDouble(cand, exp)) == want) {
        *m_out = cand;
        return true;
      }
    }
    return false;
  };
  ms->resize(n);
  int e = 0;
  size_t redo_below = 0;  // values before this index were converted at a smaller e
  for (size_t i = 0; i < n; i++) {
    int64_t m;
    if (!try_at(vs[i], e, &m)) {
      do {
        if (++e > kMaxExp) return false;
      } while (!try_at(vs[i], e, &m));
      redo_below = i;
    }
    (*ms)[i] = static_cast<uint64_t>(m);
  }
  // A value exact at a smaller exponent normally is at a larger one too, but
  // verify.
  for (size_t i = 0; i < redo_below; i++) {
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
    // m = v * 2^k from the bit pattern: v = mant * 2^(bexp - 1075), and
    // k >= -(bexp - 1075 + ctz(mant)), so a right shift drops only zeros.
    uint64_t b = std::bit_cast<uint64_t>(vs[i]);
    int64_t bexp = static_cast<int64_t>((b >> 52) & 0x7ff);
    uint64_t mant = b & ((uint64_t{1} << 52) - 1);
    if (bexp != 0) mant |= uint64_t{1} << 52;
    int64_t sh = (bexp == 0 ? 1 : bexp) - 1075 + k;
    uint64_t mag = 0;
    if (mant != 0) {
      if (sh >= 0) {
        if (sh >= 62 || (mant >> (62 - sh)) != 0) return false;
        mag = mant << sh;
      } else {
        mag = mant >> -sh;
      }
    }
    int64_t m = (b >> 63) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
    if (std::bit_cast<uint64_t>(static_cast<double>(m) * scale) != b) return false;
    (*ms)[i] = static_cast<uint64_t>(m);
  }
  *k_out = k;
  return true;
}

// MSB-first bit writer with a 64-bit accumulator, for a whole stream at once.
class BufferedBitWriter {
 public:
  explicit BufferedBitWriter(std::string* s) : s_(s) {}
  ~BufferedBitWriter() {
    if (n_ > 0) s_->push_back(static_cast<char>(acc_ << (8 - n_)));
  }
  void WriteBit(bool bit) { WriteBits(bit ? 1 : 0, 1); }
  // Writes the low n bits of v (1 <= n <= 64), most significant first.
  void WriteBits(uint64_t v, int n) {
    if (n > 32) {
      Put(v >> 32, n - 32);
      n = 32;
    }
    Put(v, n);
  }

 private:
  void Put(uint64_t v, int n) {  // n <= 32, so acc_ holds at most 39 bits
    acc_ = (acc_ << n) | (v & ((uint64_t{1} << n) - 1));
    n_ += n;
    while (n_ >= 8) {
      n_ -= 8;
      s_->push_back(static_cast<char>(acc_ >> n_));
    }
  }
  std::string* s_;
  uint64_t acc_ = 0;  // the low n_ bits are pending
  int n_ = 0;
};

void PutXorValues(const double* vs, size_t n, std::string* out) {
  BufferedBitWriter w(out);
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

uint64_t XorValueBits(const double* vs, size_t n) {
  uint64_t bits = 64;
  uint8_t leading = 0xff, trailing = 0;
  uint64_t prev = std::bit_cast<uint64_t>(vs[0]);
  for (size_t i = 1; i < n; i++) {
    uint64_t cur = std::bit_cast<uint64_t>(vs[i]);
    uint64_t x = prev ^ cur;
    prev = cur;
    if (x == 0) {
      bits += 1;
      continue;
    }
    int nl = std::min(std::countl_zero(x), 31);
    int nt = std::countr_zero(x);
    if (leading != 0xff && nl >= leading && nt >= trailing) {
      bits += 2 + static_cast<uint64_t>(64 - leading - trailing);
      continue;
    }
    leading = static_cast<uint8_t>(nl);
    trailing = static_cast<uint8_t>(nt);
    bits += 2 + 5 + 6 + static_cast<uint64_t>(64 - nl - nt);
  }
  return bits;
}

void EncodeDenseExhaustive(const int64_t* ts, const double* vs, size_t n, std::string* out) {
  Scratch sc;
  auto put_smallest = [&](const uint64_t* x, std::string* dst) {
    std::string best, alt;
    for (int order : {1, 0, 2, 3, 4, 5, 6, 7}) {
      if (order >= 2 && static_cast<size_t>(order) >= n) continue;
      alt.clear();
      PutIntSeqOrder(x, n, order, &alt, &sc);
      if (best.empty() || alt.size() < best.size()) best.swap(alt);
    }
    dst->append(best);
  };
  PutVarint64(out, n);
  put_smallest(reinterpret_cast<const uint64_t*>(ts), out);
  std::string best(1, static_cast<char>(kValXor)), cand;
  PutXorValues(vs, n, &best);
  std::vector<uint64_t> ints;
  int e;
  if (ToDecimal(vs, n, &e, &ints)) {
    cand = {static_cast<char>(kValDecimal), static_cast<char>(e)};
    put_smallest(ints.data(), &cand);
    if (cand.size() < best.size()) best.swap(cand);
  }
  int64_t k;
  if (ToBinary(vs, n, &k, &ints)) {
    cand.assign(1, static_cast<char>(kValBinary));
    PutZigZag(&cand, k);
    put_smallest(ints.data(), &cand);
    if (cand.size() < best.size()) best.swap(cand);
  }
  ints.resize(n);
  std::memcpy(ints.data(), vs, n * sizeof(double));
  cand.assign(1, static_cast<char>(kValBits));
  put_smallest(ints.data(), &cand);
  if (cand.size() < best.size()) best.swap(cand);
  out->append(best);
}

}  // namespace internal

namespace {

// The encoder's scratch, one per thread (EncodeDense is reentrant per thread
// only through its callers, which never nest).
internal::Scratch& ThreadScratch() {
  thread_local internal::Scratch sc;
  return sc;
}

// The choices of a chunk in a byte (DenseChoice): bit 7 set, the value mode
// in bits 5-6, the timestamps' order (0-3) in bits 3-4, the values' in 0-2.
constexpr uint8_t kChoiceSet = 0x80;
uint8_t PackChoice(int ts_order, internal::ValueMode mode, int order) {
  if (ts_order > 3) return 0;  // rare: no hint
  return static_cast<uint8_t>(kChoiceSet | (mode << 5) | (ts_order << 3) | (order & 7));
}

// The XOR candidate of the values, sized exactly (and cheaply).
internal::Candidate XorCandidate(const double* vs, size_t n) {
  const size_t bytes = 1 + static_cast<size_t>((internal::XorValueBits(vs, n) + 7) / 8);
  return internal::Candidate{0, internal::kValXor, 0, 0, nullptr, {bytes, bytes}};
}

// The values as `mode`'s integers (order 0, its parameter and extra bytes)
// in *c; false when they do not convert. kValXor: the values themselves.
bool ModeCandidate(internal::ValueMode mode, const double* vs, size_t n, internal::Scratch* sc,
                   internal::Candidate* c) {
  using namespace internal;
  *c = Candidate{0, mode, 0, 0, nullptr, {}};
  switch (mode) {
    case kValXor: return true;
    case kValDecimal: {
      int e = 0;
      if (!ToDecimal(vs, n, &e, &sc->dec)) return false;
      *c = Candidate{0, kValDecimal, e, 2, sc->dec.data(), {}};
      return true;
    }
    case kValBinary: {
      int64_t k = 0;
      if (!ToBinary(vs, n, &k, &sc->bin)) return false;
      *c = Candidate{0, kValBinary, k, 1 + ZigZagLength(k), sc->bin.data(), {}};
      return true;
    }
    case kValBits: *c = Candidate{0, kValBits, 0, 1, reinterpret_cast<const uint64_t*>(vs), {}}; return true;
  }
  return false;
}

// Writes the values as candidate c says.
void PutValues(const internal::Candidate& c, const double* vs, size_t n, std::string* out, internal::Scratch* sc) {
  using namespace internal;
  out->push_back(static_cast<char>(c.mode));
  if (c.ints == nullptr) {
    PutXorValues(vs, n, out);
    return;
  }
  if (c.mode == kValDecimal) out->push_back(static_cast<char>(c.param));
  if (c.mode == kValBinary) PutZigZag(out, c.param);
  PutIntSeqOrder(c.ints, n, c.order, out, sc);
}

// The search: every order of the timestamps, every value mode and order,
// bounded (AddOrders, PickSmallest). Stores its choices in *choice.
void EncodeDenseSearch(const int64_t* ts, const double* vs, size_t n, std::string* out, uint8_t* choice) {
  using namespace internal;
  Scratch& sc = ThreadScratch();
  PutVarint64(out, n);

  // Timestamps: the smallest order.
  std::vector<Candidate>& cands = sc.cands;
  const auto* tx = reinterpret_cast<const uint64_t*>(ts);
  cands.clear();
  size_t best_plain = SIZE_MAX;
  AddOrders(tx, n, Candidate{}, &sc, &cands, &best_plain);
  const int ts_order = PickSmallest(&cands, n, &sc).order;
  PutIntSeqOrder(tx, n, ts_order, out, &sc);

  // Values: XOR (sized exactly and cheaply) against the integer modes.
  cands.assign(1, XorCandidate(vs, n));
  best_plain = cands[0].size.plain;
  Candidate dec, bin, bits;
  const bool decimal = ModeCandidate(kValDecimal, vs, n, &sc, &dec);
  if (decimal) AddOrders(dec.ints, n, dec, &sc, &cands, &best_plain);
  // Integers with an odd one among them are the same integers in binary mode
  // at k = 0, with as many extra bytes: the twin would only repeat the bounds.
  if (ModeCandidate(kValBinary, vs, n, &sc, &bin) && !(decimal && dec.param == 0 && bin.param == 0)) {
    AddOrders(bin.ints, n, bin, &sc, &cands, &best_plain);
  }
  ModeCandidate(kValBits, vs, n, &sc, &bits);
  AddOrders(bits.ints, n, bits, &sc, &cands, &best_plain);
  const Candidate& c = PickSmallest(&cands, n, &sc);
  *choice = PackChoice(ts_order, c.mode, c.order);
  PutValues(c, vs, n, out, &sc);
}

// Encodes with the choices of `choice`, if the values allow its mode; with
// `orders`, the values' order is searched among the mode's (and XOR).
// Stores the choices made in *made.
bool EncodeDenseAs(const int64_t* ts, const double* vs, size_t n, std::string* out, uint8_t choice, bool orders,
                   uint8_t* made) {
  using namespace internal;
  Scratch& sc = ThreadScratch();
  const int ts_order = (choice >> 3) & 3;
  Candidate c;
  if (!ModeCandidate(static_cast<ValueMode>((choice >> 5) & 3), vs, n, &sc, &c)) return false;
  c.order = choice & 7;
  PutVarint64(out, n);
  PutIntSeqOrder(reinterpret_cast<const uint64_t*>(ts), n, ts_order, out, &sc);
  if (orders && c.ints != nullptr) {
    std::vector<Candidate>& cands = sc.cands;
    cands.assign(1, XorCandidate(vs, n));
    size_t best_plain = cands[0].size.plain;
    AddOrders(c.ints, n, c, &sc, &cands, &best_plain);
    c = PickSmallest(&cands, n, &sc);
  }
  *made = PackChoice(ts_order, c.mode, c.order);
  PutValues(c, vs, n, out, &sc);
  return true;
}

}  // namespace

void EncodeDense(const int64_t* ts, const double* vs, size_t n, std::string* out) {
  CHECK(n >= 1 && n <= internal::kMaxDenseSamples, "BUG: EncodeDense sample count out of range");
  uint8_t choice;
  EncodeDenseSearch(ts, vs, n, out, &choice);
}

void EncodeDenseLike(const int64_t* ts, const double* vs, size_t n, std::string* out, DenseChoice* choice,
                     DenseSearch search) {
  CHECK(n >= 1 && n <= internal::kMaxDenseSamples, "BUG: EncodeDense sample count out of range");
  if (search != DenseSearch::kAll && (choice->bits & kChoiceSet) != 0) {
    const size_t start = out->size();
    if (EncodeDenseAs(ts, vs, n, out, choice->bits, search == DenseSearch::kOrders, &choice->bits)) return;
    out->resize(start);
  }
  EncodeDenseSearch(ts, vs, n, out, &choice->bits);
}

}  // namespace trainwatch::chunkenc
