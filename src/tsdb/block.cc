#include "tsdb/block.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "storage/merge.h"
#include "tsdb/chunk_series.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/histogram.h"
#include "tsdb/chunkenc/parts.h"
#include "tsdb/index/chunks_file.h"
#include "tsdb/index/index_reader.h"
#include "tsdb/index/index_writer.h"

namespace trainwatch::tsdb {

std::string NewUlid() {
  static const char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(MonoNanos()));
  uint64_t ms = static_cast<uint64_t>(NowMillis());
  std::string out(26, '0');
  for (int i = 9; i >= 0; i--) {
    out[i] = kAlphabet[ms & 31];
    ms >>= 5;
  }
  uint64_t r1 = rng(), r2 = rng();
  for (int i = 10; i < 26; i++) {
    uint64_t& r = i < 18 ? r1 : r2;
    out[i] = kAlphabet[r & 31];
    r >>= 5;
  }
  return out;
}

Result<std::shared_ptr<Block>> Block::Open(const std::string& dir) {
  std::shared_ptr<Block> b(new Block());
  b->dir_ = dir;
  ASSIGN_OR_RETURN(b->meta_, index::ReadBlockMeta(dir));
  index::IndexReader::Options iopts;
  iopts.verify_checksums = true;
  ASSIGN_OR_RETURN(b->index_, index::IndexReader::Open(dir + "/" + std::string(index::kBlockIndexFile), iopts));
  index::ChunkReader::Options copts;
  // Each chunk's CRC is checked as it is read (hardware CRC32C: a few ns per
  // chunk beside its decoding), so a flipped byte is an error, never a wrong value.
  copts.verify_checksums = true;
  ASSIGN_OR_RETURN(b->chunks_, index::ChunkReader::Open(dir + "/" + std::string(index::kBlockChunksDir), copts));
  b->size_bytes_ = file::DiskUsage(dir);
  return b;
}

void Block::MarkCorrupt(const Status& why) {
  base::MutexLock l(&reason_mu_);
  if (corrupt_.load()) return;
  corrupt_reason_ = why.message();
  corrupt_.store(true, std::memory_order_release);
}

Status Block::ReadFailed(const Status& s) {
  if (s.IsCorruption()) MarkCorrupt(s);
  return s.Annotate("block " + meta_.id);
}

std::string Block::CorruptReason() const {
  base::MutexLock l(&reason_mu_);
  return corrupt_reason_;
}

Block::~Block() {
  Fate fate = fate_.load();
  if (fate == Fate::kSetAside) {
    index_.reset();
    chunks_.reset();
    // A block found damaged ("<id>.corrupt"): no longer served or compacted,
    // kept for the operator.
    auto s = file::SetAside(dir_);
    if (!s.ok()) TW_LOG(Error, "{}", s.status().message());
  } else if (fate == Fate::kDelete) {
    index_.reset();
    chunks_.reset();
    // Renamed first, atomically: a crash while the files go leaves a
    // "<id>.tmp" dir, which the next open removes, never half a block.
    std::string gone = dir_ + ".tmp";
    std::string victim = dir_;
    if (::rename(dir_.c_str(), gone.c_str()) == 0) victim = gone;
    else TW_LOG(Warn, "delete block {}: rename: {}", dir_, std::strerror(errno));
    Status s = file::RemoveAll(victim);
    if (!s.ok()) TW_LOG(Warn, "delete block {}: {}", dir_, s.message());
  }
}

// Series of a block in id (= label) order, decoded one at a time as the
// caller advances: neither a query nor a compaction holds the labels and
// chunk lists of a whole block at once.
class BlockSeriesSet : public storage::SeriesSet {
 public:
  using LabelViews = std::vector<std::pair<std::string_view, std::string_view>>;
  // parts.value < 0: a block of single chunks (not parts). With `views`,
  // Current()'s labels are left empty and Views() holds them instead
  // (AcrossSeriesSet compares every block's series and copies one).
  BlockSeriesSet(std::shared_ptr<Block> b, index::Postings ids, int64_t mint, int64_t maxt, Block::Parts parts,
                 bool views = false)
      : b_(b), ids_(std::move(ids)), cur_({}, {}, nullptr, mint, maxt, std::move(b)), mint_(mint), maxt_(maxt),
        parts_(parts), views_(views) {}

