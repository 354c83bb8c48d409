#include "tsdb/chunk_series.h"

#include <algorithm>

#include "storage/merge.h"

namespace trainwatch::tsdb {
namespace {

const std::vector<model::Sample> kNoSamples;
const std::vector<storage::HistogramSample> kNoHistograms;

// Iterates shared vectors of out-of-order floats and histograms, keeping
// them alive.
class SharedVectorIterator : public storage::ForwardingIterator {
 public:
  SharedVectorIterator(std::shared_ptr<const std::vector<model::Sample>> s,
                       std::shared_ptr<const std::vector<storage::HistogramSample>> h,
                       std::shared_ptr<const std::vector<int64_t>> st)
      : ForwardingIterator(storage::MixedVectorIterator(s != nullptr ? s.get() : &kNoSamples,
                                                        h != nullptr ? h.get() : &kNoHistograms, st.get())),
        s_(std::move(s)),
        h_(std::move(h)),
        st_(std::move(st)) {}

 private:
  // What it_ points into (destroyed before it_, which reads them only while iterating).
  std::shared_ptr<const std::vector<model::Sample>> s_;
  std::shared_ptr<const std::vector<storage::HistogramSample>> h_;
  std::shared_ptr<const std::vector<int64_t>> st_;
};

}  // namespace

ChunkListIterator::ChunkListIterator(std::vector<ChunkRefData> chunks, int64_t mint, int64_t maxt,
                                     std::shared_ptr<const void> keepalive)
    : chunks_(std::move(chunks)), mint_(mint), maxt_(maxt), keepalive_(std::move(keepalive)) {
  // Skip chunks entirely before mint.
  while (ci_ < chunks_.size() && chunks_[ci_].maxt < mint_) ci_++;
  for (const ChunkRefData& c : chunks_) {
    counted_ = counted_ || !c.counts.empty();
    has_st_ = has_st_ || c.enc == chunkenc::Encoding::kStartTimes;
    has_hist_ = has_hist_ || chunkenc::IsHistogramEncoding(chunkenc::InnerEncoding(c.enc, c.data));
  }
}

bool ChunkListIterator::Advance() {
  for (;;) {
    bool enter_by_seek = false;
    if (!started_) {
      if (ci_ >= chunks_.size() || chunks_[ci_].mint > maxt_) return done_ = true, false;
      chunkenc::Unwrapped u{chunks_[ci_].enc, chunks_[ci_].data};
      if (has_st_) [[unlikely]] {
        Result<chunkenc::Unwrapped> r = chunkenc::UnwrapST(u.enc, u.data, &st_);
        if (!r.ok()) {
          err_ = r.status();
          return done_ = true, false;
        }
        u = *r;
      }
      hist_ = chunkenc::IsHistogramEncoding(u.enc);
      if (hist_) {
        if (hit_ == nullptr) hit_ = std::make_unique<chunkenc::FloatHistogramIterator>();
        hit_->Reset(u.data);
      } else {
        if (counted_) {
          it_.ResetCounted(u.enc, u.data, chunks_[ci_].counts_enc, chunks_[ci_].counts);
        } else {
          it_.Reset(u.enc, u.data);
        }
        // A chunk that starts before mint_ is entered at mint_ by Seek: a
        // dense chunk's binary search rather than a Next per sample before
        // it (a query starting late in a long tier chunk).
        enter_by_seek = chunks_[ci_].mint < mint_;
      }
      started_ = true;
    }
    if (!hist_) [[likely]] {  // floats: the path as before histograms
      if (enter_by_seek ? it_.Seek(mint_) : it_.Next()) {
        if (it_.t() < mint_) continue;
        if (it_.t() > maxt_) return done_ = true, false;
        return true;
      }
      if (!it_.Err().ok()) {
        err_ = it_.Err();
        return done_ = true, false;
      }
    } else {
      if (hit_->Next()) {
        if (hit_->t() < mint_) continue;
        if (hit_->t() > maxt_) return done_ = true, false;
        return true;
      }
      if (!hit_->Err().ok()) {
        err_ = hit_->Err();
        return done_ = true, false;
      }
    }
    ci_++;
    started_ = false;
  }
}

bool ChunkListIterator::Next() {
  if (done_) return false;
  return Advance();
}

bool ChunkListIterator::AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out,
                                           std::vector<double>* counts) {
  if (!counted_) return SeriesIterator::AppendCountedUntil(maxt, out, counts);
  return Append(maxt, out, counts);
}

bool ChunkListIterator::Append(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) {
  if (done_) return false;
  const int64_t until = std::min(maxt, maxt_);
  for (;;) {
    // On a histogram: stop there (before or after maxt, the caller looks).
    if (hist_) return true;
    if (it_.AppendCountedUntil(until, out, counts)) {
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
  if (started_ && CurT() >= t && CurT() >= mint_) return true;
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
  if (started_ && CurT() >= mint_ && CurT() <= maxt_) return true;
  return Advance();
}

std::unique_ptr<storage::SeriesIterator> ChunkSeries::Iterator() const {
  auto in_order = std::make_unique<ChunkListIterator>(chunks_, mint_, maxt_, keepalive_);
  if ((ooo_ == nullptr || ooo_->empty()) && (ooo_hist_ == nullptr || ooo_hist_->empty())) return in_order;
  std::vector<std::unique_ptr<storage::SeriesIterator>> its;
  its.push_back(std::move(in_order));
  its.push_back(std::make_unique<SharedVectorIterator>(ooo_, ooo_hist_, ooo_st_));
  return storage::MergeIterators(std::move(its));
}

}  // namespace trainwatch::tsdb
