#pragma once
// Downsampled tiers (docs/format/downsample.md): per series and per window of
// a fixed resolution (5 m, 1 h, 6 h), the min, max, sum, count and last of its
// float samples, so long ranges read a few points per window instead of every
// sample. Written from raw data at compaction, kept longer than raw data, and
// read by queries of min/max/sum/count/avg/last_over_time whose windows lie
// on the tier's grid (DBImpl::NewQuerier), where they give the raw answer.
//
// A window is (k·res, (k+1)·res] and its point is stamped (k+1)·res: the
// same left-open, right-closed shape as a PromQL range (t-r, t], so a range
// with t and r on the grid holds exactly the points of the windows it spans.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/storage.h"
#include "tsdb/block.h"

namespace trainwatch::tsdb {

// The aggregates of a window; each is one part of a tier block's chunks.
enum TierAggr : int { kAggrMin = 0, kAggrMax, kAggrSum, kAggrCount, kAggrLast, kNumAggr };

// The aggregate's name: "min", "max", "sum", "count", "last" (the part
// directories of the first layout, IsFirstLayoutTierBlock).
std::string_view AggrName(int aggr);

// The tier resolutions (ms), finest first, and their directory names.
inline constexpr std::array<int64_t, 3> kTierResolutions = {5 * 60 * 1000, 3600 * 1000, 6 * 3600 * 1000};
inline constexpr int kNumTiers = 3;
std::string_view TierName(int tier);  // "5m", "1h", "6h"

// The part [lo, hi) of a raw block's range [mint, maxt) whose windows of
// `tier` lie wholly in it: both ends rounded inwards to the tier's grid
// (lo >= hi: none). A raw block on the 2 h grid is whole for 5 m and 1 h;
// for 6 h, a block that starts or ends between two 6 h marks (the first
// block of a server's data, the last before an outage) leaves its edge
// windows out, since they hold samples of the block beside it too. Queries
// read a finer tier there (PlanTiers).
std::pair<int64_t, int64_t> TierRange(int64_t mint, int64_t maxt, int tier);

// Aggregates the float samples ts/vs[0, n) (sorted, unique) into windows of
// `res` ms: one point per non-empty window and aggregate, appended to
// out[a].ts/vs. Stale markers are not samples (as for the *_over_time
// functions) and are left out; a window of only stale markers has no point.
// min and max follow min_over_time's NaN rule (NaN only when every value
// is), sum is a Kahan sum as sum_over_time's.
void AggregateWindows(const int64_t* ts, const double* vs, size_t n, int64_t res,
                      std::array<SeriesSamples, kNumAggr>* out);

// One tier block: <tier dir>/<ULID>/, a block of the ordinary layout
// (meta.json, index, chunks/) whose chunks are parts chunks
// (chunkenc::Encoding::kParts) of five parts, one per aggregate in TierAggr
// order: one index for the five. Its range [RawMint, RawMaxt) is the
// TierRange of the raw block it was made from (or the union of merged
// ones); its points are stamped in (RawMint, RawMaxt].
// Thread-safe; queriers hold the block.
class TierBlock {
 public:
  static Result<std::shared_ptr<TierBlock>> Open(const std::string& dir);

  const std::string& dir() const { return block_->dir(); }
  // The raw range its windows cover, [RawMint, RawMaxt), and its sources
  // (raw level-1 block ids), which say whether the raw data changed since.
  int64_t RawMint() const { return block_->meta().mint - 1; }
  int64_t RawMaxt() const { return block_->meta().maxt - 1; }
  const std::vector<std::string>& Sources() const { return block_->meta().sources; }
  uint64_t NumSeries() const { return block_->meta().num_series; }
  uint64_t SizeBytes() const { return block_->SizeBytes(); }
  // The points of aggregate `aggr` stamped in [mint, maxt] of the series
  // matching, sorted by labels; with `counted`, each carries its window's
  // count (SeriesIterator::AtCount) from the count part.
  std::unique_ptr<storage::SeriesSet> Select(int aggr, bool counted, int64_t mint, int64_t maxt,
                                             const model::Matchers& matchers) const;
  const std::shared_ptr<Block>& block() const { return block_; }
  // The directory is deleted once the last reference is dropped (queriers
  // hold the block).
  void MarkDeleted() { block_->MarkDeleted(); }

