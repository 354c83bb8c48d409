#pragma once
// The head: recent data in memory. Series are created on first append and
// keep chunks (closed ones immutable, dense-coded when smaller, shared with readers; one
// open delta chunk being appended to) plus a sorted buffer for out-of-order
// samples.
// Chunks never cross a block boundary (multiples of the block duration), so a
// range of the head can be persisted as whole chunks.
//
// Thread-safety: all public methods are thread-safe. Appends to one series
// serialize on the series' spinlock; series creation on creation_mu_.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/idle_pool.h"
#include "base/memory.h"
#include "base/mutex.h"
#include "model/labels.h"
#include "model/sample.h"
#include "storage/merge.h"
#include "storage/storage.h"
#include "tsdb/chunk_bytes.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/histogram.h"
#include "tsdb/chunkenc/st.h"
#include "tsdb/index/postings.h"
#include "tsdb/limits.h"
#include "tsdb/symbols.h"
#include "tsdb/wal/records.h"

namespace trainwatch::wal {
class Writer;
}

namespace trainwatch::tsdb {

// A closed, immutable chunk. Shared with queriers and the block writer.
struct HeadChunk {
  int64_t mint = 0, maxt = 0;  // inclusive
  ChunkBytes data;
  uint32_t num_samples = 0;
  chunkenc::Encoding enc = chunkenc::Encoding::kXor;
};

// A series' closed chunks, in time order: a vector of 16 bytes (a pointer and
// two 32-bit counts, not three pointers) that grows to 1, 3, 5, ... chunks,
// not twofold. A series closes a chunk every half hour at 15 s and a cut
// drops the persisted ones, so a head of 2-3 h holds 4-6: doubling left most
// lists room for 8.
class ChunkList {
 public:
  ChunkList() = default;
  ~ChunkList() { Free(); }
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;
  ChunkList& operator=(std::vector<HeadChunk>&& v) {
    Free();
    Reserve(static_cast<uint32_t>(v.size()));
    for (HeadChunk& c : v) new (p_ + n_++) HeadChunk(std::move(c));
    v.clear();
    return *this;
  }

  HeadChunk* begin() { return p_; }
  HeadChunk* end() { return p_ + n_; }
  const HeadChunk* begin() const { return p_; }
  const HeadChunk* end() const { return p_ + n_; }
  const HeadChunk* data() const { return p_; }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return n_ == 0; }
  HeadChunk& operator[](size_t i) { return p_[i]; }
  const HeadChunk& operator[](size_t i) const { return p_[i]; }
  HeadChunk& front() { return p_[0]; }
  const HeadChunk& front() const { return p_[0]; }
  HeadChunk& back() { return p_[n_ - 1]; }
  const HeadChunk& back() const { return p_[n_ - 1]; }

  void push_back(HeadChunk&& c) {
    if (n_ == cap_) Reserve(cap_ == 0 ? 1 : cap_ + 2);
    new (p_ + n_++) HeadChunk(std::move(c));
  }
  // Drops the first n chunks.
  void EraseFront(size_t n) {
    n = std::min<size_t>(n, n_);
    if (n == 0) return;
    std::move(p_ + n, p_ + n_, p_);
    for (size_t i = n_ - n; i < n_; i++) p_[i].~HeadChunk();
    n_ -= static_cast<uint32_t>(n);
  }

 private:
  void Reserve(uint32_t cap) {
    if (cap <= cap_) return;
    auto* q = static_cast<HeadChunk*>(::operator new(sizeof(HeadChunk) * cap));
    for (uint32_t i = 0; i < n_; i++) {
      new (q + i) HeadChunk(std::move(p_[i]));
      p_[i].~HeadChunk();
    }
    ::operator delete(p_);
    p_ = q;
    cap_ = cap;
  }
  void Free() {
    for (uint32_t i = 0; i < n_; i++) p_[i].~HeadChunk();
    ::operator delete(p_);
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  HeadChunk* p_ = nullptr;
  uint32_t n_ = 0, cap_ = 0;
};

// A series' open float chunk: std::optional<DeltaChunk> without the flag's
// 8 bytes a series. A chunk is opened to take a sample at once, so one
// without samples is none.
class OpenChunk {
 public:
  explicit operator bool() const { return c_.NumSamples() > 0; }
  chunkenc::DeltaChunk* operator->() { return &c_; }
  const chunkenc::DeltaChunk* operator->() const { return &c_; }
  void emplace() { c_ = chunkenc::DeltaChunk(); }
  void reset() { c_ = chunkenc::DeltaChunk(); }

