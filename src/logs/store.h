#pragma once
// The embedded log store: time partitions (one SQLite database per
// partition_ms, default a day, under <data>/logs/). Lines are kept per stream
// in zstd-compressed blocks of up to block_lines lines (one SQLite row each,
// with a contentless FTS5 index row per block); a stream's lines that do not
// yet fill a block wait in `chunks`, one uncompressed row per append, and
// are packed when they do (docs/format/logs.md). Each line has a sequence number,
// increasing in append order within a partition. An Append returns once its
// lines are durable (synchronous=FULL: fsync per commit).
// Retention drops whole partitions (by age, measured from the clock `now_ms`,
// and by total size). At most max_open_partitions SQLite connections are
// open at once (least recently used closed, reopened on demand), so a year of
// partitions does not exhaust file descriptors. The last `tail_buffer`
// appended records are also kept in memory for live tail.
// Thread-safe: one mutex serializes SQLite access.

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "logs/query.h"
#include "logs/record.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace trainwatch::logs {

struct LineRef;

struct StoreOptions {
  std::string dir;                 // created when missing
  bool sync_full = true;           // synchronous=FULL (else NORMAL: survives a crash, not power loss)
  int64_t partition_ms = 86400000;
  int64_t retention_ms = 0;        // 0: keep; else drop partitions ending before now - retention
  uint64_t retention_bytes = 0;    // 0: no limit; else drop oldest partitions while above
  size_t tail_buffer = 10000;
  size_t block_lines = 1024;       // lines per compressed block
  // The clock (unix ms) for retention and the ingest time bounds; empty: NowMillis.
  std::function<int64_t()> now_ms;
  // 0: unbounded; else lines dated more than this after now are refused.
  int64_t max_future_ms = 0;
  // SQLite connections kept open (each holds 3 descriptors: db, -wal, -shm).
  size_t max_open_partitions = 32;
  // Where trainwatch_logs_lines_rejected_total and trainwatch_logs_partitions
  // register once the store is open (outlives it); null: nowhere.
  common::metrics::Registry* metrics = nullptr;
};

struct SelectOptions {
  int64_t start_ns = INT64_MIN;  // inclusive
  int64_t end_ns = INT64_MAX;    // inclusive
  size_t limit = 100;
  std::string cursor;            // next_cursor of the previous page, or empty
};

struct SelectResult {
  std::vector<Record> lines;  // newest first
  std::string next_cursor;    // empty when there is nothing more
};

// Called after each successful Append with the stored records (log-derived metrics).
class AppendObserver {
 public:
  virtual ~AppendObserver() = default;
  virtual void Observe(const std::vector<Record>& records) = 0;
};

class LogStore {
 public:
  static Result<std::unique_ptr<LogStore>> Open(const StoreOptions& opts);
  ~LogStore();
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // REQUIRES: called before the first Append; `o` outlives the store.
  void SetObserver(AppendObserver* o) { observer_ = o; }

  // Stores every record (labels must be valid); durable when OK. On error
  // nothing of a failed partition's transaction is kept. A record outside
  // IngestBounds() refuses the whole call (InvalidArgument naming the record
  // and the bound, counted by CountRejected) before anything is stored. A non-empty
  // `batch_id` makes the append idempotent: the id is stored with the lines,
  // and a later Append with the same id stores nothing again in the
  // partitions that already hold it (*duplicate, when given, is set then).
  Status Append(std::vector<Record> records, std::string_view batch_id = {}, bool* duplicate = nullptr);

  // Lines matching `q` in [start, end], newest first, with cursor paging.
  Result<SelectResult> Select(const Query& q, const SelectOptions& o);
  // Counts of matching lines per bucket [start + k*step, start + (k+1)*step).
  Result<std::vector<std::pair<int64_t, uint64_t>>> Histogram(const Query& q, int64_t start_ns, int64_t end_ns,
                                                              int64_t step_ns);
  // Stream label names / values of partitions overlapping [start, end], sorted.
  Result<std::vector<std::string>> LabelNames(int64_t start_ns, int64_t end_ns);
  Result<std::vector<std::string>> LabelValues(std::string_view name, int64_t start_ns, int64_t end_ns);

  // Live tail: records appended after sequence *seq (append order), waiting
  // up to timeout_ms for the first; advances *seq. Records that fell out of
  // the tail buffer are skipped. Returns at once after Shutdown.
  std::vector<Record> WaitNew(uint64_t* seq, int64_t timeout_ms);
  uint64_t LastSeq();
  // Wakes and ends tail waiters; call before stopping the HTTP server.
  void Shutdown();
  bool IsShutdown();

  // Lines stored after `*after` (partition start ms -> last sequence number read), in
  // insertion order per partition, oldest partition first, at most `max`;
  // advances *after. For forwarding: the store is the disk-backed queue.
  Result<std::vector<Record>> ReadAfter(std::map<int64_t, int64_t>* after, size_t max);

  // Drops partitions per the retention options; also run after appends.
  Status ApplyRetention();

