#pragma once
// The storage seam: what ingest, promql, scrape and rules see of the TSDB.
// Interfaces only (plus the generic merge in merge.h); tsdb/ implements them.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "model/labels.h"
#include "model/matcher.h"
#include "model/sample.h"

namespace trainwatch::storage {

// Dense, process-local series id. 0 means "not known yet".
using SeriesRef = uint64_t;

// Buffers samples until Commit. Not thread-safe: one appender per goroutine-like
// unit of work (an HTTP request, a scrape).
class Appender {
 public:
  virtual ~Appender() = default;
  // Adds one sample. `ref` is a ref returned earlier for the same labels, or 0;
  // returns the series' ref. Fails on invalid labels. Samples of any age within
  // retention are accepted; one with the timestamp of a stored sample of the
  // same series is ignored (the stored one wins).
  virtual Result<SeriesRef> Append(SeriesRef ref, const model::Labels& labels, int64_t t, double v) = 0;
  // Adds one sample to the series `ref` returned by an earlier Append, with
  // no label lookup. Returns false, adding nothing, when the ref is no longer
  // valid (the series was dropped); the caller then appends with labels.
  virtual bool AppendByRef(SeriesRef ref, int64_t t, double v) {
    (void)ref, (void)t, (void)v;
    return false;
  }
  // Adds one native-histogram sample, like Append. A series holds floats
  // and histograms side by side, one value per timestamp. Fails with
  // kNotSupported where the store keeps no histograms, and with
  // kInvalidArgument when h.Validate() fails.
  virtual Result<SeriesRef> AppendHistogram(SeriesRef ref, const model::Labels& labels, int64_t t,
                                            const model::FloatHistogram& h) {
    (void)ref, (void)labels, (void)t, (void)h;
    return Status::NotSupported("native histograms are not stored here");
  }
  // Append and AppendHistogram for a sample with its start timestamp `st`
  // (ms; 0 = unknown): when the counter, histogram or summary behind it last
  // started (OpenMetrics `_created`, the protobuf exposition's
  // created_timestamp, remote write 2.0's start_timestamp, OTLP's
  // start_time_unix_nano). Stores that keep none drop it; the TSDB keeps it
  // per sample and SeriesIterator::AtST returns it.
  virtual Result<SeriesRef> AppendST(SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t, double v) {
    (void)st;
    return Append(ref, labels, t, v);
  }
  virtual Result<SeriesRef> AppendHistogramST(SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t,
                                              const model::FloatHistogram& h) {
    (void)st;
    return AppendHistogram(ref, labels, t, h);
  }
  // Writes every sample since the last Commit to the WAL and makes it
  // queryable. Returns once the data is durable per the WAL sync policy.
  virtual Status Commit() = 0;
  // Drops every sample since the last Commit.
  virtual void Rollback() = 0;
};

class Appendable {
 public:
  virtual ~Appendable() = default;
  virtual std::unique_ptr<Appender> NewAppender() = 0;
  // OK when an appender made now would accept a sample at t; otherwise the
  // kOutOfRange error its Append would return (counted as refused), for
  // writers that drop such a sample from a request instead of failing it.
  virtual Status CheckTimestamp(int64_t t) {
    (void)t;
    return Status::OK();
  }
};

// Iterates one series' samples in increasing time order. Sticky error in Err().
class SeriesIterator {
 public:
  virtual ~SeriesIterator() = default;
  // Advances; false at the end or on error.
  virtual bool Next() = 0;
  // Advances to the first sample with timestamp >= t (may stay put); false when none.
  virtual bool Seek(int64_t t) = 0;
  virtual model::Sample At() const = 0;
  // True when the sample at At() is a native histogram (At().v is then
  // meaningless, At().t valid) and AtHistogram() returns it.
  virtual bool AtIsHistogram() const { return false; }
  // The histogram at At(); REQUIRES AtIsHistogram(). Valid until the next
  // call that moves the iterator.
  virtual const model::FloatHistogram* AtHistogram() const { return nullptr; }
  // False when no sample of this iterator is a histogram, so a reader can
  // keep to At() and AppendUntil (which, when this is true, may only be
  // used where the caller checks AtIsHistogram first: it copies floats and
  // stops, returning true, on the first histogram sample before maxt).
  virtual bool HasHistograms() const { return false; }
  // Appends the sample at At() and those after it with t <= maxt to *out and
  // stops on the first one after maxt (At() then returns it). False when the
  // samples ran out or on error, like Next(). REQUIRES: the iterator is on a
  // sample (the last Seek or Next returned true). Readers of many samples use
  // it instead of a virtual At and Next per sample.
  virtual bool AppendUntil(int64_t maxt, std::vector<model::Sample>* out) {
    const bool hist = HasHistograms();  // once per call, not per sample
    do {
      model::Sample s = At();
      if (s.t > maxt || (hist && AtIsHistogram())) return true;
      out->push_back(s);
    } while (Next());
    return false;
  }
  // As AppendUntil, with each sample's AtCount() appended to *counts. For
  // iterators with counts and neither histograms nor start timestamps.
  virtual bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) {
    if (!HasCounts() && !HasHistograms()) {
      // Raw samples beside a tier's points (a merge of both asks each
      // source for counts): each stands for one, read in bulk.
      const size_t before = out->size();
      const bool more = AppendUntil(maxt, out);
      counts->insert(counts->end(), out->size() - before, 1.0);
      return more;
    }
    do {
      model::Sample s = At();
      if (s.t > maxt) return true;
      out->push_back(s);
      counts->push_back(AtCount());
    } while (Next());
    return false;
  }
  // Start timestamp of the sample at At(): when the counter behind it last
  // started (OpenMetrics/OTel start time, ms; 0 = unknown). PromQL's
  // rate/increase/irate/resets read it to see resets and the counter's zero
  // point; start_timestamp() returns it.
  virtual int64_t AtST() const { return 0; }
  // False when no sample of this iterator carries a start timestamp, so a
  // reader can skip AtST() per sample.
  virtual bool HasST() const { return false; }
  // How many raw samples the sample at At() stands for: 1, or, for a point
  // of a downsampled tier (a window's sum, see SelectHints::func), the
  // window's count, so count_over_time and avg_over_time read it.
  virtual double AtCount() const { return 1; }
  // False when every sample of this iterator stands for one (AtCount() == 1).
  virtual bool HasCounts() const { return false; }
  virtual Status Err() const = 0;
};

