#include "tsdb/chunk_series.h"

#include <algorithm>

#include "storage/merge.h"

namespace trainwatch::tsdb {
namespace {

// Iterates a shared sample vector, keeping it alive.
class SharedVectorIterator : public storage::SeriesIterator {
 public:
  explicit SharedVectorIterator(std::shared_ptr<const std::vector<model::Sample>> s)
      : s_(std::move(s)), it_(storage::VectorIterator(s_.get())) {}
  bool Next() override { return it_->Next(); }
  bool Seek(int64_t t) override { return it_->Seek(t); }
  model::Sample At() const override { return it_->At(); }
  Status Err() const override { return it_->Err(); }

 private:
  std::shared_ptr<const std::vector<model::Sample>> s_;
  std::unique_ptr<storage::SeriesIterator> it_;
};

}  // namespace

ChunkListIterator::ChunkListIterator(std::vector<ChunkRefData> chunks, int64_t mint, int64_t maxt,
                                     std::shared_ptr<const void> keepalive)
    : chunks_(std::move(chunks)), mint_(mint), maxt_(maxt), keepalive_(std::move(keepalive)) {
  // Skip chunks entirely before mint.
  while (ci_ < chunks_.size() && chunks_[ci_].maxt < mint_) ci_++;
}

bool ChunkListIterator::Advance() {
  for (;;) {
    if (!started_) {
      if (ci_ >= chunks_.size() || chunks_[ci_].mint > maxt_) return done_ = true, false;
      it_.Reset(chunks_[ci_].enc, chunks_[ci_].data);
      started_ = true;
    }
    if (it_.Next()) {
      if (it_.t() < mint_) continue;
      if (it_.t() > maxt_) return done_ = true, false;
      return true;
    }
    if (!it_.Err().ok()) {
      err_ = it_.Err();
      return done_ = true, false;
    }
    ci_++;
    started_ = false;
  }
}

bool ChunkListIterator::Next() {
  if (done_) return false;
  return Advance();
}

bool ChunkListIterator::AppendUntil(int64_t maxt, std::vector<model::Sample>* out) {
  if (done_) return false;
  const int64_t until = std::min(maxt, maxt_);
  for (;;) {
    if (it_.AppendUntil(until, out)) {
      if (it_.t() <= maxt_) return true;  // stopped after the caller's maxt
      return done_ = true, false;
    }
    if (!it_.Err().ok()) {
      err_ = it_.Err();
      return done_ = true, false;
    }
    ci_++;
    started_ = false;
    if (!Advance()) return false;
  }
}

bool ChunkListIterator::Seek(int64_t t) {
  if (done_) return false;
  if (started_ && it_.t() >= t && it_.t() >= mint_) return true;
  if (t > mint_) {
    // Jump over whole chunks that end before t.
    size_t ci = ci_;
    while (ci < chunks_.size() && chunks_[ci].maxt < t) ci++;
    if (ci != ci_) {
      ci_ = ci;
      started_ = false;
    }
    mint_ = t;
  }
  if (started_ && it_.t() >= mint_ && it_.t() <= maxt_) return true;
  return Advance();
}

std::unique_ptr<storage::SeriesIterator> ChunkSeries::Iterator() const {
  auto in_order = std::make_unique<ChunkListIterator>(chunks_, mint_, maxt_, keepalive_);
  if (ooo_ == nullptr || ooo_->empty()) return in_order;
  std::vector<std::unique_ptr<storage::SeriesIterator>> its;
  its.push_back(std::move(in_order));
  its.push_back(std::make_unique<SharedVectorIterator>(ooo_));
  return storage::MergeIterators(std::move(its));
}

}  // namespace trainwatch::tsdb
