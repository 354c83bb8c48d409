#pragma once
// Reading the WAL back (replay) and repairing it after a crash.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/memory.h"
#include "base/status.h"

namespace trainwatch::wal {

// Where reading stopped on a bad frame; pass it to Repair.
struct CorruptionInfo {
  int segment = -1;
  uint64_t offset = 0;  // byte offset of the bad frame within the segment
  // The bad bytes run to the end of their segment and every later segment is
  // empty: what a crash mid-write leaves (partial frame, zero-filled tail).
  // False means damage inside the log; Repair then drops valid later records.
  bool torn_tail = false;
};

// Iterates the records of the segments of a WAL directory, in order. Not
// thread-safe. Meant for replay while no Writer appends: a segment is read
// up to the size it has when the reader reaches it. Reads go through a
// buffer of a few MiB (read(2), not mmap: the kernel copies from its linear
// map, so checking the frames' CRCs runs 3x faster than through 4 KiB
// user mappings of the page cache on a virtual machine).
//
//   ASSIGN_OR_RETURN(auto r, Reader::Open(dir));
//   std::string_view rec;
//   while (r->Next(&rec)) { ... }
//   if (!r->status().ok()) { ... r->corruption() ... }
class Reader {
 public:
  // Reads segments with index >= first_segment. A missing dir is NotFound.
  static Result<std::unique_ptr<Reader>> Open(const std::string& dir, int first_segment = 0);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Sets *record to the next record and returns true; the view stays valid
  // until the next call. False at the end or on error: check status().
  bool Next(std::string_view* record);

  // OK, or sticky: a Corruption whose message is
  // "wal segment 00000003 offset 81920: checksum mismatch", or an IOError.
  const Status& status() const { return status_; }
  // Set iff status() is a Corruption.
  const std::optional<CorruptionInfo>& corruption() const { return corruption_; }

  // Segment index and frame offset of the record last returned by Next.
  int segment() const { return rec_segment_; }
  uint64_t offset() const { return rec_offset_; }

 private:
  struct Seg {
    int index;
    std::string path;
  };
  Reader(std::string dir, std::vector<Seg> segments) : dir_(std::move(dir)), segments_(std::move(segments)) {}
  bool OpenNextSegment();
  // The segment's bytes [off, off + n), or fewer where it ends first; valid
  // until the next call. Sets status_ on a read error (and returns {}).
  std::string_view Window(uint64_t off, size_t n);
  static constexpr size_t kReadSize = size_t{4} << 20;  // bytes a refill reads at least
  void CloseSegment();
  void SetCorruption(int segment, uint64_t offset, std::string_view what, bool torn_candidate);
  bool LaterSegmentsEmpty() const;

  const std::string dir_;
  const std::vector<Seg> segments_;
  size_t next_seg_ = 0;                    // index into segments_ of the next one to open
  int fd_ = -1;                            // current segment; -1 between segments
  int cur_index_ = -1;                     // segment index of fd_
  std::string cur_path_;
  uint64_t seg_size_ = 0;                  // its size when opened
  uint64_t pos_ = 0;                       // offset of the next frame in it
  std::vector<char, memory::LargeBlockAllocator<char>> buf_;  // its bytes [buf_off_, buf_off_ + buf_len_)
  uint64_t buf_off_ = 0;
  size_t buf_len_ = 0;
  int rec_segment_ = -1;
  uint64_t rec_offset_ = 0;
  Status status_;
  std::optional<CorruptionInfo> corruption_;
};

// Decodes the frame at the start of `data` (the unread rest of a segment).
// True: *record is its payload and *frame_size its bytes, header included.
// False: *what is the reason (docs/format/wal.md's messages) and *torn
// whether a crash mid-write leaves such a frame (it is the last thing in
// `data`). For readers that tail a segment while a Writer appends: they pass
// only bytes the writer has finished.
bool ParseFrame(std::string_view data, std::string_view* record, size_t* frame_size, std::string* what, bool* torn);

// Truncates segment `segment` to `offset` bytes (when it exists) and, unless
// keep_later, deletes every later segment: after it the log reads cleanly up
// to the cut (and, with keep_later, on through the later segments, which a
// caller has read cleanly). REQUIRES: no Writer is open on dir.
Status Repair(const std::string& dir, int segment, uint64_t offset, bool keep_later = false);
inline Status Repair(const std::string& dir, const CorruptionInfo& c) { return Repair(dir, c.segment, c.offset); }

}  // namespace trainwatch::wal
