#pragma once
// Private: the DB implementation, split by concern over db.cc (open, replay,
// querying, stats), db_cut.cc (persisting the head, checkpoints) and
// db_compact.cc (compaction and retention).

#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "tsdb/block.h"
#include "tsdb/chunk_log.h"
#include "tsdb/db.h"
#include "tsdb/downsample.h"
#include "tsdb/head.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::tsdb {

// The multiple of r at or before t (r > 0), for negative t too.
inline int64_t AlignDown(int64_t t, int64_t r) { return t >= 0 ? t / r * r : -(((-t) + r - 1) / r) * r; }

class DBImpl : public DB {
 public:
  explicit DBImpl(const Options& opts);
  ~DBImpl() override;

  Status Init();
  std::unique_ptr<storage::Appender> NewAppender() override { return head_->NewAppender(); }
  Status CheckTimestamp(int64_t t) override { return head_->CheckTimestamp(t); }
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;
  Status Flush() override;
  Result<std::string> Snapshot(bool skip_head) override;
  Status Close() override;
  Stats GetStats() override;
  int64_t StartTime() override;
  index::MemPostings::Cardinality Cardinality(size_t limit) override { return head_->Cardinality(limit); }
  Status Health() override;

  // One maintenance pass: cut the head if it spans enough, compact, apply
  // retention. Exposed for tests.
  Status Maintain();
  // Logs the chunks closed since the last flush to the chunk log
  // (tsdb/chunk_log.h), behind a new WAL segment. The background loop calls
  // it every minute, or sooner when much is queued. Exposed for tests.
  Status FlushChunkLog();
  // The tier blocks per resolution (tsdb/downsample.h). Exposed for tests.
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> TiersSnapshot();

 private:
  // db.cc
  Status LoadBlocks();
  Status ReplayWal();
  // `mark`: the chunk log's, whose covered samples are skipped (null: none);
  // `checkpoint`: dir is a checkpoint (every record in it is before the mark).
  // `series_through`: the last segment whose series records
  // ReplaySeriesRecords applied (they are passed over; -1: none).
  Status ReplayDir(const std::string& dir, int first_segment, bool repair, const chunklog::Mark* mark,
                   bool checkpoint, int series_through);
  // Replays segments from first_segment on until the end or the first damage,
  // which it returns in *damage.
  Status ReplaySegments(const std::string& dir, int first_segment, std::optional<wal::CorruptionInfo>* damage,
                        const chunklog::Mark* mark, bool checkpoint, int series_through);
  // Creates the series of the series records of dir's segments from
  // first_segment on, passing over everything else, up to the end or the
  // first damage (left to ReplayDir). Returns the last segment it read
  // cleanly to its end (first_segment - 1: none). Runs while the chunk log
  // loads, so that series creation and the load share the cores.
  int ReplaySeriesRecords(const std::string& dir, int first_segment);
  void BackgroundLoop();
  // Re-encodes the chunks closed during replay densely (Head::SetDeferDense).
  void DensifyAfterReplay();
  std::vector<std::shared_ptr<Block>> BlocksSnapshot();

  // db_cut.cc: persists head data before `boundary` (all of it when close_all).
  Status CutHead(int64_t boundary, bool close_all) TW_REQUIRES(maint_mu_);
  Status WriteBlocks(const Head::PersistSet& set);
  Status WriteCheckpoint(int segment) TW_REQUIRES(maint_mu_);
  // The head's current data as one block in `parent` (for Snapshot).
  Status WriteHeadBlock(const std::string& parent);

  // db_compact.cc
  Status Compact(bool force);
  // The range compaction grows blocks to: a tenth of the retention, 31 days
  // at most, one block duration at least (Prometheus's rule).
  int64_t MaxBlockRange() const;
  // The largest level range Compact merges blocks into: the block duration
  // times the largest power of 3 within MaxBlockRange (18 h at a 15 d
  // retention, 20.25 d without one).
  int64_t TopLevelRange() const;
  // The newest sample's time: of the head, or of `blocks` (sorted by mint).
  int64_t DataMaxTime(const std::vector<std::shared_ptr<Block>>& blocks) const;
  // Whether compaction takes the level window [w, w + range) as complete:
  // it ends at least half a block before the newest sample (db_maxt).
  bool WindowComplete(int64_t w, int64_t range, int64_t db_maxt) const {
    return w + range <= db_maxt - opts_.block_duration_ms / 2;
  }
  Status CompactBlocks(const std::vector<std::shared_ptr<Block>>& group);
  // --retention.time, then --retention.size (db_compact.cc). The size
  // counts the WAL, the chunk log, raw blocks and tier blocks. While over
  // it: tier blocks beyond half of it go first, oldest first; then raw
  // blocks, oldest first, each getting its tiers (--storage.tsdb.downsample)
  // just before it goes; then the remaining tier blocks.
  Status ApplyRetention() TW_REQUIRES(maint_mu_);

