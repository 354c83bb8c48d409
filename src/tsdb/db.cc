// DB: opening (blocks, WAL replay), querying across blocks and the head,
// stats and the background maintenance loop.

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "storage/merge.h"
#include "tsdb/db_impl.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/segment.h"
#include "tsdb/wal/records.h"

namespace trainwatch::tsdb {

Result<std::unique_ptr<DB>> DB::Open(const Options& opts) {
  auto db = std::make_unique<DBImpl>(opts);
  RETURN_IF_ERROR(db->Init());
  return std::unique_ptr<DB>(std::move(db));
}

DBImpl::DBImpl(const Options& opts) : opts_(opts) {
  HeadOptions ho;
  ho.block_duration_ms = opts.block_duration_ms;
  ho.max_future_ms = opts.max_future_ms;
  ho.max_age_ms = opts.retention_ms;
  ho.now_ms = opts.now_ms;
  ho.limits = opts.series_limits;
  if (!opts.dir.empty()) ho.spill.dir = SpillDir();
  head_ = std::make_unique<Head>(ho);
}

DBImpl::~DBImpl() {
  Status s = Close();
  if (!s.ok()) TW_LOG(Warn, "close tsdb: {}", s.message());
}

Status DBImpl::Init() {
  if (opts_.dir.empty()) return Status::InvalidArgument("tsdb: empty data directory");
  RETURN_IF_ERROR(file::MkdirAll(opts_.dir));
  std::string lock_path = opts_.dir + "/lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return Status::FromErrno("open " + lock_path, errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Unavailable("data directory " + opts_.dir + " is in use by another process");
  }
  // The spilled closed chunks of an earlier process: nothing reads them
  // (the chunk log holds every closed chunk).
  RETURN_IF_ERROR(file::RemoveAll(SpillDir()));
  RETURN_IF_ERROR(file::MkdirAll(SpillDir()));
  int64_t start = MonoNanos();
  RETURN_IF_ERROR(LoadBlocks());
  RETURN_IF_ERROR(LoadTiers());
  // Chunks closed during replay are re-encoded densely after it, in the
  // background: ready sooner (it was a fifth of replay's time).
  head_->SetDeferDense(true);
  head_->EnableChunkQueue();
  Status replayed = ReplayWal();
  head_->SetDeferDense(false);
  RETURN_IF_ERROR(replayed);
  wal::Options wo;
  wo.dir = WalDir();
  wo.segment_bytes = opts_.wal_segment_bytes;
  ASSIGN_OR_RETURN(wal_, wal::Writer::Open(wo));
  head_->SetWal(wal_.get(), opts_.wal_sync == WalSync::kPerRequest);
  // Samples replayed from after the last mark were logged in segments the
  // next span covers.
  head_->NoteLogged(replay_tail_maxt_);
  base::MutexLock maint_lock(&maint_mu_);  // nothing else runs yet; held for the analysis
  if (replay_mark_.has_value()) {  // replay used the generation: append to it
    spans_ = replay_mark_->spans;
    span_start_ = replay_mark_->wal_segment;
    chunk_log_dir_ = ChunkLogDir(chunk_gen_);
    wal::Options co;
    co.dir = chunk_log_dir_;
    auto w = wal::Writer::Open(co);
    if (w.ok()) {
      chunk_log_ = std::move(*w);
    } else {
      DropChunkLog(w.status());
    }
  }
  if (chunk_log_ == nullptr) StartChunkLog(chunk_gen_);
  maint_lock.Unlock();
  TW_LOG(Info,
         "tsdb opened dir={} blocks={} head_series={} head_samples={} in {} ms (the chunk log held {} wal samples "
         "records and {} more samples)",
         opts_.dir, BlocksSnapshot().size(), head_->NumSeries(), head_->NumSamples(), (MonoNanos() - start) / 1000000,
         replay_skipped_records_, head_->ReplaySkipped());
  if (opts_.background || opts_.wal_sync == WalSync::kInterval) bg_ = std::thread([this] { BackgroundLoop(); });
  densify_ = std::thread([this] { DensifyAfterReplay(); });
  return Status::OK();
}

