// Persisting the head: rotate the WAL, write head data into blocks (one per
// aligned block range), drop it from the head, checkpoint what remains and
// delete the WAL segments the checkpoint covers. Also snapshots (the blocks
// hard-linked, the head written as one more block).

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/histogram.h"
#include "tsdb/chunkenc/st.h"
#include "tsdb/db_impl.h"
#include "tsdb/wal/records.h"

namespace trainwatch::tsdb {
namespace {

// Merges the out-of-order histograms into out->hts/hs (and their start
// timestamps into out->hsts), leaving out those at a timestamp of an
// in-order sample (`taken`, sorted) or a float.
void MergeOooHistograms(const SeriesSnapshot& snap, const std::vector<int64_t>& taken, SeriesSamples* out) {
  const bool with_st = !out->hsts.empty() || std::any_of(snap.ooo_hist.begin(), snap.ooo_hist.end(),
                                                         [](const storage::HistogramSample& x) { return x.st != 0; });
  if (with_st) out->hsts.resize(out->hts.size(), 0);
  std::vector<int64_t> mt, mst;
  std::vector<model::FloatHistogram> mh;
  mt.reserve(out->hts.size() + snap.ooo_hist.size());
  mh.reserve(out->hts.size() + snap.ooo_hist.size());
  size_t i = 0;
  auto keep_in_order = [&] {
    mt.push_back(out->hts[i]);
    mh.push_back(std::move(out->hs[i]));
    if (with_st) mst.push_back(out->hsts[i]);
    i++;
  };
  for (const auto& x : snap.ooo_hist) {
    while (i < out->hts.size() && out->hts[i] < x.t) keep_in_order();
    if (std::binary_search(taken.begin(), taken.end(), x.t) ||
        std::binary_search(out->ts.begin(), out->ts.end(), x.t)) {
      continue;
    }
    mt.push_back(x.t);
    mh.push_back(x.h);
    if (with_st) mst.push_back(x.st);
  }
  while (i < out->hts.size()) keep_in_order();
  out->hts = std::move(mt);
  out->hs = std::move(mh);
  out->hsts = std::move(mst);
}

Status MaterializeFloats(const SeriesSnapshot& snap, SeriesSamples* out, const std::vector<int64_t>& hist_ts);

// Decodes a snapshot's in-order chunks (floats and histograms) and merges
// its out-of-order samples; in-order samples win timestamp ties (they were
// written first). Start timestamps come along.
Status Materialize(const SeriesSnapshot& snap, SeriesSamples* out) {
  out->clear();
  bool any_hist = !snap.ooo_hist.empty();
  for (const auto& c : snap.chunks) {
    any_hist = any_hist || chunkenc::IsHistogramEncoding(chunkenc::InnerEncoding(c.enc, c.data.view()));
  }
  if (!any_hist) return MaterializeFloats(snap, out, {});
  // In-order floats and histograms never share a timestamp.
  SeriesSnapshot floats_only;
  for (const auto& c : snap.chunks) {
    if (chunkenc::IsHistogramEncoding(chunkenc::InnerEncoding(c.enc, c.data.view()))) {
      RETURN_IF_ERROR(chunkenc::DecodeAllHistogramsST(c.enc, c.data.view(), &out->hts, &out->hs, &out->hsts));
    } else {
      floats_only.chunks.push_back(c);
    }
  }
  std::vector<int64_t> in_order_hist = out->hts;
  floats_only.ooo = snap.ooo;
  floats_only.ooo_st = snap.ooo_st;
  RETURN_IF_ERROR(MaterializeFloats(floats_only, out, in_order_hist));
  if (snap.ooo_hist.empty()) return Status::OK();
  // Timestamps of in-order floats win over out-of-order histograms too.
  std::vector<int64_t> taken;
  for (const auto& c : floats_only.chunks) {
    std::vector<double> ignored;
    RETURN_IF_ERROR(chunkenc::DecodeAll(c.enc, c.data.view(), &taken, &ignored));
  }
  MergeOooHistograms(snap, taken, out);
  return Status::OK();
}

// Floats of snap's float chunks and out-of-order floats into out->ts/vs/sts,
// leaving out out-of-order ones at a timestamp of an in-order histogram
// (hist_ts, sorted).
Status MaterializeFloats(const SeriesSnapshot& snap, SeriesSamples* out, const std::vector<int64_t>& hist_ts) {
  std::vector<int64_t>* ts = &out->ts;
  std::vector<double>* vs = &out->vs;
  std::vector<int64_t>* sts = &out->sts;
  ts->clear();
  vs->clear();
  sts->clear();
  for (const auto& c : snap.chunks) RETURN_IF_ERROR(chunkenc::DecodeAllST(c.enc, c.data.view(), ts, vs, sts));
  if (snap.ooo.empty()) return Status::OK();
  const bool with_st = !sts->empty() || !snap.ooo_st.empty();
  if (with_st) sts->resize(ts->size(), 0);
  std::vector<int64_t> mt, mst;
  std::vector<double> mv;
  mt.reserve(ts->size() + snap.ooo.size());
  mv.reserve(ts->size() + snap.ooo.size());
  size_t i = 0, j = 0;
  while (i < ts->size() || j < snap.ooo.size()) {
    if (j == snap.ooo.size() || (i < ts->size() && (*ts)[i] <= snap.ooo[j].t)) {
      if (j < snap.ooo.size() && (*ts)[i] == snap.ooo[j].t) j++;
      mt.push_back((*ts)[i]);
      mv.push_back((*vs)[i]);
      if (with_st) mst.push_back((*sts)[i]);
      i++;
    } else {
      if (!std::binary_search(hist_ts.begin(), hist_ts.end(), snap.ooo[j].t)) {
        mt.push_back(snap.ooo[j].t);
        mv.push_back(snap.ooo[j].v);
        if (with_st) mst.push_back(snap.ooo_st.empty() ? 0 : snap.ooo_st[j]);
      }
      j++;
    }
  }
  *ts = std::move(mt);
  *vs = std::move(mv);
  *sts = std::move(mst);
  return Status::OK();
}

}  // namespace

Status DBImpl::CutHead(int64_t boundary, bool close_all) {
  int64_t start = MonoNanos();
  int segment;
  {
    // Every sample logged before the new segment is applied to the head.
    Head::ExclusiveAppendLock lock(head_.get());
    ASSIGN_OR_RETURN(segment, wal_->NextSegment());
  }
  Head::PersistSet set = head_->SnapshotForPersist(boundary, close_all);
  if (!set.series.empty()) {
    RETURN_IF_ERROR(WriteBlocks(set));
    head_->Truncate(set);
  }
  RETURN_IF_ERROR(WriteCheckpoint(segment));
  // The chunk log starts over with what the checkpoint left in the head.
  StartChunkLog(segment);
  RETURN_IF_ERROR(wal_->TruncateBefore(segment));
  ASSIGN_OR_RETURN(auto names, file::ListDir(opts_.dir));
  std::string keep = CheckpointDir(segment), keep_log = ChunkLogDir(segment);
  for (const auto& name : names) {
    std::string path = opts_.dir + "/" + name;
    if (name.rfind("checkpoint.", 0) == 0 && path != keep) RETURN_IF_ERROR(file::RemoveAll(path));
    if (name.rfind("chunks_head.", 0) == 0 && path != keep_log) RETURN_IF_ERROR(file::RemoveAll(path));
  }
  TW_LOG(Info, "persisted head up to {}: {} series in {} ms", boundary == INT64_MAX ? "now" : std::to_string(boundary),
         set.series.size(), (MonoNanos() - start) / 1000000);
  return Status::OK();
}

Status DBImpl::WriteChunkLog(wal::Writer* w, bool all) {
  int segment;
  {
    // Every sample logged before the new segment is applied to the head, so
    // the drain below sees it: in a chunk it logs, an open chunk (at or
    // after open_min) or out-of-order samples it logs.
    Head::ExclusiveAppendLock lock(head_.get());
    ASSIGN_OR_RETURN(segment, wal_->NextSegment());
    spans_.push_back({span_start_, head_->TakeLoggedMaxt()});
    span_start_ = segment;
  }
  Head::ChunkLogDrain d = head_->DrainForChunkLog(all);
  std::vector<std::string> recs;
  constexpr size_t kChunksPerRecord = 4096;
  for (size_t i = 0; i < d.chunks.size(); i += kChunksPerRecord) {
    recs.emplace_back();
    chunklog::EncodeChunks(d.chunks.data() + i, std::min(kChunksPerRecord, d.chunks.size() - i), &recs.back());
    if (recs.size() >= 16) {
      RETURN_IF_ERROR(w->Log(recs));
      recs.clear();
    }
  }
  // Reading every chunk closed since the last flush (or, for a base, every
  // closed chunk) mapped the spilled ones back in: out again.
  ChunkSlabs::DropMappedPages();
  for (size_t i = 0; i < d.ooo.size(); i++) {
    recs.emplace_back();
    chunklog::EncodeOoo(d.ooo[i], d.ooo_st[i], &recs.back());
  }
  for (const RefOooHist& o : d.ooo_hist) {
    recs.emplace_back();
    chunklog::EncodeOooHistograms(o, &recs.back());
  }
  recs.emplace_back();
  chunklog::EncodeMark(chunklog::Mark{segment, d.open_min, spans_}, &recs.back());
  RETURN_IF_ERROR(w->Log(recs));
  return w->Sync();
}

void DBImpl::DropChunkLog(const Status& why) {
  TW_LOG(Error, "tsdb: chunk log {} dropped: {}; the next start replays the whole wal", chunk_log_dir_,
         why.message());
  chunk_log_.reset();
  if (!chunk_log_dir_.empty()) {
    if (Status s = file::RemoveAll(chunk_log_dir_); !s.ok()) TW_LOG(Error, "tsdb: {}", s.message());
  }
  chunk_log_dir_.clear();
}

void DBImpl::StartChunkLog(int gen) {
  chunk_log_.reset();
  chunk_gen_ = gen;
  spans_.clear();
  span_start_ = gen;
  const std::string dir = ChunkLogDir(gen), tmp = dir + ".tmp";
  auto fail = [&](const Status& s) {
    TW_LOG(Error, "tsdb: chunk log {} not started: {}; the next start replays the whole wal", dir, s.message());
    (void)file::RemoveAll(tmp);
    (void)file::RemoveAll(dir);
    chunk_log_dir_.clear();
  };
  // Written aside and renamed: a generation without its base would promise
  // what it does not hold.
  if (Status s = file::RemoveAll(tmp); !s.ok()) return fail(s);
  if (Status s = file::RemoveAll(dir); !s.ok()) return fail(s);
  {
    wal::Options o;
    o.dir = tmp;
    auto w = wal::Writer::Open(o);
    if (!w.ok()) return fail(w.status());
    Status s = WriteChunkLog(w->get(), /*all=*/true);
    if (s.ok()) s = (*w)->Close();
    if (!s.ok()) return fail(s);
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) return fail(Status::FromErrno("rename " + tmp, errno));
  if (Status s = file::SyncDir(opts_.dir); !s.ok()) return fail(s);
  wal::Options o;
  o.dir = dir;
  auto w = wal::Writer::Open(o);
  if (!w.ok()) return fail(w.status());
  chunk_log_ = std::move(*w);
  chunk_log_dir_ = dir;
}

Status DBImpl::AddSeriesOrSkip(BlockWriter* w, const model::Labels& labels, const SeriesSamples& samples) {
  Status s = w->AddSeries(labels, samples);
  if (!s.IsInvalidArgument()) return s;
  series_skipped_.fetch_add(1, std::memory_order_relaxed);
  TW_LOG(Error, "tsdb: skipped a series of {} samples that a block cannot hold: {}", samples.size(), s.message());
  return Status::OK();
}

Status DBImpl::WriteBlocks(const Head::PersistSet& set) {
  const int64_t block = opts_.block_duration_ms;
  // The block ranges the set touches. A closed chunk lies within one range
  // (chunks are cut at block boundaries); out-of-order samples may be
  // anywhere. Head data lies within [model::kMinTime, model::kMaxTime], so
  // no range end overflows.
  std::set<int64_t> starts;
  for (const auto& [series, snap] : set.series) {
    for (const auto& c : snap.chunks) {
      for (int64_t w = AlignDown(c.mint, block); w <= c.maxt; w += block) starts.insert(w);
    }
    for (const auto& smp : snap.ooo) starts.insert(AlignDown(smp.t, block));
    for (const auto& x : snap.ooo_hist) starts.insert(AlignDown(x.t, block));
  }
  // An import spanning thousands of ranges must not hold a file per range
  // open at once (flush failed with EMFILE, forever): ranges are written in
  // groups of at most kMaxOpenWriters, one pass over the series per group.
  constexpr size_t kMaxOpenWriters = 64;
  std::vector<int64_t> order(starts.begin(), starts.end());
  std::vector<std::shared_ptr<Block>> opened;
  SeriesSamples all, part;
  for (size_t g = 0; g < order.size(); g += kMaxOpenWriters) {
    const size_t g_end = std::min(order.size(), g + kMaxOpenWriters);
    const int64_t lo = order[g], hi = order[g_end - 1] + block;  // [lo, hi)
    std::map<int64_t, std::unique_ptr<BlockWriter>> writers;     // by block start
    for (const auto& [series, snap] : set.series) {
      bool any = false;
      for (const auto& c : snap.chunks) any = any || (c.maxt >= lo && c.mint < hi);
      for (const auto& smp : snap.ooo) any = any || (smp.t >= lo && smp.t < hi);
      for (const auto& x : snap.ooo_hist) any = any || (x.t >= lo && x.t < hi);
      if (!any) continue;
      RETURN_IF_ERROR(Materialize(snap, &all));
      const model::Labels labels = head_->LabelsOf(series);
      const std::vector<int64_t>& ts = all.ts;
      const std::vector<int64_t>& hts = all.hts;
      size_t i = std::lower_bound(ts.begin(), ts.end(), lo) - ts.begin();
      size_t k = std::lower_bound(hts.begin(), hts.end(), lo) - hts.begin();
      for (;;) {
        const bool fl = i < ts.size() && ts[i] < hi, hl = k < hts.size() && hts[k] < hi;
        if (!fl && !hl) break;
        int64_t start = AlignDown(fl && (!hl || ts[i] < hts[k]) ? ts[i] : hts[k], block);
        size_t j = i, m = k;
        // start + block cannot overflow: head data lies within
        // [model::kMinTime, model::kMaxTime] (ts[j] - start could, across
        // that whole range).
        while (j < ts.size() && ts[j] < start + block) j++;
        while (m < hts.size() && hts[m] < start + block) m++;
        auto& w = writers[start];
        if (w == nullptr) {
          index::BlockMeta meta;
          meta.id = NewUlid();
          meta.mint = start;
          meta.maxt = start + block;
          meta.compaction_level = 1;
          meta.sources = {meta.id};
          meta.seq = next_seq_++;
          ASSIGN_OR_RETURN(w, BlockWriter::Create(opts_.dir, meta));
        }
        auto from = [](auto& v, size_t a) { return v.begin() + static_cast<std::ptrdiff_t>(a); };
        part.ts.assign(from(all.ts, i), from(all.ts, j));
        part.vs.assign(from(all.vs, i), from(all.vs, j));
        part.hts.assign(from(all.hts, k), from(all.hts, m));
        part.hs.assign(from(all.hs, k), from(all.hs, m));
        part.sts.clear();
        part.hsts.clear();
        if (!all.sts.empty()) part.sts.assign(from(all.sts, i), from(all.sts, j));
        if (!all.hsts.empty()) part.hsts.assign(from(all.hsts, k), from(all.hsts, m));
        RETURN_IF_ERROR(AddSeriesOrSkip(w.get(), labels, part));
        i = j;
        k = m;
      }
    }
    for (auto& [start, w] : writers) {
      ASSIGN_OR_RETURN(index::BlockMeta meta, w->Finish());
      ASSIGN_OR_RETURN(auto b, Block::Open(opts_.dir + "/" + meta.id));
      opened.push_back(std::move(b));
    }
  }
  base::MutexLock lock(&blocks_mu_);
  for (auto& b : opened) blocks_.push_back(std::move(b));
  std::sort(blocks_.begin(), blocks_.end(), [](const auto& a, const auto& b) {
    return a->meta().mint != b->meta().mint ? a->meta().mint < b->meta().mint : a->meta().seq < b->meta().seq;
  });
  return Status::OK();
}

Status DBImpl::WriteCheckpoint(int segment) {
  std::string dir = CheckpointDir(segment);
  std::string tmp = dir + ".tmp";
  RETURN_IF_ERROR(file::RemoveAll(tmp));
  {
    wal::Options wo;
    wo.dir = tmp;
    wo.segment_bytes = opts_.wal_segment_bytes;
    ASSIGN_OR_RETURN(auto w, wal::Writer::Open(wo));
    std::vector<wal::RefSeries> series;
    std::vector<wal::RefSample> samples;
    std::vector<wal::RefHistogramSample> hist_samples;
    std::vector<wal::RefSampleST> st_samples;
    SeriesSamples data;
    std::string rec;
    Status st;
    // Series records precede the samples that refer to them.
    auto flush = [&]() {
      if (!st.ok()) return;
      if (!series.empty()) {
        wal::EncodeSeries(series, &rec);
        st = w->Log(rec);
        series.clear();
      }
      if (st.ok() && !samples.empty()) {
        wal::EncodeSamples(samples, &rec);
        st = w->Log(rec);
        samples.clear();
      }
      if (st.ok() && !st_samples.empty()) {
        wal::EncodeSamplesST(st_samples, &rec);
        st = w->Log(rec);
        st_samples.clear();
      }
      if (st.ok() && !hist_samples.empty()) {
        wal::EncodeHistogramSamples(hist_samples, &rec);
        st = w->Log(rec);
        hist_samples.clear();
      }
    };
    head_->ForEachSeries([&](uint64_t ref, const model::Labels& labels, const SeriesSnapshot& snap) {
      if (!st.ok()) return;
      series.push_back(wal::RefSeries{ref, labels});
      st = Materialize(snap, &data);
      // A series with start timestamps has all its floats in records that
      // carry them, so replay applies them in time order.
      if (data.sts.empty()) {
        for (size_t i = 0; st.ok() && i < data.ts.size(); i++) samples.push_back({ref, data.ts[i], data.vs[i]});
      } else {
        for (size_t i = 0; st.ok() && i < data.ts.size(); i++) {
          st_samples.push_back({ref, data.ts[i], data.vs[i], data.sts[i]});
        }
      }
      for (size_t i = 0; st.ok() && i < data.hts.size(); i++) {
        hist_samples.push_back({ref, data.hts[i], std::move(data.hs[i]), data.hsts.empty() ? 0 : data.hsts[i]});
      }
      if (series.size() >= 1024 || samples.size() + st_samples.size() >= 8192 || hist_samples.size() >= 512) flush();
    });
    flush();
    RETURN_IF_ERROR(st);
    RETURN_IF_ERROR(w->Sync());
    RETURN_IF_ERROR(w->Close());
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) return Status::FromErrno("rename " + tmp, errno);
  return file::SyncDir(opts_.dir);
}

Result<std::string> DBImpl::Snapshot(bool skip_head) {
  // Held throughout: no compaction or retention removes a block while it is linked.
  base::MutexLock lock(&maint_mu_);
  if (closed_) return Status::Unavailable("tsdb is closed");
  // Prometheus's name: UTC time, then 16 random hex digits.
  char when[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  std::random_device rd;
  const std::string name = fmt::format("{}-{:016x}", when, (uint64_t{rd()} << 32) ^ rd());
  const std::string parent = opts_.dir + "/snapshots";
  const std::string dir = parent + "/" + name, tmp = dir + ".tmp";
  auto fail = [&](Status s) {
    Status r = file::RemoveAll(tmp);
    if (!r.ok()) TW_LOG(Warn, "snapshot: {}", r.message());
    return s.Annotate("snapshot " + name);
  };
  if (Status s = file::MkdirAll(tmp); !s.ok()) return fail(s);
  for (const auto& b : BlocksSnapshot()) {
    std::error_code ec;
    std::filesystem::copy(b->dir(), tmp + "/" + b->meta().id,
                          std::filesystem::copy_options::recursive | std::filesystem::copy_options::create_hard_links,
                          ec);
    if (ec) return fail(Status::IOError("link block " + b->dir() + ": " + ec.message()));
  }
  // Tiers too: those whose raw blocks retention took exist nowhere else.
  const auto tiers = TiersSnapshot();
  for (int t = 0; t < kNumTiers; ++t) {
    const std::string tier_dir = tmp + "/downsample/" + std::string(TierName(t));
    if (tiers[static_cast<size_t>(t)].empty()) continue;
    if (Status s = file::MkdirAll(tier_dir); !s.ok()) return fail(s);
    for (const auto& tb : tiers[static_cast<size_t>(t)]) {
      std::error_code ec;
      std::filesystem::copy(tb->dir(), tier_dir + "/" + std::filesystem::path(tb->dir()).filename().string(),
                            std::filesystem::copy_options::recursive | std::filesystem::copy_options::create_hard_links,
                            ec);
      if (ec) return fail(Status::IOError("link tier block " + tb->dir() + ": " + ec.message()));
    }
  }
  if (!skip_head) {
    if (Status s = WriteHeadBlock(tmp); !s.ok()) return fail(s);
  }
  if (Status s = file::SyncDir(tmp); !s.ok()) return fail(s);
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) return fail(Status::IOError("rename " + tmp + ": " + ec.message()));
  if (Status s = file::SyncDir(parent); !s.ok()) return s.Annotate("snapshot " + name);
  TW_LOG(Info, "snapshot {} written{}", dir, skip_head ? " (without the head)" : "");
  return name;
}

Status DBImpl::WriteHeadBlock(const std::string& parent) {
  // Compressed chunks are copied, sorted by labels (the index's order), then
  // decoded one series at a time.
  std::vector<SeriesSnapshot> all;
  head_->ForEachSeries([&](uint64_t, const model::Labels& labels, const SeriesSnapshot& snap) {
    all.push_back(snap);
    all.back().labels = labels;
  });
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  for (const auto& s : all) {
    for (const auto& c : s.chunks) {
      mint = std::min(mint, c.mint);
      maxt = std::max(maxt, c.maxt);
    }
    for (const auto& smp : s.ooo) {
      mint = std::min(mint, smp.t);
      maxt = std::max(maxt, smp.t);
    }
    for (const auto& x : s.ooo_hist) {
      mint = std::min(mint, x.t);
      maxt = std::max(maxt, x.t);
    }
  }
  if (mint > maxt) return Status::OK();  // an empty head: no block
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.labels < b.labels; });
  index::BlockMeta meta;
  meta.id = NewUlid();
  meta.mint = mint;
  meta.maxt = maxt + 1;  // exclusive, as every block's (head data ends at model::kMaxTime)
  meta.compaction_level = 1;
  meta.sources = {meta.id};
  meta.seq = next_seq_++;
  ASSIGN_OR_RETURN(auto w, BlockWriter::Create(parent, meta));
  SeriesSamples data;
  for (const auto& s : all) {
    RETURN_IF_ERROR(Materialize(s, &data));
    RETURN_IF_ERROR(AddSeriesOrSkip(w.get(), s.labels, data));
  }
  return w->Finish().status();
}

}  // namespace trainwatch::tsdb
