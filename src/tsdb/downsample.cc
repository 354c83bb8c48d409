#include "tsdb/downsample.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/coding.h"
#include "base/file.h"
#include "base/log.h"
#include "model/sample.h"
#include "storage/merge.h"
#include "tsdb/chunk_series.h"
#include "tsdb/chunkenc/parts.h"
#include "tsdb/index/block_meta.h"

namespace trainwatch::tsdb {
namespace {

constexpr std::array<std::string_view, kNumAggr> kAggrNames = {"min", "max", "sum", "count", "last"};

// Points per tier chunk, by tier (raw blocks: kBlockChunkSamples, 960). A
// query reads a finer tier for a few windows at the end of a coarser one's
// blocks (PlanTiers, TierAnswerEnd), and a chunk is decoded whole: 960
// points of the 5 m tier and 744 of the 1 h for the 16 they give cost more
// than the 6 h tier's 90 days (downsample_bench, 6 h step: 3.5 ms with 960
// for all, 2.7 with 120, 2.9 with 240, 2.7 with these; tiers 3.3, 6.9, 4.9
// and 5.1 MiB). A chunk spans at most 20 h of the 5 m tier, 20 days of the
// 1 h, 30 days of the 6 h. The 1 h tier's 480 (120 until session 31): a
// 90-day query at a 3 h step reads it whole, and took 5 % less time (10 %
// for max) than with 120, the 6 h step no more, its tier blocks 2 % smaller.
constexpr std::array<size_t, kNumTiers> kTierChunkSamples = {240, 480, 120};

// Neumaier's compensated sum step, as PromQL's sum_over_time takes it, so a
// window's sum is what sum_over_time over that window returns.
double KahanSumInc(double inc, double sum, double* c) {
  double t = sum + inc;
  if (std::isinf(t)) {
    *c = 0;
  } else if (std::fabs(sum) >= std::fabs(inc)) {
    *c += (sum - t) + inc;
  } else {
    *c += (inc - t) + sum;
  }
  return t;
}

// The end of the window (k·res, (k+1)·res] holding t.
int64_t WindowEnd(int64_t t, int64_t res) {
  int64_t m = ((t % res) + res) % res;
  return m == 0 ? t : t - m + res;
}

// An iterator with the samples before `mint` left out.
class FromIterator : public storage::ForwardingIterator {
 public:
  FromIterator(std::unique_ptr<storage::SeriesIterator> it, int64_t mint)
      : ForwardingIterator(std::move(it)), mint_(mint) {}
  bool Next() override {
    if (!started_) return Seek(mint_);
    return it_->Next();
  }
  bool Seek(int64_t t) override {
    started_ = true;
    return it_->Seek(std::max(t, mint_));
  }

 private:
  int64_t mint_;
  bool started_ = false;
};

class FromSeries : public storage::Series {
 public:
  const model::Labels& labels() const override { return s_->labels(); }
  std::unique_ptr<storage::SeriesIterator> Iterator() const override {
    return std::make_unique<FromIterator>(s_->Iterator(), mint_);
  }
  const storage::Series* s_ = nullptr;
  int64_t mint_ = 0;
};

class FromSeriesSet : public storage::SeriesSet {
 public:
  FromSeriesSet(std::unique_ptr<storage::SeriesSet> set, int64_t mint) : set_(std::move(set)) { cur_.mint_ = mint; }
  bool Next() override {
    if (!set_->Next()) return false;
    cur_.s_ = &set_->At();
    return true;
  }
  const storage::Series& At() const override { return cur_; }
  Status Err() const override { return set_->Err(); }