void DBImpl::DensifyAfterReplay() {
  const std::vector<uint64_t> refs = head_->SeriesRefs();
  const int64_t start = MonoNanos();
  uint64_t chunks = 0;
  // In slices, each under maint_mu_ (a head cut must not swap chunks under
  // it), so maintenance and flushes wait at most one slice.
  constexpr size_t kSlice = 4096;
  for (size_t i = 0; i < refs.size(); i += kSlice) {
    {
      base::MutexLock lock(&bg_mu_);
      if (stopping_) return;
    }
    base::MutexLock lock(&maint_mu_);
    if (closed_) return;
    std::vector<uint64_t> slice(refs.begin() + static_cast<std::ptrdiff_t>(i),
                                refs.begin() + static_cast<std::ptrdiff_t>(std::min(refs.size(), i + kSlice)));
    chunks += head_->DensifyClosed(slice);
  }
  if (chunks > 0) {
    TW_LOG(Info, "tsdb: re-encoded {} chunks replayed from the wal in {} ms", chunks, (MonoNanos() - start) / 1000000);
  }
}

Status DBImpl::LoadBlocks() {
  ASSIGN_OR_RETURN(auto names, file::ListDir(opts_.dir));
  std::vector<std::shared_ptr<Block>> blocks;
  std::vector<std::pair<std::string, Status>> unreadable;  // (name, why)
  uint64_t set_aside = 0;
  for (const auto& name : names) {
    std::string path = opts_.dir + "/" + name;
    if (name.size() > 4 && name.ends_with(".tmp")) {
      // A block or checkpoint whose writing did not finish.
      RETURN_IF_ERROR(file::RemoveAll(path));
      continue;
    }
    if (name.find(file::kSetAsideSuffix) != std::string::npos) {
      set_aside++;
      continue;
    }
    std::error_code ec;
    if (name.size() != 26 || !std::filesystem::is_directory(path, ec)) continue;
    auto b = file::Exists(path + "/meta.json") ? Block::Open(path)
                                               : Result<std::shared_ptr<Block>>(Status::Corruption("no meta.json"));
    if (!b.ok()) {
      unreadable.emplace_back(name, b.status());
      continue;
    }
    next_seq_ = std::max<uint64_t>(next_seq_, (*b)->meta().seq + 1);
    blocks.push_back(std::move(*b));
  }
  // An unreadable block dir that a compacted block lists among its sources
  // is what an older version's interrupted delete left (files removed in
  // place): its data is in the newer block, so the rest goes. Any other that
  // its checksums or structure show damaged is set aside ("<id>.corrupt");
  // one that failed for another reason (permissions, no memory) stays, and
  // is logged at every start.
  for (const auto& [name, why] : unreadable) {
    const Block* by = nullptr;
    for (const auto& o : blocks) {
      const auto& src = o->meta().sources;
      if (o->meta().id != name && std::find(src.begin(), src.end(), name) != src.end()) by = o.get();
    }
    std::string path = opts_.dir + "/" + name;
    if (by == nullptr && why.IsCorruption()) {
      auto to = file::SetAside(path);
      if (to.ok()) {
        set_aside++;
        TW_LOG(Error, "block {} is damaged and was set aside as {}: {}; its data is not served", path, *to,
               why.message());
      } else {
        TW_LOG(Error, "skip damaged block {} ({}): {}", path, why.message(), to.status().message());
      }
      continue;
    }
    if (by == nullptr) {
      TW_LOG(Error, "skip unreadable block {}: {}", path, why.message());
      continue;
    }
    TW_LOG(Warn, "remove the rest of block {} ({}): compacted into block {}", path, why.message(), by->meta().id);
    RETURN_IF_ERROR(file::RemoveAll(path));
  }
  // A compaction that crashed after writing its output but before deleting
  // its inputs leaves blocks whose sources are covered by a newer block.
  std::vector<std::shared_ptr<Block>> kept;
  for (auto& b : blocks) {
    bool covered = false;
    for (auto& o : blocks) {
      if (o == b || o->meta().compaction_level <= b->meta().compaction_level) continue;
      const auto& src = o->meta().sources;
      covered = std::all_of(b->meta().sources.begin(), b->meta().sources.end(), [&](const std::string& s) {
        return std::find(src.begin(), src.end(), s) != src.end();
      });
      if (covered) break;
    }
    if (covered) {
      b->MarkDeleted();
    } else {
      kept.push_back(b);
    }
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a->meta().mint != b->meta().mint ? a->meta().mint < b->meta().mint : a->meta().seq < b->meta().seq;
  });
  base::MutexLock lock(&blocks_mu_);
  blocks_ = std::move(kept);
  blocks_set_aside_.store(set_aside);
  return Status::OK();
}