  // The times accepted at ingest now: not after now + max_future_ms, not
  // before now - retention_ms (those would be deleted at once).
  TimeBounds IngestBounds() const;
  // Counts a line refused for its time (trainwatch_logs_lines_rejected_total).
  void CountRejected(TimeReject reason);
  struct Stats {
    uint64_t partitions = 0;
    uint64_t bytes = 0;
    uint64_t appended_lines = 0;  // since open
    uint64_t open_partitions = 0;  // SQLite connections open now
    uint64_t rejected_too_far_in_future = 0, rejected_too_old = 0;  // since open
    uint64_t set_aside = 0;  // damaged partitions renamed logs-*.db.corrupt*: present at open, or set aside since
  };
  Stats GetStats();

  struct Partition;

 private:
  explicit LogStore(const StoreOptions& o);
  Status Init();
  Result<Partition*> GetPartition(int64_t start_ms, bool create) TW_REQUIRES(mu_);
  // Opens p's connection when closed and marks it most recently used; closes
  // the least recently used others above max_open_partitions.
  Status Touch(Partition* p) TW_REQUIRES(mu_);
  Status Connect(Partition* p) TW_REQUIRES(mu_);
  void Disconnect(Partition* p) TW_REQUIRES(mu_);
  // Removes p's files and forgets it (retention).
  Status DropPartition(int64_t start_ms) TW_REQUIRES(mu_);
  // Damage (SQLite's SQLITE_CORRUPT or NOTADB, a block that does not
  // decode): the file of the partition starting at start_ms is renamed
  // aside with its WAL, counted and logged, so every other partition is
  // served and new lines of its range go to a new one. The partition, if
  // loaded, is closed and forgotten first. An error only when the rename fails.
  Status SetAside(int64_t start_ms, const Status& damage) TW_REQUIRES(mu_);
  // Runs `read` on the partition starting at start_ms (its connection opened
  // first). False when it met damage and the partition was set aside: the
  // caller drops what `read` gathered and goes on with the others.
  Result<bool> ReadPartition(int64_t start_ms, const std::function<Status(Partition*)>& read) TW_REQUIRES(mu_);
  std::string PartitionPath(int64_t start_ms) const;
  // Start times of the partitions overlapping [start_ns, end_ns], oldest
  // first or newest first: a list that a loop setting partitions aside can walk.
  std::vector<int64_t> PartitionsOverlapping(int64_t start_ns, int64_t end_ns, bool newest_first) const
      TW_REQUIRES(mu_);
  int64_t Now() const;  // opts_.now_ms, else the wall clock
  // First and last ns of the partition starting at start_ms, saturated to int64.
  int64_t PartitionFirstNs(int64_t start_ms) const;
  int64_t PartitionLastNs(int64_t start_ms) const;
  Status AppendToPartition(Partition* p, std::vector<Record*>& recs, std::string_view batch_id, bool* duplicate)
      TW_REQUIRES(mu_);
  Status AppendLocked(Partition* p, std::vector<Record*>& recs) TW_REQUIRES(mu_);
  Status WriteBlock(Partition* p, int64_t stream, const std::vector<LineRef>& lines) TW_REQUIRES(mu_);
  Status PackPending(Partition* p, int64_t stream) TW_REQUIRES(mu_);
  Status Migrate(Partition* p) TW_REQUIRES(mu_);         // schema 1
  Status MigratePending(Partition* p) TW_REQUIRES(mu_);  // schema 2
  int64_t PartitionStart(int64_t t_ns) const;

  StoreOptions opts_;
  AppendObserver* observer_ = nullptr;
  base::Mutex mu_;  // also the SQLite connections of the partitions
  ZSTD_CCtx_s* cctx_ TW_GUARDED_BY(mu_) = nullptr;  // reused by every block written
  ZSTD_DCtx_s* dctx_ TW_GUARDED_BY(mu_) = nullptr;
  std::map<int64_t, std::unique_ptr<Partition>> partitions_ TW_GUARDED_BY(mu_);  // by start ms
  std::list<Partition*> open_ TW_GUARDED_BY(mu_);  // partitions with a connection, most recently used first
  int64_t last_retention_ms_ = 0;
  uint64_t appended_ = 0;
  uint64_t rejected_future_ TW_GUARDED_BY(mu_) = 0;
  uint64_t rejected_old_ TW_GUARDED_BY(mu_) = 0;
  uint64_t set_aside_ TW_GUARDED_BY(mu_) = 0;

  base::Mutex tail_mu_;
  base::CondVar tail_cv_;
  std::deque<Record> tail_ TW_GUARDED_BY(tail_mu_);  // the newest tail_buffer records; tail_seq_ is the last one's
  uint64_t tail_seq_ TW_GUARDED_BY(tail_mu_) = 0;
  bool shutdown_ TW_GUARDED_BY(tail_mu_) = false;

  common::metrics::Collector metrics_;  // from GetStats, at scrape time
  common::metrics::Registration metrics_registration_;
};

}  // namespace trainwatch::logs