 private:
  std::unique_ptr<storage::SeriesSet> set_;
  FromSeries cur_;
};

// The meta.json of tier block `id` made from raw data in [mint, maxt) of
// `sources`: points are stamped in (mint, maxt], the half-open range one
// later.
index::BlockMeta TierMeta(const std::string& id, int64_t mint, int64_t maxt, const std::vector<std::string>& sources) {
  index::BlockMeta meta;
  meta.id = id;
  meta.mint = mint + 1;
  meta.maxt = maxt + 1;
  meta.sources = sources;
  return meta;
}

// What a tier block's reader takes of its parts chunks: aggregate `aggr`,
// with the count part as each point's count when `counted`.
Block::Parts PartsOf(int aggr, bool counted) { return {.value = aggr, .count = counted ? int{kAggrCount} : -1}; }

// Writes the series of sets[a], aggregate a's points of the same series with
// the same timestamps, into `w` as parts chunks.
Status CopyParts(std::array<std::unique_ptr<storage::SeriesSet>, kNumAggr> sets, BlockWriter* w) {
  std::vector<int64_t> ts;
  std::array<std::vector<double>, kNumAggr> cols;
  std::array<const double*, kNumAggr> ptrs{};
  for (;;) {
    int more = 0;
    for (auto& set : sets) more += set->Next() ? 1 : 0;
    if (more < kNumAggr) {
      for (auto& set : sets) RETURN_IF_ERROR(set->Err());
      if (more > 0) return Status::Corruption("tier block: its parts hold different series");
      return Status::OK();
    }
    const model::Labels& labels = sets[0]->At().labels();
    ts.clear();
    for (int a = 0; a < kNumAggr; ++a) {
      const storage::Series& series = sets[static_cast<size_t>(a)]->At();
      if (series.labels() != labels) return Status::Corruption("tier block: its parts hold different series");
      auto& col = cols[static_cast<size_t>(a)];
      col.clear();
      auto it = series.Iterator();
      while (it->Next()) {
        const model::Sample smp = it->At();
        if (a == 0) {
          ts.push_back(smp.t);
        } else if (col.size() >= ts.size() || ts[col.size()] != smp.t) {
          return Status::Corruption("tier block: parts of " + labels.ToString() + " hold different points");
        }
        col.push_back(smp.v);
      }
      RETURN_IF_ERROR(it->Err());
      if (col.size() != ts.size()) {
        return Status::Corruption("tier block: parts of " + labels.ToString() + " hold different points");
      }
      ptrs[static_cast<size_t>(a)] = col.data();
    }
    RETURN_IF_ERROR(w->AddSeriesParts(labels, ts, ptrs));
  }
}

}  // namespace

std::unique_ptr<storage::SeriesSet> SamplesFrom(std::unique_ptr<storage::SeriesSet> set, int64_t mint) {
  return std::make_unique<FromSeriesSet>(std::move(set), mint);
}

std::string_view AggrName(int aggr) { return kAggrNames[static_cast<size_t>(aggr)]; }

std::string_view TierName(int tier) {
  constexpr std::array<std::string_view, kNumTiers> kNames = {"5m", "1h", "6h"};
  return kNames[static_cast<size_t>(tier)];
}

std::pair<int64_t, int64_t> TierRange(int64_t mint, int64_t maxt, int tier) {
  const int64_t res = kTierResolutions[static_cast<size_t>(tier)];
  // WindowEnd(t) is the grid mark at or after t; the one at or before maxt
  // is WindowEnd(maxt - res + 1).
  return {WindowEnd(mint, res), WindowEnd(maxt - res + 1, res)};
}

int TierAggrFor(std::string_view func) {
  if (func == "min_over_time") return kAggrMin;
  if (func == "max_over_time") return kAggrMax;
  if (func == "last_over_time") return kAggrLast;
  if (func == "sum_over_time" || func == "count_over_time" || func == "avg_over_time") return kAggrSum;
  return kNumAggr;
}

void AggregateWindows(const int64_t* ts, const double* vs, size_t n, int64_t res,
                      std::array<SeriesSamples, kNumAggr>* out) {
  size_t i = 0;
  while (i < n) {
    const int64_t end = WindowEnd(ts[i], res);
    double mn = 0, mx = 0, sum = 0, c = 0, last = 0, count = 0;
    for (; i < n && ts[i] <= end; ++i) {
      const double v = vs[i];
      if (model::IsStaleNaN(v)) continue;
      if (count == 0) {
        mn = mx = v;
      } else {
        if (v < mn || std::isnan(mn)) mn = v;
        if (v > mx || std::isnan(mx)) mx = v;
      }
      sum = KahanSumInc(v, sum, &c);
      last = v;
      count++;
    }
    if (count == 0) continue;
    const double vals[kNumAggr] = {mn, mx, std::isinf(sum) ? sum : sum + c, count, last};
    for (int a = 0; a < kNumAggr; ++a) {
      (*out)[static_cast<size_t>(a)].ts.push_back(end);
      (*out)[static_cast<size_t>(a)].vs.push_back(vals[a]);
    }
  }
}

Result<std::shared_ptr<TierBlock>> TierBlock::Open(const std::string& dir) {
  std::shared_ptr<TierBlock> t(new TierBlock());
  ASSIGN_OR_RETURN(t->block_, Block::Open(dir));
  return t;
}

std::unique_ptr<storage::SeriesSet> TierBlock::Select(int aggr, bool counted, int64_t mint, int64_t maxt,
                                                      const model::Matchers& matchers) const {
  storage::SelectHints hints;
  hints.start = mint;
  hints.end = maxt;
  return block_->NewQuerier(mint, maxt, PartsOf(aggr, counted))
      ->Select(true, hints, matchers);
}

bool IsFirstLayoutTierBlock(const std::string& dir) {
  return !file::Exists(dir + "/" + std::string(index::kBlockMetaFile)) &&
         file::Exists(dir + "/" + std::string(AggrName(kAggrMin)));
}

Result<std::shared_ptr<TierBlock>> RewriteFirstLayoutTierBlock(const std::string& tier_dir, int tier,
                                                               const std::string& dir,
                                                               const std::vector<std::shared_ptr<TierBlock>>& loaded) {
  std::array<std::shared_ptr<Block>, kNumAggr> parts;
  for (int a = 0; a < kNumAggr; ++a) {
    ASSIGN_OR_RETURN(parts[static_cast<size_t>(a)], Block::Open(dir + "/" + std::string(AggrName(a))));
  }
  const index::BlockMeta& m = parts[0]->meta();
  for (const auto& p : parts) {
    if (p->meta().mint != m.mint || p->meta().maxt != m.maxt || p->meta().num_series != m.num_series) {
      return Status::Corruption("tier block " + dir + ": parts cover different series or ranges");
    }
  }
  for (const auto& tb : loaded) {
    if (tb->RawMint() == m.mint - 1 && tb->RawMaxt() == m.maxt - 1 && tb->Sources() == m.sources) return std::shared_ptr<TierBlock>();
  }
  ASSIGN_OR_RETURN(auto all, model::Matcher::Make(model::MatchType::kRegex, std::string(model::kMetricName), ".*"));
  ASSIGN_OR_RETURN(auto w, BlockWriter::Create(tier_dir, TierMeta(NewUlid(), m.mint - 1, m.maxt - 1, m.sources),
                                               kTierChunkSamples[static_cast<size_t>(tier)]));
  std::array<std::unique_ptr<storage::SeriesSet>, kNumAggr> sets;
  for (int a = 0; a < kNumAggr; ++a) {
    sets[static_cast<size_t>(a)] =
        parts[static_cast<size_t>(a)]->NewQuerier(model::kMinTime, model::kMaxTime)->Select(true, {}, {all});
  }
  RETURN_IF_ERROR(CopyParts(std::move(sets), w.get()));
  ASSIGN_OR_RETURN(auto meta, w->Finish());
  return TierBlock::Open(tier_dir + "/" + meta.id);
}

Result<std::array<std::shared_ptr<TierBlock>, kNumTiers>> WriteTierBlocks(
    const std::array<std::string, kNumTiers>& tier_dirs, const std::array<bool, kNumTiers>& which, int64_t mint,
    int64_t maxt, const std::vector<std::string>& sources, storage::SeriesSet* raw) {
  // A writer removes its unfinished "<ULID>.tmp" on any error below.
  std::array<std::unique_ptr<BlockWriter>, kNumTiers> writers;
  std::array<std::pair<int64_t, int64_t>, kNumTiers> ranges;
  for (int i = 0; i < kNumTiers; ++i) {
    ranges[i] = TierRange(mint, maxt, i);
    if (!which[static_cast<size_t>(i)] || ranges[i].first >= ranges[i].second) continue;  // not asked, or no whole window
    ASSIGN_OR_RETURN(writers[i], BlockWriter::Create(tier_dirs[i], TierMeta(NewUlid(), ranges[i].first, ranges[i].second, sources),
                                                     kTierChunkSamples[static_cast<size_t>(i)]));
  }
  std::vector<int64_t> ts;
  std::vector<double> vs;
  std::array<SeriesSamples, kNumAggr> agg;
  std::array<const double*, kNumAggr> cols{};
  while (raw->Next()) {
    const storage::Series& s = raw->At();
    auto it = s.Iterator();
    ts.clear();
    vs.clear();
    if (it->Seek(mint + 1)) {
      do {
        if (it->AtIsHistogram()) continue;  // native histograms are not downsampled
        model::Sample smp = it->At();
        if (smp.t > maxt) break;
        ts.push_back(smp.t);
        vs.push_back(smp.v);
      } while (it->Next());
    }
    RETURN_IF_ERROR(it->Err());
    if (ts.empty()) continue;
    for (int i = 0; i < kNumTiers; ++i) {
      if (writers[i] == nullptr) continue;
      // The samples of the tier's whole windows, (lo, hi].
      const size_t b = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), ranges[i].first) - ts.begin());
      const size_t e = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), ranges[i].second) - ts.begin());
      if (b == e) continue;
      for (auto& a : agg) a.clear();
      AggregateWindows(ts.data() + b, vs.data() + b, e - b, kTierResolutions[static_cast<size_t>(i)], &agg);
      if (agg[0].ts.empty()) continue;  // only stale markers
      for (int a = 0; a < kNumAggr; ++a) cols[static_cast<size_t>(a)] = agg[static_cast<size_t>(a)].vs.data();
      RETURN_IF_ERROR(writers[i]->AddSeriesParts(s.labels(), agg[0].ts, cols));
    }
  }
  RETURN_IF_ERROR(raw->Err());
  std::array<std::shared_ptr<TierBlock>, kNumTiers> out;
  for (int i = 0; i < kNumTiers; ++i) {
    if (writers[i] == nullptr) continue;
    ASSIGN_OR_RETURN(auto meta, writers[i]->Finish());
    ASSIGN_OR_RETURN(out[i], TierBlock::Open(tier_dirs[i] + "/" + meta.id));
  }
  return out;
}

