#pragma once
// Writes a block index file once. Collects symbols itself: callers only add
// series. Layout: docs/format/index.md.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "tsdb/index/index_format.h"
#include "tsdb/index/postings.h"

namespace trainwatch::index {

// Not thread-safe. Holds every series' labels (as symbol numbers) and chunk
// metas in memory until Finish(), about 16 B per label pair + 24 B per chunk.
class IndexWriter {
 public:
  struct Options {
    // zstd level for the symbol table and series blocks; 0 disables zstd.
    int zstd_level = 3;
  };
  // The file is written to `path`.tmp and renamed over `path` by Finish().
  static Result<std::unique_ptr<IndexWriter>> Create(const std::string& path, Options opts);
  static Result<std::unique_ptr<IndexWriter>> Create(const std::string& path) {
    return Create(path, Options());
  }
  ~IndexWriter();
  IndexWriter(const IndexWriter&) = delete;
  IndexWriter& operator=(const IndexWriter&) = delete;

  // Adds the next series. REQUIRES (else InvalidArgument): `id` equals the
  // number of series added before (ids are dense 0, 1, 2, ...), `labels` is
  // non-empty and sorts strictly after the previous series' labels. So any
  // postings list of the index is also sorted by series labels.
  // `chunks` may be empty; any order is stored as given.
  Status AddSeries(SeriesRef id, const model::Labels& labels, std::span<const ChunkMeta> chunks);
  // The checks of AddSeries on the labels alone (model::CheckSeriesLabels, and the
  // order after the previous series): InvalidArgument when AddSeries would
  // refuse them, with nothing written.
  Status CheckSeries(const model::Labels& labels) const;

  // Encodes all sections, writes and fsyncs the file, renames it into place
  // and fsyncs the directory. The writer is unusable afterwards.
  Status Finish();

  uint64_t num_series() const { return series_.size(); }
  // Size of the written file; valid after Finish().
  uint64_t file_size() const { return file_size_; }

 private:
  IndexWriter(std::string path, Options opts) : path_(std::move(path)), opts_(opts) {}
  uint32_t Intern(std::string_view s);

  struct SeriesEntry {
    uint32_t first_pair;  // into pairs_
    uint32_t num_pairs;
    uint64_t first_chunk; // into chunks_
    uint32_t num_chunks;
  };
  std::string path_;
  Options opts_;
  // Temporary symbol numbers (insertion order) until Finish() sorts them.
  struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, StrHash, std::equal_to<>> sym_ids_;
  std::vector<std::string_view> syms_;  // views into sym_ids_ keys
  std::vector<std::pair<uint32_t, uint32_t>> pairs_;
  std::vector<ChunkMeta> chunks_;
  std::vector<SeriesEntry> series_;
  model::Labels last_;
  uint64_t file_size_ = 0;
  bool finished_ = false;
};

}  // namespace trainwatch::index
