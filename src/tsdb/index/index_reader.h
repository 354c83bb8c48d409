#pragma once
// Reads a block index file through a read-only mmap. Every decode is bounds
// checked: a damaged file yields Corruption("index <path>: ... at offset N"),
// never a crash. Layout: docs/format/index.md.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "model/matcher.h"
#include "tsdb/index/index_format.h"
#include "tsdb/index/postings.h"

namespace trainwatch::file {
class MmapFile;
}

namespace trainwatch::index {

// Thread-safe: all methods are const and may be called concurrently.
// Series ids are dense 0..NumSeries()-1 in label order, so every postings
// list is also sorted by series labels.
class IndexReader final : public PostingsProvider {
 public:
  struct Options {
    // Verify every section's CRC32C at Open() (one pass over the file).
    // Series blocks are always checked for structure; with this off a
    // damaged file may still return wrong data, but never crash.
    bool verify_checksums = true;
    // Series blocks the decoded-block cache holds at most (a power of two
    // from 64 up; 0: 4096).
    size_t max_cached_blocks = 0;
  };
  static Result<std::unique_ptr<IndexReader>> Open(const std::string& path, Options opts);
  static Result<std::unique_ptr<IndexReader>> Open(const std::string& path) {
    return Open(path, Options());
  }
  ~IndexReader() override;

  uint64_t NumSeries() const { return num_series_; }
  uint64_t FileSize() const;
  const std::string& path() const { return path_; }

  // Sorted label names present in the index.
  std::vector<std::string> LabelNames() const;

  // Labels and chunk metas of series `id` (either output may be null). Both
  // are overwritten in place, so a caller reading series after series reuses
  // their storage.
  // NotFound if id >= NumSeries(); Corruption on damaged data.
  Status Series(SeriesRef id, model::Labels* labels, std::vector<ChunkMeta>* chunks) const;

  // Labels and chunk metas of several series of one series block
  // (kSeriesPerBlock ids from a multiple of it), decoded in one pass: `ids`
  // sorted and unique, all in one series block (InvalidArgument otherwise).
  // A block in the cache serves them; one the batch takes a quarter of, or
  // any block of an index small enough for every block to have a cache slot
  // of its own, is decoded whole and cached; of any other only these series
  // are kept: a selector's few series in each block of a large index would
  // otherwise decode, and evict from the cache, whole blocks for a few
  // series each.
  struct DecodedBlock;
  class SeriesBatch {
   public:
    SeriesBatch();
    ~SeriesBatch();
    size_t size() const { return pos_.size(); }
    // Of the i-th id asked for. Either output may be null.
    void Get(size_t i, model::Labels* labels, std::vector<ChunkMeta>* chunks) const;
    // As Get, the labels as views of the index's symbols (valid while the
    // reader is), sorted by name: no label string is copied.
    void GetViews(size_t i, std::vector<std::pair<std::string_view, std::string_view>>* labels,
                  std::vector<ChunkMeta>* chunks) const;

   private:
    friend class IndexReader;
    const IndexReader* r_ = nullptr;
    std::shared_ptr<const DecodedBlock> blk_;
    std::shared_ptr<DecodedBlock> own_;  // storage for partial blocks, reused
    std::vector<uint32_t> pos_;          // per id: its series in *blk_
  };
  Status ReadSeries(std::span<const SeriesRef> ids, SeriesBatch* out) const;

  // PostingsProvider.
  Result<std::vector<std::string>> LabelValues(std::string_view name) const override;
  Result<index::Postings> Postings(std::string_view name, std::string_view value) const override;
  Result<index::Postings> AllPostings() const override;  // 0..NumSeries()-1
  // From the list's header, without decoding it.
  Result<uint64_t> PostingsCount(std::string_view name, std::string_view value) const override;
  // Decodes only what `with` needs of a blocked list (the blocks its ids fall
  // in) or of a bitmap (one bit per id of `with`).
  Result<index::Postings> PostingsIntersecting(std::string_view name, std::string_view value,
                                               index::PostingsSpan with) const override;
  Result<index::Postings> PostingsForLabelMatching(
      std::string_view name, const std::function<bool(std::string_view)>& match) const override;

  // index::PostingsForMatchers(*this, ms).
  Result<index::Postings> PostingsForMatchers(const model::Matchers& ms) const;

 private:
  struct ValueEntry {
    uint32_t value_sym;
    uint64_t offset;  // of the postings list, absolute in the file
  };
  struct BlockCache;
  IndexReader() = default;
  Status Load(const Options& opts);
  Status Corrupt(std::string_view what, uint64_t offset) const;
  const std::vector<ValueEntry>* ValuesOf(std::string_view name) const;
  bool FindSymbol(std::string_view s, uint32_t* id) const;
  struct PostingsList;
  Status ReadPostingsList(uint64_t offset, PostingsList* l) const;
  // Appends v and the ids of its count - 1 varint deltas read from the
  // cursor *c (the file's Cursor; a template only to keep it out of here).
  template <typename C>
  Status DecodeDeltas(C* c, uint64_t v, uint64_t count, index::Postings* out) const;
  // Appends the ids of block b of a blocked list.
  Status DecodePostingsBlock(const PostingsList& l, size_t b, index::Postings* out) const;
  Result<index::Postings> DecodePostings(uint64_t offset) const;
  Result<index::Postings> DecodePostings(const PostingsList& l) const;
  const ValueEntry* FindList(std::string_view name, std::string_view value) const;
  // Reads a blob (u8 compression, varint raw_len, payload) spanning [off, end).
  Result<std::string_view> ReadBlob(uint64_t off, uint64_t end, std::string* scratch) const;
  std::shared_ptr<const DecodedBlock> CachedBlock(uint64_t block) const;  // null when not cached
  Result<std::shared_ptr<const DecodedBlock>> GetBlock(uint64_t block) const;
  Result<std::shared_ptr<const DecodedBlock>> DecodeBlock(uint64_t block) const;
  // Decodes series block b into *blk, keeping the series s (0-based in the
  // block) for which keep(s).
  template <typename Keep>
  Status WalkBlock(uint64_t b, const Keep& keep, DecodedBlock* blk) const;
  void Fill(const DecodedBlock& blk, size_t s, model::Labels* labels, std::vector<ChunkMeta>* chunks) const;

  std::string path_;
  std::unique_ptr<file::MmapFile> file_;
  std::string_view data_;
  uint64_t num_series_ = 0;
  std::vector<std::string> symbols_;                 // sorted
  std::vector<std::pair<uint32_t, std::vector<ValueEntry>>> names_;  // by name sym, sorted
  uint64_t series_off_ = 0, series_len_ = 0;         // series section
  uint64_t postings_off_ = 0, postings_len_ = 0;     // postings section
  std::vector<uint64_t> block_offsets_;              // series block starts (absolute), + end
  std::unique_ptr<BlockCache> cache_;
};

}  // namespace trainwatch::index
