#include "tsdb/downsample.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/file.h"
#include "base/log.h"
#include "model/sample.h"
#include "storage/merge.h"

namespace trainwatch::tsdb {
namespace {

constexpr std::array<std::string_view, kNumAggr> kAggrNames = {"min", "max", "sum", "count", "last"};

// Points per tier chunk, by tier (raw blocks: kBlockChunkSamples, 960). A
// query reads a finer tier for a few windows at the end of a coarser one's
// blocks (PlanTiers, TierAnswerEnd), and a chunk is decoded whole: 960
// points of the 5 m tier and 744 of the 1 h for the 16 they give cost more
// than the 6 h tier's 90 days (downsample_bench, 6 h step: 3.5 ms with 960
// for all, 2.7 with 120, 2.9 with 240, 2.7 with these; tiers 3.3, 6.9, 4.9
// and 5.1 MiB). A chunk spans at most 20 h of the 5 m tier, 5 days of the
// 1 h, 30 days of the 6 h.
constexpr std::array<size_t, kNumTiers> kTierChunkSamples = {240, 120, 120};

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

// A series whose points carry their window's count: the sum part's points
// zipped with the count part's (same series, same timestamps by construction).
class CountedIterator : public storage::SeriesIterator {
 public:
  CountedIterator(std::unique_ptr<storage::SeriesIterator> v, std::unique_ptr<storage::SeriesIterator> c)
      : v_(std::move(v)), c_(std::move(c)) {}
  bool Next() override { return Check(v_->Next(), c_->Next()); }
  bool Seek(int64_t t) override { return Check(v_->Seek(t), c_->Seek(t)); }
  model::Sample At() const override { return v_->At(); }
  double AtCount() const override { return c_->At().v; }
  bool HasCounts() const override { return true; }
  // Both parts in bulk, then checked against each other.
  bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) override {
    const size_t first = out->size();
    const bool a = v_->AppendUntil(maxt, out);
    buf_.clear();
    const bool b = c_->AppendUntil(maxt, &buf_);
    bool same = buf_.size() == out->size() - first;
    for (size_t i = 0; same && i < buf_.size(); ++i) same = (*out)[first + i].t == buf_[i].t;
    if (!same) return Check(true, false);
    for (const model::Sample& c : buf_) counts->push_back(c.v);
    return Check(a, b);
  }
  Status Err() const override {
    if (!err_.ok()) return err_;
    Status s = v_->Err();
    return s.ok() ? c_->Err() : s;
  }

 private:
  bool Check(bool a, bool b) {
    if (a == b && (!a || v_->At().t == c_->At().t)) return a;
    if (err_.ok()) err_ = Status::Corruption("tier block: sum and count parts disagree");
    return false;
  }
  std::unique_ptr<storage::SeriesIterator> v_, c_;
  std::vector<model::Sample> buf_;  // the count part's points
  Status err_;
};

class CountedSeries : public storage::Series {
 public:
  const model::Labels& labels() const override { return v_->labels(); }
  std::unique_ptr<storage::SeriesIterator> Iterator() const override {
    return std::make_unique<CountedIterator>(v_->Iterator(), c_->Iterator());
  }
  const storage::Series* v_ = nullptr;
  const storage::Series* c_ = nullptr;
};

// The sum part's series zipped with the count part's, one tier block.
class CountedSeriesSet : public storage::SeriesSet {
 public:
  CountedSeriesSet(std::unique_ptr<storage::SeriesSet> v, std::unique_ptr<storage::SeriesSet> c)
      : v_(std::move(v)), c_(std::move(c)) {}
  bool Next() override {
    if (!err_.ok()) return false;
    bool a = v_->Next(), b = c_->Next();
    if (a != b || (a && v_->At().labels() != c_->At().labels())) {
      err_ = Status::Corruption("tier block: sum and count parts hold different series");
      return false;
    }
    if (!a) return false;
    cur_.v_ = &v_->At();
    cur_.c_ = &c_->At();
    return true;
  }
  const storage::Series& At() const override { return cur_; }
  Status Err() const override {
    if (!err_.ok()) return err_;
    Status s = v_->Err();
    return s.ok() ? c_->Err() : s;
  }

 private:
  std::unique_ptr<storage::SeriesSet> v_, c_;
  CountedSeries cur_;
  Status err_;
};

// Keeps the tier blocks (and so their files) alive while the set is read.
class HoldingSeriesSet : public storage::SeriesSet {
 public:
  HoldingSeriesSet(std::vector<std::shared_ptr<TierBlock>> hold, std::unique_ptr<storage::SeriesSet> set)
      : hold_(std::move(hold)), set_(std::move(set)) {}
  bool Next() override { return set_->Next(); }
  const storage::Series& At() const override { return set_->At(); }
  Status Err() const override { return set_->Err(); }