namespace {

// The points of a parts chunk, from its first part's header: a dense
// chunk's uvarint count or an XOR chunk's u16 (docs/format/chunks.md).
Result<uint64_t> PartsChunkPoints(std::string_view data) {
  ASSIGN_OR_RETURN(auto p, chunkenc::UnwrapPart(data, 0));
  uint64_t n = 0;
  if (p.enc == chunkenc::Encoding::kDense && GetVarint64(&p.data, &n)) return n;
  if (p.enc == chunkenc::Encoding::kXor && p.data.size() >= 2) {
    return (static_cast<uint64_t>(static_cast<uint8_t>(p.data[0])) << 8) | static_cast<uint8_t>(p.data[1]);
  }
  return Status::Corruption("tier block: a parts chunk whose first part is neither a dense nor an XOR chunk");
}

// A series' points of the five parts, decoded.
struct PartsPoints {
  std::vector<int64_t> ts;
  std::array<std::vector<double>, kNumAggr> cols;
  void clear() {
    ts.clear();
    for (auto& c : cols) c.clear();
  }
  void Push(const PartsPoints& from, size_t i) {
    ts.push_back(from.ts[i]);
    for (int a = 0; a < kNumAggr; ++a) cols[static_cast<size_t>(a)].push_back(from.cols[static_cast<size_t>(a)][i]);
  }
};

// Appends the n points of parts chunk `data` to *out.
Status DecodeParts(std::string_view data, uint64_t n, const model::Labels& labels, PartsPoints* out,
                   std::vector<int64_t>* scratch) {
  const size_t before = out->ts.size();
  for (int a = 0; a < kNumAggr; ++a) {
    ASSIGN_OR_RETURN(auto part, chunkenc::UnwrapPart(data, static_cast<size_t>(a)));
    scratch->clear();
    RETURN_IF_ERROR(chunkenc::DecodeAll(part.enc, part.data, a == 0 ? &out->ts : scratch,
                                        &out->cols[static_cast<size_t>(a)]));
    if ((a == 0 ? out->ts.size() - before : scratch->size()) != n) {
      return Status::Corruption("tier block: parts of " + labels.ToString() + " hold different points");
    }
  }
  return Status::OK();
}

// Writes the series of `base` (blocks not overlapping each other, sorted by
// time) and of `overlay` (null: none) into w, an overlay point replacing a
// base point at the same time. A base chunk already full (chunk_samples
// points) that no overlay point falls in is copied as it is; runs of the
// others (a raw block's few windows, a merged block's last chunk) are
// decoded and encoded again. Merging one more raw block's tiers into a
// merged block then encodes its points and the merged block's last chunk,
// not all of it: the dense encoder is the cost (~170 ns a value on these
// short chunks).
Status WriteMerged(const std::vector<std::shared_ptr<Block>>& base, const std::shared_ptr<Block>& overlay,
                   size_t chunk_samples, const model::Matchers& all, BlockWriter* w) {
  const Block::Parts whole{.value = -1, .whole = true};
  auto bset = Block::SelectAcross(base, model::kMinTime, model::kMaxTime, whole, all);
  std::unique_ptr<storage::SeriesSet> oset;
  if (overlay != nullptr) oset = Block::SelectAcross({overlay}, model::kMinTime, model::kMaxTime, whole, all);
  bool bvalid = bset->Next(), ovalid = oset != nullptr && oset->Next();
  std::vector<int64_t> scratch;
  PartsPoints over, dec, pending;
  std::array<const double*, kNumAggr> ptrs{};
  auto flush = [&]() -> Status {
    if (pending.ts.empty()) return Status::OK();
    for (int a = 0; a < kNumAggr; ++a) ptrs[static_cast<size_t>(a)] = pending.cols[static_cast<size_t>(a)].data();
    RETURN_IF_ERROR(w->AppendParts(pending.ts, ptrs, kMergedDenseMinSamples));
    pending.clear();
    return Status::OK();
  };
  while (bvalid || ovalid) {
    // SelectAcross gives ChunkSeries.
    const auto* b = bvalid ? &static_cast<const ChunkSeries&>(bset->At()) : nullptr;
    const auto* o = ovalid ? &static_cast<const ChunkSeries&>(oset->At()) : nullptr;
    if (b != nullptr && o != nullptr && b->labels() != o->labels()) {
      (b->labels() < o->labels() ? o : b) = nullptr;
    }
    const model::Labels& labels = b != nullptr ? b->labels() : o->labels();
    RETURN_IF_ERROR(w->BeginSeries(labels));
    over.clear();
    if (o != nullptr) {
      for (const ChunkRefData& c : o->chunks()) {
        ASSIGN_OR_RETURN(const uint64_t n, PartsChunkPoints(c.data));
        RETURN_IF_ERROR(DecodeParts(c.data, n, labels, &over, &scratch));
      }
    }
    size_t k = 0;  // the next overlay point
    for (const ChunkRefData& c : b != nullptr ? b->chunks() : std::vector<ChunkRefData>{}) {
      ASSIGN_OR_RETURN(const uint64_t n, PartsChunkPoints(c.data));
      const bool overlaid = std::lower_bound(over.ts.begin() + static_cast<std::ptrdiff_t>(k), over.ts.end(), c.mint) !=
                                std::upper_bound(over.ts.begin() + static_cast<std::ptrdiff_t>(k), over.ts.end(), c.maxt);
      if (n >= chunk_samples && !overlaid) {
        while (k < over.ts.size() && over.ts[k] < c.mint) pending.Push(over, k++);
        RETURN_IF_ERROR(flush());
        RETURN_IF_ERROR(w->AppendPartsChunk(c.mint, c.maxt, c.data, n));
        continue;
      }
      dec.clear();
      RETURN_IF_ERROR(DecodeParts(c.data, n, labels, &dec, &scratch));
      for (size_t i = 0; i < dec.ts.size(); ++i) {
        while (k < over.ts.size() && over.ts[k] < dec.ts[i]) pending.Push(over, k++);
        if (k < over.ts.size() && over.ts[k] == dec.ts[i]) continue;  // the overlay's point replaces it
        pending.Push(dec, i);
      }
    }
    while (k < over.ts.size()) pending.Push(over, k++);
    RETURN_IF_ERROR(flush());
    RETURN_IF_ERROR(w->EndSeries());
    if (b != nullptr) bvalid = bset->Next();
    if (o != nullptr) ovalid = oset->Next();
  }
  RETURN_IF_ERROR(bset->Err());
  return oset != nullptr ? oset->Err() : Status::OK();
}

}  // namespace

