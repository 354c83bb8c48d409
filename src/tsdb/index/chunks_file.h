#pragma once
// A block's chunk data: segment files <dir>/000001, 000002, ... each at most
// ~kDefaultSegmentSize bytes (a single larger chunk gets a segment of its
// own). Layout: docs/format/block.md.
//
// A ChunkRef is (segment sequence << 32) | byte offset of the chunk record
// within that segment file. Ref 0 is never a valid chunk.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::file {
class MmapFile;
}

namespace trainwatch::index {

using ChunkRef = uint64_t;

inline constexpr uint64_t kDefaultSegmentSize = 512ull << 20;
inline constexpr uint32_t kChunksMagic = 0x54574348;  // "TWCH" read as LE fixed32 "HCWT"
inline constexpr uint8_t kChunksFormatV1 = 1;
inline constexpr size_t kChunksSegmentHeaderSize = 8;  // magic u32, version u8, 3 zero bytes

inline ChunkRef MakeChunkRef(uint32_t segment, uint32_t offset) {
  return (static_cast<uint64_t>(segment) << 32) | offset;
}
inline uint32_t ChunkRefSegment(ChunkRef r) { return static_cast<uint32_t>(r >> 32); }
inline uint32_t ChunkRefOffset(ChunkRef r) { return static_cast<uint32_t>(r); }

// Segment file name for a sequence number: "000001".
std::string ChunkSegmentName(uint32_t seq);

// Writes chunks sequentially. Not thread-safe. Files are written with
// buffered appends and fsynced by Finish(); the directory is fsynced too.
class ChunkWriter {
 public:
  // Creates `dir` if needed. Fails if a segment file already exists there.
  static Result<std::unique_ptr<ChunkWriter>> Create(const std::string& dir,
                                                     uint64_t segment_size = kDefaultSegmentSize);
  ~ChunkWriter();  // closes without syncing if Finish() was not called
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Appends one chunk: varint len(data), encoding byte, data, CRC32C over
  // encoding byte + data. InvalidArgument if a record exceeds 4 GiB.
  Result<ChunkRef> Write(uint8_t encoding, std::string_view data);
  // Flushes, fsyncs and closes all segments. Idempotent.
  Status Finish();

  uint64_t bytes_written() const { return total_bytes_; }
  uint64_t num_chunks() const { return num_chunks_; }

 private:
  ChunkWriter(std::string dir, uint64_t segment_size);
  Status Cut();     // starts the next segment
  Status Flush();   // writes buf_ to fd_
  Status CloseSegment(bool sync);

  std::string dir_;
  uint64_t segment_size_;
  int fd_ = -1;
  uint32_t seq_ = 0;     // current segment's sequence number
  uint64_t seg_off_ = 0; // bytes in the current segment (incl. buffered)
  std::string buf_;
  uint64_t total_bytes_ = 0;
  uint64_t num_chunks_ = 0;
  bool finished_ = false;
};

struct ChunkView {
  uint8_t encoding = 0;
  std::string_view data;  // points into the mmapped segment
};

// Reads chunks through read-only mmaps of all segments. Thread-safe.
class ChunkReader {
 public:
  struct Options {
    // Verify each chunk's CRC32C in Get(). Costs one pass over the chunk
    // bytes (~10+ GB/s with SSE4.2); turn off for hot query paths that
    // tolerate detecting corruption later in the decoder.
    bool verify_checksums = true;
  };
  // Opens every segment file in `dir` (names must be 6-digit sequence
  // numbers; other files are ignored). A missing dir is NotFound.
  static Result<std::unique_ptr<ChunkReader>> Open(const std::string& dir, Options opts);
  static Result<std::unique_ptr<ChunkReader>> Open(const std::string& dir) { return Open(dir, Options()); }
  ~ChunkReader();

  // The chunk at `ref`. The view stays valid for the reader's lifetime.
  // Corruption (with segment file and offset) on bad refs or damaged data.
  Result<ChunkView> Get(ChunkRef ref) const;

  uint64_t TotalBytes() const;

 private:
  ChunkReader(std::string dir, Options opts) : dir_(std::move(dir)), opts_(opts) {}
  std::string dir_;
  Options opts_;
  // Indexed by sequence number; null for missing sequence numbers.
  std::vector<std::unique_ptr<file::MmapFile>> segs_;
};

}  // namespace trainwatch::index