 private:
  std::vector<std::shared_ptr<TierBlock>> hold_;  // destroyed after set_
  std::unique_ptr<storage::SeriesSet> set_;
};

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

// The meta.json of part `aggr` of a tier block made from raw data in
// [mint, maxt) of `sources`: points are stamped in (mint, maxt], the
// half-open range one later.
index::BlockMeta PartMeta(int aggr, int64_t mint, int64_t maxt, const std::vector<std::string>& sources) {
  index::BlockMeta meta;
  meta.id = std::string(AggrName(aggr));
  meta.mint = mint + 1;
  meta.maxt = maxt + 1;
  meta.sources = sources;
  return meta;
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
  t->dir_ = dir;
  for (int a = 0; a < kNumAggr; ++a) {
    ASSIGN_OR_RETURN(t->parts_[static_cast<size_t>(a)], Block::Open(dir + "/" + std::string(AggrName(a))));
  }
  const auto& m0 = t->parts_[0]->meta();
  for (const auto& p : t->parts_) {
    if (p->meta().mint != m0.mint || p->meta().maxt != m0.maxt || p->meta().num_series != m0.num_series) {
      return Status::Corruption("tier block " + dir + ": parts cover different series or ranges");
    }
  }
  return t;
}

TierBlock::~TierBlock() {
  if (!deleted_.load()) return;
  for (auto& p : parts_) p.reset();
  // Renamed first, as a raw block: a crash while the files go leaves a
  // "<id>.tmp" dir that the next open removes.
  std::string gone = dir_ + ".tmp";
  std::string victim = dir_;
  if (::rename(dir_.c_str(), gone.c_str()) == 0) victim = gone;
  Status s = file::RemoveAll(victim);
  if (!s.ok()) TW_LOG(Warn, "delete tier block {}: {}", dir_, s.message());
}

uint64_t TierBlock::SizeBytes() const {
  uint64_t n = 0;
  for (const auto& p : parts_) n += p->SizeBytes();
  return n;
}

Result<std::array<std::shared_ptr<TierBlock>, kNumTiers>> WriteTierBlocks(
    const std::array<std::string, kNumTiers>& tier_dirs, int64_t mint, int64_t maxt,
    const std::vector<std::string>& sources, storage::SeriesSet* raw) {
  std::array<std::string, kNumTiers> ids, tmps;
  std::array<std::array<std::unique_ptr<BlockWriter>, kNumAggr>, kNumTiers> writers;
  std::array<std::pair<int64_t, int64_t>, kNumTiers> ranges;
  for (int i = 0; i < kNumTiers; ++i) {
    ranges[i] = TierRange(mint, maxt, i);
    if (ranges[i].first >= ranges[i].second) continue;  // no whole window
    ids[i] = NewUlid();
    tmps[i] = tier_dirs[i] + "/" + ids[i] + ".tmp";
    RETURN_IF_ERROR(file::RemoveAll(tmps[i]));
    RETURN_IF_ERROR(file::MkdirAll(tmps[i]));
    for (int a = 0; a < kNumAggr; ++a) {
      ASSIGN_OR_RETURN(writers[i][a],
                       BlockWriter::Create(tmps[i], PartMeta(a, ranges[i].first, ranges[i].second, sources),
                                           kTierChunkSamples[static_cast<size_t>(i)]));
    }
  }
  // Removes the unfinished directories on any error below.
  struct Cleanup {
    std::array<std::string, kNumTiers>* tmps;
    bool armed = true;
    ~Cleanup() {
      if (!armed) return;
      for (auto& t : *tmps) {
        if (!t.empty()) (void)file::RemoveAll(t);
      }
    }
  } cleanup{&tmps};
  std::vector<int64_t> ts;
  std::vector<double> vs;
  std::array<SeriesSamples, kNumAggr> agg;
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
      if (writers[i][0] == nullptr) continue;
      // The samples of the tier's whole windows, (lo, hi].
      const size_t b = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), ranges[i].first) - ts.begin());
      const size_t e = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), ranges[i].second) - ts.begin());
      if (b == e) continue;
      for (auto& a : agg) a.clear();
      AggregateWindows(ts.data() + b, vs.data() + b, e - b, kTierResolutions[static_cast<size_t>(i)], &agg);
      if (agg[0].ts.empty()) continue;  // only stale markers
      for (int a = 0; a < kNumAggr; ++a) RETURN_IF_ERROR(writers[i][a]->AddSeries(s.labels(), agg[a]));
    }
  }
  RETURN_IF_ERROR(raw->Err());
  std::array<std::shared_ptr<TierBlock>, kNumTiers> out;
  for (int i = 0; i < kNumTiers; ++i) {
    if (writers[i][0] == nullptr) continue;
    for (auto& w : writers[i]) RETURN_IF_ERROR(w->Finish().status());
    RETURN_IF_ERROR(file::SyncDir(tmps[i]));
    std::string final_dir = tier_dirs[i] + "/" + ids[i];
    if (::rename(tmps[i].c_str(), final_dir.c_str()) != 0) return Status::FromErrno("rename " + tmps[i], errno);
    tmps[i].clear();  // in place: no longer the cleanup's
    RETURN_IF_ERROR(file::SyncDir(tier_dirs[i]));
    ASSIGN_OR_RETURN(out[i], TierBlock::Open(final_dir));
  }
  cleanup.armed = false;
  return out;
}