Result<std::shared_ptr<TierBlock>> MergeTierBlocks(const std::string& tier_dir, int tier,
                                                   const std::vector<std::shared_ptr<TierBlock>>& group,
                                                   const std::shared_ptr<TierBlock>& overlay,
                                                   const model::Matchers& all) {
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  std::vector<std::string> sources;
  auto cover = [&](const TierBlock& b) {
    mint = std::min(mint, b.RawMint());
    maxt = std::max(maxt, b.RawMaxt());
    sources.insert(sources.end(), b.Sources().begin(), b.Sources().end());
  };
  std::vector<std::shared_ptr<Block>> base;
  for (size_t i = 0; i < group.size(); ++i) {
    if (i > 0 && group[i]->RawMint() < group[i - 1]->RawMaxt()) {
      return Status::InvalidArgument("merging tier blocks: " + group[i]->dir() + " overlaps " + group[i - 1]->dir());
    }
    base.push_back(group[i]->block());
    cover(*group[i]);
  }
  if (overlay != nullptr) cover(*overlay);
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  const size_t chunk_samples = kTierChunkSamples[static_cast<size_t>(tier)];
  ASSIGN_OR_RETURN(auto w, BlockWriter::Create(tier_dir, TierMeta(NewUlid(), mint, maxt, sources), chunk_samples));
  RETURN_IF_ERROR(WriteMerged(base, overlay != nullptr ? overlay->block() : nullptr, chunk_samples, all, w.get()));
  ASSIGN_OR_RETURN(auto meta, w->Finish());
  return TierBlock::Open(tier_dir + "/" + meta.id);
}

