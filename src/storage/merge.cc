#include "storage/merge.h"

#include <algorithm>
#include <limits>

namespace trainwatch::storage {
namespace {

class ErrSet : public SeriesSet {
 public:
  explicit ErrSet(Status s) : s_(std::move(s)) {}
  bool Next() override { return false; }
  const Series& At() const override { CHECK(false, "BUG: At on empty set"); __builtin_unreachable(); }
  Status Err() const override { return s_; }

 private:
  Status s_;
};

class VecIter : public SeriesIterator {
 public:
  VecIter(const std::vector<model::Sample>* s, const std::vector<int64_t>* st) : s_(s), st_(st) {}
  bool Next() override { return ++i_ < s_->size(); }
  bool Seek(int64_t t) override {
    if (i_ == SIZE_MAX) i_ = 0;
    if (i_ >= s_->size()) return false;
    if ((*s_)[i_].t >= t) return true;
    auto it = std::lower_bound(s_->begin() + i_, s_->end(), t,
                               [](const model::Sample& a, int64_t x) { return a.t < x; });
    i_ = it - s_->begin();
    return i_ < s_->size();
  }
  model::Sample At() const override { return (*s_)[i_]; }
  int64_t AtST() const override { return st_ != nullptr ? (*st_)[i_] : 0; }
  bool HasST() const override { return st_ != nullptr; }
  Status Err() const override { return Status::OK(); }

 private:
  const std::vector<model::Sample>* s_;
  const std::vector<int64_t>* st_;  // null: no start timestamps
  size_t i_ = SIZE_MAX;              // before the first sample
};

// Floats and histograms from two sorted vectors; a float wins a tie.
class MixedVecIter : public SeriesIterator {
 public:
  MixedVecIter(const std::vector<model::Sample>* f, const std::vector<HistogramSample>* h,
               const std::vector<int64_t>* fst)
      : f_(f), h_(h), fst_(fst != nullptr && !fst->empty() ? fst : nullptr) {
    has_st_ = fst_ != nullptr ||
              std::any_of(h_->begin(), h_->end(), [](const HistogramSample& x) { return x.st != 0; });
  }
  bool Next() override {
    if (!started_) {
      started_ = true;
      return Pick();
    }
    if (!valid_) return false;
    if (fi_ < f_->size() && (*f_)[fi_].t == t_) fi_++;
    if (hi_ < h_->size() && (*h_)[hi_].t == t_) hi_++;
    return Pick();
  }
  bool Seek(int64_t t) override {
    if (started_ && valid_ && t_ >= t) return true;
    if (started_ && !valid_) return false;
    started_ = true;
    fi_ = static_cast<size_t>(std::lower_bound(f_->begin() + static_cast<std::ptrdiff_t>(fi_), f_->end(), t,
                                               [](const model::Sample& a, int64_t x) { return a.t < x; }) -
                              f_->begin());
    hi_ = static_cast<size_t>(std::lower_bound(h_->begin() + static_cast<std::ptrdiff_t>(hi_), h_->end(), t,
                                               [](const HistogramSample& a, int64_t x) { return a.t < x; }) -
                              h_->begin());
    return Pick();
  }
  model::Sample At() const override {
    return {t_, hist_ ? std::numeric_limits<double>::quiet_NaN() : (*f_)[fi_].v};
  }
  bool AtIsHistogram() const override { return hist_; }
  const model::FloatHistogram* AtHistogram() const override { return hist_ ? &(*h_)[hi_].h : nullptr; }
  bool HasHistograms() const override { return !h_->empty(); }
  int64_t AtST() const override { return hist_ ? (*h_)[hi_].st : fst_ != nullptr ? (*fst_)[fi_] : 0; }
  bool HasST() const override { return has_st_; }
  Status Err() const override { return Status::OK(); }

 private:
  bool Pick() {
    const bool hf = fi_ < f_->size(), hh = hi_ < h_->size();
    if (!hf && !hh) return valid_ = false;
    hist_ = !hf || (hh && (*h_)[hi_].t < (*f_)[fi_].t);
    t_ = hist_ ? (*h_)[hi_].t : (*f_)[fi_].t;
    return valid_ = true;
  }
  const std::vector<model::Sample>* f_;
  const std::vector<HistogramSample>* h_;
  const std::vector<int64_t>* fst_;  // null: no float has a start timestamp
  size_t fi_ = 0, hi_ = 0;
  int64_t t_ = 0;
  bool hist_ = false, valid_ = false, started_ = false, has_st_ = false;
};

// K-way merge of iterators; ties on timestamp go to the lowest index.
// Sources mostly cover disjoint time ranges (blocks, then the head), so the
// source of the current sample (the lead) is advanced alone while its next
// sample is still before every other source's: one virtual Next and At per
// sample instead of a pass over all sources.
class MergeIter : public SeriesIterator {
 public:
  explicit MergeIter(std::vector<std::unique_ptr<SeriesIterator>> its) : its_(std::move(its)), valid_(its_.size()) {
    for (auto& it : its_) has_hist_ = has_hist_ || it->HasHistograms();
  }

