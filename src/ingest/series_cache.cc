#include "ingest/series_cache.h"

#include <algorithm>
#include <cstring>

#include "base/crc32c.h"
#include "base/hash.h"

namespace trainwatch::ingest {

namespace {

// A key is two independent functions of the text: a 64-bit multiply-mix hash
// and a CRC32C with the length. The hash runs two chains, words at even and
// odd positions, so that no multiply waits on the one before it; with the
// CRC (one instruction a word) in the same loop, a key costs about one
// chain's latency per 16 bytes rather than the sum of three (remote_write
// hashes each series' label bytes, some 300 of them, every time it comes).
constexpr uint64_t kK1 = 0xa0761d6478bd642full, kK2 = 0xe7037ed1a0b428dbull, kK3 = 0x8ebc6af09c88c6e3ull;

struct Chains {
  uint64_t h1, h2;
};

Chains ChainsBegin(size_t n, uint64_t salt) { return {salt ^ (n * kK1), (salt + kK3) ^ (n * kK2)}; }

// The last 0..15 bytes: the first whole word goes to the even chain, the
// rest (zero-padded) to the odd one.
uint64_t ChainsEnd(Chains c, const char* p, size_t n) {
  uint64_t w0 = 0, w1 = 0;
  std::memcpy(&w0, p, std::min<size_t>(n, 8));
  if (n > 8) std::memcpy(&w1, p + 8, n - 8);
  c.h1 = HashMix(c.h1 ^ w0 ^ kK3, kK2 ^ n);
  c.h2 = HashMix(c.h2 ^ w1 ^ kK1, kK3);
  return HashMix(c.h1 ^ kK2, c.h2 ^ kK1);
}

SeriesCache::Key KeyOfPortable(std::string_view text, uint64_t salt) {
  const char* p = text.data();
  size_t n = text.size();
  Chains c = ChainsBegin(n, salt);
  for (; n >= 16; p += 16, n -= 16) {
    uint64_t w0, w1;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    c.h1 = HashMix(c.h1 ^ w0, kK2);
    c.h2 = HashMix(c.h2 ^ w1, kK1);
  }
  const uint32_t crc = crc32c::Extend(static_cast<uint32_t>(salt ^ (salt >> 32)), text.data(), text.size());
  return {ChainsEnd(c, p, n), (uint64_t{crc} << 32) | (text.size() & 0xffffffffu)};
}

#if defined(__x86_64__)
// KeyOfPortable with the CRC32C instruction in the loop: the same key.
__attribute__((target("sse4.2"))) SeriesCache::Key KeyOfHw(std::string_view text, uint64_t salt) {
  const char* p = text.data();
  size_t n = text.size();
  Chains c = ChainsBegin(n, salt);
  uint64_t crc = ~static_cast<uint32_t>(salt ^ (salt >> 32));
  for (; n >= 16; p += 16, n -= 16) {
    uint64_t w0, w1;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    crc = __builtin_ia32_crc32di(crc, w0);
    c.h1 = HashMix(c.h1 ^ w0, kK2);
    crc = __builtin_ia32_crc32di(crc, w1);
    c.h2 = HashMix(c.h2 ^ w1, kK1);
  }
  uint32_t crc32 = static_cast<uint32_t>(crc);
  for (size_t i = 0; i < n; i++) crc32 = __builtin_ia32_crc32qi(crc32, static_cast<unsigned char>(p[i]));
  return {ChainsEnd(c, p, n), (uint64_t{~crc32} << 32) | (text.size() & 0xffffffffu)};
}

bool HaveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

SeriesCache::Key SeriesCache::KeyOf(std::string_view text, uint64_t salt) {
#if defined(__x86_64__)
  if (HaveSse42()) return KeyOfHw(text, salt);
#endif
  return KeyOfPortable(text, salt);
}

storage::SeriesRef SeriesCache::Probe(const Shard& s, const Key& k) {
  if (s.slots.empty()) return 0;
  size_t mask = s.slots.size() - 1;
  const uint32_t b = Fold(k);
  for (size_t i = k.a & mask;; i = (i + 1) & mask) {
    const Slot& slot = s.slots[i];
    if (slot.ref == 0) return 0;
    if (slot.a == k.a && slot.b == b) return slot.ref;
  }
}

storage::SeriesRef SeriesCache::Get(const Key& k) const {
  const Shard& s = shards_[ShardOf(k)];
  base::MutexLock lock(&s.mu);
  return Probe(s, k);
}

void SeriesCache::GetMany(std::span<const Key> keys, std::span<storage::SeriesRef> refs) const {
  // The lookups ordered by shard (a counting sort).
  std::array<uint32_t, kShards + 1> begin{};
  for (const Key& k : keys) begin[ShardOf(k) + 1]++;
  for (size_t i = 0; i < kShards; i++) begin[i + 1] += begin[i];
  std::array<uint32_t, kShards> next;
  std::copy(begin.begin(), begin.end() - 1, next.begin());
  thread_local std::vector<uint32_t> order;
  order.resize(keys.size());
  for (uint32_t i = 0; i < keys.size(); i++) order[next[ShardOf(keys[i])]++] = i;
  for (size_t sh = 0; sh < kShards; sh++) {
    if (begin[sh] == begin[sh + 1]) continue;
    const Shard& s = shards_[sh];
    base::MutexLock lock(&s.mu);
    if (!s.slots.empty()) {
      const size_t mask = s.slots.size() - 1;
      for (uint32_t j = begin[sh]; j < begin[sh + 1]; j++) __builtin_prefetch(&s.slots[keys[order[j]].a & mask]);
    }
    for (uint32_t j = begin[sh]; j < begin[sh + 1]; j++) refs[order[j]] = Probe(s, keys[order[j]]);
  }
}

void SeriesCache::Insert(Shard* s, const Key& k, storage::SeriesRef ref) {
  size_t mask = s->slots.size() - 1;
  const uint32_t b = Fold(k);
  for (size_t i = k.a & mask;; i = (i + 1) & mask) {
    Slot& slot = s->slots[i];
    if (slot.ref == 0) {
      slot = Slot{k.a, b, static_cast<uint32_t>(ref)};
      s->used++;
      return;
    }
    if (slot.a == k.a && slot.b == b) {
      slot.ref = static_cast<uint32_t>(ref);
      return;
    }
  }
}

void SeriesCache::Reinsert(Shard* s, const Slot& o) {
  size_t mask = s->slots.size() - 1;
  size_t i = o.a & mask;
  while (s->slots[i].ref != 0) i = (i + 1) & mask;
  s->slots[i] = o;
  s->used++;
}

void SeriesCache::Put(const Key& k, storage::SeriesRef ref) {
  if (ref == 0 || ref > UINT32_MAX) return;
  Shard& s = shards_[ShardOf(k)];
  base::MutexLock lock(&s.mu);
  if (s.used >= max_per_shard_) {
    s.slots.assign(s.slots.size(), Slot{});
    s.used = 0;
  }
  if (4 * (s.used + 1) > 3 * s.slots.size()) {
    std::vector<Slot> old = std::move(s.slots);
    s.slots.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    s.used = 0;
    for (const Slot& o : old) {
      if (o.ref != 0) Reinsert(&s, o);
    }
  }
  Insert(&s, k, ref);
}

size_t SeriesCache::size() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    base::MutexLock lock(&s.mu);
    n += s.used;
  }
  return n;
}

}  // namespace trainwatch::ingest
