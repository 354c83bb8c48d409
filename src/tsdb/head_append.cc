// Head appender: resolves or creates series at Append, buffers the samples,
// and at Commit logs series records for series not yet in the WAL plus one
// samples record in a single write, then applies the samples. A sample is
// visible only once it is durable per the WAL sync policy.

#include <algorithm>
#include <shared_mutex>

#include "tsdb/head.h"

namespace trainwatch::tsdb {
namespace {

class HeadAppender : public storage::Appender {
  static constexpr size_t kPrefetch = 8;

 public:
  HeadAppender(Head* head, IdlePool<Head::AppendBuffers>::Lease buf)
      : head_(head),
        buf_(std::move(buf)),
        series_(buf_->series),
        samples_(buf_->samples),
        unlogged_(buf_->unlogged),
        hist_series_(buf_->hist_series),
        hist_samples_(buf_->hist_samples),
        st_series_(buf_->st_series),
        st_samples_(buf_->st_samples) {}
  ~HeadAppender() override { Rollback(); }

  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                    double v) override {
    ASSIGN_OR_RETURN(MemSeries * s, Resolve(ref, labels, t));
    Add(s, t, v);
    return storage::SeriesRef{s->ref};
  }

  Result<storage::SeriesRef> AppendST(storage::SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t,
                                      double v) override {
    // A start after its sample is no start (Prometheus refuses it).
    if (st == 0 || st > t) return Append(ref, labels, t, v);
    ASSIGN_OR_RETURN(MemSeries * s, Resolve(ref, labels, t));
    if (!s->logged.load(std::memory_order_acquire)) unlogged_.push_back(s);
    if (!st_mode_) {
      // From here on every float of this commit goes with its start
      // timestamp (0 for none), in one list: applied, logged and replayed
      // in the order they came. Two lists would apply one's samples before
      // the other's, putting a series' samples out of order.
      for (size_t i = 0; i < samples_.size(); i++) {
        st_series_.push_back(series_[i]);
        st_samples_.push_back({samples_[i].ref, samples_[i].t, samples_[i].v, 0});
      }
      series_.clear();
      samples_.clear();
      st_mode_ = true;
    }
    st_series_.push_back(s);
    st_samples_.push_back({s->ref, t, v, st});
    return storage::SeriesRef{s->ref};
  }

  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    return AppendHistogramST(ref, labels, 0, t, h);
  }

  Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef ref, const model::Labels& labels, int64_t st,
                                               int64_t t, const model::FloatHistogram& h) override {
    // Checked here so that every histogram in the WAL and chunks is well formed.
    RETURN_IF_ERROR(h.Validate());
    ASSIGN_OR_RETURN(MemSeries * s, Resolve(ref, labels, t));
    if (!s->logged.load(std::memory_order_acquire)) unlogged_.push_back(s);
    hist_series_.push_back(s);
    hist_samples_.push_back({s->ref, t, h, st > t ? 0 : st});
    return storage::SeriesRef{s->ref};
  }

  // The series a sample at t goes to: `ref`'s, else that of `labels`
  // (created when new); kOutOfRange when t is outside the accepted range.
  Result<MemSeries*> Resolve(storage::SeriesRef ref, const model::Labels& labels, int64_t t) {
    Lock();
    if (t < bounds_.mint || t > bounds_.maxt) return head_->OutOfRange(t, bounds_);
    // Refs are never reused, so a ref that still resolves is this series.
    MemSeries* s = ref != 0 ? head_->GetByRef(ref) : nullptr;
    if (s != nullptr) return s;
    return ByLabels(labels);
  }

  // The series of `labels`, created when new (within the limits).
  Result<MemSeries*> ByLabels(const model::Labels& labels) {
    MemSeries* s = nullptr;
    {
      if (labels.empty()) return Status::InvalidArgument("series without labels");
      // Every writer reaches the head here, so this is where a label set a
      // block could not hold is stopped (issue 17): empty values are dropped
      // (Prometheus reads them as absent), anything else invalid is refused.
      bool has_empty = false;
      for (const model::Label& l : labels) has_empty = has_empty || l.value.empty();
      if (has_empty) {
        model::Labels cleaned = model::WithoutEmptyValues(labels);
        if (cleaned.empty()) return Status::InvalidArgument("series without labels: every value of " + labels.ToString() + " is empty");
        ASSIGN_OR_RETURN(s, head_->GetOrCreateChecked(cleaned));
      } else {
        ASSIGN_OR_RETURN(s, head_->GetOrCreateChecked(labels));
      }
    }
    return s;
  }

  bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override {
    Lock();
    // The caller then appends with labels, and that Append says why.
    if (t < bounds_.mint || t > bounds_.maxt) return false;
    MemSeries* s = head_->GetByRef(ref);
    if (s == nullptr) return false;
    Add(s, t, v);
    return true;
  }

  Status Commit() override {
    std::sort(unlogged_.begin(), unlogged_.end());
    unlogged_.erase(std::unique(unlogged_.begin(), unlogged_.end()), unlogged_.end());
    Status st = head_->LogCommit(unlogged_, samples_, hist_samples_, st_samples_);
    if (st.ok()) {
      int64_t mint = INT64_MAX, maxt = INT64_MIN;
      uint64_t applied = 0;
      for (size_t i = 0; i < samples_.size(); i++) {
        // Series are scattered over memory; fetching a few ahead hides most
        // of the cache misses of a batch that touches each series once.
        if (i + kPrefetch < series_.size()) {
          const char* p = reinterpret_cast<const char*>(series_[i + kPrefetch]);
          __builtin_prefetch(p, 1);
          __builtin_prefetch(p + 64, 1);
          __builtin_prefetch(p + 128, 1);
        }
        applied += head_->ApplySample(series_[i], samples_[i].t, samples_[i].v) ? 1 : 0;
        mint = std::min(mint, samples_[i].t);
        maxt = std::max(maxt, samples_[i].t);
      }
      // Then floats with start timestamps (if any, all of the commit's
      // since the first) and histograms, as the WAL has them (replay
      // applies in that order).
      for (size_t i = 0; i < st_samples_.size(); i++) {
        const wal::RefSampleST& x = st_samples_[i];
        applied += head_->ApplySample(st_series_[i], x.t, x.v, x.st) ? 1 : 0;
        mint = std::min(mint, x.t);
        maxt = std::max(maxt, x.t);
      }
      for (size_t i = 0; i < hist_samples_.size(); i++) {
        const wal::RefHistogramSample& x = hist_samples_[i];
        applied += head_->ApplyHistogram(hist_series_[i], x.t, x.h, x.st) ? 1 : 0;
        mint = std::min(mint, x.t);
        maxt = std::max(maxt, x.t);
      }
      head_->UpdateTimes(mint, maxt);
      head_->CountApplied(applied);
    }
    Rollback();  // clears buffers and releases the lock
    return st.ok() ? st : st.Annotate("write wal");
  }

  void Rollback() override {
    // Kept for the next appender unless one commit made them large.
    constexpr size_t kKeep = size_t{1} << 16;
    if (samples_.capacity() > kKeep) {
      std::vector<MemSeries*>().swap(series_);
      std::vector<wal::RefSample>().swap(samples_);
      std::vector<MemSeries*>().swap(unlogged_);
    }
    if (hist_samples_.capacity() > kKeep / 64) {
      std::vector<MemSeries*>().swap(hist_series_);
      std::vector<wal::RefHistogramSample>().swap(hist_samples_);
    }
    if (st_samples_.capacity() > kKeep) {
      std::vector<MemSeries*>().swap(st_series_);
      std::vector<wal::RefSampleST>().swap(st_samples_);
    }
    series_.clear();
    samples_.clear();
    unlogged_.clear();
    hist_series_.clear();
    hist_samples_.clear();
    st_series_.clear();
    st_samples_.clear();
    st_mode_ = false;
    lock_.Release();
  }

 private:
  // Held from the first Append to Commit/Rollback: series found here cannot
  // be garbage-collected before their samples are applied, and WAL rotation
  // waits until logged samples are applied.
  // The accepted time range is taken from the clock once per commit.
  void Lock() {
    if (!lock_.held()) {
      lock_.Take(head_);
      bounds_ = head_->AcceptedTimeRange();
    }
  }

  void Add(MemSeries* s, int64_t t, double v) {
    if (!s->logged.load(std::memory_order_acquire)) unlogged_.push_back(s);
    if (st_mode_) [[unlikely]] {
      st_series_.push_back(s);
      st_samples_.push_back({s->ref, t, v, 0});
      return;
    }
    series_.push_back(s);
    samples_.push_back({s->ref, t, v});
  }

  Head* head_;
  IdlePool<Head::AppendBuffers>::Lease buf_;
  std::vector<MemSeries*>& series_;
  std::vector<wal::RefSample>& samples_;
  std::vector<MemSeries*>& unlogged_;
  std::vector<MemSeries*>& hist_series_;
  std::vector<wal::RefHistogramSample>& hist_samples_;
  std::vector<MemSeries*>& st_series_;
  std::vector<wal::RefSampleST>& st_samples_;
  bool st_mode_ = false;  // this commit's floats go to st_samples_
  Head::SharedAppendLock lock_;
  Head::TimeBounds bounds_{model::kMinTime, model::kMaxTime};  // set by Lock()
};

}  // namespace

std::unique_ptr<storage::Appender> Head::NewAppender() {
  return std::make_unique<HeadAppender>(this, append_buffers_.Acquire());
}

}  // namespace trainwatch::tsdb