  bool Next() override {
    if (!started_) {
      started_ = true;
      for (size_t i = 0; i < its_.size(); i++) valid_[i] = its_[i]->Next();
      return Pick();
    }
    if (!has_cur_) return false;
    if (others_min_ > cur_.t) {
      // No other source holds cur_.t: only the lead moves.
      valid_[lead_] = its_[lead_]->Next();
      if (valid_[lead_]) {
        model::Sample s = its_[lead_]->At();
        if (s.t < others_min_) {
          cur_ = s;
          return true;
        }
      }
      return Pick();
    }
    for (size_t i = 0; i < its_.size(); i++) {
      if (valid_[i] && its_[i]->At().t == cur_.t) valid_[i] = its_[i]->Next();
    }
    return Pick();
  }

  bool Seek(int64_t t) override {
    if (started_ && has_cur_ && cur_.t >= t) return true;
    started_ = true;
    for (size_t i = 0; i < its_.size(); i++) valid_[i] = its_[i]->Seek(t);
    return Pick();
  }

  bool AppendUntil(int64_t maxt, std::vector<model::Sample>* out) override {
    if (has_hist_) return SeriesIterator::AppendUntil(maxt, out);
    return Append(maxt, out, nullptr);
  }
  bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) override {
    if (has_hist_) return SeriesIterator::AppendCountedUntil(maxt, out, counts);
    return Append(maxt, out, counts);
  }