int64_t TierCoverageEnd(const std::vector<std::shared_ptr<TierBlock>>& blocks) {
  int64_t end = INT64_MIN;
  for (const auto& b : blocks) end = std::max(end, b->RawMaxt());
  return end;
}

int64_t TierAnswerEnd(const TierView& v, int tier) {
  const int64_t cov = TierCoverageEnd(v.tiers[static_cast<size_t>(tier)]);
  const int64_t res = kTierResolutions[static_cast<size_t>(tier)];
  for (const auto& [mint, maxt] : v.raw) {
    // A raw block holding part of the window before its end and ending
    // before it (so the sample at the end was in the next block or the
    // head). One that only starts at its end holds just that sample, which
    // the point has: the block before was deleted (by retention) after its
    // tiers were made, and the sample was there by then. One that holds the
    // end too (a 6 h tier block ends inside its raw block) made the point
    // whole.
    if (mint < cov && cov - res < maxt && maxt < cov) return cov - res;
  }
  return cov;
}

std::vector<TierSegment> PlanTiers(const TierView& v, const storage::SelectHints& h) {
  std::vector<TierSegment> plan;
  if (TierAggrFor(h.func) == kNumAggr || h.range_ms <= 0 || h.step_ms < 0 || h.start > h.end) return plan;
  auto aligned = [](int64_t t, int64_t res) { return ((t % res) + res) % res == 0; };
  auto raw_in = [&](int64_t a, int64_t b) {  // raw data in [a, b]?
    for (const auto& [mint, maxt] : v.raw) {
      if (mint <= b && a <= maxt) return true;
    }
    return false;
  };
  std::vector<int> tiers;  // those on whose grid the query lies, coarsest first
  std::array<int64_t, kNumTiers> answer_end{};
  for (int t = kNumTiers - 1; t >= 0; --t) {
    const int64_t res = kTierResolutions[static_cast<size_t>(t)];
    if (v.tiers[static_cast<size_t>(t)].empty() || !aligned(h.range_ms, res) || !aligned(h.step_ms, res) ||
        !aligned(h.start - 1, res) || !aligned(h.end, res)) {
      continue;
    }
    tiers.push_back(t);
    answer_end[static_cast<size_t>(t)] = TierAnswerEnd(v, t);
  }
  // Blocks of a tier are sorted by RawMint and do not overlap: the one
  // holding the window after `at`, and the first starting after it.
  auto holding = [&](int t, int64_t at) -> const TierBlock* {
    for (const auto& b : v.tiers[static_cast<size_t>(t)]) {
      if (b->RawMint() <= at && at < b->RawMaxt()) return b.get();
    }
    return nullptr;
  };
  auto next_start = [&](int t, int64_t at) {
    for (const auto& b : v.tiers[static_cast<size_t>(t)]) {
      if (b->RawMint() > at) return b->RawMint();
    }
    return INT64_MAX;
  };
  int64_t covered = h.start - 1;  // every point time up to here is planned
  while (covered < h.end) {
    int pick = -1;
    const TierBlock* block = nullptr;
    for (int t : tiers) {
      const int64_t res = kTierResolutions[static_cast<size_t>(t)];
      if (!aligned(covered, res) || covered >= answer_end[static_cast<size_t>(t)]) continue;
      if ((block = holding(t, covered)) != nullptr) {
        pick = t;
        break;
      }
    }
    if (pick < 0) {
      // No tier holds the next window: pass over to the next tier block if
      // nothing lies in between, else raw data answers from here on.
      int64_t next = INT64_MAX;
      for (int t : tiers) next = std::min(next, next_start(t, covered));
      if (next >= h.end || raw_in(covered + 1, next)) break;
      covered = next;
      continue;
    }
    int64_t to = std::min({block->RawMaxt(), answer_end[static_cast<size_t>(pick)], h.end});
    for (int t : tiers) {  // back to a coarser tier where it has a block again
      if (t == pick) break;
      to = std::min(to, next_start(t, covered));
    }
    if (!plan.empty() && plan.back().tier == pick) {
      plan.back().to = to;
    } else {
      plan.push_back({pick, covered + 1, to});
    }
    covered = to;
  }
  return plan;
}

