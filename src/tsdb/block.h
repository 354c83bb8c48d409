#pragma once
// Persisted blocks: an immutable directory <id>/ with meta.json, index and
// chunks/ covering [meta.mint, meta.maxt). Read through mmap.
// docs/format/block.md describes the layout.

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "model/histogram.h"
#include "storage/storage.h"
#include "tsdb/chunkenc/st.h"
#include "tsdb/index/block_meta.h"
#include "tsdb/index/index_format.h"

namespace trainwatch::index {
class IndexReader;
class ChunkReader;
class ChunkWriter;
class IndexWriter;
}  // namespace trainwatch::index

namespace trainwatch::tsdb {

// Thread-safe. Keep a shared_ptr while reading; queriers hold one.
class Block : public std::enable_shared_from_this<Block> {
 public:
  static Result<std::shared_ptr<Block>> Open(const std::string& dir);
  ~Block();

  const index::BlockMeta& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }
  uint64_t SizeBytes() const { return size_bytes_; }
  bool Overlaps(int64_t mint, int64_t maxt) const { return meta_.mint <= maxt && mint < meta_.maxt; }

  std::unique_ptr<storage::Querier> NewQuerier(int64_t mint, int64_t maxt);
  // A block of parts chunks (chunkenc::Encoding::kParts; a tier block, see
  // docs/format/downsample.md) is read one part at a time: `value` gives the
  // samples; with `count` >= 0, that part gives each one's
  // SeriesIterator::AtCount. A chunk that is not a parts chunk is an error
  // here, as a parts chunk is to a querier without parts.
  // With `whole`, the chunks of a series (ChunkSeries::chunks) are the
  // parts chunks themselves, for copying into another block (an iterator
  // refuses them).
  struct Parts {
    int value = 0;
    int count = -1;
    bool whole = false;
  };
  std::unique_ptr<storage::Querier> NewQuerier(int64_t mint, int64_t maxt, Parts parts);
  // The series matching in `blocks`, which do not overlap in time and are
  // sorted by it, read as one block: a series in several has their chunks
  // in one list, so one iterator reads it where a merge of per-block sets
  // would stack one per block (tier blocks: a 90-day query reads dozens).
  static std::unique_ptr<storage::SeriesSet> SelectAcross(const std::vector<std::shared_ptr<Block>>& blocks,
                                                          int64_t mint, int64_t maxt, Parts parts,
                                                          const model::Matchers& matchers);

  // The directory is deleted once the last reference is dropped.
  void MarkDeleted() { fate_.store(Fate::kDelete); }
  // Damage met while reading (an index section or chunk checksum, a bad
  // reference): the DB stops serving the block and sets it aside. The first
  // reason is kept.
  void MarkCorrupt(const Status& why);
  // A read's error `s`, annotated with the block's id; marks the block
  // corrupt first when `s` is Corruption.
  Status ReadFailed(const Status& s);
  bool corrupt() const { return corrupt_.load(std::memory_order_acquire); }
  std::string CorruptReason() const;
  // The directory is renamed "<id>.corrupt" once the last reference is dropped.
  void MarkSetAside() { fate_.store(Fate::kSetAside); }

 private:
  friend class BlockQuerier;
  friend class BlockSeriesSet;
  friend class AcrossSeriesSet;
  Block() = default;
  std::string dir_;
  index::BlockMeta meta_;
  uint64_t size_bytes_ = 0;
  std::unique_ptr<index::IndexReader> index_;
  std::unique_ptr<index::ChunkReader> chunks_;
  enum class Fate { kKeep, kDelete, kSetAside };
  std::atomic<Fate> fate_{Fate::kKeep};
  std::atomic<bool> corrupt_{false};
  mutable base::Mutex reason_mu_;
  std::string corrupt_reason_ TW_GUARDED_BY(reason_mu_);
};

// One series' samples as a block takes them: floats (ts, vs) and native
// histograms (hts, hs), each sorted by time with unique timestamps, no
// timestamp in both; with their start timestamps in sts (hsts), parallel to
// ts (hts), or empty when no sample of that kind has one.
struct SeriesSamples {
  std::vector<int64_t> ts;
  std::vector<double> vs;
  std::vector<int64_t> hts;
  std::vector<model::FloatHistogram> hs;
  std::vector<int64_t> sts, hsts;
  void clear() {
    ts.clear();
    vs.clear();
    hts.clear();
    hs.clear();
    sts.clear();
    hsts.clear();
  }
  size_t size() const { return ts.size() + hts.size(); }
  bool empty() const { return ts.empty() && hts.empty(); }
};

