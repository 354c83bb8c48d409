#include "tsdb/index/index_writer.h"

#include <zstd.h>

#include <algorithm>
#include <numeric>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/file.h"

namespace trainwatch::index {

namespace {

// Payload ratio above which a blob is stored raw so that readers can bound
// the allocation of a decompressed blob by its compressed size.
constexpr uint64_t kMaxZstdRatio = 1024;

// Appends: u8 compression, varint raw_len, payload.
void PutBlob(std::string* dst, std::string_view raw, int level) {
  if (level > 0 && raw.size() >= 64) {
    // One compression context per thread: ZSTD_compress would allocate and
    // free a context (about 1 MB at the default level) for every blob.
    struct CCtx {
      ZSTD_CCtx* p = ZSTD_createCCtx();
      ~CCtx() { ZSTD_freeCCtx(p); }
    };
    thread_local CCtx cctx;
    thread_local std::string z;
    z.resize(ZSTD_compressBound(raw.size()));
    size_t n = cctx.p != nullptr ? ZSTD_compressCCtx(cctx.p, z.data(), z.size(), raw.data(), raw.size(), level)
                                 : ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), level);
    if (!ZSTD_isError(n) && n + 8 < raw.size() && raw.size() <= n * kMaxZstdRatio) {
      dst->push_back(1);
      PutVarint64(dst, raw.size());
      dst->append(z.data(), n);
      return;
    }
  }
  dst->push_back(0);
  PutVarint64(dst, raw.size());
  dst->append(raw);
}

inline uint64_t Delta(int64_t a, int64_t b) {
  return ZigZagEncode(static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)));
}
inline uint64_t DeltaU(uint64_t a, uint64_t b) { return ZigZagEncode(static_cast<int64_t>(a - b)); }

void EncodePostingsList(std::string* dst, const uint32_t* ids, size_t n) {
  const uint64_t first = ids[0], last = ids[n - 1];
  const uint64_t bitmap_bytes = (last - first) / 8 + 1;
  uint64_t varint_bytes = static_cast<uint64_t>(VarintLength(first));
  for (size_t i = 1; i < n && varint_bytes <= bitmap_bytes; ++i) {
    varint_bytes += static_cast<uint64_t>(VarintLength(ids[i] - ids[i - 1]));
  }
  if (n > 2 && bitmap_bytes < varint_bytes) {
    dst->push_back(1);
    PutVarint64(dst, n);
    PutVarint64(dst, first);
    PutVarint64(dst, bitmap_bytes);
    size_t base = dst->size();
    dst->resize(base + bitmap_bytes, '\0');
    char* bm = dst->data() + base;
    for (size_t i = 0; i < n; ++i) {
      uint64_t b = ids[i] - first;
      bm[b >> 3] = static_cast<char>(static_cast<uint8_t>(bm[b >> 3]) | (1u << (b & 7)));
    }
    return;
  }
  if (n < kPostingsBlockedMin) {
    dst->push_back(0);
    PutVarint64(dst, n);
    PutVarint64(dst, first);
    for (size_t i = 1; i < n; ++i) PutVarint64(dst, ids[i] - ids[i - 1]);
    return;
  }
  // Blocked: the deltas in blocks of kPostingsBlock ids behind a table of
  // each block's first id and byte length, so that intersecting with a
  // short list decodes only the blocks it meets.
  const size_t nblocks = (n + kPostingsBlock - 1) / kPostingsBlock;
  std::string payload;
  std::vector<uint64_t> lens(nblocks);
  for (size_t b = 0; b < nblocks; ++b) {
    const size_t begin = b * kPostingsBlock, end = std::min(n, begin + kPostingsBlock);
    const size_t before = payload.size();
    for (size_t i = begin + 1; i < end; ++i) PutVarint64(&payload, ids[i] - ids[i - 1]);
    lens[b] = payload.size() - before;
  }
  dst->push_back(2);
  PutVarint64(dst, n);
  PutVarint64(dst, first);
  PutVarint64(dst, nblocks);
  for (size_t b = 0; b < nblocks; ++b) {
    PutVarint64(dst, b == 0 ? 0 : ids[b * kPostingsBlock] - ids[(b - 1) * kPostingsBlock]);
    PutVarint64(dst, lens[b]);
  }
  dst->append(payload);
}

// Appends the section body's CRC32C and records (offset, length) in toc.
void EndSection(std::string* out, size_t start, std::string* toc) {
  const size_t len = out->size() - start;
  PutFixed32(out, crc32c::Value(out->data() + start, len));
  PutFixed64(toc, start);
  PutFixed64(toc, len);
}

}  // namespace