Result<std::shared_ptr<TierBlock>> MergeTierBlocks(const std::string& tier_dir, int tier,
                                                   const std::vector<std::shared_ptr<TierBlock>>& group,
                                                   const model::Matchers& all) {
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  std::vector<std::string> sources;
  for (const auto& b : group) {
    mint = std::min(mint, b->RawMint());
    maxt = std::max(maxt, b->RawMaxt());
    sources.insert(sources.end(), b->Sources().begin(), b->Sources().end());
  }
  std::sort(sources.begin(), sources.end());
  const std::string id = NewUlid();
  std::string tmp = tier_dir + "/" + id + ".tmp";
  RETURN_IF_ERROR(file::RemoveAll(tmp));
  RETURN_IF_ERROR(file::MkdirAll(tmp));
  struct Cleanup {
    std::string* tmp;
    ~Cleanup() {
      if (!tmp->empty()) (void)file::RemoveAll(*tmp);
    }
  } cleanup{&tmp};
  SeriesSamples data;
  for (int a = 0; a < kNumAggr; ++a) {
    ASSIGN_OR_RETURN(auto w, BlockWriter::Create(tmp, PartMeta(a, mint, maxt, sources),
                                                 kTierChunkSamples[static_cast<size_t>(tier)]));
    // Every part of every block holds the same series with the same
    // timestamps, so each part's merge yields the same series in order.
    std::vector<std::unique_ptr<storage::SeriesSet>> sets;
    for (const auto& b : group) {
      sets.push_back(b->Part(a)->NewQuerier(model::kMinTime, model::kMaxTime)->Select(true, {}, all));
    }
    auto merged = storage::MergeSeriesSets(std::move(sets));
    while (merged->Next()) {
      auto it = merged->At().Iterator();
      data.clear();
      while (it->Next()) {
        data.ts.push_back(it->At().t);
        data.vs.push_back(it->At().v);
      }
      RETURN_IF_ERROR(it->Err());
      RETURN_IF_ERROR(w->AddSeries(merged->At().labels(), data));
    }
    RETURN_IF_ERROR(merged->Err());
    RETURN_IF_ERROR(w->Finish().status());
  }
  RETURN_IF_ERROR(file::SyncDir(tmp));
  const std::string final_dir = tier_dir + "/" + id;
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) return Status::FromErrno("rename " + tmp, errno);
  tmp.clear();
  RETURN_IF_ERROR(file::SyncDir(tier_dir));
  return TierBlock::Open(final_dir);
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
  std::vector<std::unique_ptr<storage::SeriesSet>> sets;
  std::vector<std::shared_ptr<TierBlock>> hold;
  storage::SelectHints hints;
  hints.start = mint;
  hints.end = maxt;
  for (const auto& b : blocks) {
    if (b->RawMaxt() < mint || b->RawMint() >= maxt) continue;  // points in (RawMint, RawMaxt]
    hold.push_back(b);
    auto part = [&](int a) { return b->Part(a)->NewQuerier(mint, maxt)->Select(true, hints, matchers); };
    if (aggr == kAggrSum && func != "sum_over_time") {
      sets.push_back(std::make_unique<CountedSeriesSet>(part(kAggrSum), part(kAggrCount)));
    } else {
      sets.push_back(part(aggr));
    }
  }
  return std::make_unique<HoldingSeriesSet>(std::move(hold), storage::MergeSeriesSets(std::move(sets)));
}

}  // namespace trainwatch::tsdb