  bool Next() override {
    // One ChunkSeries refilled in place: its label strings and chunk list
    // keep their storage from series to series. The ids of one series block
    // are read together.
    while (err_.ok() && i_ < ids_.size()) {
      if (i_ == batch_end_) {
        const uint64_t block = ids_[i_] / index::kSeriesPerBlock;
        batch_end_ = i_ + 1;
        while (batch_end_ < ids_.size() && ids_[batch_end_] / index::kSeriesPerBlock == block) batch_end_++;
        Status s = b_->index_->ReadSeries(std::span<const uint64_t>(ids_).subspan(i_, batch_end_ - i_), &batch_);
        if (!s.ok()) {
          err_ = b_->ReadFailed(s);
          return false;
        }
        batch_start_ = i_;
      }
      if (views_) {
        batch_.GetViews(i_ - batch_start_, &label_views_, &metas_);
      } else {
        batch_.Get(i_ - batch_start_, cur_.mutable_labels(), &metas_);
      }
      i_++;
      std::vector<ChunkRefData>& chunks = *cur_.mutable_chunks();
      chunks.clear();
      for (const auto& m : metas_) {
        if (m.maxt < mint_ || m.mint > maxt_) continue;
        auto cv = b_->chunks_->Get(m.ref);
        if (!cv.ok()) {
          err_ = b_->ReadFailed(cv.status());
          return false;
        }
        const auto enc = static_cast<chunkenc::Encoding>(cv->encoding);
        const bool parts = parts_.value >= 0 || parts_.whole;
        if ((enc == chunkenc::Encoding::kParts) != parts) {
          err_ = b_->ReadFailed(Status::Corruption(
              std::string(parts ? "a chunk that is not a parts chunk in a block of parts"
                                : "a parts chunk in a block of single chunks") +
              " (series " + SeriesName() + ")"));
          return false;
        }
        if (parts_.value < 0) {
          chunks.push_back({m.mint, m.maxt, enc, cv->data});
          continue;
        }
        ChunkRefData& c = chunks.emplace_back(ChunkRefData{.mint = m.mint, .maxt = m.maxt});
        for (auto [part, part_enc, part_data] : {std::tuple{parts_.value, &c.enc, &c.data},
                                       std::tuple{parts_.count, &c.counts_enc, &c.counts}}) {
          if (part < 0) continue;
          auto p = chunkenc::UnwrapPart(cv->data, static_cast<size_t>(part));
          if (!p.ok()) {
            err_ = b_->ReadFailed(p.status().Annotate("series " + SeriesName()));
            return false;
          }
          *part_enc = p->enc;
          *part_data = p->data;
        }
      }
      if (chunks.empty()) continue;
      return true;
    }
    return false;
  }
  const storage::Series& At() const override { return cur_; }
  const ChunkSeries& Current() const { return cur_; }
  const LabelViews& Views() const { return label_views_; }
  Status Err() const override { return err_; }

 private:
  std::string SeriesName() const {
    if (!views_) return cur_.labels().ToString();
    model::Labels l;
    l.Assign(label_views_.size(), [&](size_t i) { return label_views_[i]; });
    return l.ToString();
  }

  std::shared_ptr<Block> b_;
  index::Postings ids_;
  ChunkSeries cur_;
  int64_t mint_, maxt_;
  Block::Parts parts_;
  bool views_;
  LabelViews label_views_;
  size_t i_ = 0;
  size_t batch_start_ = 0, batch_end_ = 0;  // ids_[batch_start_, batch_end_) are in batch_
  index::IndexReader::SeriesBatch batch_;
  std::vector<index::ChunkMeta> metas_;
  Status err_;
};

class BlockQuerier : public storage::Querier {
 public:
  BlockQuerier(std::shared_ptr<Block> b, int64_t mint, int64_t maxt, Block::Parts parts)
      : b_(std::move(b)), mint_(mint), maxt_(maxt), parts_(parts) {}