std::string DBImpl::CheckpointDir(int segment) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "checkpoint.%08d", segment);
  return opts_.dir + "/" + buf;
}

Status DBImpl::ReplayDir(const std::string& dir, int first_segment, bool repair, const chunklog::Mark* mark,
                         bool checkpoint, int series_through) {
  // Damage inside the log (a flipped bit, not a crash's torn tail) loses the
  // rest of its segment only: replay goes on with the next segment, whose
  // records are framed on their own, and repair cuts just the damaged one.
  std::vector<wal::CorruptionInfo> damaged;
  for (int first = first_segment;;) {
    std::optional<wal::CorruptionInfo> c;
    RETURN_IF_ERROR(ReplaySegments(dir, first, &c, mark, checkpoint, series_through));
    if (!c.has_value()) break;
    damaged.push_back(*c);
    if (c->torn_tail || !repair) break;
    ASSIGN_OR_RETURN(auto segs, wal::internal::ListSegments(dir));
    if (segs.empty() || segs.back().index <= c->segment) break;
    first = c->segment + 1;
  }
  for (const wal::CorruptionInfo& c : damaged) {
    if (!repair) break;
    // The last one may be a torn tail: the writer will append after it.
    RETURN_IF_ERROR(wal::Repair(dir, c.segment, c.offset, /*keep_later=*/&c != &damaged.back() || !c.torn_tail));
  }
  return Status::OK();
}

