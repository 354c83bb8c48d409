// Reading the head: a querier copies each selected series' chunk list (closed
// chunks are shared, the open one copied) under the series lock, so readers
// never block appenders for long and see a consistent prefix.

#include <algorithm>
#include <shared_mutex>

#include "base/mutex.h"
#include "storage/merge.h"
#include "tsdb/chunk_series.h"
#include "tsdb/head.h"

namespace trainwatch::tsdb {
namespace {

class HeadQuerier : public storage::Querier {
 public:
  HeadQuerier(Head* head, int64_t mint, int64_t maxt) : head_(head), mint_(mint), maxt_(maxt) {}

  std::unique_ptr<storage::SeriesSet> Select(bool sorted, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    int64_t mint = std::max(mint_, hints.start), maxt = std::min(maxt_, hints.end);
    auto refs = head_->PostingsFor(matchers);
    if (!refs.ok()) return storage::ErrorSeriesSet(refs.status());
    std::vector<std::shared_ptr<storage::Series>> out;
    out.reserve(refs->size());
    for (uint64_t ref : *refs) {
      SeriesSnapshot snap;
      if (!head_->SnapshotByRef(ref, mint, maxt, &snap)) continue;
      if (snap.chunks.empty() && snap.ooo.empty() && snap.ooo_hist.empty()) continue;
      std::vector<ChunkRefData> chunks;
      chunks.reserve(snap.chunks.size());
      auto keep = std::make_shared<std::vector<ChunkBytes>>();
      keep->reserve(snap.chunks.size());
      for (auto& c : snap.chunks) {
        chunks.push_back({c.mint, c.maxt, c.enc, c.data.view()});
        keep->push_back(std::move(c.data));
      }
      std::shared_ptr<const std::vector<model::Sample>> ooo;
      if (!snap.ooo.empty()) ooo = std::make_shared<const std::vector<model::Sample>>(std::move(snap.ooo));
      std::shared_ptr<const std::vector<storage::HistogramSample>> ooo_hist;
      if (!snap.ooo_hist.empty()) {
        ooo_hist = std::make_shared<const std::vector<storage::HistogramSample>>(std::move(snap.ooo_hist));
      }
      std::shared_ptr<const std::vector<int64_t>> ooo_st;
      if (!snap.ooo_st.empty()) ooo_st = std::make_shared<const std::vector<int64_t>>(std::move(snap.ooo_st));
      out.push_back(std::make_shared<ChunkSeries>(std::move(snap.labels), std::move(chunks), std::move(ooo), mint,
                                                  maxt, std::move(keep), std::move(ooo_hist), std::move(ooo_st)));
    }
    if (sorted) {
      std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->labels() < b->labels(); });
    }
    return storage::ListSeriesSet(std::move(out));
  }

  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& matchers) override {
    return head_->LabelValuesFor(name, matchers);
  }

  Result<std::vector<std::string>> LabelNames(const model::Matchers& matchers) override {
    return head_->LabelNamesFor(matchers);
  }

 private:
  Head* head_;
  int64_t mint_, maxt_;
};

}  // namespace

bool Head::SnapshotByRef(uint64_t ref, int64_t mint, int64_t maxt, SeriesSnapshot* out) const {
  base::ReaderMutexLock lock(&postings_mu_);
  MemSeries* s = GetByRef(ref);
  if (s == nullptr) return false;
  *out = Snapshot(s, mint, maxt);
  out->labels = LabelsOf(s);
  return true;
}

Result<std::unique_ptr<storage::Querier>> Head::NewQuerier(int64_t mint, int64_t maxt) {
  return std::unique_ptr<storage::Querier>(std::make_unique<HeadQuerier>(this, mint, maxt));
}

}  // namespace trainwatch::tsdb