  std::unique_ptr<storage::SeriesSet> Select(bool, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    int64_t mint = std::max(mint_, hints.start), maxt = std::min(maxt_, hints.end);
    auto ids = b_->index_->PostingsForMatchers(matchers);
    if (!ids.ok()) return storage::ErrorSeriesSet(b_->ReadFailed(ids.status()));
    // Block series ids are in label order: the set is sorted already.
    return std::make_unique<BlockSeriesSet>(b_, std::move(*ids), mint, maxt, parts_);
  }

  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& matchers) override {
    if (matchers.empty()) return b_->index_->LabelValues(name);
    ASSIGN_OR_RETURN(index::Postings ids, b_->index_->PostingsForMatchers(matchers));
    std::vector<std::string> out;
    model::Labels labels;
    for (uint64_t id : ids) {
      RETURN_IF_ERROR(b_->index_->Series(id, &labels, nullptr));
      std::string_view v = labels.Get(name);
      if (!v.empty()) out.emplace_back(v);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  Result<std::vector<std::string>> LabelNames(const model::Matchers& matchers) override {
    if (matchers.empty()) return b_->index_->LabelNames();
    ASSIGN_OR_RETURN(index::Postings ids, b_->index_->PostingsForMatchers(matchers));
    std::vector<std::string> out;
    model::Labels labels;
    for (uint64_t id : ids) {
      RETURN_IF_ERROR(b_->index_->Series(id, &labels, nullptr));
      for (const auto& l : labels) out.push_back(l.name);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  std::shared_ptr<Block> b_;
  int64_t mint_, maxt_;
  Block::Parts parts_;
};

// Block::SelectAcross: the per-block sets advanced together by labels; the
// chunk lists of a series' blocks, in block (= time) order, make one list.
class AcrossSeriesSet : public storage::SeriesSet {
 public:
  AcrossSeriesSet(std::vector<std::unique_ptr<BlockSeriesSet>> sets, int64_t mint, int64_t maxt,
                  std::shared_ptr<const void> keepalive)
      : sets_(std::move(sets)), valid_(sets_.size()), cur_({}, {}, nullptr, mint, maxt, std::move(keepalive)) {}

  bool Next() override {
    if (!err_.ok()) return false;
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (!started_ || taken_[i]) valid_[i] = sets_[i]->Next();
      if (!valid_[i] && !sets_[i]->Err().ok()) {
        err_ = sets_[i]->Err();
        return false;
      }
    }
    started_ = true;
    // The least labels and the sets at them, one comparison a set (mostly
    // every set is at the same series). Compared as views of each block's
    // symbols, in model::Labels' order; only the least is copied.
    const BlockSeriesSet::LabelViews* min = nullptr;
    taken_.assign(sets_.size(), false);
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (!valid_[i]) continue;
      const BlockSeriesSet::LabelViews& l = sets_[i]->Views();
      if (min != nullptr) {
        const auto c = l <=> *min;
        if (c >= 0) {
          taken_[i] = c == 0;
          continue;
        }
        std::fill(taken_.begin(), taken_.begin() + static_cast<std::ptrdiff_t>(i), false);
      }
      min = &l;
      taken_[i] = true;
    }
    if (min == nullptr) return false;
    cur_.mutable_labels()->Assign(min->size(), [&](size_t i) { return (*min)[i]; });
    std::vector<ChunkRefData>& chunks = *cur_.mutable_chunks();
    chunks.clear();
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (!taken_[i]) continue;
      const ChunkSeries& s = sets_[i]->Current();
      chunks.insert(chunks.end(), s.chunks().begin(), s.chunks().end());
    }
    return true;
  }
  const storage::Series& At() const override { return cur_; }
  Status Err() const override { return err_; }

 private:
  std::vector<std::unique_ptr<BlockSeriesSet>> sets_;
  std::vector<bool> valid_, taken_;
  bool started_ = false;
  ChunkSeries cur_;
  Status err_;
};

std::unique_ptr<storage::SeriesSet> Block::SelectAcross(const std::vector<std::shared_ptr<Block>>& blocks,
                                                        int64_t mint, int64_t maxt, Parts parts,
                                                        const model::Matchers& matchers) {
  std::vector<std::unique_ptr<BlockSeriesSet>> sets;
  for (const auto& b : blocks) {
    auto ids = b->index_->PostingsForMatchers(matchers);
    if (!ids.ok()) return storage::ErrorSeriesSet(b->ReadFailed(ids.status()));
    sets.push_back(std::make_unique<BlockSeriesSet>(b, std::move(*ids), mint, maxt, parts, /*views=*/true));
  }
  auto keepalive = std::make_shared<const std::vector<std::shared_ptr<Block>>>(blocks);
  return std::make_unique<AcrossSeriesSet>(std::move(sets), mint, maxt, std::move(keepalive));
}