Status DBImpl::ReplaySegments(const std::string& dir, int first_segment, std::optional<wal::CorruptionInfo>* damage,
                              const chunklog::Mark* mark, bool checkpoint, int series_through) {
  ASSIGN_OR_RETURN(auto reader, wal::Reader::Open(dir, first_segment));
  std::string_view rec;
  std::vector<wal::RefSeries> series;
  std::vector<wal::RefSample> samples;
  Head::ReplayBatch batch, scratch;
  uint64_t records = 0;
  // Samples are applied in batches of many records (Head::ReplaySamples
  // sorts them by series and spreads the series over the cores). A series
  // record precedes its samples in the log, so creating series as their
  // records come while samples wait in the batch keeps every sample's
  // series known when it is applied.
  // One batch is applied while the next is decoded.
  auto batch_samples = [&] {
    return std::clamp<size_t>(head_->NumSeries() * 16, std::min<size_t>(opts_.replay_batch_samples, 256u << 10),
                              std::max<size_t>(opts_.replay_batch_samples, 1));
  };
  const int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Head::ReplayBatch applying;
  std::thread applier;
  // Whether the batch's samples were logged before the chunk log's mark;
  // those in the log are skipped: all before its time T here, the rest by
  // their series' logged chunks in Head::ReplaySamples.
  bool batch_covered = false;
  uint64_t skipped = 0;
  // Segments whose samples records are all covered are not even decoded.
  const int skip_before = mark != nullptr ? mark->FirstUncoveredSegment(first_segment) : 0;
  // Histogram samples and floats with start timestamps wait in batches of
  // their own (at most one of the three holds samples) and are applied on
  // this thread, in log order with the floats: a record of one kind first
  // applies the samples of the others before it (waiting for the applier).
  std::vector<wal::RefHistogramSample> hist_rec, hist_batch;
  std::vector<wal::RefSampleST> st_rec, st_batch;
  bool hist_covered = false;
  auto flush_hist = [&] {
    if (hist_batch.empty() && st_batch.empty()) return;
    if (applier.joinable()) applier.join();
    const int64_t from = mark != nullptr ? mark->covered_before : INT64_MIN;
    if (!hist_batch.empty()) head_->ReplayHistograms(hist_batch, hist_covered, from);
    if (!st_batch.empty()) head_->ReplaySamplesST(st_batch, hist_covered, from);
    hist_batch.clear();
    st_batch.clear();
  };
  auto apply = [&] {
    if (applier.joinable()) applier.join();
    applying.swap(batch);
    batch.clear();
    if (!applying.empty()) {
      applier = std::thread([&, covered = batch_covered] {
        head_->ReplaySamples(&applying, &scratch, workers, covered);
      });
    }
  };
  // A side record (histograms, floats with start timestamps) of the kind
  // whose batch is *side: skipped, decoded and filtered as samples records
  // are, then queued after the float batch and the other side batch
  // (`other`) are applied, so every sample is applied in log order.
  auto take_side = [&](auto max_time, auto decode, auto* rec_samples, auto* side, const auto& other, size_t limit) {
    const bool covered = mark != nullptr && (checkpoint || reader->segment() < mark->wal_segment);
    int64_t rec_maxt;
    if ((!checkpoint && reader->segment() < skip_before) ||
        (covered && max_time(rec, &rec_maxt) && rec_maxt < mark->covered_before)) {
      replay_skipped_records_++;
      return;
    }
    Status s = decode(rec, rec_samples);
    if (!s.ok()) {
      TW_LOG(Error, "wal {} segment {} offset {}: {}", dir, reader->segment(), reader->offset(), s.message());
      return;
    }
    head_->ResolveReplayAliases(rec_samples);
    if (!batch.empty()) apply();
    if (covered != hist_covered || !other.empty()) {
      flush_hist();
      hist_covered = covered;
    }
    if (!checkpoint && (mark == nullptr || reader->segment() >= mark->wal_segment)) {
      for (const auto& x : *rec_samples) replay_tail_maxt_ = std::max(replay_tail_maxt_, x.t);
    }
    for (auto& x : *rec_samples) side->push_back(std::move(x));
    if (side->size() >= limit) flush_hist();
  };
  while (reader->Next(&rec)) {
    records++;
    switch (wal::Type(rec)) {
      case wal::RecordType::kSeries: {
        if (reader->segment() <= series_through) break;  // created by ReplaySeriesRecords
        Status s = wal::DecodeSeries(rec, &series);
        if (!s.ok()) {
          TW_LOG(Error, "wal {} segment {} offset {}: {}", dir, reader->segment(), reader->offset(), s.message());
          continue;
        }
        head_->ReplaySeries(series);
        break;
      }
      case wal::RecordType::kSamples: {
        // Records whose samples the chunk log holds are passed over undecoded:
        // whole segments by the mark's spans, others by their latest time.
        const bool covered = mark != nullptr && (checkpoint || reader->segment() < mark->wal_segment);
        int64_t rec_maxt;
        if ((!checkpoint && reader->segment() < skip_before) ||
            (covered && wal::SamplesMaxTime(rec, &rec_maxt) && rec_maxt < mark->covered_before)) {
          replay_skipped_records_++;
          break;
        }
        Status s = wal::DecodeSamples(rec, &samples);
        if (!s.ok()) {
          TW_LOG(Error, "wal {} segment {} offset {}: {}", dir, reader->segment(), reader->offset(), s.message());
          continue;
        }
        head_->ResolveReplayAliases(&samples);
        flush_hist();
        if (covered != batch_covered) {
          apply();
          batch_covered = covered;
        }
        // Room for the whole batch at once, with an eighth to spare as the
        // series (and so the batch size) grow: growing by doubling would
        // write (and fault in) each batch buffer about twice over.
        if (const size_t want = batch.size() + samples.size(); want > batch.capacity()) {
          const size_t full = std::max(want, batch_samples() + samples.size());
          batch.reserve(full + full / 8);
        }
        if (!checkpoint && (mark == nullptr || reader->segment() >= mark->wal_segment)) {
          for (const auto& smp : samples) replay_tail_maxt_ = std::max(replay_tail_maxt_, smp.t);
        }
        if (covered) {
          skipped += head_->AppendUncovered(samples, mark->covered_before, &batch);
        } else {
          batch.insert(batch.end(), samples.begin(), samples.end());
        }
        if (batch.size() >= batch_samples()) apply();
        break;
      }
      case wal::RecordType::kHistogramSamples:
        take_side(wal::HistogramSamplesMaxTime, wal::DecodeHistogramSamples, &hist_rec, &hist_batch, st_batch, 4096);
        break;
      case wal::RecordType::kSamplesST:
        take_side(wal::SamplesSTMaxTime, wal::DecodeSamplesST, &st_rec, &st_batch, hist_batch, 65536);
        break;
      default:
        TW_LOG(Warn, "wal {} segment {} offset {}: unknown record type, skipped", dir, reader->segment(),
               reader->offset());
    }
  }
  flush_hist();  // at most one of the batches holds samples now
  apply();
  if (applier.joinable()) applier.join();
  head_->CountReplaySkipped(skipped);
  if (!reader->status().ok()) {
    wal_corruptions_++;
    TW_LOG(Warn, "wal replay stopped: {}; truncating the segment there", reader->status().message());
    if (reader->corruption().has_value()) *damage = *reader->corruption();
  }
  TW_LOG(Debug, "replayed {} records from {}", records, dir);
  return Status::OK();
}


