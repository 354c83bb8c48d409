// Head appender: buffers a batch, resolves or creates its series, logs the
// batch to the WAL and then applies it, so a sample is visible only once it
// is durable per the WAL sync policy.

#include <shared_mutex>

#include "base/clock.h"
#include "tsdb/head.h"

namespace trainwatch::tsdb {
namespace {

class HeadAppender : public storage::Appender {
 public:
  explicit HeadAppender(Head* head) : head_(head) {}
  ~HeadAppender() override { Rollback(); }

  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                    double v) override {
    // Held from the first Append to Commit/Rollback: series found here
    // cannot be garbage-collected before their samples are applied, and WAL
    // rotation waits until logged samples are applied.
    if (!lock_.owns_lock()) lock_ = head_->SharedAppendLock();
    // Refs are never reused, so a ref that still resolves is this series.
    MemSeries* s = ref != 0 ? head_->GetByRef(ref) : nullptr;
    if (s == nullptr) {
      if (labels.empty()) return Status::InvalidArgument("series without labels");
      uint64_t h = labels.Hash();
      s = head_->Lookup(labels, h);
      if (s == nullptr) {
        pending_.push_back({nullptr, static_cast<uint32_t>(new_labels_.size()), t, v});
        new_labels_.push_back(labels);
        return storage::SeriesRef{0};
      }
    }
    pending_.push_back({s, 0, t, v});
    return storage::SeriesRef{s->ref};
  }

  Status Commit() override {
    if (pending_.empty()) {
      Rollback();
      return Status::OK();
    }
    if (!new_labels_.empty()) {
      std::vector<const model::Labels*> ptrs;
      ptrs.reserve(new_labels_.size());
      for (const auto& l : new_labels_) ptrs.push_back(&l);
      std::vector<MemSeries*> created;
      RETURN_IF_ERROR(head_->GetOrCreate(ptrs, &created));
      for (auto& p : pending_) {
        if (p.series == nullptr) p.series = created[p.new_index];
      }
    }
    samples_.clear();
    samples_.reserve(pending_.size());
    for (const auto& p : pending_) samples_.push_back({p.series->ref, p.t, p.v});
    Status st = head_->LogSamples(samples_);
    if (!st.ok()) {
      Rollback();
      return st.Annotate("write wal");
    }
    for (const auto& p : pending_) head_->ApplySample(p.series, p.t, p.v);
    Rollback();  // clears buffers
    return Status::OK();
  }

  void Rollback() override {
    pending_.clear();
    new_labels_.clear();
    if (lock_.owns_lock()) lock_.unlock();
  }

 private:
  struct Pending {
    MemSeries* series;   // null until created at commit
    uint32_t new_index;  // into new_labels_ when series is null
    int64_t t;
    double v;
  };
  Head* head_;
  std::vector<Pending> pending_;
  std::vector<model::Labels> new_labels_;
  std::vector<wal::RefSample> samples_;
  std::shared_lock<std::shared_mutex> lock_;
};

}  // namespace

std::unique_ptr<storage::Appender> Head::NewAppender() { return std::make_unique<HeadAppender>(this); }

}  // namespace trainwatch::tsdb