std::unique_ptr<storage::Querier> Block::NewQuerier(int64_t mint, int64_t maxt) {
  return NewQuerier(mint, maxt, Parts{.value = -1});
}

std::unique_ptr<storage::Querier> Block::NewQuerier(int64_t mint, int64_t maxt, Parts parts) {
  return std::make_unique<BlockQuerier>(shared_from_this(), mint, maxt, parts);
}

Result<std::unique_ptr<BlockWriter>> BlockWriter::Create(const std::string& parent, index::BlockMeta meta,
                                                         size_t chunk_samples) {
  std::unique_ptr<BlockWriter> w(new BlockWriter());
  w->parent_ = parent;
  w->chunk_samples_ = std::max<size_t>(chunk_samples, 1);
  w->meta_ = std::move(meta);
  w->meta_.num_series = w->meta_.num_samples = w->meta_.num_chunks = 0;
  w->tmp_dir_ = parent + "/" + w->meta_.id + ".tmp";
  RETURN_IF_ERROR(file::RemoveAll(w->tmp_dir_));
  RETURN_IF_ERROR(file::MkdirAll(w->tmp_dir_));
  ASSIGN_OR_RETURN(w->chunks_, index::ChunkWriter::Create(w->tmp_dir_ + "/" + std::string(index::kBlockChunksDir)));
  ASSIGN_OR_RETURN(w->index_, index::IndexWriter::Create(w->tmp_dir_ + "/" + std::string(index::kBlockIndexFile)));
  return w;
}

BlockWriter::~BlockWriter() {
  if (!finished_) {
    chunks_.reset();
    index_.reset();
    (void)file::RemoveAll(tmp_dir_);
  }
}

Result<uint64_t> BlockWriter::WriteChunk(chunkenc::Encoding enc, std::string_view bytes, const int64_t* ts,
                                                const int64_t* sts, size_t n) {
  runs_.clear();
  if (sts != nullptr) chunkenc::RunsOf(ts, sts, n, &runs_);
  if (runs_.empty()) return chunks_->Write(static_cast<uint8_t>(enc), bytes);
  wrapped_.clear();
  chunkenc::WrapST(enc, bytes, runs_, &wrapped_);
  return chunks_->Write(static_cast<uint8_t>(chunkenc::Encoding::kStartTimes), wrapped_);
}

Status BlockWriter::AddSeries(const model::Labels& labels, const SeriesSamples& s) {
  if (s.empty()) return Status::OK();
  // Refused labels write nothing, so the caller may skip the series and go on.
  RETURN_IF_ERROR(index_->CheckSeries(labels));
  metas_.clear();
  size_t i = 0, k = 0;  // next float, next histogram
  const size_t nf = s.ts.size(), nh = s.hts.size();
  const int64_t* sts = s.sts.empty() ? nullptr : s.sts.data();
  const int64_t* hsts = s.hsts.empty() ? nullptr : s.hsts.data();
  while (i < nf || k < nh) {
    if (k == nh || (i < nf && s.ts[i] < s.hts[k])) {
      // A run of floats, up to the next histogram.
      size_t end = i;
      while (end < nf && end - i < chunk_samples_ && (k == nh || s.ts[end] < s.hts[k])) end++;
      buf_.clear();
      chunkenc::EncodeDense(&s.ts[i], &s.vs[i], end - i, &buf_);
      ASSIGN_OR_RETURN(index::ChunkRef ref, WriteChunk(chunkenc::Encoding::kDense, buf_, &s.ts[i],
                                                       sts != nullptr ? sts + i : nullptr, end - i));
      metas_.push_back({s.ts[i], s.ts[end - 1], ref});
      i = end;
    } else {
      // A run of histograms of one layout, up to the next float.
      chunkenc::FloatHistogramChunk c;
      const size_t first = k;
      while (k < nh && (i == nf || s.hts[k] < s.ts[i]) && c.CanAppend(s.hs[k]) &&
             c.NumSamples() < chunkenc::kHistogramChunkSamples && c.Bytes().size() < chunkenc::kHistogramChunkBytes) {
        c.Append(s.hts[k], s.hs[k]);
        k++;
      }
      ASSIGN_OR_RETURN(index::ChunkRef ref, WriteChunk(chunkenc::Encoding::kFloatHistogram, c.Bytes(), &s.hts[first],
                                                       hsts != nullptr ? hsts + first : nullptr, k - first));
      metas_.push_back({s.hts[first], s.hts[k - 1], ref});
    }
  }
  series_samples_ = s.size();
  return FinishSeries(labels);
}