int DBImpl::ReplaySeriesRecords(const std::string& dir, int first_segment) {
  auto reader = wal::Reader::Open(dir, first_segment);
  if (!reader.ok()) return first_segment - 1;
  std::string_view rec;
  std::vector<wal::RefSeries> series;
  int done = first_segment - 1;
  while ((*reader)->Next(&rec)) {
    done = std::max(done, (*reader)->segment() - 1);
    if (wal::Type(rec) != wal::RecordType::kSeries) continue;
    Status s = wal::DecodeSeries(rec, &series);
    if (!s.ok()) {
      TW_LOG(Error, "wal {} segment {} offset {}: {}", dir, (*reader)->segment(), (*reader)->offset(), s.message());
      continue;
    }
    head_->ReplaySeries(series);
  }
  if (!(*reader)->status().ok()) return done;
  auto segs = wal::internal::ListSegments(dir);
  return segs.ok() && !segs->empty() ? std::max(done, segs->back().index) : done;
}

Status DBImpl::ReplayWal() {
  // The newest complete checkpoint holds the head as of its segment; older
  // segments are covered by it.
  ASSIGN_OR_RETURN(auto names, file::ListDir(opts_.dir));
  int checkpoint = -1;
  for (const auto& name : names) {
    if (name.rfind("checkpoint.", 0) == 0 && name.size() == 19) checkpoint = std::max(checkpoint, std::atoi(name.c_str() + 11));
  }
  // The chunk log of this checkpoint, if any, holds most of what follows.
  const int gen = std::max(checkpoint, 0);
  chunk_gen_ = gen;
  for (const auto& name : names) {
    if (name.rfind("chunks_head.", 0) == 0 && opts_.dir + "/" + name != ChunkLogDir(gen)) {
      RETURN_IF_ERROR(file::RemoveAll(opts_.dir + "/" + name));  // of an older checkpoint, or unfinished
    }
  }
  // The chunk log loads on a thread while the series records are read
  // (the base's chunks go to the series created before it arrives, and to
  // the others as they are created); then the samples are replayed, from
  // the first segment with samples the log does not hold if every segment
  // before it read cleanly.
  std::optional<chunklog::Mark> mark;
  int wal_first = gen;
  int checkpoint_clean = -1, wal_clean = -1;  // series records applied through these segments
  if (file::Exists(ChunkLogDir(gen))) {
    std::optional<Result<chunklog::Loaded>> loaded;
    std::thread loader([&, dir = ChunkLogDir(gen)] {
      loaded.emplace(chunklog::Load(dir, opts_.block_duration_ms, head_->Spill()));
    });
    if (checkpoint >= 0) checkpoint_clean = ReplaySeriesRecords(CheckpointDir(checkpoint), 0);
    wal_clean = file::Exists(WalDir()) ? ReplaySeriesRecords(WalDir(), gen) : gen - 1;
    loader.join();
    if (!loaded->ok() || !(*loaded)->mark.has_value()) {
      if (!loaded->ok()) {
        TW_LOG(Warn, "chunk log {}: {}; replaying the whole wal", ChunkLogDir(gen), loaded->status().message());
      }
      RETURN_IF_ERROR(file::RemoveAll(ChunkLogDir(gen)));
    } else {
      chunklog::Loaded& l = **loaded;
      mark = l.mark;
      replay_mark_ = mark;
      TW_LOG(Info, "chunk log {}: {} chunks{}", ChunkLogDir(gen), l.num_chunks,
             l.dropped_overlaps > 0 ? fmt::format(" ({} logged twice)", l.dropped_overlaps) : "");
      head_->SetReplayBase(std::move(l.chunks), std::move(l.ooo), std::move(l.ooo_hist), std::move(l.ooo_st));
      const int skip_to = mark->FirstUncoveredSegment(gen);
      if (wal_clean >= skip_to - 1) wal_first = std::max(gen, skip_to);
    }
  }
  const chunklog::Mark* m = mark.has_value() ? &*mark : nullptr;
  Status s;
  if (checkpoint >= 0) {
    s = ReplayDir(CheckpointDir(checkpoint), 0, /*repair=*/false, m, /*checkpoint=*/true, checkpoint_clean);
  }
  if (s.ok() && file::Exists(WalDir())) {
    s = ReplayDir(WalDir(), wal_first, /*repair=*/true, m, /*checkpoint=*/false, wal_clean);
  }
  if (uint64_t left = head_->EndReplayBase(); left > 0) {
    TW_LOG(Warn, "chunk log {}: {} chunks of series the wal does not know were dropped", ChunkLogDir(gen), left);
  }
  return s;
}

