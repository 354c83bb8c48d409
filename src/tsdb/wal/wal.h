#pragma once
// Write-ahead log for the TSDB head: a directory of numbered segment files
// ("00000000", "00000001", ...) holding CRC-framed records. Layout:
// docs/format/wal.md. Records are opaque bytes here; tsdb/wal/records.h
// encodes the head's series and samples. Reading and repair: tsdb/wal/reader.h.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace trainwatch::wal {

struct Options {
  std::string dir;
  // A segment is closed before a record would make it exceed this size. A
  // record larger than this gets a segment of its own. Records never span
  // segments.
  uint64_t segment_bytes = 128ull << 20;
};

// Appends records to the log. Thread-safe: Log, Sync, NextSegment,
// TruncateBefore and the accessors may be called concurrently; Close must not
// race with the others.
//
// Durability: Log hands the bytes to the OS with pwritev(2) before returning,
// so they survive a process crash. Sync makes everything logged before it
// durable against power loss (fdatasync), with group commit: concurrent
// callers share one fdatasync. After a failed fdatasync every call fails.
class Writer {
 public:
  // Creates dir if needed and starts a new segment after the last existing
  // one. An existing segment is never appended to: its tail may be torn.
  // Replay and Repair (reader.h) should run before Open.
  static Result<std::unique_ptr<Writer>> Open(const Options& options);
  ~Writer();  // Close()s, ignoring errors.
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Appends one record; one of 4 GiB or more is InvalidArgument.
  Status Log(std::string_view record);
  // Appends several records with one pwritev(2), in order (more than one
  // where the batch crosses a segment boundary). On error a prefix of them
  // may have been logged.
  Status Log(const std::vector<std::string>& records);

  // Returns once every record logged before the call is fdatasync'ed, along
  // with any segments closed since and their directory entries. N concurrent
  // callers cost about one fdatasync (leader/follower group commit).
  Status Sync();
  // OK, or the error that made the writer refuse writes (a failed fsync:
  // the kernel may have dropped the dirty pages). Sticky until reopened.
  Status Health() const;

  // Fsyncs and closes the current segment and starts a new one; returns the
  // new segment's index.
  Result<int> NextSegment();

  // Deletes segments with index < segment.
  // REQUIRES: segment <= CurrentSegment().
  Status TruncateBefore(int segment);

  int CurrentSegment() const;
  // Bytes of all segment files, the current one included.
  uint64_t SizeBytes() const;
  // Group-commit rounds run so far (one fdatasync pass each); for metrics.
  uint64_t SyncRounds() const { return sync_rounds_.load(std::memory_order_relaxed); }

  // Syncs and closes. Later calls of anything but Close fail; Close is
  // idempotent.
  Status Close();


 private:
  struct Segment;  // an open segment file (writer.cc)

  Writer(Options options, std::map<int, uint64_t> closed_sizes);
  static Result<std::shared_ptr<Segment>> CreateSegment(const std::string& dir, int index);
  Status WriteFrames(const std::string_view* records, size_t n);
  Status RollLocked(bool sync_old) TW_REQUIRES(mu_);
  Status CheckUsableLocked() const TW_REQUIRES(mu_);
  // One group-commit round; returns the logical position it made durable.
  Result<uint64_t> SyncRound();

  const Options opts_;

  mutable base::Mutex mu_;
  std::shared_ptr<Segment> cur_ TW_GUARDED_BY(mu_);  // null once closed
  int cur_index_ TW_GUARDED_BY(mu_) = 0;             // cur_'s index, kept after Close
  uint64_t cur_bytes_ TW_GUARDED_BY(mu_) = 0;        // bytes written to cur_
  // Segments rolled by Log that are not fdatasync'ed yet; the next Sync does.
  std::vector<std::shared_ptr<Segment>> unsynced_ TW_GUARDED_BY(mu_);
  bool dir_dirty_ TW_GUARDED_BY(mu_) = false;  // a segment was created since the last dir fsync
  uint64_t logged_ TW_GUARDED_BY(mu_) = 0;     // bytes logged since Open; Sync's position
  std::map<int, uint64_t> closed_sizes_ TW_GUARDED_BY(mu_);  // index -> bytes of segments before cur_
  Status err_ TW_GUARDED_BY(mu_);                           // sticky: a failed fsync poisons the writer
  bool closed_ TW_GUARDED_BY(mu_) = false;

  base::Mutex sync_mu_;
  base::CondVar sync_cv_;
  uint64_t synced_ TW_GUARDED_BY(sync_mu_) = 0;    // logged_ position known durable
  bool syncing_ TW_GUARDED_BY(sync_mu_) = false;  // a leader is inside SyncRound
  std::atomic<uint64_t> sync_rounds_{0};
};

}  // namespace trainwatch::wal
