// Compaction and retention. Overlapping blocks (late data, repeated flushes)
// are merged first; then blocks inside one window of the next level range
// (block duration × 3^k, as Prometheus) are merged once the window is
// complete, or at once when forced (Flush). Merging keeps the sample of the
// earlier-written block when two share a timestamp.

#include <algorithm>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "storage/merge.h"
#include "tsdb/db_impl.h"

namespace trainwatch::tsdb {
int64_t DBImpl::TopLevelRange() const {
  int64_t range = opts_.block_duration_ms;
  while (range * 3 <= MaxBlockRange()) range *= 3;
  return range;
}

int64_t DBImpl::DataMaxTime(const std::vector<std::shared_ptr<Block>>& blocks) const {
  return blocks.empty() ? head_->MaxTime() : std::max(head_->MaxTime(), blocks.back()->meta().maxt);
}

int64_t DBImpl::MaxBlockRange() const {
  // Blocks grow up to a tenth of the retention (31 days at most), as Prometheus.
  int64_t max_range = 31LL * 24 * 3600 * 1000;
  if (opts_.retention_ms > 0) max_range = std::min(max_range, opts_.retention_ms / 10);
  return std::max(max_range, opts_.block_duration_ms);
}

Status DBImpl::Compact(bool force) {
  // A merge that met a damaged input goes on with the next round: the
  // snapshot there has set that block aside, and the others still compact.
  auto compact = [&](const std::vector<std::shared_ptr<Block>>& g) {
    Status s = CompactBlocks(g);
    if (!s.ok() && std::any_of(g.begin(), g.end(), [](const auto& b) { return b->corrupt(); })) {
      TW_LOG(Error, "compaction of {} blocks stopped at a damaged block: {}", g.size(), s.message());
      return Status::OK();
    }
    return s;
  };
  for (int round = 0; round < 64; round++) {
    std::vector<std::shared_ptr<Block>> blocks = BlocksSnapshot();
    if (blocks.size() < 2) return Status::OK();
    // 1. Overlapping blocks (sorted by mint).
    std::vector<std::shared_ptr<Block>> group;
    int64_t group_maxt = INT64_MIN;
    for (auto& b : blocks) {
      if (!group.empty() && b->meta().mint < group_maxt) {
        group.push_back(b);
        group_maxt = std::max(group_maxt, b->meta().maxt);
        continue;
      }
      if (group.size() > 1) break;
      group.assign(1, b);
      group_maxt = b->meta().maxt;
    }
    if (group.size() > 1) {
      RETURN_IF_ERROR(compact(group));
      continue;
    }
    // 2. Level windows.
    const int64_t db_maxt = DataMaxTime(blocks);
    bool did = false;
    for (int64_t range = opts_.block_duration_ms * 3; range <= TopLevelRange() && !did; range *= 3) {
      for (size_t i = 0; i < blocks.size() && !did;) {
        int64_t w = AlignDown(blocks[i]->meta().mint, range);
        size_t j = i;
        while (j < blocks.size() && blocks[j]->meta().mint >= w && blocks[j]->meta().maxt <= w + range) j++;
        bool complete = force || WindowComplete(w, range, db_maxt);
        if (j - i > 1 && complete) {
          std::vector<std::shared_ptr<Block>> g(blocks.begin() + static_cast<std::ptrdiff_t>(i),
                                                blocks.begin() + static_cast<std::ptrdiff_t>(j));
          RETURN_IF_ERROR(compact(g));
          did = true;
        }
        i = std::max(j, i + 1);
      }
    }
    if (!did) return Status::OK();
  }
  return Status::OK();
}

Status DBImpl::CompactBlocks(const std::vector<std::shared_ptr<Block>>& group) {
  int64_t start = MonoNanos();
  index::BlockMeta meta;
  meta.id = NewUlid();
  meta.mint = INT64_MAX;
  meta.maxt = INT64_MIN;
  meta.seq = UINT64_MAX;
  uint32_t level = 0;
  for (const auto& b : group) {
    meta.mint = std::min(meta.mint, b->meta().mint);
    meta.maxt = std::max(meta.maxt, b->meta().maxt);
    meta.seq = std::min(meta.seq, b->meta().seq);  // keeps its place in tie-breaking
    level = std::max(level, b->meta().compaction_level);
    for (const auto& s : b->meta().sources) meta.sources.push_back(s);
  }
  meta.compaction_level = level + 1;
  std::sort(meta.sources.begin(), meta.sources.end());

  std::vector<std::shared_ptr<Block>> by_seq = group;
  std::sort(by_seq.begin(), by_seq.end(), [](const auto& a, const auto& b) { return a->meta().seq < b->meta().seq; });
  std::vector<std::unique_ptr<storage::SeriesSet>> sets;
  std::vector<std::unique_ptr<storage::Querier>> queriers;
  ASSIGN_OR_RETURN(auto all, model::Matcher::Make(model::MatchType::kRegex, std::string(model::kMetricName), ".*"));
  for (auto& b : by_seq) {
    queriers.push_back(b->NewQuerier(meta.mint, meta.maxt - 1));
    sets.push_back(queriers.back()->Select(true, storage::SelectHints{}, {all}));
  }
  auto merged = storage::MergeSeriesSets(std::move(sets));
  ASSIGN_OR_RETURN(auto w, BlockWriter::Create(opts_.dir, meta));
  SeriesSamples data;
  while (merged->Next()) {
    const auto& s = merged->At();
    auto it = s.Iterator();
    data.clear();
    if (!it->HasHistograms() && !it->HasST()) {
      while (it->Next()) {
        auto smp = it->At();
        data.ts.push_back(smp.t);
        data.vs.push_back(smp.v);
      }
    } else {
      // Start timestamps are gathered for every sample and dropped below
      // where none has one.
      const bool has_st = it->HasST();
      while (it->Next()) {
        if (it->AtIsHistogram()) {
          data.hts.push_back(it->At().t);
          data.hs.push_back(*it->AtHistogram());
          if (has_st) data.hsts.push_back(it->AtST());
        } else {
          auto smp = it->At();
          data.ts.push_back(smp.t);
          data.vs.push_back(smp.v);
          if (has_st) data.sts.push_back(it->AtST());
        }
      }
      auto none = [](const std::vector<int64_t>& v) { return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; }); };
      if (none(data.sts)) data.sts.clear();
      if (none(data.hsts)) data.hsts.clear();
    }
    RETURN_IF_ERROR(it->Err());
    RETURN_IF_ERROR(AddSeriesOrSkip(w.get(), s.labels(), data));
  }
  RETURN_IF_ERROR(merged->Err());
  ASSIGN_OR_RETURN(index::BlockMeta out, w->Finish());
  ASSIGN_OR_RETURN(auto nb, Block::Open(opts_.dir + "/" + out.id));
  {
    base::MutexLock lock(&blocks_mu_);
    std::erase_if(blocks_, [&](const auto& b) { return std::find(group.begin(), group.end(), b) != group.end(); });
    blocks_.push_back(nb);
    std::sort(blocks_.begin(), blocks_.end(), [](const auto& a, const auto& b) {
      return a->meta().mint != b->meta().mint ? a->meta().mint < b->meta().mint : a->meta().seq < b->meta().seq;
    });
  }
  for (const auto& b : group) b->MarkDeleted();
  compactions_++;
  TW_LOG(Info, "compacted {} blocks into {} [{}, {}) level {}: {} series, {} samples in {} ms", group.size(), out.id,
         out.mint, out.maxt, out.compaction_level, out.num_series, out.num_samples, (MonoNanos() - start) / 1000000);
  return Status::OK();
}