std::string DBImpl::ChunkLogDir(int gen) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "chunks_head.%08d", gen);
  return opts_.dir + "/" + buf;
}

std::vector<std::shared_ptr<Block>> DBImpl::BlocksSnapshot() {
  base::MutexLock lock(&blocks_mu_);
  // A block a read found damaged leaves the set here; its directory is
  // renamed once the last reader lets go.
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (!(*it)->corrupt()) {
      ++it;
      continue;
    }
    const Block& b = **it;
    TW_LOG(Error, "block {} is damaged and is set aside as {}{}: {}; its data [{}, {}] is no longer served", b.dir(),
           b.dir(), file::kSetAsideSuffix, b.CorruptReason(), b.meta().mint, b.meta().maxt);
    (*it)->MarkSetAside();
    blocks_set_aside_.fetch_add(1, std::memory_order_relaxed);
    it = blocks_.erase(it);
  }
  return blocks_;
}

namespace {

// Queries blocks and the head together; earlier sources win timestamp ties.
class DBQuerier : public storage::Querier {
 public:
  // spans[i]: the times qs[i] holds samples in, [first, last].
  DBQuerier(std::vector<std::unique_ptr<storage::Querier>> qs, std::vector<std::pair<int64_t, int64_t>> spans,
            TierView tiers)
      : qs_(std::move(qs)), spans_(std::move(spans)), tiers_(std::move(tiers)) {}

