#pragma once
// The embedded time-series database: a head (recent data in memory, backed by
// the WAL) plus immutable on-disk blocks, compaction and retention. Implements
// storage::Appendable and storage::Queryable. Thread-safe.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/storage.h"
#include "tsdb/index/postings.h"
#include "tsdb/limits.h"

namespace trainwatch::tsdb {

enum class WalSync {
  kPerRequest,  // Commit returns after fsync (group commit: concurrent commits share one fsync)
  kInterval,    // fsync every `wal_sync_interval_ms`; Commit returns after write(2)
};

struct Options {
  std::string dir;
  int64_t block_duration_ms = 2 * 3600 * 1000;         // head cut into blocks of this span
  int64_t retention_ms = 15LL * 24 * 3600 * 1000;      // --retention.time; 0 = unlimited
  // Appends later than now + this are refused (--ingest.max-future; 0 = no
  // bound); so are those older than now - retention_ms, which retention
  // would delete at once. Retention ages blocks by this same clock.
  int64_t max_future_ms = 10 * 60 * 1000;
  std::function<int64_t()> now_ms;  // the wall clock when empty; tests and soak runs set their own
  uint64_t retention_bytes = 0;                        // --retention.size; 0 = unlimited
  // Downsampled tiers (5 m, 1 h, 6 h; tsdb/downsample.h): written from old
  // raw blocks at compaction into <dir>/downsample/, and kept for
  // tier_retention_ms[tier] (--storage.tsdb.retention.resolution-5m/-1h,
  // the latter for 6 h too; 0 = forever), independent of retention_ms.
  bool downsample = true;
  std::array<int64_t, 3> tier_retention_ms = {90LL * 24 * 3600 * 1000, 365LL * 24 * 3600 * 1000,
                                              365LL * 24 * 3600 * 1000};
  // Bounds on new series (--storage.max-series, --ingest.max-labels-per-series,
  // ...): refused with ResourceExhausted and counted; existing ones flow on.
  SeriesLimits series_limits;
  WalSync wal_sync = WalSync::kPerRequest;
  int64_t wal_sync_interval_ms = 100;
  uint64_t wal_segment_bytes = 128ull << 20;
  bool background = true;  // run cut/compaction/retention in a background thread
  // WAL replay applies samples in batches of 16 per series known so far,
  // at least 256 Ki and at most this many (sorted by series; 72 bytes each
  // while replaying: the batch, the one being applied, the sort's scratch).
  size_t replay_batch_samples = 4u << 20;
};

struct Stats {
  uint64_t head_series = 0;
  uint64_t head_samples = 0;       // samples currently in the head
  uint64_t head_chunks = 0;
  int64_t head_min_time = 0, head_max_time = 0;
  uint64_t blocks = 0;
  uint64_t block_bytes = 0;
  uint64_t wal_bytes = 0;
  uint64_t appended_samples_total = 0;
  uint64_t out_of_order_samples_total = 0;
  uint64_t duplicate_samples_total = 0;  // ignored: same series and timestamp as a stored one
  uint64_t wal_corruptions_total = 0;
  uint64_t compactions_total = 0;
  uint64_t too_far_in_future_samples_total = 0;  // refused appends (and unsupported WAL timestamps)
  uint64_t too_old_samples_total = 0;
  uint64_t compaction_series_skipped_total = 0;  // series a block could not hold, left out of it
  // WAL samples and whole samples records the last open skipped (not even
  // decoded): the chunk log held them.
  uint64_t replay_skipped_samples = 0, replay_skipped_records = 0;
  uint64_t tier_blocks = 0;  // downsampled tier blocks, both resolutions
  uint64_t tier_bytes = 0;
  uint64_t blocks_set_aside = 0;  // damaged blocks renamed "<id>.corrupt" (present at open, or set aside since)
  // Closed head chunks in files mapped back (SpillOptions; of the process),
  // and blocks of them that could not be written out and stayed in memory.
  uint64_t head_chunks_mapped_bytes = 0, head_chunk_spill_failures_total = 0;
  // New series refused by each bound of Options::series_limits (SeriesRefusal order).
  std::array<uint64_t, kNumSeriesRefusals> series_refused_total = {};
};

class DB : public storage::Appendable, public storage::Queryable {
 public:
  // Opens (creating if needed) the DB in opts.dir, loads blocks and replays
  // the WAL. A torn or corrupt WAL tail is truncated and logged, never fatal.
  static Result<std::unique_ptr<DB>> Open(const Options& opts);
  ~DB() override = default;

  // Persists everything acknowledged so far into compacted on-disk blocks and
  // returns when that is durable (POST /api/v1/admin/tsdb/flush).
  virtual Status Flush() = 0;
  // Writes a snapshot into <dir>/snapshots/<name> and returns the name, as
  // Prometheus's POST /api/v1/admin/tsdb/snapshot does: every block
  // hard-linked (no copy), plus the head's data as one more block unless
  // `skip_head`. A data dir of its own: `serve --data-dir` on it reads it.
  // The DB itself is not changed.
  virtual Result<std::string> Snapshot(bool skip_head) = 0;
  // Stops background work and syncs the WAL. Idempotent; the destructor calls it.
  virtual Status Close() = 0;
  virtual Stats GetStats() = 0;
  // The time of the oldest sample held (ms; INT64_MAX when empty), as
  // Prometheus's StartTime: remote_read's read_recent: false asks remote
  // stores only for the time before it.
  virtual int64_t StartTime() = 0;
  // The head's cardinality statistics, each list the `limit` largest
  // (/api/v1/status/tsdb, Prometheus's shape).
  virtual index::MemPostings::Cardinality Cardinality(size_t limit) = 0;
  // OK, or why the DB cannot keep what it acknowledges (a failed WAL fsync);
  // /-/ready answers 503 with it.
  virtual Status Health() = 0;
};

}  // namespace trainwatch::tsdb
