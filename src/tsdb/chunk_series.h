#pragma once
// Series and iterators over lists of encoded chunks, shared by the head and
// persisted blocks. Samples are clipped to [mint, maxt].

#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "model/labels.h"
#include "model/sample.h"
#include "storage/merge.h"
#include "storage/storage.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/histogram.h"
#include "tsdb/chunkenc/st.h"

namespace trainwatch::tsdb {

struct ChunkRefData {
  int64_t mint = 0, maxt = 0;
  chunkenc::Encoding enc = chunkenc::Encoding::kXor;
  std::string_view data;
  // Not empty: the counts of data's points, a chunk of the same points (a
  // tier block's count part beside its value part; SeriesIterator::AtCount).
  chunkenc::Encoding counts_enc = chunkenc::Encoding::kXor;
  std::string_view counts;
};

// Iterates non-overlapping, time-ordered chunks of floats or histograms
// (chunkenc::kFloatHistogram), any of them with start timestamps
// (chunkenc::kStartTimes), or of floats with counts (ChunkRefData::counts:
// a tier block's value and count parts; AtCount, AppendCountedUntil).
// `keepalive` owns the bytes.
class ChunkListIterator : public storage::SeriesIterator {
 public:
  ChunkListIterator(std::vector<ChunkRefData> chunks, int64_t mint, int64_t maxt, std::shared_ptr<const void> keepalive);
  bool Next() override;
  bool Seek(int64_t t) override;
  // On a histogram, v is NaN (meaningless, as the seam says).
  model::Sample At() const override {
    return hist_ ? model::Sample{hit_->t(), std::numeric_limits<double>::quiet_NaN()} : model::Sample{it_.t(), it_.v()};
  }
  bool AtIsHistogram() const override { return hist_; }
  const model::FloatHistogram* AtHistogram() const override { return hist_ ? &hit_->h() : nullptr; }
  bool HasHistograms() const override { return has_hist_; }
  bool AppendUntil(int64_t maxt, std::vector<model::Sample>* out) override { return Append(maxt, out, nullptr); }
  bool AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) override;
  double AtCount() const override { return counted_ ? it_.count() : 1; }
  bool HasCounts() const override { return counted_; }
  int64_t AtST() const override { return st_.empty() ? 0 : chunkenc::STAt(st_, CurT()); }
  bool HasST() const override { return has_st_; }
  Status Err() const override { return err_; }

 private:
  int64_t CurT() const { return hist_ ? hit_->t() : it_.t(); }
  bool Advance();  // moves to the next sample >= mint_, possibly into the next chunk
  bool Append(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts);
  std::vector<ChunkRefData> chunks_;
  int64_t mint_, maxt_;
  std::shared_ptr<const void> keepalive_;
  size_t ci_ = 0;
  bool started_ = false, done_ = false;
  chunkenc::Iterator it_;
  // The current chunk holds histograms: hit_ (made at the first one) reads it.
  bool hist_ = false, has_hist_ = false;
  bool has_st_ = false;            // some chunk has start timestamps
  bool counted_ = false;           // the chunks have counts
  std::vector<chunkenc::STRun> st_;  // the current chunk's
  std::unique_ptr<chunkenc::FloatHistogramIterator> hit_;
  Status err_;
};

// A series over chunks plus optional out-of-order samples and histograms
// (chunks win ties, then out-of-order floats).
class ChunkSeries : public storage::Series {
 public:
  // `ooo_st`: null, or the start timestamps of `ooo` (parallel to it).
  ChunkSeries(model::Labels labels, std::vector<ChunkRefData> chunks, std::shared_ptr<const std::vector<model::Sample>> ooo, int64_t mint,
              int64_t maxt, std::shared_ptr<const void> keepalive,
              std::shared_ptr<const std::vector<storage::HistogramSample>> ooo_hist = nullptr,
              std::shared_ptr<const std::vector<int64_t>> ooo_st = nullptr)
      : labels_(std::move(labels)), chunks_(std::move(chunks)), ooo_(std::move(ooo)), ooo_hist_(std::move(ooo_hist)),
        ooo_st_(std::move(ooo_st)), mint_(mint), maxt_(maxt), keepalive_(std::move(keepalive)) {}
  const model::Labels& labels() const override { return labels_; }
  std::unique_ptr<storage::SeriesIterator> Iterator() const override;

  // For a series set that refills one ChunkSeries for series after series,
  // reusing its storage.
  model::Labels* mutable_labels() { return &labels_; }
  std::vector<ChunkRefData>* mutable_chunks() { return &chunks_; }
  const std::vector<ChunkRefData>& chunks() const { return chunks_; }

 private:
  model::Labels labels_;
  std::vector<ChunkRefData> chunks_;
  std::shared_ptr<const std::vector<model::Sample>> ooo_;  // may be null
  std::shared_ptr<const std::vector<storage::HistogramSample>> ooo_hist_;  // may be null
  std::shared_ptr<const std::vector<int64_t>> ooo_st_;  // may be null
  int64_t mint_, maxt_;
  std::shared_ptr<const void> keepalive_;
};

}  // namespace trainwatch::tsdb