IndexWriter::~IndexWriter() = default;

Result<std::unique_ptr<IndexWriter>> IndexWriter::Create(const std::string& path, Options opts) {
  if (path.empty()) return Status::InvalidArgument("index writer: empty path");
  if (opts.zstd_level < 0 || opts.zstd_level > ZSTD_maxCLevel()) {
    return Status::InvalidArgument("index writer: zstd level out of range");
  }
  return std::unique_ptr<IndexWriter>(new IndexWriter(path, opts));
}

uint32_t IndexWriter::Intern(std::string_view s) {
  auto it = sym_ids_.find(s);
  if (it != sym_ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(syms_.size());
  auto [nit, _] = sym_ids_.emplace(std::string(s), id);
  syms_.push_back(nit->first);
  return id;
}

Status IndexWriter::CheckSeries(const model::Labels& labels) const {
  Status s = model::CheckSeriesLabels(labels);
  if (!s.ok()) return s.Annotate("index writer");
  if (!series_.empty() && !(last_ < labels)) {
    return Status::InvalidArgument("index writer: series " + labels.ToString() + " not after " + last_.ToString());
  }
  return Status::OK();
}

Status IndexWriter::AddSeries(SeriesRef id, const model::Labels& labels,
                              std::span<const ChunkMeta> chunks) {
  if (finished_) return Status::InvalidArgument("index writer: add after finish");
  if (id != series_.size()) {
    return Status::InvalidArgument("index writer: series id " + std::to_string(id) + " out of order, want " +
                                   std::to_string(series_.size()));
  }
  RETURN_IF_ERROR(CheckSeries(labels));
  if (series_.size() >= (1ull << 32) - 1) return Status::InvalidArgument("index writer: too many series");
  SeriesEntry e;
  e.first_pair = static_cast<uint32_t>(pairs_.size());
  e.num_pairs = static_cast<uint32_t>(labels.size());
  e.first_chunk = chunks_.size();
  e.num_chunks = static_cast<uint32_t>(chunks.size());
  for (const model::Label& l : labels) pairs_.emplace_back(Intern(l.name), Intern(l.value));
  chunks_.insert(chunks_.end(), chunks.begin(), chunks.end());
  series_.push_back(e);
  last_ = labels;
  return Status::OK();
}

Status IndexWriter::Finish() {
  if (finished_) return Status::InvalidArgument("index writer: finish called twice");
  finished_ = true;
  const int level = opts_.zstd_level;

  // Symbols, sorted; remap temporary numbers to sorted positions.
  std::vector<uint32_t> order(syms_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) { return syms_[a] < syms_[b]; });
  std::vector<uint32_t> remap(syms_.size());
  for (uint32_t i = 0; i < order.size(); ++i) remap[order[i]] = i;
  for (auto& [n, v] : pairs_) {
    n = remap[n];
    v = remap[v];
  }

  std::string out, toc;
  out.resize(kIndexHeaderSize, '\0');
  EncodeFixed32(out.data(), kIndexMagic);
  out[4] = static_cast<char>(kIndexFormatV1);

  // 1. Symbol table: front-coded, one blob.
  {
    std::string raw;
    PutVarint64(&raw, order.size());
    std::string_view prev;
    for (uint32_t t : order) {
      std::string_view s = syms_[t];
      size_t shared = 0;
      while (shared < prev.size() && shared < s.size() && prev[shared] == s[shared]) ++shared;
      PutVarint64(&raw, shared);
      PutLengthPrefixed(&raw, s.substr(shared));
      prev = s;
    }
    const size_t start = out.size();
    PutBlob(&out, raw, level);
    EndSection(&out, start, &toc);
  }

  // 2. Series: blocks of kSeriesPerBlock, then the block offset table.
  {
    const size_t start = out.size();
    std::vector<uint64_t> block_offs;
    std::string raw;
    for (size_t b = 0; b * kSeriesPerBlock < series_.size(); ++b) {
      raw.clear();
      const size_t lo = b * kSeriesPerBlock;
      const size_t hi = std::min<size_t>(series_.size(), lo + kSeriesPerBlock);
      int64_t prev_mint = 0;
      uint64_t prev_ref = 0;
      const std::pair<uint32_t, uint32_t>* prev_pairs = nullptr;
      uint32_t prev_n = 0;
      for (size_t s = lo; s < hi; ++s) {
        const SeriesEntry& e = series_[s];
        const auto* ps = pairs_.data() + e.first_pair;
        uint32_t shared = 0;
        while (shared < prev_n && shared < e.num_pairs && prev_pairs[shared] == ps[shared]) ++shared;
        PutVarint32(&raw, shared);
        PutVarint32(&raw, e.num_pairs - shared);
        for (uint32_t i = shared; i < e.num_pairs; ++i) {
          PutVarint32(&raw, ps[i].first);
          PutVarint32(&raw, ps[i].second);
        }
        prev_pairs = ps;
        prev_n = e.num_pairs;
        PutVarint32(&raw, e.num_chunks);
        const ChunkMeta* cs = chunks_.data() + e.first_chunk;
        for (uint32_t i = 0; i < e.num_chunks; ++i) {
          if (i == 0) {
            PutVarint64(&raw, Delta(cs[0].mint, prev_mint));
            prev_mint = cs[0].mint;
          } else {
            PutVarint64(&raw, Delta(cs[i].mint, cs[i - 1].maxt));
          }
          PutVarint64(&raw, Delta(cs[i].maxt, cs[i].mint));
          PutVarint64(&raw, DeltaU(cs[i].ref, prev_ref));
          prev_ref = cs[i].ref;
        }
      }
      block_offs.push_back(out.size() - start);
      PutBlob(&out, raw, level);
    }
    block_offs.push_back(out.size() - start);
    for (uint64_t o : block_offs) PutFixed64(&out, o);
    PutFixed64(&out, block_offs.size() - 1);
    EndSection(&out, start, &toc);
  }

  // 3. Postings lists, grouped by (name, value) in symbol order.
  std::vector<std::pair<uint64_t, uint32_t>> entries;  // ((name << 32) | value, series id)
  entries.reserve(pairs_.size());
  for (uint32_t s = 0; s < series_.size(); ++s) {
    const SeriesEntry& e = series_[s];
    for (uint32_t i = 0; i < e.num_pairs; ++i) {
      const auto& p = pairs_[e.first_pair + i];
      entries.emplace_back((static_cast<uint64_t>(p.first) << 32) | p.second, s);
    }
  }
  std::sort(entries.begin(), entries.end());
  struct ListPos {
    uint64_t key;
    uint64_t off;
  };
  std::vector<ListPos> lists;
  {
    const size_t start = out.size();
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < entries.size();) {
      size_t j = i;
      ids.clear();
      while (j < entries.size() && entries[j].first == entries[i].first) ids.push_back(entries[j++].second);
      lists.push_back({entries[i].first, out.size() - start});
      EncodePostingsList(&out, ids.data(), ids.size());
      i = j;
    }
    EndSection(&out, start, &toc);
  }
  std::vector<std::pair<uint64_t, uint32_t>>().swap(entries);

  // 4. Postings table: per name, its values and list offsets (delta coded).
  {
    std::string raw;
    size_t num_names = 0;
    for (size_t i = 0; i < lists.size();) {
      size_t j = i;
      while (j < lists.size() && (lists[j].key >> 32) == (lists[i].key >> 32)) ++j;
      ++num_names;
      i = j;
    }
    PutVarint64(&raw, num_names);
    uint64_t prev_off = 0;
    for (size_t i = 0; i < lists.size();) {
      size_t j = i;
      while (j < lists.size() && (lists[j].key >> 32) == (lists[i].key >> 32)) ++j;
      PutVarint32(&raw, static_cast<uint32_t>(lists[i].key >> 32));
      PutVarint64(&raw, j - i);
      uint32_t prev_v = 0;
      for (size_t k = i; k < j; ++k) {
        const uint32_t v = static_cast<uint32_t>(lists[k].key);
        PutVarint32(&raw, v - prev_v);
        PutVarint64(&raw, lists[k].off - prev_off);
        prev_v = v;
        prev_off = lists[k].off;
      }
      i = j;
    }
    const size_t start = out.size();
    out.append(raw);
    EndSection(&out, start, &toc);
  }

  // TOC: 4 × (offset, length), num_series, CRC32C.
  PutFixed64(&toc, series_.size());
  PutFixed32(&toc, crc32c::Value(toc));
  out.append(toc);

  RETURN_IF_ERROR(file::WriteFileAtomic(path_, out));
  file_size_ = out.size();
  // Release memory.
  std::vector<std::pair<uint32_t, uint32_t>>().swap(pairs_);
  std::vector<ChunkMeta>().swap(chunks_);
  return Status::OK();
}

}  // namespace trainwatch::index