  model::Sample At() const override { return cur_; }
  // The lead sits on cur_: the sample (of either kind) of the earliest
  // source holding cur_.t.
  bool AtIsHistogram() const override { return has_hist_ && its_[lead_]->AtIsHistogram(); }
  const model::FloatHistogram* AtHistogram() const override { return its_[lead_]->AtHistogram(); }
  bool HasHistograms() const override { return has_hist_; }
  int64_t AtST() const override { return its_[lead_]->AtST(); }
  bool HasST() const override {
    for (auto& it : its_) {
      if (it->HasST()) return true;
    }
    return false;
  }
  double AtCount() const override { return its_[lead_]->AtCount(); }
  bool HasCounts() const override {
    for (auto& it : its_) {
      if (it->HasCounts()) return true;
    }
    return false;
  }
  Status Err() const override {
    for (auto& it : its_) {
      Status s = it->Err();
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

 private:
  // The samples Next would visit up to maxt: the lead's run before any other
  // source's next sample in one call to the lead (blocks of one series
  // rarely overlap, so a run is usually all of a block's samples), ties one
  // by one as Next resolves them.
  bool Append(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) {
    while (has_cur_) {
      if (cur_.t > maxt) return true;
      if (cur_.t < others_min_) {
        const int64_t limit = std::min(maxt, others_min_ - 1);
        valid_[lead_] = counts != nullptr ? its_[lead_]->AppendCountedUntil(limit, out, counts)
                                          : its_[lead_]->AppendUntil(limit, out);
        Pick();
        continue;
      }
      out->push_back(cur_);
      if (counts != nullptr) counts->push_back(AtCount());
      if (!Next()) return false;
    }
    return false;
  }

  // Sets cur_ to the earliest sample (lowest index on ties), lead_ to its
  // source and others_min_ to the earliest timestamp of the other sources.
  bool Pick() {
    has_cur_ = false;
    others_min_ = model::kMaxTime;
    for (size_t i = 0; i < its_.size(); i++) {
      if (!valid_[i]) continue;
      model::Sample s = its_[i]->At();
      if (!has_cur_ || s.t < cur_.t) {
        if (has_cur_) others_min_ = std::min(others_min_, cur_.t);
        cur_ = s;
        lead_ = i;
        has_cur_ = true;
      } else {
        others_min_ = std::min(others_min_, s.t);
      }
    }
    return has_cur_;
  }

  std::vector<std::unique_ptr<SeriesIterator>> its_;
  std::vector<char> valid_;  // not vector<bool>: read and written per sample
  model::Sample cur_;
  size_t lead_ = 0;                      // the source cur_ came from
  int64_t others_min_ = model::kMaxTime;  // earliest timestamp of the others; kMaxTime: none
  bool has_cur_ = false;
  bool started_ = false;
  bool has_hist_ = false;  // some source has histograms
};

// A series made of the same-labelled series of several sets.
class MergedSeries : public Series {
 public:
  MergedSeries(model::Labels l, std::vector<const Series*> parts) : labels_(std::move(l)), parts_(std::move(parts)) {}
  const model::Labels& labels() const override { return labels_; }
  std::unique_ptr<SeriesIterator> Iterator() const override {
    if (parts_.size() == 1) return parts_[0]->Iterator();
    std::vector<std::unique_ptr<SeriesIterator>> its;
    for (auto* p : parts_) its.push_back(p->Iterator());
    return std::make_unique<MergeIter>(std::move(its));
  }

 private:
  model::Labels labels_;
  std::vector<const Series*> parts_;
};

class MergeSet : public SeriesSet {
 public:
  explicit MergeSet(std::vector<std::unique_ptr<SeriesSet>> sets) : sets_(std::move(sets)), valid_(sets_.size()) {}

  bool Next() override {
    if (!started_) {
      started_ = true;
      for (size_t i = 0; i < sets_.size(); i++) valid_[i] = sets_[i]->Next();
    } else {
      for (size_t i : last_) valid_[i] = sets_[i]->Next();
    }
    last_.clear();
    const model::Labels* min = nullptr;
    for (size_t i = 0; i < sets_.size(); i++) {
      if (!valid_[i]) continue;
      const model::Labels& l = sets_[i]->At().labels();
      if (min == nullptr || l < *min) {
        min = &l;
        last_.assign(1, i);
      } else if (l == *min) {
        last_.push_back(i);
      }
    }
    if (min == nullptr) return false;
    if (last_.size() == 1) {
      // Only one source has this series (the common case: data in one
      // block, or only in the head): hand it out as is, without copying
      // its labels into a wrapper.
      single_ = &sets_[last_[0]]->At();
      return true;
    }
    single_ = nullptr;
    std::vector<const Series*> parts;
    for (size_t i : last_) parts.push_back(&sets_[i]->At());
    cur_ = std::make_unique<MergedSeries>(*min, std::move(parts));
    return true;
  }

  const Series& At() const override { return single_ != nullptr ? *single_ : *cur_; }
  Status Err() const override {
    for (auto& s : sets_) {
      Status st = s->Err();
      if (!st.ok()) return st;
    }
    return Status::OK();
  }

 private:
  std::vector<std::unique_ptr<SeriesSet>> sets_;
  std::vector<bool> valid_;
  std::vector<size_t> last_;  // sets positioned on the current series
  std::unique_ptr<MergedSeries> cur_;
  const Series* single_ = nullptr;  // when one set alone holds the current series
  bool started_ = false;
};

class ListSet : public SeriesSet {
 public:
  explicit ListSet(std::vector<std::shared_ptr<Series>> s) : s_(std::move(s)) {}
  bool Next() override { return ++i_ < s_.size(); }
  const Series& At() const override { return *s_[i_]; }
  Status Err() const override { return Status::OK(); }

 private:
  std::vector<std::shared_ptr<Series>> s_;
  size_t i_ = SIZE_MAX;
};

}  // namespace

std::unique_ptr<SeriesSet> ErrorSeriesSet(Status s) { return std::make_unique<ErrSet>(std::move(s)); }

std::unique_ptr<SeriesSet> MergeSeriesSets(std::vector<std::unique_ptr<SeriesSet>> sets) {
  if (sets.size() == 1) return std::move(sets[0]);
  return std::make_unique<MergeSet>(std::move(sets));
}

std::unique_ptr<SeriesIterator> MergeIterators(std::vector<std::unique_ptr<SeriesIterator>> its) {
  if (its.size() == 1) return std::move(its[0]);
  return std::make_unique<MergeIter>(std::move(its));
}

ListSeries::ListSeries(model::Labels labels, std::vector<model::Sample> samples, std::vector<int64_t> st)
    : labels_(std::move(labels)), samples_(std::move(samples)), st_(std::move(st)) {
  CHECK(st_.empty() || st_.size() == samples_.size(), "BUG: one start timestamp per sample");
}

std::unique_ptr<SeriesIterator> ListSeries::Iterator() const {
  return std::make_unique<VecIter>(&samples_, st_.empty() ? nullptr : &st_);
}

std::unique_ptr<SeriesSet> ListSeriesSet(std::vector<std::shared_ptr<Series>> series) {
  return std::make_unique<ListSet>(std::move(series));
}

std::unique_ptr<SeriesIterator> MixedVectorIterator(const std::vector<model::Sample>* floats,
                                                    const std::vector<HistogramSample>* hists,
                                                    const std::vector<int64_t>* float_st) {
  return std::make_unique<MixedVecIter>(floats, hists, float_st);
}

std::unique_ptr<SeriesIterator> VectorIterator(const std::vector<model::Sample>* samples) {
  return std::make_unique<VecIter>(samples, nullptr);
}

}  // namespace trainwatch::storage
