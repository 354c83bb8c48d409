#include "ingest/series_cache.h"

#include <algorithm>

#include "base/crc32c.h"
#include "base/hash.h"

namespace trainwatch::ingest {

SeriesCache::Key SeriesCache::KeyOf(std::string_view text, uint64_t salt) {
  // Two independent functions of the text: a 64-bit multiply-mix hash and a
  // CRC32C (one instruction per 8 bytes) with the length.
  uint32_t crc = crc32c::Extend(static_cast<uint32_t>(salt ^ (salt >> 32)), text.data(), text.size());
  return Key{HashString(text, 0x9e3779b97f4a7c15ull ^ salt), (uint64_t{crc} << 32) | (text.size() & 0xffffffffu)};
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
