#pragma once
// Downsampled tiers (docs/format/downsample.md): per series and per window of
// a fixed resolution (5 m, 1 h), the min, max, sum, count and last of its
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

// The aggregates of a window; each is one block ("part") of a tier block.
enum TierAggr : int { kAggrMin = 0, kAggrMax, kAggrSum, kAggrCount, kAggrLast, kNumAggr };

// The part's directory name: "min", "max", "sum", "count", "last".
std::string_view AggrName(int aggr);

// The tier resolutions (ms), finest first, and their directory names.
inline constexpr std::array<int64_t, 2> kTierResolutions = {5 * 60 * 1000, 3600 * 1000};
inline constexpr int kNumTiers = 2;
std::string_view TierName(int tier);  // "5m", "1h"

// Aggregates the float samples ts/vs[0, n) (sorted, unique) into windows of
// `res` ms: one point per non-empty window and aggregate, appended to
// out[a].ts/vs. Stale markers are not samples (as for the *_over_time
// functions) and are left out; a window of only stale markers has no point.
// min and max follow min_over_time's NaN rule (NaN only when every value
// is), sum is a Kahan sum as sum_over_time's.
void AggregateWindows(const int64_t* ts, const double* vs, size_t n, int64_t res,
                      std::array<SeriesSamples, kNumAggr>* out);

// One tier block: <tier dir>/<ULID>/{min,max,sum,count,last}/, each part a
// block of the ordinary format with the same series in the same order and
// the same timestamps. Its range is that of the raw block it was made from
// (`RawMint/RawMaxt`); its points are stamped in (RawMint, RawMaxt].
// Thread-safe; queriers hold a shared_ptr.
class TierBlock {
 public:
  static Result<std::shared_ptr<TierBlock>> Open(const std::string& dir);
  ~TierBlock();

  const std::string& dir() const { return dir_; }
  // The raw block's range [RawMint, RawMaxt) and its sources (raw level-1
  // block ids), which say whether the raw data changed since.
  int64_t RawMint() const { return parts_[0]->meta().mint - 1; }
  int64_t RawMaxt() const { return parts_[0]->meta().maxt - 1; }
  const std::vector<std::string>& Sources() const { return parts_[0]->meta().sources; }
  const std::shared_ptr<Block>& Part(int aggr) const { return parts_[static_cast<size_t>(aggr)]; }
  uint64_t SizeBytes() const;
  // The directory is deleted once the last reference is dropped.
  void MarkDeleted() { deleted_ = true; }

 private:
  TierBlock() = default;
  std::string dir_;
  std::array<std::shared_ptr<Block>, kNumAggr> parts_;
  std::atomic<bool> deleted_{false};
};

// Writes one tier block per resolution from `raw` (series sorted by labels,
// with their samples in (mint, maxt]) into tier_dirs[i], crash-safe: parts
// are written under "<ULID>.tmp", fsynced, and the directory renamed into
// place. Series without float samples are left out (native histograms are
// not downsampled). Returns the opened blocks, one per resolution.
Result<std::array<std::shared_ptr<TierBlock>, kNumTiers>> WriteTierBlocks(
    const std::array<std::string, kNumTiers>& tier_dirs, int64_t mint, int64_t maxt,
    const std::vector<std::string>& sources, storage::SeriesSet* raw);

// Merges tier blocks of one resolution (not overlapping) into one tier
// block in tier_dir covering all their ranges and sources, crash-safe as
// WriteTierBlocks. `all` matches every series.
Result<std::shared_ptr<TierBlock>> MergeTierBlocks(const std::string& tier_dir,
                                                   const std::vector<std::shared_ptr<TierBlock>>& group,
                                                   const model::Matchers& all);

// The points of one tier's blocks (sorted by time, not overlapping) for a
// query asking for `func`: min, max or last points for min/max/last_over_time,
// sum points carrying their window's count (SeriesIterator::AtCount) for
// sum/count/avg_over_time. Series sorted by labels.
std::unique_ptr<storage::SeriesSet> SelectTier(const std::vector<std::shared_ptr<TierBlock>>& blocks,
                                               std::string_view func, int64_t mint, int64_t maxt,
                                               const model::Matchers& matchers);

// What a querier sees of the tiers and of the raw data, to pick a tier.
struct TierView {
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> tiers;  // each sorted by RawMint
  std::vector<std::pair<int64_t, int64_t>> raw;  // [mint, maxt] (inclusive) of each raw block and the head
};

// The tier (index of kTierResolutions) whose points give `hints`'s function
// exactly, or -1. Exact needs the windows on the grid: range, step, the
// first window's start (hints.start - 1) and the last's end (hints.end)
// multiples of the resolution. Among those, the coarsest that is either
// at most a fifth of the step (of the range for an instant query), as
// Thanos's auto downsampling, or needed because raw data no longer reaches
// back to hints.start; and whose blocks leave no hole where raw data exists.
int PickTier(const TierView& v, const storage::SelectHints& hints);
// The last point time the tier's blocks hold (INT64_MIN: none).
int64_t TierCoverageEnd(const std::vector<std::shared_ptr<TierBlock>>& blocks);
// The last point time a query takes from the tier: its coverage end, or one
// window before it while a raw block holds data in that last window: the
// window's point was made from that raw block, maybe before the sample at
// exactly the window's end (in the next block or the head) arrived.
int64_t TierAnswerEnd(const TierView& v, int tier);

// `set` with every sample before `mint` left out: stores filter by whole
// chunks, and raw samples read beside a tier must not repeat its windows.
std::unique_ptr<storage::SeriesSet> SamplesFrom(std::unique_ptr<storage::SeriesSet> set, int64_t mint);

// The aggregate whose points answer `func` (kNumAggr: none, the function
// cannot be answered from tiers).
int TierAggrFor(std::string_view func);

}  // namespace trainwatch::tsdb
