#pragma once
// Maps a series as written on the wire ("name{a=\"b\"}" plus any extra
// labels) to the storage ref it was appended under, so repeated pushes of a
// known series skip label parsing, sorting, hashing and lookup. Keys are
// 128-bit hashes of the text (collision odds ~2^-128 per pair); refs that
// went stale are detected by Appender::AppendByRef and re-resolved.
// Thread-safe (sharded mutexes). Bounded: a shard that grows past its share
// of `max_entries` is cleared.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "storage/storage.h"

namespace trainwatch::ingest {

class SeriesCache {
 public:
  // The default holds the 10 M active series one 24 GiB machine is to take
  // (docs/performance.md) with room for churn; a full table is 16 B per entry
  // at 3/8 to 3/4 load, allocated only as series come.
  explicit SeriesCache(size_t max_entries = 16u << 20) : max_per_shard_(max_entries / kShards + 1) {}

  struct Key {
    uint64_t a = 0, b = 0;
    bool operator==(const Key&) const = default;
  };
  // `salt` distinguishes the same text under different extra labels.
  static Key KeyOf(std::string_view series_text, uint64_t salt);

  // 0 when unknown.
  storage::SeriesRef Get(const Key& k) const;
  // refs[i] = Get(keys[i]) for every i, taking each shard's lock once and
  // touching all of a shard's slots before comparing any, so that in a table
  // larger than the CPU's caches the lookups' misses overlap instead of
  // following one another. REQUIRES: refs.size() == keys.size().
  void GetMany(std::span<const Key> keys, std::span<storage::SeriesRef> refs) const;
  void Put(const Key& k, storage::SeriesRef ref);
  size_t size() const;

 private:
  static constexpr size_t kShards = 64;
  // Open addressing with linear probing: one cache line per lookup. A slot
  // with ref 0 is empty (0 is never a valid ref). 16 bytes: the key's first
  // 64 bits and 32 more bits of it (96 bits compared; collision odds stay
  // negligible), and a 32-bit ref (larger refs are not cached).
  struct Slot {
    uint64_t a = 0;
    uint32_t b = 0;
    uint32_t ref = 0;
  };
  static uint32_t Fold(const Key& k) { return static_cast<uint32_t>(k.b >> 32) ^ static_cast<uint32_t>(k.b); }
  static size_t ShardOf(const Key& k) { return (k.b >> 32) % kShards; }
  struct Shard {
    mutable base::Mutex mu;
    std::vector<Slot> slots TW_GUARDED_BY(mu);  // power-of-two size, at most 3/4 full
    size_t used TW_GUARDED_BY(mu) = 0;
  };
  static storage::SeriesRef Probe(const Shard& s, const Key& k) TW_REQUIRES(s.mu);
  static void Insert(Shard* s, const Key& k, storage::SeriesRef ref) TW_REQUIRES(s->mu);
  static void Reinsert(Shard* s, const Slot& o) TW_REQUIRES(s->mu);  // into a table being rebuilt
  const size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace trainwatch::ingest