// Forwards every call to the iterator it wraps: the base of iterators that
// change one or two of them (a lower time bound, keeping shared data alive).
class ForwardingIterator : public SeriesIterator {
 public:
  explicit ForwardingIterator(std::unique_ptr<SeriesIterator> it) : it_(std::move(it)) {}
  bool Next() override { return it_->Next(); }
  bool Seek(int64_t t) override { return it_->Seek(t); }
  model::Sample At() const override { return it_->At(); }
  bool AtIsHistogram() const override { return it_->AtIsHistogram(); }
  const model::FloatHistogram* AtHistogram() const override { return it_->AtHistogram(); }
  bool HasHistograms() const override { return it_->HasHistograms(); }
  bool AppendUntil(int64_t maxt, std::vector<model::Sample>* out) override { return it_->AppendUntil(maxt, out); }
  bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) override {
    return it_->AppendCountedUntil(maxt, out, counts);
  }
  int64_t AtST() const override { return it_->AtST(); }
  bool HasST() const override { return it_->HasST(); }
  double AtCount() const override { return it_->AtCount(); }
  bool HasCounts() const override { return it_->HasCounts(); }
  Status Err() const override { return it_->Err(); }

 protected:
  std::unique_ptr<SeriesIterator> it_;
};

class Series {
 public:
  virtual ~Series() = default;
  virtual const model::Labels& labels() const = 0;
  virtual std::unique_ptr<SeriesIterator> Iterator() const = 0;
};

// Iterates series; At() is valid until the next call to Next().
class SeriesSet {
 public:
  virtual ~SeriesSet() = default;
  virtual bool Next() = 0;
  virtual const Series& At() const = 0;
  virtual Status Err() const = 0;
};

// What the caller will do with the data; implementations may use it to prune.
struct SelectHints {
  int64_t start = model::kMinTime;  // ms, inclusive
  int64_t end = model::kMaxTime;    // ms, inclusive
  // As Prometheus's SelectHints: the range function the samples go into
  // ("min_over_time"; empty: none or not known), its range and the query's
  // step (ms; 0: an instant query). A store with downsampled tiers answers
  // min/max/last_over_time with the windows' min/max/last points and
  // sum/count/avg_over_time with their sums carrying counts
  // (SeriesIterator::AtCount) where the windows of the query lie on a tier's
  // grid, so the function over those points is its value over the raw
  // samples. Other stores ignore it.
  std::string_view func;
  int64_t range_ms = 0;
  int64_t step_ms = 0;
};

// A view over [mint, maxt] of the data. Thread-compatible; close by destroying.
class Querier {
 public:
  virtual ~Querier() = default;
  // Series matching all matchers, with samples in [mint, maxt] of the querier
  // (narrowed by hints). Sorted by labels when `sorted`.
  virtual std::unique_ptr<SeriesSet> Select(bool sorted, const SelectHints& hints, const model::Matchers& matchers) = 0;
  // Sorted distinct values of label `name` among series matching `matchers` (all series when empty).
  virtual Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& matchers) = 0;
  // Sorted distinct label names among series matching `matchers`.
  virtual Result<std::vector<std::string>> LabelNames(const model::Matchers& matchers) = 0;
};

class Queryable {
 public:
  virtual ~Queryable() = default;
  virtual Result<std::unique_ptr<Querier>> NewQuerier(int64_t mint, int64_t maxt) = 0;
};

// A SeriesSet that yields nothing but an error (or nothing at all).
std::unique_ptr<SeriesSet> ErrorSeriesSet(Status s);

}  // namespace trainwatch::storage
