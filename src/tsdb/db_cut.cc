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
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/db_impl.h"
#include "tsdb/wal/records.h"

namespace trainwatch::tsdb {
namespace {

int64_t AlignDown(int64_t t, int64_t block) {
  return t >= 0 ? t / block * block : -(((-t) + block - 1) / block) * block;
}

// Decodes a snapshot's in-order chunks and merges its out-of-order samples;
// in-order samples win timestamp ties (they were written first).
Status Materialize(const SeriesSnapshot& snap, std::vector<int64_t>* ts, std::vector<double>* vs) {
  ts->clear();
  vs->clear();
  for (const auto& c : snap.chunks) RETURN_IF_ERROR(chunkenc::DecodeAll(c.enc, c.data.view(), ts, vs));
  if (snap.ooo.empty()) return Status::OK();
  std::vector<int64_t> mt;
  std::vector<double> mv;
  mt.reserve(ts->size() + snap.ooo.size());
  mv.reserve(ts->size() + snap.ooo.size());
  size_t i = 0, j = 0;
  while (i < ts->size() || j < snap.ooo.size()) {
    if (j == snap.ooo.size() || (i < ts->size() && (*ts)[i] <= snap.ooo[j].t)) {
      if (j < snap.ooo.size() && (*ts)[i] == snap.ooo[j].t) j++;
      mt.push_back((*ts)[i]);
      mv.push_back((*vs)[i]);
      i++;
    } else {
      mt.push_back(snap.ooo[j].t);
      mv.push_back(snap.ooo[j].v);
      j++;
    }
  }
  *ts = std::move(mt);
  *vs = std::move(mv);
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
  for (const RefOoo& o : d.ooo) {
    recs.emplace_back();
    chunklog::EncodeOoo(o, &recs.back());
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

Status DBImpl::AddSeriesOrSkip(BlockWriter* w, const model::Labels& labels, const std::vector<int64_t>& ts,
                               const std::vector<double>& vs) {
  Status s = w->AddSeries(labels, ts, vs);
  if (!s.IsInvalidArgument()) return s;
  series_skipped_.fetch_add(1, std::memory_order_relaxed);
  TW_LOG(Error, "tsdb: skipped a series of {} samples that a block cannot hold: {}", ts.size(), s.message());
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
  }
  // An import spanning thousands of ranges must not hold a file per range
  // open at once (flush failed with EMFILE, forever): ranges are written in
  // groups of at most kMaxOpenWriters, one pass over the series per group.
  constexpr size_t kMaxOpenWriters = 64;
  std::vector<int64_t> order(starts.begin(), starts.end());
  std::vector<std::shared_ptr<Block>> opened;
  std::vector<int64_t> ts, part_t;
  std::vector<double> vs, part_v;
  for (size_t g = 0; g < order.size(); g += kMaxOpenWriters) {
    const size_t g_end = std::min(order.size(), g + kMaxOpenWriters);
    const int64_t lo = order[g], hi = order[g_end - 1] + block;  // [lo, hi)
    std::map<int64_t, std::unique_ptr<BlockWriter>> writers;     // by block start
    for (const auto& [series, snap] : set.series) {
      bool any = false;
      for (const auto& c : snap.chunks) any = any || (c.maxt >= lo && c.mint < hi);
      for (const auto& smp : snap.ooo) any = any || (smp.t >= lo && smp.t < hi);
      if (!any) continue;
      RETURN_IF_ERROR(Materialize(snap, &ts, &vs));
      const model::Labels labels = head_->LabelsOf(series);
      size_t i = std::lower_bound(ts.begin(), ts.end(), lo) - ts.begin();
      while (i < ts.size() && ts[i] < hi) {
        int64_t start = AlignDown(ts[i], block);
        size_t j = i;
        // start + block cannot overflow: head data lies within
        // [model::kMinTime, model::kMaxTime] (ts[j] - start could, across
        // that whole range).
        while (j < ts.size() && ts[j] < start + block) j++;
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
        part_t.assign(ts.begin() + static_cast<std::ptrdiff_t>(i), ts.begin() + static_cast<std::ptrdiff_t>(j));
        part_v.assign(vs.begin() + static_cast<std::ptrdiff_t>(i), vs.begin() + static_cast<std::ptrdiff_t>(j));
        RETURN_IF_ERROR(AddSeriesOrSkip(w.get(), labels, part_t, part_v));
        i = j;
      }
    }
    for (auto& [start, w] : writers) {
      ASSIGN_OR_RETURN(index::BlockMeta meta, w->Finish());
      ASSIGN_OR_RETURN(auto b, Block::Open(opts_.dir + "/" + meta.id));
      opened.push_back(std::move(b));
    }
  }
  std::lock_guard<std::mutex> lock(blocks_mu_);
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
    std::vector<int64_t> ts;
    std::vector<double> vs;
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
    };
    head_->ForEachSeries([&](uint64_t ref, const model::Labels& labels, const SeriesSnapshot& snap) {
      if (!st.ok()) return;
      series.push_back(wal::RefSeries{ref, labels});
      st = Materialize(snap, &ts, &vs);
      for (size_t i = 0; st.ok() && i < ts.size(); i++) samples.push_back({ref, ts[i], vs[i]});
      if (series.size() >= 1024 || samples.size() >= 8192) flush();
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
  std::lock_guard<std::mutex> lock(maint_mu_);
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
  std::vector<int64_t> ts;
  std::vector<double> vs;
  for (const auto& s : all) {
    RETURN_IF_ERROR(Materialize(s, &ts, &vs));
    RETURN_IF_ERROR(AddSeriesOrSkip(w.get(), s.labels, ts, vs));
  }
  return w->Finish().status();
}

}  // namespace trainwatch::tsdb
