#pragma once
// A block's meta.json: identity, time range, stats and compaction lineage.
// Layout: docs/format/block.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::index {

struct BlockMeta {
  std::string id;            // ULID, 26 chars Crockford base32
  int64_t mint = 0;          // inclusive, ms
  int64_t maxt = 0;          // exclusive, ms (as Prometheus)
  uint64_t num_series = 0;
  uint64_t num_samples = 0;
  uint64_t num_chunks = 0;
  uint32_t compaction_level = 1;
  std::vector<std::string> sources;  // ids of the level-1 blocks merged in (self for level 1)
  uint64_t seq = 0;                  // monotonically increasing creation sequence
  uint32_t version = 1;              // meta format version

  bool operator==(const BlockMeta&) const = default;
};

inline constexpr std::string_view kBlockMetaFile = "meta.json";
inline constexpr std::string_view kBlockIndexFile = "index";
inline constexpr std::string_view kBlockChunksDir = "chunks";

// Pretty-printed JSON.
std::string EncodeBlockMeta(const BlockMeta& m);
// Corruption on malformed JSON, missing or mistyped fields,
// unknown version, or mint > maxt.
Result<BlockMeta> DecodeBlockMeta(std::string_view json);

// Read / write <dir>/meta.json (atomically).
Result<BlockMeta> ReadBlockMeta(const std::string& dir);
Status WriteBlockMeta(const std::string& dir, const BlockMeta& m);

}  // namespace trainwatch::index