 private:
  chunkenc::DeltaChunk c_;
};

// A series' closed chunk, or its out-of-order samples, by series ref (the
// chunk log's entries: tsdb/chunk_log.h).
using RefChunk = std::pair<uint64_t, HeadChunk>;
using RefOoo = std::pair<uint64_t, std::vector<model::Sample>>;
using RefOooHist = std::pair<uint64_t, std::vector<storage::HistogramSample>>;

// A series' lock: appends and reads of one series hold it for a few
// hundred nanoseconds, so waiting spins. A capability for the thread-safety
// analysis (base/thread_annotations.h), taken with SpinGuard.
class TW_CAPABILITY("mutex") SpinLock {
 public:
  void lock() TW_ACQUIRE() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
      while (flag_.test(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  void unlock() TW_RELEASE() { flag_.clear(std::memory_order_release); }
  // For code that holds the lock by a path the analysis cannot follow.
  void AssertHeld() const TW_ASSERT_CAPABILITY(this) {}

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

class TW_SCOPED_CAPABILITY SpinGuard {
 public:
  explicit SpinGuard(SpinLock& mu) TW_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~SpinGuard() TW_RELEASE() { mu_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock& mu_;
};

// Out-of-order samples of one series: a sorted prefix with unique timestamps
// and an unsorted tail, merged into the prefix once it outgrows it, so n
// inserts in any order cost O(n log n), not O(n^2). Of equal timestamps the
// one inserted first wins. Guarded by its series' mu.
struct OooBuffer {
  std::vector<model::Sample> samples;
  size_t sorted = 0;  // samples[0, sorted) is sorted with unique timestamps
  std::unordered_set<int64_t> tail_ts;  // timestamps of samples[sorted, end)

  // Adds a sample; false, adding nothing, when its timestamp is already here.
  bool Insert(int64_t t, double v);
  // Whether a sample at t is here.
  bool Has(int64_t t) const;
  bool NeedsNormalize() const { return samples.size() - sorted > std::max<size_t>(32, sorted); }
  // Merges the tail into the prefix; returns the number of duplicates dropped
  // (none unless the invariants were broken).
  size_t Normalize();
  // Appends the samples with t in [mint, maxt] to *out, sorted and unique.
  void CopyRange(int64_t mint, int64_t maxt, std::vector<model::Sample>* out) const;
};

// What few series have, allocated when a series first needs it (and freed
// when it needs it no more), so that the rest stay small. Guarded by its
// series' mu.
//
// Native histograms: the open histogram chunk and out-of-order histograms
// (sorted by time, unique timestamps; at most a few, so inserts move the
// tail). A series has at most one open chunk, of floats or of histograms: a
// sample of the other kind closes it.
//
// Start timestamps (chunkenc/st.h) of the samples not in closed chunks (a
// closed chunk carries its own): runs, sorted by time. Invariant: for each
// sample of the open chunks and the out-of-order buffers, STAt(st, t) is
// its start timestamp. Kept for the samples read through them only (older
// runs are dropped as chunks close), so a counter that keeps its start
// timestamp holds one run.
struct SeriesExtras {
  std::optional<chunkenc::FloatHistogramChunk> open;
  std::vector<storage::HistogramSample> ooo;
  std::vector<chunkenc::STRun> st;
  // Whether the out-of-order histograms hold one at t.
  bool OooHas(int64_t t) const;
  bool Unused() const { return !open && ooo.empty() && st.empty(); }
};

// One series of the head: a single allocation holding the struct and,
// after it, its 2 x num_labels symbol ids (name, value, sorted by name).
struct MemSeries {
  static MemSeries* New(uint64_t ref, uint64_t hash, uint32_t num_labels);
  static void Delete(MemSeries* s);
  MemSeries(const MemSeries&) = delete;
  MemSeries& operator=(const MemSeries&) = delete;

  uint32_t* syms() { return reinterpret_cast<uint32_t*>(this + 1); }
  const uint32_t* syms() const { return reinterpret_cast<const uint32_t*>(this + 1); }

  const uint64_t ref;
  const uint64_t hash;
  const uint32_t num_labels;
  // Whether a series record for this series is in the WAL. Series are created
  // at Append and logged by the first commit that has samples for them (or
  // by several, harmlessly: replay skips known refs).
  std::atomic<bool> logged{false};

  mutable SpinLock mu;
  // Out-of-order samples added since the chunk log last took them.
  bool ooo_dirty TW_GUARDED_BY(mu) = false;
  // What the dense encoder chose for this series' last closed chunk
  // (Head::CloseOpenLocked: its metric's choices at first, a search at the
  // second chunk and every fourth after).
  chunkenc::DenseChoice dense_choice TW_GUARDED_BY(mu);
  ChunkList closed TW_GUARDED_BY(mu);                          // sorted by time, non-overlapping
  OpenChunk open TW_GUARDED_BY(mu);                            // inline: one cache miss less per append
  int64_t open_block_end TW_GUARDED_BY(mu) = 0;                // the open chunk must end before this
  std::unique_ptr<OooBuffer> ooo TW_GUARDED_BY(mu);            // out-of-order samples
  // Null until the series gets a histogram or a start timestamp.
  std::unique_ptr<SeriesExtras> extra TW_GUARDED_BY(mu);

 private:
  MemSeries(uint64_t r, uint64_t h, uint32_t n) : ref(r), hash(h), num_labels(n) {}
  ~MemSeries() = default;
};
static_assert(sizeof(MemSeries) % alignof(uint32_t) == 0);
static_assert(sizeof(MemSeries) <= 136, "a byte more a series is a kilobyte more in a thousand: keep MemSeries packed");

// A consistent copy of one series' data at some instant, for reading.
struct SeriesSnapshot {
  model::Labels labels;
  std::vector<HeadChunk> chunks;              // in-order data (closed + a copy of the open one)
  std::vector<model::Sample> ooo;             // out-of-order samples
  std::vector<int64_t> ooo_st;                // their start timestamps, or empty when none has one
  std::vector<storage::HistogramSample> ooo_hist;  // out-of-order histograms (with their start timestamps)
};

struct HeadOptions {
  int64_t block_duration_ms = 2 * 3600 * 1000;
  // Appenders refuse samples later than now + max_future_ms or earlier than
  // now - max_age_ms (0: no bound on that side) with kOutOfRange, and always
  // those outside [model::kMinTime, model::kMaxTime]. `now_ms` is the wall
  // clock when empty (tests and the soak benchmark set their own).
  int64_t max_future_ms = 0;
  int64_t max_age_ms = 0;
  std::function<int64_t()> now_ms;
  uint32_t samples_per_chunk = 120;
  bool dense_closed_chunks = true;  // re-encode closed chunks densely
  // Where full blocks of closed chunks are written and mapped back
  // (SpillOptions; an empty dir: they stay in memory).
  SpillOptions spill;
  SeriesLimits limits;
};

class Head : public storage::Queryable {
 public:
  explicit Head(HeadOptions opts);
  ~Head() override;
  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  // Where full blocks of closed chunks go (HeadOptions::spill).
  const SpillOptions& Spill() const { return opts_.spill; }

  // The WAL that commits write to; null while replaying or in tests without WAL.
  void SetWal(wal::Writer* wal, bool sync_each_commit);

  std::unique_ptr<storage::Appender> NewAppender();
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;

  // Replay: applies decoded WAL records (series create with the given ref).
  // A record whose labels a series of another ref already has is that
  // series under a second ref: a head cut dropped it (every sample
  // persisted) and it came back, while a record of the first ref was still
  // in the log (logged after the cut's new segment began, or the process
  // died before the cut's checkpoint). The second ref becomes an alias of
  // the series (as Prometheus's replay maps such refs), its logged chunks
  // go to the series, and ResolveReplayAliases gives it its samples.
  void ReplaySeries(const std::vector<wal::RefSeries>& series);
  // Rewrites the refs of samples logged under an alias to the series' ref.
  // REQUIRES: called by the thread that calls ReplaySeries, before the
  // samples are applied.
  void ResolveReplayAliases(std::vector<wal::RefSample>* samples);
  void ResolveReplayAliases(std::vector<wal::RefSampleST>* samples);
  void ResolveReplayAliases(std::vector<wal::RefHistogramSample>* samples);
  // Applies a batch of WAL samples (of many records): reordered by series,
  // stably (a series' samples keep their log order), then the series are
  // shared out among `workers` threads. Each series' chunk is touched in one
  // run rather than once per sample scattered over the whole head, which
  // made replay bound by cache misses. Samples of unknown refs are counted
  // and dropped. Leaves *batch and *scratch in an unspecified state.
  // With skip_covered, the samples of a series up to the end of its chunks
  // from the replay base are skipped (they are in those chunks).
  // A batch is tens of MiB written once: its blocks are huge-page maps.
  using ReplayBatch = std::vector<wal::RefSample, memory::LargeBlockAllocator<wal::RefSample>>;
  void ReplaySamples(ReplayBatch* batch, ReplayBatch* scratch, int workers, bool skip_covered = false);
  // Applies WAL histogram samples in their order, on this thread (they are
  // few beside floats). With skip_covered, those before `from` or not after
  // the end of their series' chunks from the replay base are skipped.
  void ReplayHistograms(const std::vector<wal::RefHistogramSample>& samples, bool skip_covered, int64_t from);
  // ReplayHistograms for floats with start timestamps.
  void ReplaySamplesST(const std::vector<wal::RefSampleST>& samples, bool skip_covered, int64_t from);
  // Appends to *out the samples the replay base does not hold (at or after
  // `from` and after the end of their series' chunks in the base); returns
  // how many it left out. Filtering as records are decoded keeps covered
  // samples out of the batches' copies and sorts.
  size_t AppendUncovered(const std::vector<wal::RefSample>& samples, int64_t from, ReplayBatch* out) const;

  // The chunk log (tsdb/chunk_log.h). Once enabled, every chunk that closes
  // is queued for it.
  // The bytes LogCommit's buffers hold on the calling thread (for tests).
  static size_t ThreadLogScratchBytes();
  void EnableChunkQueue() { chunk_queue_on_.store(true, std::memory_order_relaxed); }
  size_t ChunkQueueBytes() const { return chunk_queue_bytes_.load(std::memory_order_relaxed); }
  struct ChunkLogDrain {
    std::vector<RefChunk> chunks;  // closed since the last drain; with `all`, every closed chunk
    std::vector<RefOoo> ooo;       // of series given out-of-order samples since; with `all`, of all
    std::vector<std::vector<int64_t>> ooo_st;  // their start timestamps (parallel; each empty when none has one)
    std::vector<RefOooHist> ooo_hist;  // their out-of-order histograms, likewise
    int64_t open_min = INT64_MAX;  // the earliest sample of any open chunk
  };
  // Takes what the chunk log has not logged yet (everything, for a base).
  // REQUIRES: no concurrent Truncate.
  ChunkLogDrain DrainForChunkLog(bool all);
  // Replay from a chunk log: a series that ReplaySeries created or creates
  // takes its chunks and out-of-order samples from `chunks` and `ooo`
  // (REQUIRES: no samples replayed yet), and
  // ReplaySamples(skip_covered) skips its samples up to the end of the last
  // of those chunks. EndReplayBase forgets the rest and returns how many
  // chunks no series took.
  void SetReplayBase(std::unordered_map<uint64_t, std::vector<HeadChunk>> chunks,
                     std::unordered_map<uint64_t, std::vector<model::Sample>> ooo,
                     std::unordered_map<uint64_t, std::vector<storage::HistogramSample>> ooo_hist = {},
                     std::unordered_map<uint64_t, std::vector<int64_t>> ooo_st = {});
  uint64_t EndReplayBase();
  // The latest sample time logged to the WAL since the last TakeLoggedMaxt
  // (the chunk log records it per span of segments); NoteLogged raises it
  // for samples logged otherwise (those replay found after the last mark).
  void NoteLogged(int64_t t) {
    int64_t cur = logged_maxt_.load(std::memory_order_relaxed);
    while (t > cur && !logged_maxt_.compare_exchange_weak(cur, t, std::memory_order_relaxed)) {
    }
  }
  int64_t TakeLoggedMaxt() { return logged_maxt_.exchange(INT64_MIN, std::memory_order_relaxed); }

  // While set, chunks closed keep their appendable encoding instead of being
  // re-encoded densely (replay sets it: re-encoding was a fifth of its time);
  // DensifyClosed does it afterwards.
  void SetDeferDense(bool defer) { defer_dense_.store(defer, std::memory_order_relaxed); }
  // The refs of every series, sorted.
  std::vector<uint64_t> SeriesRefs() const;
  // Re-encodes the closed chunks of the series `refs` that are still in the
  // appendable encoding with the dense codec, where that is smaller. Returns
  // the number of chunks re-encoded.
  // REQUIRES: no concurrent Truncate (the DB holds off head cuts meanwhile).
  uint64_t DensifyClosed(const std::vector<uint64_t>& refs);

  // Snapshot of the data with timestamps < boundary that can be persisted:
  // closed chunks ending before boundary (the open chunk is closed first when
  // it ends before boundary, or always when close_all) and out-of-order
  // samples before boundary. Series with nothing to persist are skipped.
  // Result is sorted by labels; the snapshots' labels are left empty (take
  // them one series at a time with LabelsOf).
  struct PersistSet {
    std::vector<std::pair<MemSeries*, SeriesSnapshot>> series;
    int64_t mint = INT64_MAX, maxt = INT64_MIN;
  };
  PersistSet SnapshotForPersist(int64_t boundary, bool close_all);
  // Removes exactly the data of `set` from the head (data appended since the
  // snapshot stays), then garbage-collects series left without any data.
  void Truncate(const PersistSet& set) TW_EXCLUDES(append_gate_, append_mu_);  // takes an ExclusiveAppendLock

  // Calls fn for every series' current data (for checkpoints).
  void ForEachSeries(const std::function<void(uint64_t ref, const model::Labels&, const SeriesSnapshot&)>& fn);

  // Excludes appenders while held (writer-preferring: new appenders wait
  // behind a waiting exclusive locker). Used around WAL rotation, so every
  // sample logged before it is applied, and by series garbage collection.
  class TW_SCOPED_CAPABILITY ExclusiveAppendLock {
   public:
    explicit ExclusiveAppendLock(Head* h) TW_ACQUIRE(h->append_gate_, h->append_mu_) : h_(h) {
      h_->append_gate_.Lock();
      h_->append_mu_.Lock();
    }
    ~ExclusiveAppendLock() TW_RELEASE() {
      h_->append_mu_.Unlock();
      h_->append_gate_.Unlock();
    }
    ExclusiveAppendLock(const ExclusiveAppendLock&) = delete;
    ExclusiveAppendLock& operator=(const ExclusiveAppendLock&) = delete;

   private:
    Head* const h_;
  };
  // What an appender holds from its first Append until Commit or Rollback:
  // append_mu_ shared. Held across the appender's calls, which the analysis
  // cannot follow, so Take and Release are not analysed (no field is
  // TW_GUARDED_BY append_mu_: it orders appenders against rotation and GC).
  class SharedAppendLock {
   public:
    SharedAppendLock() = default;
    SharedAppendLock(const SharedAppendLock&) = delete;
    SharedAppendLock& operator=(const SharedAppendLock&) = delete;
    ~SharedAppendLock() { Release(); }
    bool held() const { return h_ != nullptr; }
    void Take(Head* h) TW_NO_THREAD_SAFETY_ANALYSIS {
      base::MutexLock gate(&h->append_gate_);
      h->append_mu_.ReaderLock();
      h_ = h;
    }
    void Release() TW_NO_THREAD_SAFETY_ANALYSIS {
      if (h_ != nullptr) h_->append_mu_.ReaderUnlock();
      h_ = nullptr;
    }

   private:
    Head* h_ = nullptr;
  };

  int64_t MinTime() const { return min_time_.load(std::memory_order_relaxed); }  // of in-order data
  int64_t MaxTime() const { return max_time_.load(std::memory_order_relaxed); }
  uint64_t NumSeries() const { return num_series_.load(std::memory_order_relaxed); }
  uint64_t NumSamples() const { return num_samples_.load(std::memory_order_relaxed); }
  uint64_t NumChunks() const { return num_chunks_.load(std::memory_order_relaxed); }
  uint64_t AppendedTotal() const { return appended_total_.load(std::memory_order_relaxed); }
  uint64_t OutOfOrderTotal() const { return ooo_total_.load(std::memory_order_relaxed); }
  uint64_t DuplicateTotal() const { return dup_total_.load(std::memory_order_relaxed); }
  uint64_t ReplayUnknownRefs() const { return replay_unknown_.load(std::memory_order_relaxed); }
  // WAL samples replay skipped because the chunk log held them.
  uint64_t ReplaySkipped() const { return replay_skipped_.load(std::memory_order_relaxed); }
  void CountReplaySkipped(uint64_t n) { replay_skipped_.fetch_add(n, std::memory_order_relaxed); }
  // Samples refused by appenders for their timestamp, and WAL samples outside
  // [model::kMinTime, model::kMaxTime] dropped at replay.
  uint64_t TooFarInFutureTotal() const { return too_new_total_.load(std::memory_order_relaxed); }
  uint64_t TooOldTotal() const { return too_old_total_.load(std::memory_order_relaxed); }
  // New series refused by a bound of HeadOptions::limits (each refused append counts).
  uint64_t SeriesRefusedTotal(SeriesRefusal r) const {
    return series_refused_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
  }
  // The time bounds an appender checks, computed from the clock now.
  struct TimeBounds {
    int64_t mint, maxt;
  };
  TimeBounds AcceptedTimeRange() const;
  // kOutOfRange naming t and the bound it breaks (and counts it).
  Status OutOfRange(int64_t t, const TimeBounds& b);
  // OK when t is within AcceptedTimeRange(), else OutOfRange(t, ...).
  Status CheckTimestamp(int64_t t) {
    TimeBounds b = AcceptedTimeRange();
    return t < b.mint || t > b.maxt ? OutOfRange(t, b) : Status::OK();
  }
  int64_t Now() const;
  // /api/v1/status/tsdb's statistics of the head's series (index::MemPostings::Stats).
  index::MemPostings::Cardinality Cardinality(size_t limit) const;
  size_t SymbolMemoryBytes() const { return symbols_.MemoryBytes(); }
  // Heap bytes held by the head, by part (malloc_usable_size of each block;
  // for benchmarks and diagnostics: walks every series).
  struct MemoryStats {
    size_t series = 0;        // MemSeries incl. label symbol ids, and SeriesExtras
    size_t chunk_lists = 0;   // arrays of closed-chunk descriptors
    size_t closed_bytes = 0;  // closed chunks' encoded bytes in memory, and the headers of those spilled
    size_t closed_mapped = 0;  // closed chunks' bytes in files mapped back (page cache: not in Total)
    size_t closed_slack = 0;  // the unwritten ends of the blocks they are copied into
    size_t open_bytes = 0;    // open XOR chunks' buffers
    size_t ooo = 0;           // out-of-order buffers
    size_t series_maps = 0;   // hash stripes and ref pages
    size_t postings = 0;      // inverted index lists (capacity)
    size_t symbols = 0;
    size_t closed_samples = 0, open_samples = 0;
    size_t Total() const {
      return series + chunk_lists + closed_bytes + closed_slack + open_bytes + ooo + series_maps + postings + symbols;
    }
  };
  MemoryStats GetMemoryStats() const;

  // Used by the appender and querier (head_append.cc, head_read.cc).
  MemSeries* GetByRef(uint64_t ref) const;
  MemSeries* Lookup(const model::Labels& labels, uint64_t hash) const;
  // The series with these labels, created (not yet logged) when missing.
  MemSeries* GetOrCreate(const model::Labels& labels);
  MemSeries* GetOrCreate(const model::Labels& labels, uint64_t hash);  // hash: labels.Hash()
  // GetOrCreate, refusing to create a series whose label set a block cannot
  // hold (model::CheckSeriesLabels) or whose names or values are not UTF-8
  // (InvalidArgument), or one beyond a bound of HeadOptions::limits
  // (ResourceExhausted, counted).
  Result<MemSeries*> GetOrCreateChecked(const model::Labels& labels);
  // Applies one sample. Returns false for a duplicate timestamp. Neither the
  // head's time range nor its sample counts are updated: callers pass the
  // batch's range to UpdateTimes and its number of applied samples to
  // CountApplied once (a few contended atomics per batch, not per sample).
  // `st` is the sample's start timestamp (0: none; one after t is dropped).
  bool ApplySample(MemSeries* s, int64_t t, double v, int64_t st = 0);
  bool ApplySampleLocked(MemSeries* s, int64_t t, double v, int64_t st) TW_REQUIRES(s->mu);
  // ApplySample for a native histogram (REQUIRES: it passed
  // model::FloatHistogram::Validate). A histogram after the series' last sample
  // goes to its open histogram chunk (a new one when the layout changed),
  // an earlier one to its out-of-order histograms.
  bool ApplyHistogram(MemSeries* s, int64_t t, const model::FloatHistogram& h, int64_t st = 0);
  bool ApplyHistogramLocked(MemSeries* s, int64_t t, const model::FloatHistogram& h, int64_t st) TW_REQUIRES(s->mu);
  void UpdateTimes(int64_t mint, int64_t maxt);
  void CountApplied(uint64_t n) {
    num_samples_.fetch_add(n, std::memory_order_relaxed);
    appended_total_.fetch_add(n, std::memory_order_relaxed);
  }
  model::Labels LabelsOf(const MemSeries* s) const;
  SeriesSnapshot Snapshot(const MemSeries* s, int64_t mint, int64_t maxt) const;
  // Snapshot with labels of the series `ref`; false when it no longer exists.
  bool SnapshotByRef(uint64_t ref, int64_t mint, int64_t maxt, SeriesSnapshot* out) const;
  // Logs series records for `unlogged` series, then the samples, in one
  // write; syncs per the policy; marks the series logged.
  // Floats without a start timestamp, then those with one, then histograms:
  // Commit applies them in this order, and so does replay.
  Status LogCommit(const std::vector<MemSeries*>& unlogged, const std::vector<wal::RefSample>& samples,
                   const std::vector<wal::RefHistogramSample>& hist_samples = {},
                   const std::vector<wal::RefSampleST>& st_samples = {});
  // Postings for matchers (sorted refs).
  Result<index::Postings> PostingsFor(const model::Matchers& ms) const;
  Result<std::vector<std::string>> LabelValuesFor(std::string_view name, const model::Matchers& ms) const;
  Result<std::vector<std::string>> LabelNamesFor(const model::Matchers& ms) const;

  // An appender's per-commit vectors, reused across appenders (a scrape or
  // push opens one per commit) and freed when idle.
  struct AppendBuffers {
    std::vector<MemSeries*> series;  // parallel to samples
    std::vector<wal::RefSample> samples;
    std::vector<MemSeries*> unlogged;  // series whose record this commit logs (may repeat until Commit)
    std::vector<MemSeries*> hist_series;  // parallel to hist_samples
    std::vector<wal::RefHistogramSample> hist_samples;
    std::vector<MemSeries*> st_series;  // parallel to st_samples
    std::vector<wal::RefSampleST> st_samples;  // floats with a start timestamp
  };
 private:
  struct Stripe;
  static constexpr size_t kStripeBits = 10;
  static constexpr size_t kStripes = size_t{1} << kStripeBits;
  static constexpr uint32_t kPageBits = 16;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static constexpr uint32_t kMaxPages = 1u << 16;

  MemSeries* CreateLocked(uint64_t ref, const model::Labels& labels, uint64_t hash);
  bool LabelsEqual(const MemSeries* s, const model::Labels& labels) const;
  bool LabelsLess(const MemSeries* a, const MemSeries* b) const;  // as model::Labels' operator<
  void SetRef(uint64_t ref, MemSeries* s);
  // Closes the open float chunk; `dense_ok`: re-encoded densely where smaller
  // (not for a chunk about to be persisted and dropped).
  void CloseOpenLocked(MemSeries* s, bool dense_ok = true) TW_REQUIRES(s->mu);
  void CloseHistOpenLocked(MemSeries* s) TW_REQUIRES(s->mu);  // closes the open histogram chunk
  void CloseAnyOpenLocked(MemSeries* s) TW_REQUIRES(s->mu) {
    CloseOpenLocked(s);
    CloseHistOpenLocked(s);
  }
  void QueueForChunkLog(uint64_t ref, const HeadChunk& c);
  // Start timestamps (SeriesExtras::st). REQUIRES: s->mu held.
  // Records that the sample just applied at t has start timestamp st;
  // `in_order`: it is the series' latest sample.
  void NoteSTLocked(MemSeries* s, int64_t t, int64_t st, bool in_order) TW_REQUIRES(s->mu);
  // Wraps the bytes of c (a chunk of s being closed or copied) with its
  // samples' start timestamps when any has one.
  // `closed`: c is being closed (its bytes go to the slabs, CopyClosed).
  void WrapSTLocked(const MemSeries* s, HeadChunk* c, bool closed) const TW_REQUIRES(s->mu);
  // Drops the runs that no sample read through them needs any more.
  static void TrimSTLocked(MemSeries* s) TW_REQUIRES(s->mu);
  // *out: the start timestamps of `ooo` (s's out-of-order samples, sorted),
  // or empty when none has one.
  static void OooSTLocked(const MemSeries* s, const std::vector<model::Sample>& ooo, std::vector<int64_t>* out)
      TW_REQUIRES(s->mu);
  // The last in-order sample's time (INT64_MIN: none). REQUIRES: s->mu held.
  static int64_t InOrderMaxtLocked(const MemSeries* s) TW_REQUIRES(s->mu);
  // The open chunk's (float or histogram) time range; false when there is
  // none with samples. REQUIRES: s->mu held.
  static bool OpenRangeLocked(const MemSeries* s, int64_t* mint, int64_t* maxt) TW_REQUIRES(s->mu);
  // A closed chunk's bytes, ending at maxt, copied into the slabs of its
  // block range: its chunks are dropped together when the block is cut.
  ChunkBytes CopyClosed(std::string_view b, int64_t maxt) const;
  // Re-encodes `bytes` (chunk c's data, in c.enc) with the dense codec into
  // *out (c's times and count, the bytes by CopyClosed) as
  // chunkenc::EncodeDenseLike; false when that is not smaller.
  bool EncodeDenser(const HeadChunk& c, HeadChunk* out, std::string_view bytes, chunkenc::DenseChoice* choice,
                    chunkenc::DenseSearch search) const;
  // Applies n samples of one series (a run of ReplaySamples' sorted batch).
  struct ReplayTally {
    uint64_t applied = 0, unknown = 0, skipped = 0;
    uint64_t max_unknown = 0;  // the largest ref of an unknown series
    int64_t mint = INT64_MAX, maxt = INT64_MIN;
  };
  void ReplayRun(const wal::RefSample* run, size_t n, bool skip_covered, ReplayTally* tally);
  template <typename S, typename Apply>
  void ReplayInOrder(const std::vector<S>& samples, bool skip_covered, int64_t from, const char* what,
                     const Apply& apply);
  // Gives s what the replay base holds under `ref` (s's own ref, or an alias
  // of s: then after what s holds already).
  void AttachReplayBaseLocked(MemSeries* s, uint64_t ref) TW_REQUIRES(creation_mu_);
  template <typename Sample>
  void ResolveAliases(std::vector<Sample>* samples);
  // Makes every ref handed out from now on larger than `ref`. Replay calls
  // it for the refs the log names too (created, aliased, or unknown: the
  // samples of a series a head cut dropped can outlive its record), so that
  // no new series takes a ref whose samples a later replay would give it.
  void ReserveRef(uint64_t ref);
  // Merges s's out-of-order tail, counting the duplicates it drops. REQUIRES: s->mu held.
  void NormalizeOooLocked(MemSeries* s) TW_REQUIRES(s->mu);
  // Whether the in-order chunks hold a sample at t. REQUIRES: s->mu held.
  bool InOrderHasLocked(const MemSeries* s, int64_t t) const TW_REQUIRES(s->mu);

  const HeadOptions opts_;
  SymbolTable symbols_;
  // The dense encoder's last search over a series of each metric name (by
  // the name's symbol id, modulo the size; collisions only cost bytes):
  // what a series' first closed chunk is encoded with (CloseOpenLocked).
  static constexpr size_t kMetricChoices = 4096;
  std::unique_ptr<std::atomic<uint8_t>[]> metric_choices_{new std::atomic<uint8_t>[kMetricChoices]{}};
  std::atomic<uint8_t>* MetricChoice(const MemSeries* s) TW_REQUIRES(s->mu);
  std::unique_ptr<Stripe[]> stripes_;
  std::unique_ptr<std::atomic<std::atomic<MemSeries*>*>[]> pages_;
  base::Mutex creation_mu_;             // serializes series creation and its WAL record
  std::atomic<uint64_t> next_ref_{1};
  mutable base::SharedMutex postings_mu_;
  index::MemPostings postings_ TW_GUARDED_BY(postings_mu_);
  base::Mutex append_gate_;               // taken briefly by every locker of append_mu_
  base::SharedMutex append_mu_;          // shared by appenders, exclusive for rotation and GC
  wal::Writer* wal_ = nullptr;
  bool sync_each_commit_ = true;
  std::atomic<bool> defer_dense_{false};
  std::atomic<bool> chunk_queue_on_{false};
  std::atomic<int64_t> logged_maxt_{INT64_MIN};
  // Closed chunks' bytes (CopyClosed), grouped by block range; Truncate
  // stops carving the ranges it cut.
  static constexpr size_t kClosedSlabBlock = size_t{256} << 10;
  mutable base::Mutex slabs_mu_;
  mutable ChunkSlabs slabs_ TW_GUARDED_BY(slabs_mu_);
  base::Mutex chunk_queue_mu_;
  std::vector<RefChunk> chunk_queue_ TW_GUARDED_BY(chunk_queue_mu_);
  std::atomic<size_t> chunk_queue_bytes_{0};
  struct ReplayBase {
    std::unordered_map<uint64_t, std::vector<HeadChunk>> chunks;      // taken by ReplaySeries
    std::unordered_map<uint64_t, std::vector<model::Sample>> ooo;     // taken by ReplaySeries
    std::unordered_map<uint64_t, std::vector<storage::HistogramSample>> ooo_hist;  // taken by ReplaySeries
    std::unordered_map<uint64_t, std::vector<int64_t>> ooo_st;  // taken by ReplaySeries
    // ref -> end of its last chunk (INT64_MIN: none), read-only during
    // replay: by index where the refs are dense enough, else by hash.
    std::vector<int64_t> covered_dense;
    std::unordered_map<uint64_t, int64_t> covered;
    int64_t Covered(uint64_t ref) const {
      if (!covered_dense.empty()) return ref < covered_dense.size() ? covered_dense[ref] : INT64_MIN;
      auto it = covered.find(ref);
      return it != covered.end() ? it->second : INT64_MIN;
    }
  };
  std::unique_ptr<ReplayBase> replay_base_;
  // Replay's aliases (ReplaySeries): a second ref -> its series' ref.
  std::unordered_map<uint64_t, uint64_t> replay_alias_ TW_GUARDED_BY(creation_mu_);
  std::atomic<bool> has_replay_alias_{false};

  std::atomic<int64_t> min_time_{INT64_MAX}, max_time_{INT64_MIN};
  IdlePool<AppendBuffers> append_buffers_;
  std::atomic<uint64_t> num_series_{0}, num_samples_{0}, num_chunks_{0};
  std::atomic<uint64_t> appended_total_{0}, ooo_total_{0}, dup_total_{0}, replay_unknown_{0}, replay_skipped_{0};
  std::atomic<uint64_t> too_new_total_{0}, too_old_total_{0};
  std::atomic<uint64_t> series_refused_[kNumSeriesRefusals] = {};
  // ResourceExhausted for a new series beyond a bound (and counts it).
  Status RefuseSeries(SeriesRefusal r, const model::Labels& labels, const std::string& why);
};

}  // namespace trainwatch::tsdb
