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

std::string_view TierName(int tier) { return tier == 0 ? "5m" : "1h"; }

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
  for (int i = 0; i < kNumTiers; ++i) {
    ids[i] = NewUlid();
    tmps[i] = tier_dirs[i] + "/" + ids[i] + ".tmp";
    RETURN_IF_ERROR(file::RemoveAll(tmps[i]));
    RETURN_IF_ERROR(file::MkdirAll(tmps[i]));
    for (int a = 0; a < kNumAggr; ++a) {
      ASSIGN_OR_RETURN(writers[i][a], BlockWriter::Create(tmps[i], PartMeta(a, mint, maxt, sources)));
    }
  }
  // Removes the unfinished directories on any error below.
  struct Cleanup {
    std::array<std::string, kNumTiers>* tmps;
    bool armed = true;
    ~Cleanup() {
      if (!armed) return;
      for (auto& t : *tmps) (void)file::RemoveAll(t);
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
      for (auto& a : agg) a.clear();
      AggregateWindows(ts.data(), vs.data(), ts.size(), kTierResolutions[static_cast<size_t>(i)], &agg);
      for (int a = 0; a < kNumAggr; ++a) RETURN_IF_ERROR(writers[i][a]->AddSeries(s.labels(), agg[a]));
    }
  }
  RETURN_IF_ERROR(raw->Err());
  std::array<std::shared_ptr<TierBlock>, kNumTiers> out;
  for (int i = 0; i < kNumTiers; ++i) {
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

Result<std::shared_ptr<TierBlock>> MergeTierBlocks(const std::string& tier_dir,
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
    ASSIGN_OR_RETURN(auto w, BlockWriter::Create(tmp, PartMeta(a, mint, maxt, sources)));
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
    // A raw block holding part of the window before its end. One that only
    // starts at its end holds just that sample, which the point has: the
    // block before was deleted (by retention) after its tiers were made, and
    // the sample was there by then.
    if (mint < cov && cov - res < maxt) return cov - res;
  }
  return cov;
}

int PickTier(const TierView& v, const storage::SelectHints& h) {
  if (TierAggrFor(h.func) == kNumAggr || h.range_ms <= 0 || h.step_ms < 0 || h.start > h.end) return -1;
  auto aligned = [](int64_t t, int64_t res) { return ((t % res) + res) % res == 0; };
  auto raw_in = [&](int64_t a, int64_t b) {  // raw data in [a, b]?
    for (const auto& [mint, maxt] : v.raw) {
      if (mint <= b && a <= maxt) return true;
    }
    return false;
  };
  int64_t raw_start = INT64_MAX;
  for (const auto& r : v.raw) raw_start = std::min(raw_start, r.first);
  for (int tier = kNumTiers - 1; tier >= 0; --tier) {
    const int64_t res = kTierResolutions[static_cast<size_t>(tier)];
    const auto& blocks = v.tiers[static_cast<size_t>(tier)];
    if (blocks.empty()) continue;
    if (!aligned(h.range_ms, res) || !aligned(h.step_ms, res) || !aligned(h.start - 1, res) || !aligned(h.end, res)) {
      continue;
    }
    const bool coarse = h.step_ms > 0 ? res * 5 <= h.step_ms : res * 5 <= h.range_ms;
    if (!coarse && raw_start <= h.start) continue;
    // Points cover (RawMint, RawMaxt] per block; the query needs [start,
    // min(end, coverage end)] from the tier (raw data answers after it).
    const int64_t need_end = std::min(h.end, TierAnswerEnd(v, tier));
    if (need_end < h.start) continue;
    int64_t covered = h.start - 1;  // every point time in [start, covered] is the tier's
    bool hole = false;
    for (const auto& b : blocks) {
      if (b->RawMaxt() <= covered) continue;
      if (b->RawMint() > covered) {
        if (raw_in(covered + 1, std::min(b->RawMint(), need_end))) hole = true;
      }
      covered = b->RawMaxt();
      if (covered >= need_end || hole) break;
    }
    if (!hole) return tier;
  }
  return -1;
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
    if (aggr == kAggrSum) {
      sets.push_back(std::make_unique<CountedSeriesSet>(part(kAggrSum), part(kAggrCount)));
    } else {
      sets.push_back(part(aggr));
    }
  }
  return std::make_unique<HoldingSeriesSet>(std::move(hold), storage::MergeSeriesSets(std::move(sets)));
}

}  // namespace trainwatch::tsdb