// Samples per persisted chunk (whole-chunk dense encoding).
inline constexpr size_t kBlockChunkSamples = 960;
// Parts of fewer points are XOR chunks (BlockWriter::AddSeriesParts): a
// dense chunk's encoder searches orders and frames, ~40 us for the five
// parts of a few points against XOR's 1-4 us, for a block's tiers that a
// merge soon encodes again.
inline constexpr size_t kDenseMinSamples = 32;
// In merged tier blocks (the tails of the merge levels that every long range
// reads, kept for days) from 8 points: dense decodes faster from there on
// (a sum and a count part of 9 points: 179 against 275 ns; of 27: 285
// against 592 ns), and a merge is rare enough for the encoder's cost.
inline constexpr size_t kMergedDenseMinSamples = 8;

// Writes one block. Series must be added in strictly increasing label order.
// Not thread-safe.
class BlockWriter {
 public:
  // Writes into <parent>/<meta.id>.tmp and renames it to <parent>/<meta.id>
  // on Finish. meta's id, mint, maxt, level, sources and seq must be set.
  // Float runs are cut into chunks of at most `chunk_samples`.
  static Result<std::unique_ptr<BlockWriter>> Create(const std::string& parent, index::BlockMeta meta,
                                                     size_t chunk_samples = kBlockChunkSamples);
  ~BlockWriter();

  // Floats and histograms: runs of each kind become chunks of their own
  // (dense floats; histogram chunks cut as the head cuts them), wrapped with
  // their start timestamps where any sample has one. Empty series are skipped.
  Status AddSeries(const model::Labels& labels, const SeriesSamples& s);
  // A series of several values per sample (a tier block's aggregates):
  // chunks of parts (chunkenc::Encoding::kParts), part i of each holding
  // the values parts[i][0, ts.size()) at ts (sorted, unique), dense (XOR
  // for a chunk of fewer than kDenseMinSamples).
  Status AddSeriesParts(const model::Labels& labels, std::span<const int64_t> ts,
                        std::span<const double* const> parts);
  // The same built piece by piece, in time order (merging tier blocks):
  // BeginSeries, then parts chunks copied as they are (AppendPartsChunk:
  // the record of another block's chunk of n points in [mint, maxt]) and
  // points encoded as AddSeriesParts encodes them (AppendParts), then
  // EndSeries. A series given no chunk is skipped.
  Status BeginSeries(const model::Labels& labels);
  Status AppendPartsChunk(int64_t mint, int64_t maxt, std::string_view data, uint64_t n);
  Status AppendParts(std::span<const int64_t> ts, std::span<const double* const> parts,
                     size_t dense_min = kDenseMinSamples);
  Status EndSeries();
  // Finishes and fsyncs everything, renames the directory into place.
  Result<index::BlockMeta> Finish();
  uint64_t NumSamples() const { return meta_.num_samples; }

 private:
  BlockWriter() = default;
  std::string parent_, tmp_dir_;
  index::BlockMeta meta_;
  std::unique_ptr<index::ChunkWriter> chunks_;
  std::unique_ptr<index::IndexWriter> index_;
  uint64_t next_id_ = 0;
  bool finished_ = false;
  size_t chunk_samples_ = kBlockChunkSamples;
  std::string buf_, wrapped_;
  std::vector<std::string> part_bufs_;
  std::vector<chunkenc::STRun> runs_;
  // The series being written: its chunks so far and their samples.
  model::Labels series_;
  std::vector<index::ChunkMeta> metas_;
  uint64_t series_samples_ = 0;
  // Adds the series of metas_ (series_samples_ samples) to the index.
  Status FinishSeries(const model::Labels& labels);
  // Writes `bytes` (a chunk of encoding enc holding the samples at ts[0, n),
  // whose start timestamps are sts[0, n) or, when sts is null, none).
  // Returns its index::ChunkRef.
  Result<uint64_t> WriteChunk(chunkenc::Encoding enc, std::string_view bytes, const int64_t* ts, const int64_t* sts,
                              size_t n);
};

// A new 26-character ULID (time-ordered, random suffix).
std::string NewUlid();

}  // namespace trainwatch::tsdb