  std::unique_ptr<storage::SeriesSet> Select(bool sorted, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    if (!hints.func.empty()) {
      // A range function tiers answer exactly: their points stretch by
      // stretch, raw samples after the last (standing for one each).
      const std::vector<TierSegment> plan = PlanTiers(tiers_, hints);
      if (!plan.empty()) {
        std::vector<std::unique_ptr<storage::SeriesSet>> sets;
        for (size_t i = 0; i < plan.size(); ++i) {
          const TierSegment& seg = plan[i];
          auto set = SelectTier(tiers_.tiers[static_cast<size_t>(seg.tier)], hints.func, seg.from, seg.to, matchers);
          // Blocks are read by whole chunks: a stretch that starts inside
          // one leaves out the points the stretch before answered.
          sets.push_back(i == 0 ? std::move(set) : SamplesFrom(std::move(set), seg.from));
        }
        storage::SelectHints rest = hints;
        rest.start = plan.back().to + 1;
        if (rest.start <= rest.end) {
          for (size_t i = 0; i < qs_.size(); ++i) {
            // The blocks before the rest (a 90-day range: all but the
            // last): not even their postings and labels are read.
            if (spans_[i].second < rest.start || spans_[i].first > rest.end) continue;
            sets.push_back(SamplesFrom(qs_[i]->Select(true, rest, matchers), rest.start));
          }
        }
        return storage::MergeSeriesSets(std::move(sets));
      }
    }
    if (qs_.size() == 1) return qs_[0]->Select(sorted, hints, matchers);
    std::vector<std::unique_ptr<storage::SeriesSet>> sets;
    for (auto& q : qs_) sets.push_back(q->Select(true, hints, matchers));
    return storage::MergeSeriesSets(std::move(sets));
  }

  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& matchers) override {
    std::vector<std::string> out;
    for (auto& q : qs_) {
      ASSIGN_OR_RETURN(auto vs, q->LabelValues(name, matchers));
      out.insert(out.end(), vs.begin(), vs.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  Result<std::vector<std::string>> LabelNames(const model::Matchers& matchers) override {
    std::vector<std::string> out;
    for (auto& q : qs_) {
      ASSIGN_OR_RETURN(auto vs, q->LabelNames(matchers));
      out.insert(out.end(), vs.begin(), vs.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  std::vector<std::unique_ptr<storage::Querier>> qs_;
  std::vector<std::pair<int64_t, int64_t>> spans_;
  TierView tiers_;
};

}  // namespace

Result<std::unique_ptr<storage::Querier>> DBImpl::NewQuerier(int64_t mint, int64_t maxt) {
  std::vector<std::shared_ptr<Block>> blocks = BlocksSnapshot();
  // Earlier-written blocks win ties, then the head.
  std::sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) { return a->meta().seq < b->meta().seq; });
  std::vector<std::unique_ptr<storage::Querier>> qs;
  std::vector<std::pair<int64_t, int64_t>> spans;
  TierView view;
  for (auto& b : blocks) {
    if (b->Overlaps(mint, maxt)) {
      qs.push_back(b->NewQuerier(mint, maxt));
      spans.emplace_back(b->meta().mint, b->meta().maxt - 1);
    }
    view.raw.emplace_back(b->meta().mint, b->meta().maxt - 1);
  }
  ASSIGN_OR_RETURN(auto hq, head_->NewQuerier(mint, maxt));
  qs.push_back(std::move(hq));
  // The head takes samples while the query runs.
  spans.emplace_back(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (head_->MinTime() <= head_->MaxTime()) view.raw.emplace_back(head_->MinTime(), head_->MaxTime());
  view.tiers = TiersSnapshot();
  return std::unique_ptr<storage::Querier>(
      std::make_unique<DBQuerier>(std::move(qs), std::move(spans), std::move(view)));
}

Status DBImpl::Flush() {
  base::MutexLock lock(&maint_mu_);
  if (closed_) return Status::Unavailable("tsdb is closed");
  Status s = CutHead(INT64_MAX, /*close_all=*/true);
  // Tiers of the blocks just written, merged with those before, so the
  // blocks compaction makes of them have their tiers (but a coarser one).
  if (s.ok()) s = Downsample(/*max_blocks=*/0);
  if (s.ok()) s = CompactTiers();
  if (s.ok()) s = Compact(/*force=*/true);
  if (s.ok()) s = Downsample(/*max_blocks=*/0);
  // Retention runs even when writing failed: a full disk is when it matters.
  Status r = ApplyRetention();
  if (s.ok()) s = CompactTiers();
  ApplyTierRetention();
  return s.ok() ? r : s;
}

Status DBImpl::FlushChunkLog() {
  base::MutexLock lock(&maint_mu_);
  if (closed_ || chunk_log_ == nullptr) return Status::OK();
  Status s = WriteChunkLog(chunk_log_.get(), /*all=*/false);
  if (!s.ok()) DropChunkLog(s);
  return s;
}

Status DBImpl::Maintain() {
  base::MutexLock lock(&maint_mu_);
  if (closed_) return Status::OK();
  int64_t mint = head_->MinTime(), maxt = head_->MaxTime();
  int64_t block = opts_.block_duration_ms;
  Status s;
  // A sample ahead of the clock (within --ingest.max-future, or from a WAL
  // written before there was a bound) does not hold back the cut: what is
  // kept in memory is measured back from the earlier of the two.
  if (maxt != INT64_MIN) maxt = std::min(maxt, head_->Now());
  if (maxt != INT64_MIN && mint != INT64_MAX && maxt - mint > block + block / 2) {
    // Keep the newest half block in memory; persist whole blocks before it.
    int64_t keep_from = maxt - block / 2;
    int64_t boundary = keep_from >= 0 ? keep_from / block * block : -(((-keep_from) + block - 1) / block) * block;
    s = CutHead(boundary, /*close_all=*/false);
  }
  // Tiers of the blocks just written come before compaction merges them,
  // and are merged alike first: the block it makes then has them, but for
  // a coarser tier its range now holds whole windows of (the next pass).
  if (s.ok()) s = Downsample(/*max_blocks=*/4);
  if (s.ok()) s = CompactTiers();
  if (s.ok()) s = Compact(/*force=*/false);
  // Retention runs even when writing failed: a full disk is when it matters.
  Status r = ApplyRetention();
  if (s.ok()) s = CompactTiers();
  ApplyTierRetention();
  return s.ok() ? r : s;
}

void DBImpl::BackgroundLoop() {
  // Maintenance (head cut, compaction, retention) once a minute of server time.
  int64_t next_maint = NowMillis() + 60'000;
  base::MutexLock lock(&bg_mu_);
  while (!stopping_) {
    int64_t wait_ms = opts_.wal_sync == WalSync::kInterval ? opts_.wal_sync_interval_ms : 1000;
    bg_cv_.WaitFor(&bg_mu_, std::chrono::milliseconds(wait_ms));
    if (stopping_) break;
    lock.Unlock();
    if (opts_.wal_sync == WalSync::kInterval) {
      Status s = wal_->Sync();
      if (!s.ok()) TW_LOG(Error, "wal sync: {}", s.message());
    }
    if (opts_.background && NowMillis() >= next_maint) {
      Status s = Maintain();
      if (!s.ok()) TW_LOG(Error, "tsdb maintenance: {}", s.message());
      next_maint = NowMillis() + 60'000;
    }
    // The chunk log every real minute (what replay re-applies is the WAL
    // since the last flush), or sooner when a fast ingest queued much.
    // Nothing appended: nothing to log (and no WAL segment a minute).
    if (opts_.background && head_->AppendedTotal() != last_chunk_flush_appended_ &&
        (MonoNanos() / 1000000 - last_chunk_flush_ms_ >= 60'000 || head_->ChunkQueueBytes() >= kChunkLogFlushBytes)) {
      last_chunk_flush_appended_ = head_->AppendedTotal();
      Status s = FlushChunkLog();
      if (!s.ok()) TW_LOG(Error, "tsdb chunk log: {}", s.message());
      last_chunk_flush_ms_ = MonoNanos() / 1000000;
    }
    lock.Lock();
  }
}

Status DBImpl::Close() {
  {
    base::MutexLock lock(&bg_mu_);
    if (stopping_) return Status::OK();
    stopping_ = true;
  }
  bg_cv_.SignalAll();
  if (bg_.joinable()) bg_.join();
  if (densify_.joinable()) densify_.join();
  base::MutexLock lock(&maint_mu_);
  closed_ = true;
  Status s;
  if (wal_ != nullptr) s = wal_->Close();
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  return s;
}

Status DBImpl::Health() {
  if (wal_ == nullptr) return Status::OK();
  Status s = wal_->Health();
  return s.ok() ? s : s.Annotate("wal");
}

Stats DBImpl::GetStats() {
  Stats st;
  st.head_series = head_->NumSeries();
  st.head_samples = head_->NumSamples();
  st.head_chunks = head_->NumChunks();
  st.head_min_time = head_->MinTime();
  st.head_max_time = head_->MaxTime();
  for (auto& b : BlocksSnapshot()) {
    st.blocks++;
    st.block_bytes += b->SizeBytes();
  }
  for (const auto& tier : TiersSnapshot()) {
    for (const auto& tb : tier) {
      st.tier_blocks++;
      st.tier_bytes += tb->SizeBytes();
    }
  }
  st.wal_bytes = wal_ != nullptr ? wal_->SizeBytes() : 0;
  st.appended_samples_total = head_->AppendedTotal();
  st.out_of_order_samples_total = head_->OutOfOrderTotal();
  st.duplicate_samples_total = head_->DuplicateTotal();
  st.wal_corruptions_total = wal_corruptions_.load();
  st.compactions_total = compactions_.load();
  st.too_far_in_future_samples_total = head_->TooFarInFutureTotal();
  st.too_old_samples_total = head_->TooOldTotal();
  st.compaction_series_skipped_total = series_skipped_.load();
  st.head_chunks_mapped_bytes = ChunkSlabs::MappedBytesNow();
  st.head_chunk_spill_failures_total = ChunkSlabs::SpillFailuresTotal();
  st.blocks_set_aside = blocks_set_aside_.load();
  st.replay_skipped_samples = head_->ReplaySkipped();
  st.replay_skipped_records = replay_skipped_records_;
  for (size_t i = 0; i < kNumSeriesRefusals; i++) {
    st.series_refused_total[i] = head_->SeriesRefusedTotal(static_cast<SeriesRefusal>(i));
  }
  return st;
}

int64_t DBImpl::StartTime() {
  int64_t t = head_->NumSamples() > 0 ? head_->MinTime() : INT64_MAX;
  for (const auto& b : BlocksSnapshot()) t = std::min(t, b->meta().mint);
  return t;
}

}  // namespace trainwatch::tsdb