Status DBImpl::ApplyRetention() {
  // No early return without raw blocks: tier blocks alone may be over
  // --retention.size (raw retention took every raw block).
  std::vector<std::shared_ptr<Block>> blocks = BlocksSnapshot();
  std::vector<std::shared_ptr<Block>> drop;
  if (opts_.retention_ms > 0) {
    // Aged by the server's clock, never by the newest sample: one sample
    // dated far ahead must not make every real block look old.
    const int64_t now = head_->Now();
    for (auto& b : blocks) {
      if (b->meta().maxt <= now - opts_.retention_ms) drop.push_back(b);
    }
  }
  if (opts_.retention_bytes > 0) {
    const uint64_t budget = opts_.retention_bytes;
    uint64_t fixed = wal_ != nullptr ? wal_->SizeBytes() : 0;
    if (chunk_log_ != nullptr) fixed += chunk_log_->SizeBytes();
    std::vector<std::shared_ptr<Block>> kept;  // sorted by mint, as blocks
    uint64_t raw = 0;
    for (auto& b : blocks) {
      if (std::find(drop.begin(), drop.end(), b) != drop.end()) continue;
      kept.push_back(b);
      raw += b->SizeBytes();
    }
    const std::vector<bool> overlapped = OverlappedBlocks(kept);
    size_t next = 0;
    for (;;) {
      const uint64_t tiers = opts_.downsample ? TierBytes() : 0;
      if (fixed + raw + tiers <= budget) break;
      if (tiers > budget / 2 && DropOldestTierBlock() > 0) continue;
      if (next < kept.size()) {
        const std::shared_ptr<Block>& b = kept[next];
        const auto which = opts_.downsample && !overlapped[next] ? TiersToMake(b->meta()) : std::array<bool, kNumTiers>{};
        if (std::find(which.begin(), which.end(), true) != which.end()) {
          // Its history stays, at 5 m and 1 h. A failure (the disk is full,
          // say) must not stop retention from making room.
          if (Status s = MakeTiers(b->meta(), which); !s.ok()) {
            TW_LOG(Error, "retention: tiers of block {} before deleting it: {}", b->meta().id, s.ToString());
          }
        }
        drop.push_back(b);
        raw -= std::min(raw, b->SizeBytes());
        next++;
        continue;
      }
      if (!opts_.downsample || DropOldestTierBlock() == 0) break;
    }
  }
  if (drop.empty()) return Status::OK();
  {
    base::MutexLock lock(&blocks_mu_);
    std::erase_if(blocks_, [&](const auto& b) { return std::find(drop.begin(), drop.end(), b) != drop.end(); });
  }
  for (auto& b : drop) {
    TW_LOG(Info, "retention: deleting block {} [{}, {})", b->meta().id, b->meta().mint, b->meta().maxt);
    b->MarkDeleted();
  }
  return Status::OK();
}

}  // namespace trainwatch::tsdb
