#pragma once
// Private: the DB implementation, split by concern over db.cc (open, replay,
// querying, stats), db_cut.cc (persisting the head, checkpoints) and
// db_compact.cc (compaction and retention).

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tsdb/block.h"
#include "tsdb/db.h"
#include "tsdb/head.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::tsdb {

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
  Status Health() override;

  // One maintenance pass: cut the head if it spans enough, compact, apply
  // retention. Exposed for tests.
  Status Maintain();

 private:
  // db.cc
  Status LoadBlocks();
  Status ReplayWal();
  Status ReplayDir(const std::string& dir, int first_segment, bool repair);
  // Replays segments from first_segment on until the end or the first damage,
  // which it returns in *damage.
  Status ReplaySegments(const std::string& dir, int first_segment, std::optional<wal::CorruptionInfo>* damage);
  void BackgroundLoop();
  // Re-encodes the chunks closed during replay densely (Head::SetDeferDense).
  void DensifyAfterReplay();
  std::vector<std::shared_ptr<Block>> BlocksSnapshot();

  // db_cut.cc: persists head data before `boundary` (all of it when close_all).
  Status CutHead(int64_t boundary, bool close_all);
  Status WriteBlocks(const Head::PersistSet& set);
  Status WriteCheckpoint(int segment);
  // The head's current data as one block in `parent` (for Snapshot).
  Status WriteHeadBlock(const std::string& parent);

  // db_compact.cc
  Status Compact(bool force);
  Status CompactBlocks(const std::vector<std::shared_ptr<Block>>& group);
  Status ApplyRetention();

  std::string CheckpointDir(int segment) const;
  std::string WalDir() const { return opts_.dir + "/wal"; }

  const Options opts_;
  std::unique_ptr<Head> head_;
  std::unique_ptr<wal::Writer> wal_;
  int lock_fd_ = -1;

  std::mutex maint_mu_;  // one cut / compaction / retention pass at a time
  std::mutex blocks_mu_;
  std::vector<std::shared_ptr<Block>> blocks_;  // GUARDED_BY(blocks_mu_), sorted by (mint, seq)
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> wal_corruptions_{0}, compactions_{0};
  std::atomic<uint64_t> series_skipped_{0};  // series a block could not hold (issue 17)
  // "<id>.corrupt" dirs: found at open, plus blocks set aside since.
  std::atomic<uint64_t> blocks_set_aside_{0};
  // AddSeries; a series the writer refuses for its labels is logged, counted
  // and skipped (one bad series must not stop every cut), other errors return.
  Status AddSeriesOrSkip(BlockWriter* w, const model::Labels& labels, const std::vector<int64_t>& ts,
                         const std::vector<double>& vs);

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool stopping_ = false;  // GUARDED_BY(bg_mu_)
  std::thread bg_;
  std::thread densify_;
  bool closed_ = false;
};

}  // namespace trainwatch::tsdb
