#pragma once
// The on-disk queue of samples waiting to be sent by remote_write: a
// directory of WAL segments (tsdb/wal framing, records of tsdb/wal/records.h)
// that every remote reads at its own position. Layout: docs/format/remote_write.md.
//
// Each segment is self-contained: the first time a series is used in a
// segment, a series record (queue id -> labels) precedes its samples, so a
// reader that starts at any segment (after a restart, or after the oldest
// segments were dropped) knows every series it meets. Queue ids are never
// reused, across restarts too: the high 24 bits are an epoch counted up at
// each Open (<dir>/epoch), the low 40 a counter.
//
// Durability: a committed batch is handed to the OS at once (it survives a
// process crash) and fdatasync'ed by a background thread every
// sync_interval_ms (power loss may lose that window), on rotation and at
// Close.
//
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "model/labels.h"
#include "storage/storage.h"
#include "tsdb/wal/records.h"

namespace trainwatch::wal {
class Writer;
}

namespace trainwatch::remote {

struct QueueOptions {
  std::string dir;
  // A segment is closed once it holds this many bytes, or when it is older
  // than segment_max_age_ms and not empty, so sent data is deleted and
  // series not written for two segments are forgotten.
  uint64_t segment_bytes = 8ull << 20;
  int64_t segment_max_age_ms = 5 * 60 * 1000;
  // Beyond this many bytes the oldest segments are deleted, sent or not
  // (counted in segments_dropped()): the bound on disk use during a long
  // outage. 0: no bound.
  uint64_t max_bytes = 1ull << 30;
  int64_t sync_interval_ms = 1000;
};

// A place in the queue: a segment and a byte offset in it. Records end at
// positions; (s, 0) is the start of segment s.
struct Position {
  int segment = 0;
  uint64_t offset = 0;
  auto operator<=>(const Position&) const = default;
};

class Queue : public storage::Appendable {
 public:
  static Result<std::unique_ptr<Queue>> Open(QueueOptions opts);
  ~Queue() override;  // Close()s
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Appenders whose refs are queue ids (the agent's storage). Commit logs
  // the batch; Append fails on an empty label set.
  std::unique_ptr<storage::Appender> NewAppender() override;

  // The queue id of `labels` without its empty-valued labels, created when
  // new. InvalidArgument when nothing is left.
  Result<uint64_t> Resolve(const model::Labels& labels);
  // Whether `id` is still known (series unused for two segments are
  // forgotten; the caller then resolves the labels again).
  bool Known(uint64_t id);
  // Logs one batch of (queue id, t, v) in order, with the series records it
  // needs. Samples of ids no longer known are skipped and counted.
  Status Log(const std::vector<wal::RefSample>& samples);
  // The same with native-histogram samples, logged in their own record after
  // the floats' (the queue's histogram record is the TSDB WAL's, type 4).
  Status Log(const std::vector<wal::RefSample>& samples, const std::vector<wal::RefHistogramSample>& hists);

  // The end of the last complete record: readers read up to here.
  Position End() const;
  // Waits until End() moves past `pos`, Close, or timeout_ms; returns End().
  Position WaitPast(Position pos, int64_t timeout_ms) const;
  // The oldest segment on disk.
  int FirstSegment() const;
  // Deletes closed segments with index < segment (they are sent).
  Status TruncateBefore(int segment);
  std::string SegmentPath(int segment) const;

  // Syncs and closes. Appends fail afterwards; WaitPast returns at once.
  Status Close();

  // For metrics.
  uint64_t SizeBytes() const;
  uint64_t segments_dropped() const;
  uint64_t samples_unknown_series() const;
  uint64_t series() const;
  const std::string& dir() const { return opts_.dir; }

 private:
  struct Entry {
    std::string labels;   // model::AppendEncodedLabels: a fifth of a model::Labels
    int defined_in = -1;  // segment whose series record holds it; -1: none yet
    int last_used = 0;    // segment of the last append (or resolve)
  };

  explicit Queue(QueueOptions opts);
  Status RotateLocked() TW_REQUIRES(mu_);
  void DropOldestLocked() TW_REQUIRES(mu_);
  void SyncLoop();

  const QueueOptions opts_;
  mutable base::Mutex mu_;
  mutable base::CondVar cv_;  // End() moved, or closed
  base::CondVar sync_cv_;     // closed: wakes SyncLoop
  std::unique_ptr<wal::Writer> writer_ TW_GUARDED_BY(mu_);  // null once closed
  Position end_ TW_GUARDED_BY(mu_);
  int first_segment_ TW_GUARDED_BY(mu_) = 0;
  int64_t segment_started_ms_ TW_GUARDED_BY(mu_) = 0;  // wall clock
  uint64_t next_id_ TW_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, Entry> by_id_ TW_GUARDED_BY(mu_);
  std::unordered_multimap<uint64_t, uint64_t> by_hash_ TW_GUARDED_BY(mu_);  // hash of Entry::labels -> id
  uint64_t segments_dropped_ TW_GUARDED_BY(mu_) = 0;
  uint64_t unknown_ TW_GUARDED_BY(mu_) = 0;
  bool closed_ TW_GUARDED_BY(mu_) = false;
  std::string series_buf_ TW_GUARDED_BY(mu_);  // reused encodings
  std::string samples_buf_ TW_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, std::string_view>> new_series_ TW_GUARDED_BY(mu_);
  std::thread sync_thread_;
};

// Reads the records of a Queue in order from a position, up to End(). Not
// thread-safe; one per reader. Segments that vanished under it (dropped by
// the size bound) are skipped to the oldest one left, and counted.
class QueueCursor {
 public:
  QueueCursor(const Queue* q, Position start);
  ~QueueCursor();
  QueueCursor(const QueueCursor&) = delete;
  QueueCursor& operator=(const QueueCursor&) = delete;

  // The next complete record and the position just past it; false when the
  // reader has caught up with End() (call again later) or on a read error.
  // A corrupt record in a closed segment skips the rest of that segment
  // (counted in segments_skipped()); status() keeps the last error.
  bool Next(std::string_view* record, Position* end);
  Position position() const { return pos_; }
  const Status& status() const { return status_; }
  uint64_t segments_skipped() const { return skipped_; }

 private:
  bool OpenSegment(int segment);
  bool Fill(uint64_t limit);

  const Queue* q_;
  Position pos_;
  int fd_ = -1;          // open segment pos_.segment, or -1
  std::string buf_;      // bytes of the segment from buf_start_
  uint64_t buf_start_ = 0;
  uint64_t skipped_ = 0;
  Status status_;
};

}  // namespace trainwatch::remote