std::unique_ptr<storage::SeriesSet> SelectTier(const std::vector<std::shared_ptr<TierBlock>>& blocks,
                                               std::string_view func, int64_t mint, int64_t maxt,
                                               const model::Matchers& matchers) {
  const int aggr = TierAggrFor(func);
  if (aggr == kNumAggr) return storage::ErrorSeriesSet(Status::InvalidArgument("no tier answers " + std::string(func)));
  const bool counted = aggr == kAggrSum && func != "sum_over_time";
  std::vector<std::shared_ptr<TierBlock>> read;
  bool overlap = false;
  for (const auto& b : blocks) {
    if (b->RawMaxt() < mint || b->RawMint() >= maxt) continue;  // points in (RawMint, RawMaxt]
    overlap = overlap || (!read.empty() && b->RawMint() < read.back()->RawMaxt());
    read.push_back(b);
  }
  if (overlap) {
    // Tier blocks overlap only for a moment (a crash between writing a
    // block of late data's tiers and splicing it into a merged one):
    // merged, the same points count once.
    std::vector<std::unique_ptr<storage::SeriesSet>> sets;
    for (const auto& b : read) sets.push_back(b->Select(aggr, counted, mint, maxt, matchers));
    return storage::MergeSeriesSets(std::move(sets));
  }
  // Read as one block: a series is one iterator over the chunks of all its
  // tier blocks (a 90-day query reads about two per level of CompactTiers).
  std::vector<std::shared_ptr<Block>> parts;
  for (const auto& b : read) parts.push_back(b->block());
  return Block::SelectAcross(parts, mint, maxt, PartsOf(aggr, counted),
                             matchers);
}

}  // namespace trainwatch::tsdb