  // db_downsample.cc: tiers (tsdb/downsample.h). Every raw block that no
  // other overlaps gets one tier block per resolution made from exactly its
  // sources as soon as it is written, merged later with its neighbours'
  // (CompactTiers), so a block compaction makes of blocks with tiers has
  // them already (but a coarser tier its range now holds whole windows
  // of); one that late data was merged into has them made again, replacing
  // or spliced into the tier blocks in its range.
  Status LoadTiers();
  // Makes the tiers of at most `max_blocks` raw blocks, oldest first (0: all),
  // so a data dir from before tiers is caught up a few blocks per pass
  // without holding maintenance for long.
  Status Downsample(size_t max_blocks) TW_REQUIRES(maint_mu_);
  // For each of `blocks` (sorted by mint): whether another overlaps it.
  // Overlapping blocks get no tiers until compaction merged them.
  static std::vector<bool> OverlappedBlocks(const std::vector<std::shared_ptr<Block>>& blocks);
  // The tiers `m` lacks: those whose retention keeps its range and where
  // no tier block holds its range made from (at least) its sources (its
  // own, or a merged one) with no other overlapping it, or where stale
  // blocks of raw blocks merged into it lie. None when its range holds no
  // whole window of any tier.
  std::array<bool, kNumTiers> TiersToMake(const index::BlockMeta& m);
  // Makes `m`'s tiers `which` from raw data (blocks and head: the window
  // ending at maxt takes the sample at maxt) and swaps them in for the tier
  // blocks in its range; where a merged tier block holds its range too,
  // they are spliced into it (their points win).
  Status MakeTiers(const index::BlockMeta& m, const std::array<bool, kNumTiers>& which) TW_REQUIRES(maint_mu_);
  // Swaps `made` (null: none) in for the blocks `gone` of tier t, which
  // are deleted once no reader holds them.
  void ReplaceTierBlocks(int t, const std::vector<std::shared_ptr<TierBlock>>& gone, std::shared_ptr<TierBlock> made)
      TW_REQUIRES(blocks_mu_);
  uint64_t TierBytes();
  // --retention.size: deletes the tier block of the oldest range (5 m
  // before 1 h); returns its bytes (at least 1), 0 when there is none.
  uint64_t DropOldestTierBlock();
  // Merges contiguous tier blocks of a resolution level by level (windows
  // of the block duration × 3^k, k = 1..5) once no raw block's tiers will
  // land in the window.
  Status CompactTiers() TW_REQUIRES(maint_mu_);
  void ApplyTierRetention() TW_REQUIRES(maint_mu_);
  std::string TierDir(int tier) const;

  // The chunk log generation that goes with checkpoint.<gen> (0: none).
  std::string ChunkLogDir(int gen) const;
  // Starts generation `gen` with a base (closing the current one) and keeps
  // appending to it. On failure the DB goes on without a chunk log (replay
  // then re-applies the whole WAL) until the next head cut or open.
  void StartChunkLog(int gen) TW_REQUIRES(maint_mu_);
  Status WriteChunkLog(wal::Writer* w, bool all) TW_REQUIRES(maint_mu_);
  // Closes and deletes the current generation after a failed write: what it
  // logged may now miss chunks that a later mark would promise.
  void DropChunkLog(const Status& why) TW_REQUIRES(maint_mu_);
  std::string CheckpointDir(int segment) const;
  std::string WalDir() const { return opts_.dir + "/wal"; }
  // Closed head chunks' blocks written out of memory (SpillOptions).
  std::string SpillDir() const { return opts_.dir + "/chunks_mapped"; }

  const Options opts_;
  std::unique_ptr<Head> head_;
  std::unique_ptr<wal::Writer> wal_;
  std::unique_ptr<wal::Writer> chunk_log_ TW_GUARDED_BY(maint_mu_);  // null: none
  std::string chunk_log_dir_;                // the current generation's directory; empty: none
  int chunk_gen_ = 0;                        // the generation that goes with the current checkpoint
  // The current generation's spans of WAL segments (chunklog::Mark::spans)
  // and the first segment of the span still open.
  std::vector<chunklog::SegmentSpan> spans_ TW_GUARDED_BY(maint_mu_);
  int span_start_ TW_GUARDED_BY(maint_mu_) = 0;
  std::optional<chunklog::Mark> replay_mark_;  // the mark replay used
  int64_t replay_tail_maxt_ = INT64_MIN;      // latest sample replayed from WAL segments after it
  uint64_t replay_skipped_records_ = 0;       // samples records replay did not decode
  static constexpr size_t kChunkLogFlushBytes = 16u << 20;  // queued chunk bytes that call a flush early
  int64_t last_chunk_flush_ms_ = 0;          // monotonic; background thread only
  uint64_t last_chunk_flush_appended_ = 0;   // head_->AppendedTotal() then; background thread only
  int lock_fd_ = -1;

  base::Mutex maint_mu_;  // one cut / compaction / retention pass at a time
  base::Mutex blocks_mu_;
  std::vector<std::shared_ptr<Block>> blocks_ TW_GUARDED_BY(blocks_mu_);  // sorted by (mint, seq)
  // Per resolution, sorted by RawMint, not overlapping.
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> tiers_ TW_GUARDED_BY(blocks_mu_);
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> wal_corruptions_{0}, compactions_{0};
  std::atomic<uint64_t> series_skipped_{0};  // series a block could not hold (issue 17)
  // "<id>.corrupt" dirs: found at open, plus blocks set aside since.
  std::atomic<uint64_t> blocks_set_aside_{0};
  // AddSeries; a series the writer refuses for its labels is logged, counted
  // and skipped (one bad series must not stop every cut), other errors return.
  Status AddSeriesOrSkip(BlockWriter* w, const model::Labels& labels, const SeriesSamples& s);

  base::Mutex bg_mu_;
  base::CondVar bg_cv_;
  bool stopping_ TW_GUARDED_BY(bg_mu_) = false;
  std::thread bg_;
  std::thread densify_;
  bool closed_ = false;
};

}  // namespace trainwatch::tsdb
