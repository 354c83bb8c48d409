// Downsampled tiers of the DB (tsdb/downsample.h): loading them, making
// them from raw blocks after compaction (or just before --retention.size
// deletes them), and their own retention.
//
// A tier block mirrors one raw block: same range, same sources. After a
// compaction merges raw blocks (or merges late data into one), the merged
// block's sources no longer match the tier blocks in its range, so its tiers
// are made again from the raw data and replace those. Raw data is read
// through the DB's querier, blocks and head together, because the window
// ending at a block's maxt takes the sample at exactly maxt, which lies in
// the next block or the head.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "tsdb/db_impl.h"

namespace trainwatch::tsdb {

namespace {

// Whether every source of `sub` is one of `sup`'s: tiers made from `sup`'s
// raw data hold `sub`'s (a raw block only grows by merges: no deletes).
bool Includes(std::vector<std::string> sup, std::vector<std::string> sub) {
  std::sort(sup.begin(), sup.end());
  std::sort(sub.begin(), sub.end());
  return std::includes(sup.begin(), sup.end(), sub.begin(), sub.end());
}

// Whether the points of two tier blocks, (RawMint, RawMaxt], overlap.
bool Overlap(const TierBlock& a, int64_t mint, int64_t maxt) { return a.RawMint() < maxt && mint < a.RawMaxt(); }

}  // namespace

std::string DBImpl::TierDir(int tier) const { return opts_.dir + "/downsample/" + std::string(TierName(tier)); }

std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> DBImpl::TiersSnapshot() {
  base::MutexLock lock(&blocks_mu_);
  return tiers_;
}

Status DBImpl::LoadTiers() {
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> loaded;
  for (int t = 0; t < kNumTiers; ++t) {
    const std::string dir = TierDir(t);
    if (!file::Exists(dir)) continue;
    ASSIGN_OR_RETURN(auto names, file::ListDir(dir));
    std::vector<std::string> first_layout;
    for (const auto& name : names) {
      const std::string path = dir + "/" + name;
      if (name.ends_with(".tmp")) {  // a tier block whose writing or deleting did not finish
        RETURN_IF_ERROR(file::RemoveAll(path));
        continue;
      }
      std::error_code ec;
      if (name.size() != 26 || !std::filesystem::is_directory(path, ec)) continue;
      if (IsFirstLayoutTierBlock(path)) {
        first_layout.push_back(path);
        continue;
      }
      auto b = TierBlock::Open(path);
      if (!b.ok()) {
        // Tiers are derived data: a damaged one is set aside; the raw block
        // it came from, while kept, makes it again.
        auto to = file::SetAside(path);
        TW_LOG(Error, "tier block {} is unreadable ({}); set aside: {}", path, b.status().message(),
               to.ok() ? *to : to.status().message());
        continue;
      }
      loaded[static_cast<size_t>(t)].push_back(std::move(*b));
    }
    // Tier blocks of the first layout (five indexes each) are rewritten
    // once, then deleted: renamed "<id>.tmp" first, so a crash while the
    // files go leaves what the next open removes.
    for (const auto& path : first_layout) {
      const int64_t start = MonoNanos();
      auto b = RewriteFirstLayoutTierBlock(dir, t, path, loaded[static_cast<size_t>(t)]);
      if (!b.ok()) {
        auto to = file::SetAside(path);
        TW_LOG(Error, "tier block {} is unreadable ({}); set aside: {}", path, b.status().message(),
               to.ok() ? *to : to.status().message());
        continue;
      }
      if (*b != nullptr) {
        TW_LOG(Info, "tier block {} rewritten with one index as {} in {} ms", path, (*b)->dir(),
               (MonoNanos() - start) / 1000000);
        loaded[static_cast<size_t>(t)].push_back(std::move(*b));
      }
      const std::string gone = path + ".tmp";
      if (::rename(path.c_str(), gone.c_str()) != 0) return Status::FromErrno("rename " + path, errno);
      RETURN_IF_ERROR(file::RemoveAll(gone));
    }
    auto& tier = loaded[static_cast<size_t>(t)];
    // A crash between writing a merged tier block (CompactTiers, or a
    // splice in MakeTiers) and deleting the blocks it replaces leaves both:
    // a block whose range and sources another holds is deleted.
    std::vector<bool> superseded(tier.size());
    for (size_t i = 0; i < tier.size(); ++i) {
      for (size_t j = 0; j < tier.size() && !superseded[i]; ++j) {
        const TierBlock& a = *tier[i];
        const TierBlock& b = *tier[j];
        if (i == j || superseded[j] || b.RawMint() > a.RawMint() || b.RawMaxt() < a.RawMaxt() ||
            !Includes(b.Sources(), a.Sources())) {
          continue;
        }
        superseded[i] = true;
        TW_LOG(Info, "tier block {} is superseded by {} (a merge that did not finish deleting it); deleted", a.dir(),
               b.dir());
      }
    }
    for (size_t i = 0; i < tier.size(); ++i) {
      if (superseded[i]) tier[i]->MarkDeleted();
    }
    for (size_t i = tier.size(); i-- > 0;) {
      if (superseded[i]) tier.erase(tier.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::sort(tier.begin(), tier.end(), [](const auto& a, const auto& b) { return a->RawMint() < b->RawMint(); });
  }
  base::MutexLock lock(&blocks_mu_);
  tiers_ = std::move(loaded);
  return Status::OK();
}

std::vector<bool> DBImpl::OverlappedBlocks(const std::vector<std::shared_ptr<Block>>& blocks) {
  std::vector<bool> out(blocks.size());
  int64_t prev_maxt = INT64_MIN;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const index::BlockMeta& m = blocks[i]->meta();
    out[i] = prev_maxt > m.mint || (i + 1 < blocks.size() && blocks[i + 1]->meta().mint < m.maxt);
    prev_maxt = std::max(prev_maxt, m.maxt);
  }
  return out;
}

std::array<bool, kNumTiers> DBImpl::TiersToMake(const index::BlockMeta& m) {
  const auto tiers = TiersSnapshot();
  const int64_t now = head_->Now();
  std::array<bool, kNumTiers> make{};
  bool wanted = false;
  for (int t = 0; t < kNumTiers; ++t) {
    // A range the tier's retention would drop at once is not made (again).
    const int64_t keep = opts_.tier_retention_ms[static_cast<size_t>(t)];
    if (keep > 0 && m.maxt <= now - keep) continue;
    const auto [lo, hi] = TierRange(m.mint, m.maxt, t);
    const bool fits = lo < hi;  // the range holds a whole window of the tier
    wanted = wanted || fits;
    int overlapping = 0;
    bool covered = false;
    for (const auto& tb : tiers[static_cast<size_t>(t)]) {
      if (fits) {
        // One tier block holds the range, made from (at least) its
        // sources: its own, or a merged one of several raw blocks.
        if (!Overlap(*tb, lo, hi)) continue;
        overlapping++;
        covered = covered || (tb->RawMint() <= lo && tb->RawMaxt() >= hi && Includes(tb->Sources(), m.sources));
      } else if (tb->RawMint() >= m.mint && tb->RawMaxt() <= m.maxt && Includes(m.sources, tb->Sources())) {
        // A tier of which the range holds no whole window has no block of
        // its own; one left in the range from blocks merged into this one
        // is stale.
        overlapping++;
      }
    }
    make[static_cast<size_t>(t)] = fits ? !(covered && overlapping == 1) : overlapping > 0;
  }
  if (!wanted) make = {};
  return make;
}

Status DBImpl::MakeTiers(const index::BlockMeta& m, const std::array<bool, kNumTiers>& which) {
  std::array<std::string, kNumTiers> dirs;
  for (int t = 0; t < kNumTiers; ++t) {
    dirs[static_cast<size_t>(t)] = TierDir(t);
    RETURN_IF_ERROR(file::MkdirAll(dirs[static_cast<size_t>(t)]));
  }
  ASSIGN_OR_RETURN(auto all, model::Matcher::Make(model::MatchType::kRegex, std::string(model::kMetricName), ".*"));
  std::vector<std::string> sources = m.sources;
  std::sort(sources.begin(), sources.end());
  const int64_t start = MonoNanos();
  ASSIGN_OR_RETURN(auto q, NewQuerier(m.mint + 1, m.maxt));
  storage::SelectHints hints;
  hints.start = m.mint + 1;
  hints.end = m.maxt;
  auto raw = q->Select(true, hints, {all});
  ASSIGN_OR_RETURN(auto made, WriteTierBlocks(dirs, which, m.mint, m.maxt, sources, raw.get()));
  const auto tiers = TiersSnapshot();
  // Per tier, the blocks the new one replaces: those made from raw blocks
  // merged into `m` (in its range, of its sources), and those it is
  // spliced into: any other it overlaps, a merged block of several raw
  // blocks' tiers (CompactTiers) or one of late data whose older raw data
  // --retention.size deleted. Spliced, the new block's points win.
  std::array<std::vector<std::shared_ptr<TierBlock>>, kNumTiers> gone;
  for (int t = 0; t < kNumTiers; ++t) {
    if (!which[static_cast<size_t>(t)]) continue;
    std::shared_ptr<TierBlock>& tb = made[static_cast<size_t>(t)];
    std::vector<std::shared_ptr<TierBlock>> splice;
    for (const auto& old : tiers[static_cast<size_t>(t)]) {
      if (old->RawMint() >= m.mint && old->RawMaxt() <= m.maxt && Includes(sources, old->Sources())) {
        gone[static_cast<size_t>(t)].push_back(old);
      } else if (tb != nullptr && Overlap(*old, tb->RawMint(), tb->RawMaxt())) {
        splice.push_back(old);
      }
    }
    if (splice.empty()) continue;
    ASSIGN_OR_RETURN(auto merged, MergeTierBlocks(dirs[static_cast<size_t>(t)], t, splice, tb, {all}));
    TW_LOG(Info, "tiers {} of block {} spliced into {} tier block(s): {}", TierName(t), m.id, splice.size(),
           merged->dir());
    tb->MarkDeleted();
    tb = std::move(merged);
    gone[static_cast<size_t>(t)].insert(gone[static_cast<size_t>(t)].end(), splice.begin(), splice.end());
  }
  {
    base::MutexLock lock(&blocks_mu_);
    for (int t = 0; t < kNumTiers; ++t) {
      // made[t] is null where the range holds no whole window of the tier.
      if (which[static_cast<size_t>(t)]) ReplaceTierBlocks(t, gone[static_cast<size_t>(t)], made[static_cast<size_t>(t)]);
    }
  }
  uint64_t series = 0;
  for (const auto& tb : made) {
    if (tb != nullptr) series = std::max(series, tb->NumSeries());
  }
  TW_LOG(Info, "downsampled block {} [{}, {}): {} series in {} ms", m.id, m.mint, m.maxt,
         series, (MonoNanos() - start) / 1000000);
  return Status::OK();
}

Status DBImpl::Downsample(size_t max_blocks) {
  if (!opts_.downsample) return Status::OK();
  std::vector<std::shared_ptr<Block>> blocks = BlocksSnapshot();  // sorted by mint
  // Overlapping blocks are merged by the next compaction first; their
  // tiers are made from the merged block.
  const std::vector<bool> overlapped = OverlappedBlocks(blocks);
  size_t made_blocks = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const index::BlockMeta& m = blocks[i]->meta();
    if (overlapped[i]) continue;
    // The window ending at maxt takes the sample at exactly maxt, in the
    // next block or the head: wait for data from there on (a flush writes
    // the whole head), or for the clock to pass it by half a block (ingest
    // stopped). A next block starts at maxt or later: none overlaps this.
    const bool later = i + 1 < blocks.size() || head_->MaxTime() >= m.maxt ||
                       head_->Now() >= m.maxt + opts_.block_duration_ms / 2;
    if (!later) continue;
    const auto which = TiersToMake(m);
    if (std::find(which.begin(), which.end(), true) == which.end()) continue;
    if (max_blocks > 0 && made_blocks == max_blocks) break;
    made_blocks++;
    RETURN_IF_ERROR(MakeTiers(m, which));
  }
  return Status::OK();
}

void DBImpl::ReplaceTierBlocks(int t, const std::vector<std::shared_ptr<TierBlock>>& gone,
                               std::shared_ptr<TierBlock> made) {
  auto& tier = tiers_[static_cast<size_t>(t)];
  std::erase_if(tier, [&](const std::shared_ptr<TierBlock>& tb) {
    if (std::find(gone.begin(), gone.end(), tb) == gone.end()) return false;
    tb->MarkDeleted();
    return true;
  });
  if (made == nullptr) return;
  tier.push_back(std::move(made));
  std::sort(tier.begin(), tier.end(), [](const auto& a, const auto& b) { return a->RawMint() < b->RawMint(); });
}

uint64_t DBImpl::TierBytes() {
  uint64_t n = 0;
  for (const auto& tier : TiersSnapshot()) {
    for (const auto& tb : tier) n += tb->SizeBytes();
  }
  return n;
}

uint64_t DBImpl::DropOldestTierBlock() {
  base::MutexLock lock(&blocks_mu_);
  int pick = -1;
  for (int t = 0; t < kNumTiers; ++t) {
    const auto& tier = tiers_[static_cast<size_t>(t)];
    // The oldest range first; of two alike, the finer resolution (kept
    // shorter by time too).
    if (!tier.empty() && (pick < 0 || tier.front()->RawMint() < tiers_[static_cast<size_t>(pick)].front()->RawMint())) {
      pick = t;
    }
  }
  if (pick < 0) return 0;
  auto& tier = tiers_[static_cast<size_t>(pick)];
  std::shared_ptr<TierBlock> tb = tier.front();
  tier.erase(tier.begin());
  TW_LOG(Info, "retention: deleting {} tier block {} (--retention.size)", TierName(pick), tb->dir());
  tb->MarkDeleted();
  return std::max<uint64_t>(tb->SizeBytes(), 1);
}

Status DBImpl::CompactTiers() {
  if (!opts_.downsample) return Status::OK();
  // Tier blocks are merged level by level, as raw blocks are compacted:
  // the contiguous blocks of a window of the block duration × 3^k (k = 1..5:
  // 6 h, 18 h, 54 h, 162 h, 486 h = 20.25 d by default, aligned to the
  // epoch) once the tier holds data past its end (no raw block's tiers will
  // land in it but late data's, spliced in by MakeTiers). So a 90-day
  // query reads about two blocks per level per tier, not one per raw block
  // (18 h at the default retention) with a chunk of a few points per
  // series; and a point is written again once per level, not each time a
  // block joins a growing merged one.
  ASSIGN_OR_RETURN(auto all, model::Matcher::Make(model::MatchType::kRegex, std::string(model::kMetricName), ".*"));
  // Nor will any land before the oldest raw data (ingest stopped and
  // retention took the raw blocks).
  int64_t raw_start = head_->MinTime();
  for (const auto& b : BlocksSnapshot()) raw_start = std::min(raw_start, b->meta().mint);
  for (int t = 0; t < kNumTiers; ++t) {
    int64_t range = opts_.block_duration_ms;
    for (int level = 1; level <= 5; ++level) {
      range *= 3;
      const auto tier = TiersSnapshot()[static_cast<size_t>(t)];  // sorted by RawMint
      const int64_t covered = std::max(TierCoverageEnd(tier), raw_start);
      for (size_t i = 0; i < tier.size();) {
        const int64_t w = AlignDown(tier[i]->RawMint(), range);
        size_t j = i;
        // Contiguous blocks only: a gap may hide windows a finer tier holds
        // (a 6 h tier block leaves out its raw block's edge windows).
        while (j < tier.size() && tier[j]->RawMaxt() <= w + range &&
               (j == i || tier[j]->RawMint() == tier[j - 1]->RawMaxt())) {
          j++;
        }
        if (j - i < 2 || w + range > covered) {
          i = std::max(j, i + 1);
          continue;
        }
        std::vector<std::shared_ptr<TierBlock>> group(tier.begin() + static_cast<std::ptrdiff_t>(i),
                                                      tier.begin() + static_cast<std::ptrdiff_t>(j));
        const int64_t start = MonoNanos();
        ASSIGN_OR_RETURN(auto merged, MergeTierBlocks(TierDir(t), t, group, nullptr, {all}));
        TW_LOG(Info, "merged {} {} tier blocks into {} [{}, {}) in {} ms", group.size(), TierName(t), merged->dir(),
               merged->RawMint(), merged->RawMaxt(), (MonoNanos() - start) / 1000000);
        base::MutexLock lock(&blocks_mu_);
        ReplaceTierBlocks(t, group, std::move(merged));
        i = j;
      }
    }
  }
  return Status::OK();
}

void DBImpl::ApplyTierRetention() {
  const int64_t now = head_->Now();
  base::MutexLock lock(&blocks_mu_);
  for (int t = 0; t < kNumTiers; ++t) {
    const int64_t keep = opts_.tier_retention_ms[static_cast<size_t>(t)];
    if (keep <= 0) continue;
    std::erase_if(tiers_[static_cast<size_t>(t)], [&](const std::shared_ptr<TierBlock>& tb) {
      // By the server's clock, as raw retention.
      if (tb->RawMaxt() > now - keep) return false;
      TW_LOG(Info, "retention: deleting {} tier block {}", TierName(t), tb->dir());
      tb->MarkDeleted();
      return true;
    });
  }
}

}  // namespace trainwatch::tsdb
