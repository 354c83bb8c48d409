#pragma once
// Shared types and constants of the block index file (docs/format/index.md).

#include <cstdint>

#include "tsdb/index/chunks_file.h"

namespace trainwatch::index {

// One persisted chunk of a series: its time range (inclusive, ms) and where
// its bytes live in the block's chunk segments.
struct ChunkMeta {
  int64_t mint = 0;
  int64_t maxt = 0;
  ChunkRef ref = 0;
  bool operator==(const ChunkMeta&) const = default;
};

inline constexpr uint32_t kIndexMagic = 0x58495754;  // bytes "TWIX"
inline constexpr uint8_t kIndexFormatV1 = 1;
inline constexpr size_t kIndexHeaderSize = 8;   // magic u32, version u8, 3 zero bytes
inline constexpr uint32_t kSeriesPerBlock = 64; // series per compressed series block
// Postings lists of at least kPostingsBlockedMin ids that are not bitmaps are
// "blocked" (kind 2): deltas in blocks of kPostingsBlock ids behind a table.
inline constexpr size_t kPostingsBlock = 128;
inline constexpr size_t kPostingsBlockedMin = 4 * kPostingsBlock;

}  // namespace trainwatch::index
