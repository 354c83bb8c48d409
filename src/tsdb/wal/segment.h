#pragma once
// Internal: the on-disk frame and segment-naming rules shared by the writer,
// the reader and Repair. Layout: docs/format/wal.md.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::wal::internal {

// Frame header: fixed32 length | fixed32 masked crc32c | uint8 type.
inline constexpr size_t kFrameHeaderSize = 9;
// The only frame type written today. 0 is never valid, so a zero-filled tail
// can not be mistaken for a frame; other values are reserved (compression).
inline constexpr uint8_t kFrameFull = 1;
inline constexpr uint64_t kMaxRecordSize = UINT32_MAX;

// leveldb's CRC mask: storing the CRC of data that itself holds CRCs is
// weak, so the stored value is rotated and offset.
inline constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

// Fills dst[0, kFrameHeaderSize) for a kFrameFull frame holding `record`.
// REQUIRES: record.size() <= kMaxRecordSize.
void EncodeFrameHeader(std::string_view record, char* dst);
// Masked CRC32C over the type byte followed by the record.
uint32_t FrameCrc(uint8_t type, std::string_view record);

// "00000012".
std::string SegmentName(int index);
// Parses an 8-digit segment name; returns -1 for anything else.
int ParseSegmentName(std::string_view name);
std::string SegmentPath(const std::string& dir, int index);

struct SegmentRef {
  int index;
  uint64_t size;  // bytes, as stat'ed when listed
};
// Segments in dir, ascending by index. Other entries (checkpoints, *.tmp)
// are ignored. A missing dir is NotFound.
Result<std::vector<SegmentRef>> ListSegments(const std::string& dir);

}  // namespace trainwatch::wal::internal