 private:
  TierBlock() = default;
  std::shared_ptr<Block> block_;
};

// Whether `dir` is a tier block of the first layout (before parts chunks):
// <ULID>/{min,max,sum,count,last}/, five blocks of single chunks, each
// with its own index of every series.
bool IsFirstLayoutTierBlock(const std::string& dir);

// The first-layout tier block `dir` of tier `tier` rewritten into a new one
// in tier_dir (crash-safe as WriteTierBlocks); the caller deletes `dir`.
// Null, with nothing written, when `loaded` holds one of the same range and
// sources already (written before a crash kept `dir` from being deleted).
Result<std::shared_ptr<TierBlock>> RewriteFirstLayoutTierBlock(const std::string& tier_dir, int tier,
                                                               const std::string& dir,
                                                               const std::vector<std::shared_ptr<TierBlock>>& loaded);

// Writes one tier block per resolution asked for (`which`) from `raw`
// (series sorted by labels, with their samples in (mint, maxt]) into
// tier_dirs[i], crash-safe: each
// is written under "<ULID>.tmp", fsynced, and the directory renamed into
// place. Series without float samples are left out (native histograms are
// not downsampled). Each tier block covers the TierRange of [mint, maxt).
// Returns the opened blocks, one per resolution; null for a resolution not
// asked for or of which the range holds no whole window.
Result<std::array<std::shared_ptr<TierBlock>, kNumTiers>> WriteTierBlocks(
    const std::array<std::string, kNumTiers>& tier_dirs, const std::array<bool, kNumTiers>& which, int64_t mint,
    int64_t maxt, const std::vector<std::string>& sources, storage::SeriesSet* raw);

// Merges tier blocks of one resolution into one tier block of tier `tier`
// in tier_dir covering all their ranges and sources, crash-safe as
// WriteTierBlocks. `group` is sorted by time and its blocks do not overlap
// nor leave a gap between them (a gap may hide data a finer tier holds);
// `overlay` (or null) may overlap them: its points replace theirs at the
// same times (the tiers of a raw block that late data changed, spliced
// into a merged block). Full chunks are copied, not encoded again. `all`
// matches every series.
Result<std::shared_ptr<TierBlock>> MergeTierBlocks(const std::string& tier_dir, int tier,
                                                   const std::vector<std::shared_ptr<TierBlock>>& group,
                                                   const std::shared_ptr<TierBlock>& overlay,
                                                   const model::Matchers& all);

// The points of one tier's blocks (sorted by time, not overlapping) for a
// query asking for `func`: min, max or last points for min/max/last_over_time,
// sum points carrying their window's count (SeriesIterator::AtCount) for
// count/avg_over_time, sum points alone for sum_over_time (a sum of window
// sums needs no counts: half the reading). Series sorted by labels.
std::unique_ptr<storage::SeriesSet> SelectTier(const std::vector<std::shared_ptr<TierBlock>>& blocks,
                                               std::string_view func, int64_t mint, int64_t maxt,
                                               const model::Matchers& matchers);

// What a querier sees of the tiers and of the raw data, to pick a tier.
struct TierView {
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> tiers;  // each sorted by RawMint
  std::vector<std::pair<int64_t, int64_t>> raw;  // [mint, maxt] (inclusive) of each raw block and the head
};

// A stretch of a query's point times that one tier answers.
struct TierSegment {
  int tier = 0;
  int64_t from = 0, to = 0;  // point times [from, to]
};

// Which tiers answer `hints`'s function exactly, stretch by stretch from
// hints.start; raw samples answer after the last segment's `to` (an empty
// plan: raw data answers all). Exact needs the windows on a tier's grid:
// range, step, the first window's start (hints.start - 1) and the last's
// end (hints.end) multiples of its resolution; on the grid every tier gives
// the raw answer, and a coarser one reads fewer points (a 6 h step: one
// point per window and aggregate from the 6 h tier, six from the 1 h). So
// each stretch takes the coarsest such tier with a block there, a finer one
// where the coarser has none (edge windows, TierRange), and switches back at
// the coarser's next block. A gap no tier covers is passed over while no
// raw data lies in it; otherwise raw data answers from there on.
std::vector<TierSegment> PlanTiers(const TierView& v, const storage::SelectHints& hints);
// The last point time the tier's blocks hold (INT64_MIN: none).
int64_t TierCoverageEnd(const std::vector<std::shared_ptr<TierBlock>>& blocks);
// The last point time a query takes from the tier: its coverage end, or one
// window before it while a raw block that ends inside that last window holds
// data there: the window's point was made from that raw block, maybe before
// the sample at exactly the window's end (in the next block or the head)
// arrived.
int64_t TierAnswerEnd(const TierView& v, int tier);

// `set` with every sample before `mint` left out: stores filter by whole
// chunks, and raw samples read beside a tier must not repeat its windows.
std::unique_ptr<storage::SeriesSet> SamplesFrom(std::unique_ptr<storage::SeriesSet> set, int64_t mint);

// The aggregate whose points answer `func` (kNumAggr: none, the function
// cannot be answered from tiers).
int TierAggrFor(std::string_view func);

}  // namespace trainwatch::tsdb