Status BlockWriter::FinishSeries(const model::Labels& labels) {
  RETURN_IF_ERROR(index_->AddSeries(next_id_, labels, metas_));
  next_id_++;
  meta_.num_series++;
  meta_.num_samples += series_samples_;
  meta_.num_chunks += metas_.size();
  return Status::OK();
}

Status BlockWriter::AddSeriesParts(const model::Labels& labels, std::span<const int64_t> ts,
                                   std::span<const double* const> parts) {
  if (ts.empty()) return Status::OK();
  RETURN_IF_ERROR(index_->CheckSeries(labels));
  metas_.clear();
  series_samples_ = 0;
  RETURN_IF_ERROR(AppendParts(ts, parts));
  return FinishSeries(labels);
}

Status BlockWriter::BeginSeries(const model::Labels& labels) {
  RETURN_IF_ERROR(index_->CheckSeries(labels));
  series_ = labels;
  metas_.clear();
  series_samples_ = 0;
  return Status::OK();
}

Status BlockWriter::AppendPartsChunk(int64_t mint, int64_t maxt, std::string_view data, uint64_t n) {
  ASSIGN_OR_RETURN(index::ChunkRef ref, chunks_->Write(static_cast<uint8_t>(chunkenc::Encoding::kParts), data));
  metas_.push_back({mint, maxt, ref});
  series_samples_ += n;
  return Status::OK();
}

Status BlockWriter::AppendParts(std::span<const int64_t> ts, std::span<const double* const> parts,
                                size_t dense_min) {
  part_bufs_.resize(parts.size());
  std::vector<chunkenc::Unwrapped> enc(parts.size());
  for (size_t i = 0; i < ts.size(); i += chunk_samples_) {
    const size_t n = std::min(chunk_samples_, ts.size() - i);
    // Dense, but for a few points (kDenseMinSamples).
    const bool dense = n >= dense_min;
    for (size_t p = 0; p < parts.size(); ++p) {
      part_bufs_[p].clear();
      if (dense) {
        chunkenc::EncodeDense(&ts[i], parts[p] + i, n, &part_bufs_[p]);
      } else {
        chunkenc::EncodeXor(&ts[i], parts[p] + i, n, &part_bufs_[p]);
      }
      enc[p] = {dense ? chunkenc::Encoding::kDense : chunkenc::Encoding::kXor, part_bufs_[p]};
    }
    buf_.clear();
    chunkenc::WrapParts(enc, &buf_);
    ASSIGN_OR_RETURN(index::ChunkRef ref, chunks_->Write(static_cast<uint8_t>(chunkenc::Encoding::kParts), buf_));
    metas_.push_back({ts[i], ts[i + n - 1], ref});
  }
  series_samples_ += ts.size();
  return Status::OK();
}

Status BlockWriter::EndSeries() {
  if (metas_.empty()) return Status::OK();
  return FinishSeries(series_);
}

Result<index::BlockMeta> BlockWriter::Finish() {
  RETURN_IF_ERROR(chunks_->Finish());
  RETURN_IF_ERROR(index_->Finish());
  RETURN_IF_ERROR(index::WriteBlockMeta(tmp_dir_, meta_));
  RETURN_IF_ERROR(file::SyncDir(tmp_dir_));
  std::string final_dir = parent_ + "/" + meta_.id;
  if (::rename(tmp_dir_.c_str(), final_dir.c_str()) != 0) return Status::FromErrno("rename " + tmp_dir_, errno);
  RETURN_IF_ERROR(file::SyncDir(parent_));
  finished_ = true;
  return meta_;
}

}  // namespace trainwatch::tsdb
