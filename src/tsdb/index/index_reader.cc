#include "tsdb/index/index_reader.h"

#include <zstd.h>

#include <algorithm>
#include <array>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/file.h"
#include "base/mutex.h"

namespace trainwatch::index {

namespace {

constexpr size_t kNumSections = 4;
constexpr size_t kTocSize = kNumSections * 16 + 8 + 4;
constexpr uint64_t kMaxZstdRatio = 1024;  // must match the writer
// Decoded series blocks are cached direct-mapped, one slot per block up to
// this many (4096 x 64 series; ~8 KB per decoded block of typical series):
// a selector's series are spread over the whole index in label order
// (e.g. {__name__="x"} sorts after labels like "Hostname"), so a smaller
// cache re-decodes every block on every query.
constexpr size_t kMaxCacheSlots = 4096;
constexpr size_t kMinCacheSlots = 64;

// Bounds-checked cursor over [p, limit); `base` is the file offset of `start`.
struct Cursor {
  const char* start;
  const char* p;
  const char* limit;
  uint64_t base;
  uint64_t Offset() const { return base + static_cast<uint64_t>(p - start); }
  bool Varint64(uint64_t* v) {
    const char* q = GetVarint64Ptr(p, limit, v);
    if (q == nullptr) return false;
    p = q;
    return true;
  }
  bool Varint32(uint32_t* v) {
    uint64_t x;
    if (!Varint64(&x) || x > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool Byte(uint8_t* v) {
    if (p >= limit) return false;
    *v = static_cast<uint8_t>(*p++);
    return true;
  }
  bool Bytes(uint64_t n, std::string_view* out) {
    if (static_cast<uint64_t>(limit - p) < n) return false;
    *out = std::string_view(p, n);
    p += n;
    return true;
  }
  size_t Left() const { return static_cast<size_t>(limit - p); }
};

inline int64_t Undelta(int64_t base, uint64_t zz) {
  return static_cast<int64_t>(static_cast<uint64_t>(base) + static_cast<uint64_t>(ZigZagDecode(zz)));
}

}  // namespace

// The series of a series block that were kept (all, for the cache), in order.
struct IndexReader::DecodedBlock {
  std::vector<uint32_t> syms;          // name, value, name, value, ...
  std::vector<uint32_t> pair_start;    // per kept series + 1, index into syms / 2
  std::vector<ChunkMeta> chunks;
  std::vector<uint32_t> chunk_start;   // per kept series + 1
  void Clear() {
    syms.clear();
    pair_start.clear();
    chunks.clear();
    chunk_start.clear();
  }
};

struct IndexReader::BlockCache {
  explicit BlockCache(size_t n) : size(n), key(n), val(n) {}
  const size_t size;  // of key and val, fixed
  base::Mutex mu;
  std::vector<uint64_t> key TW_GUARDED_BY(mu);
  std::vector<std::shared_ptr<const DecodedBlock>> val TW_GUARDED_BY(mu);
};

IndexReader::~IndexReader() = default;

uint64_t IndexReader::FileSize() const { return data_.size(); }

Status IndexReader::Corrupt(std::string_view what, uint64_t offset) const {
  return Status::Corruption("index " + path_ + ": " + std::string(what) + " at offset " + std::to_string(offset));
}

Result<std::unique_ptr<IndexReader>> IndexReader::Open(const std::string& path, Options opts) {
  std::unique_ptr<IndexReader> r(new IndexReader());
  r->path_ = path;
  ASSIGN_OR_RETURN(r->file_, file::MmapFile::Open(path));
  r->data_ = r->file_->data();
  RETURN_IF_ERROR(r->Load(opts));
  const size_t max_slots = opts.max_cached_blocks > 0 ? opts.max_cached_blocks : kMaxCacheSlots;
  size_t slots = kMinCacheSlots;
  while (slots < r->block_offsets_.size() - 1 && slots < max_slots) slots *= 2;
  r->cache_ = std::make_unique<BlockCache>(slots);
  return r;
}

Result<std::string_view> IndexReader::ReadBlob(uint64_t off, uint64_t end, std::string* scratch) const {
  Cursor c{data_.data() + off, data_.data() + off, data_.data() + end, off};
  uint8_t comp;
  uint64_t raw_len;
  if (!c.Byte(&comp) || !c.Varint64(&raw_len)) return Corrupt("truncated blob header", off);
  std::string_view payload(c.p, c.Left());
  if (comp == 0) {
    if (raw_len != payload.size()) return Corrupt("blob length mismatch", off);
    return payload;
  }
  if (comp != 1) return Corrupt("unknown blob compression " + std::to_string(comp), off);
  if (raw_len > payload.size() * kMaxZstdRatio) return Corrupt("implausible blob length", off);
  scratch->resize(raw_len);
  // One decompression context per thread: ZSTD_decompress would allocate
  // (and free) ~100 KB of context on every call.
  struct DCtx {
    ZSTD_DCtx* p = ZSTD_createDCtx();
    ~DCtx() { ZSTD_freeDCtx(p); }
  };
  thread_local DCtx dctx;
  if (dctx.p == nullptr) return Status::ResourceExhausted("zstd: cannot create a decompression context");
  size_t n = ZSTD_decompressDCtx(dctx.p, scratch->data(), scratch->size(), payload.data(), payload.size());
  if (ZSTD_isError(n) || n != raw_len) return Corrupt("bad zstd blob", off);
  return std::string_view(*scratch);
}

Status IndexReader::Load(const Options& opts) {
  const uint64_t size = data_.size();
  if (size < kIndexHeaderSize + kTocSize) return Corrupt("file too short (" + std::to_string(size) + " bytes)", 0);
  if (DecodeFixed32(data_.data()) != kIndexMagic) return Corrupt("bad magic", 0);
  if (data_[5] != 0 || data_[6] != 0 || data_[7] != 0) return Corrupt("nonzero header padding", 5);
  if (static_cast<uint8_t>(data_[4]) != kIndexFormatV1) {
    return Corrupt("unsupported version " + std::to_string(static_cast<uint8_t>(data_[4])), 4);
  }
  const uint64_t toc_off = size - kTocSize;
  const char* toc = data_.data() + toc_off;
  if (crc32c::Value(toc, kTocSize - 4) != DecodeFixed32(toc + kTocSize - 4)) return Corrupt("toc checksum mismatch", toc_off);
  std::array<uint64_t, kNumSections> off{}, len{};
  uint64_t prev_end = kIndexHeaderSize;
  for (size_t i = 0; i < kNumSections; ++i) {
    off[i] = DecodeFixed64(toc + 16 * i);
    len[i] = DecodeFixed64(toc + 16 * i + 8);
    if (off[i] != prev_end || len[i] > toc_off || off[i] + len[i] + 4 > toc_off) {
      return Corrupt("bad section " + std::to_string(i) + " bounds in toc", toc_off + 16 * i);
    }
    prev_end = off[i] + len[i] + 4;
    if (opts.verify_checksums &&
        crc32c::Value(data_.data() + off[i], len[i]) != DecodeFixed32(data_.data() + off[i] + len[i])) {
      return Corrupt("section " + std::to_string(i) + " checksum mismatch", off[i]);
    }
  }
  if (prev_end != toc_off) return Corrupt("gap before toc", prev_end);
  num_series_ = DecodeFixed64(toc + 16 * kNumSections);

  // Symbols.
  {
    std::string scratch;
    ASSIGN_OR_RETURN(std::string_view raw, ReadBlob(off[0], off[0] + len[0], &scratch));
    Cursor c{raw.data(), raw.data(), raw.data() + raw.size(), off[0]};
    uint64_t n;
    if (!c.Varint64(&n) || n > raw.size()) return Corrupt("bad symbol count", off[0]);
    symbols_.reserve(n);
    std::string prev;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t shared;
      std::string_view suffix;
      uint64_t slen;
      if (!c.Varint64(&shared) || shared > prev.size() || !c.Varint64(&slen) || !c.Bytes(slen, &suffix)) {
        return Corrupt("bad symbol " + std::to_string(i), off[0]);
      }
      std::string s = prev.substr(0, shared);
      s.append(suffix);
      if (i > 0 && !(prev < s)) return Corrupt("symbols not sorted at symbol " + std::to_string(i), off[0]);
      symbols_.push_back(s);
      prev = std::move(s);
    }
    if (c.Left() != 0) return Corrupt("trailing bytes in symbol table", off[0]);
  }

  // Series block table.
  {
    series_off_ = off[1];
    series_len_ = len[1];
    if (len[1] < 16) return Corrupt("series section too short", off[1]);
    const char* end = data_.data() + off[1] + len[1];
    const uint64_t nblocks = DecodeFixed64(end - 8);
    const uint64_t want = num_series_ / kSeriesPerBlock + (num_series_ % kSeriesPerBlock != 0 ? 1 : 0);
    if (nblocks != want || nblocks > (len[1] - 8) / 8 - 1) {
      return Corrupt("bad series block count", off[1] + len[1] - 8);
    }
    const uint64_t table_rel = len[1] - 8 - 8 * (nblocks + 1);
    const char* table = data_.data() + off[1] + table_rel;
    block_offsets_.resize(nblocks + 1);
    uint64_t prev = 0;
    for (uint64_t i = 0; i <= nblocks; ++i) {
      uint64_t o = DecodeFixed64(table + 8 * i);
      if (o < prev || o > table_rel || (i == 0 && o != 0) || (i == nblocks && o != table_rel)) {
        return Corrupt("bad series block offset", off[1] + table_rel + 8 * i);
      }
      block_offsets_[i] = off[1] + o;
      prev = o;
    }
  }

  postings_off_ = off[2];
  postings_len_ = len[2];

  // Postings table.
  {
    Cursor c{data_.data() + off[3], data_.data() + off[3], data_.data() + off[3] + len[3], off[3]};
    uint64_t nnames;
    if (!c.Varint64(&nnames) || nnames > len[3]) return Corrupt("bad label name count", off[3]);
    names_.reserve(nnames);
    uint64_t prev_off = 0;
    for (uint64_t i = 0; i < nnames; ++i) {
      uint32_t name_sym;
      uint64_t nvals;
      const uint64_t at = c.Offset();
      if (!c.Varint32(&name_sym) || name_sym >= symbols_.size() || !c.Varint64(&nvals) || nvals > c.Left() ||
          (i > 0 && name_sym <= names_.back().first)) {
        return Corrupt("bad postings table name entry", at);
      }
      std::vector<ValueEntry> vals;
      vals.reserve(nvals);
      uint32_t prev_v = 0;
      for (uint64_t k = 0; k < nvals; ++k) {
        uint32_t dv;
        uint64_t doff;
        const uint64_t vat = c.Offset();
        if (!c.Varint32(&dv) || !c.Varint64(&doff)) return Corrupt("truncated postings table", vat);
        const uint64_t v = static_cast<uint64_t>(prev_v) + dv;
        const uint64_t o = prev_off + doff;
        if (v >= symbols_.size() || (k > 0 && dv == 0) || o < prev_off || o >= len[2]) {
          return Corrupt("bad postings table value entry", vat);
        }
        vals.push_back({static_cast<uint32_t>(v), off[2] + o});
        prev_v = static_cast<uint32_t>(v);
        prev_off = o;
      }
      names_.emplace_back(name_sym, std::move(vals));
    }
    if (c.Left() != 0) return Corrupt("trailing bytes in postings table", c.Offset());
  }
  return Status::OK();
}

bool IndexReader::FindSymbol(std::string_view s, uint32_t* id) const {
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), s,
                             [](const std::string& a, std::string_view b) { return a < b; });
  if (it == symbols_.end() || *it != s) return false;
  *id = static_cast<uint32_t>(it - symbols_.begin());
  return true;
}

const std::vector<IndexReader::ValueEntry>* IndexReader::ValuesOf(std::string_view name) const {
  uint32_t sym;
  if (!FindSymbol(name, &sym)) return nullptr;
  auto it = std::lower_bound(names_.begin(), names_.end(), sym,
                             [](const auto& e, uint32_t s) { return e.first < s; });
  if (it == names_.end() || it->first != sym) return nullptr;
  return &it->second;
}

std::vector<std::string> IndexReader::LabelNames() const {
  std::vector<std::string> out;
  out.reserve(names_.size());
  for (const auto& [sym, _] : names_) out.push_back(symbols_[sym]);
  return out;
}

Result<std::vector<std::string>> IndexReader::LabelValues(std::string_view name) const {
  std::vector<std::string> out;
  const auto* vals = ValuesOf(name);
  if (vals == nullptr) return out;
  out.reserve(vals->size());
  for (const ValueEntry& e : *vals) out.push_back(symbols_[e.value_sym]);
  return out;
}

// A postings list as read from its header (docs/format/index.md, "Postings").
struct IndexReader::PostingsList {
  uint64_t offset = 0;  // of the list in the file
  uint8_t kind = 0;
  uint64_t n = 0, first = 0;
  Cursor rest{};  // after the header
  // Bitmap (kind 1).
  std::string_view bitmap;
  // Blocked (kind 2): each block's first id and its deltas' bytes.
  std::vector<uint64_t> starts;
  std::vector<std::string_view> blocks;
};

Status IndexReader::ReadPostingsList(uint64_t offset, PostingsList* l) const {
  const uint64_t end = postings_off_ + postings_len_;
  Cursor c{data_.data() + offset, data_.data() + offset, data_.data() + end, offset};
  l->offset = offset;
  if (!c.Byte(&l->kind) || !c.Varint64(&l->n) || !c.Varint64(&l->first) || l->n == 0) {
    return Corrupt("bad postings list header", offset);
  }
  if (l->first >= num_series_) return Corrupt("postings series id out of range", offset);
  switch (l->kind) {
    case 0:
      if (l->n - 1 > c.Left()) return Corrupt("postings list count exceeds data", offset);
      break;
    case 1: {
      uint64_t nbytes;
      if (!c.Varint64(&nbytes) || !c.Bytes(nbytes, &l->bitmap) || l->n > nbytes * 8 ||
          nbytes > (num_series_ - l->first + 7) / 8 + 1) {
        return Corrupt("bad postings bitmap", offset);
      }
      break;
    }
    case 2: {
      uint64_t nblocks;
      if (!c.Varint64(&nblocks) || nblocks != (l->n + kPostingsBlock - 1) / kPostingsBlock || nblocks > c.Left() / 2) {
        return Corrupt("bad postings block table", offset);
      }
      l->starts.resize(nblocks);
      std::vector<uint64_t> lens(nblocks);
      uint64_t start = l->first, total = 0;
      for (uint64_t b = 0; b < nblocks; ++b) {
        uint64_t d;
        if (!c.Varint64(&d) || !c.Varint64(&lens[b]) || (b == 0) != (d == 0)) {
          return Corrupt("bad postings block table", c.Offset());
        }
        start += d;
        if (start >= num_series_ || start < d) return Corrupt("postings series id out of range", c.Offset());
        l->starts[b] = start;
        total += lens[b];
        if (total < lens[b] || total > c.Left()) return Corrupt("postings blocks run past the data", c.Offset());
      }
      l->blocks.resize(nblocks);
      for (uint64_t b = 0; b < nblocks; ++b) c.Bytes(lens[b], &l->blocks[b]);
      break;
    }
    default:
      return Corrupt("unknown postings encoding " + std::to_string(l->kind), offset);
  }
  l->rest = c;
  return Status::OK();
}

template <typename C>
Status IndexReader::DecodeDeltas(C* c, uint64_t v, uint64_t count, index::Postings* out) const {
  out->push_back(v);
  for (uint64_t i = 1; i < count; ++i) {
    uint64_t d;
    if (!c->Varint64(&d) || d == 0) return Corrupt("bad postings delta", c->Offset());
    v += d;
    if (v >= num_series_ || v < d) return Corrupt("postings series id out of range", c->Offset());
    out->push_back(v);
  }
  return Status::OK();
}

Status IndexReader::DecodePostingsBlock(const PostingsList& l, size_t b, index::Postings* out) const {
  const std::string_view bytes = l.blocks[b];
  const uint64_t base = l.offset + static_cast<uint64_t>(bytes.data() - (data_.data() + l.offset));
  Cursor c{bytes.data(), bytes.data(), bytes.data() + bytes.size(), base};
  RETURN_IF_ERROR(DecodeDeltas(&c, l.starts[b], std::min<uint64_t>(kPostingsBlock, l.n - b * kPostingsBlock), out));
  if (c.Left() != 0) return Corrupt("postings block length mismatch", c.Offset());
  if (b + 1 < l.starts.size() && out->back() >= l.starts[b + 1]) {
    return Corrupt("postings blocks not increasing", base);
  }
  return Status::OK();
}

Result<index::Postings> IndexReader::DecodePostings(const PostingsList& l) const {
  index::Postings out;
  out.reserve(l.n);
  if (l.kind == 0) {
    Cursor c = l.rest;
    RETURN_IF_ERROR(DecodeDeltas(&c, l.first, l.n, &out));
    return out;
  }
  if (l.kind == 2) {
    for (size_t b = 0; b < l.blocks.size(); ++b) RETURN_IF_ERROR(DecodePostingsBlock(l, b, &out));
    return out;
  }
  for (uint64_t i = 0; i < l.bitmap.size(); ++i) {
    uint32_t byte = static_cast<uint8_t>(l.bitmap[i]);
    while (byte != 0) {
      const uint64_t v = l.first + i * 8 + static_cast<uint64_t>(__builtin_ctz(byte));
      byte &= byte - 1;
      if (v >= num_series_) return Corrupt("postings series id out of range", l.offset);
      out.push_back(v);
    }
  }
  if (out.size() != l.n) return Corrupt("postings bitmap count mismatch", l.offset);
  return out;
}

Result<index::Postings> IndexReader::DecodePostings(uint64_t offset) const {
  PostingsList l;
  RETURN_IF_ERROR(ReadPostingsList(offset, &l));
  return DecodePostings(l);
}

const IndexReader::ValueEntry* IndexReader::FindList(std::string_view name, std::string_view value) const {
  const auto* vals = ValuesOf(name);
  uint32_t vsym;
  if (vals == nullptr || !FindSymbol(value, &vsym)) return nullptr;
  auto it = std::lower_bound(vals->begin(), vals->end(), vsym,
                             [](const ValueEntry& e, uint32_t s) { return e.value_sym < s; });
  if (it == vals->end() || it->value_sym != vsym) return nullptr;
  return &*it;
}

Result<uint64_t> IndexReader::PostingsCount(std::string_view name, std::string_view value) const {
  const ValueEntry* e = FindList(name, value);
  if (e == nullptr) return uint64_t{0};
  PostingsList l;
  RETURN_IF_ERROR(ReadPostingsList(e->offset, &l));
  return l.n;
}

Result<index::Postings> IndexReader::PostingsIntersecting(std::string_view name, std::string_view value,
                                                          index::PostingsSpan with) const {
  const ValueEntry* e = FindList(name, value);
  if (e == nullptr || with.empty()) return index::Postings();
  PostingsList l;
  RETURN_IF_ERROR(ReadPostingsList(e->offset, &l));
  index::Postings out;
  if (l.kind == 1) {
    // A bitmap answers each id at once.
    for (uint64_t x : with) {
      if (x < l.first) continue;
      const uint64_t bit = x - l.first;
      if (bit / 8 >= l.bitmap.size()) break;
      if ((static_cast<uint8_t>(l.bitmap[bit / 8]) >> (bit % 8) & 1) != 0) out.push_back(x);
    }
    return out;
  }
  if (l.kind == 2 && with.size() * 8 < l.n) {
    // Only the blocks an id of `with` falls in are decoded.
    index::Postings block;
    size_t cur = SIZE_MAX, from = 0;
    for (uint64_t x : with) {
      if (x < l.first) continue;
      auto it = std::upper_bound(l.starts.begin() + static_cast<std::ptrdiff_t>(from), l.starts.end(), x);
      const size_t b = static_cast<size_t>(it - l.starts.begin()) - 1;
      if (b != cur) {
        block.clear();
        RETURN_IF_ERROR(DecodePostingsBlock(l, b, &block));
        cur = b;
        from = b;
      }
      if (std::binary_search(block.begin(), block.end(), x)) out.push_back(x);
    }
    return out;
  }
  ASSIGN_OR_RETURN(index::Postings all, DecodePostings(l));
  return index::Intersect(all, with);
}

Result<index::Postings> IndexReader::Postings(std::string_view name, std::string_view value) const {
  const ValueEntry* e = FindList(name, value);
  if (e == nullptr) return index::Postings();
  return DecodePostings(e->offset);
}

Result<index::Postings> IndexReader::AllPostings() const {
  index::Postings out(num_series_);
  for (uint64_t i = 0; i < num_series_; ++i) out[i] = i;
  return out;
}

Result<index::Postings> IndexReader::PostingsForLabelMatching(
    std::string_view name, const std::function<bool(std::string_view)>& match) const {
  const auto* vals = ValuesOf(name);
  if (vals == nullptr) return index::Postings();
  std::vector<index::Postings> lists;
  for (const ValueEntry& e : *vals) {
    if (!match(symbols_[e.value_sym])) continue;
    ASSIGN_OR_RETURN(index::Postings p, DecodePostings(e.offset));
    lists.push_back(std::move(p));
  }
  return Union(lists);
}

Result<index::Postings> IndexReader::PostingsForMatchers(const model::Matchers& ms) const {
  return index::PostingsForMatchers(*this, ms);
}

template <typename Keep>
Status IndexReader::WalkBlock(uint64_t b, const Keep& keep, DecodedBlock* blk) const {
  const uint64_t boff = block_offsets_[b];
  thread_local std::string scratch;
  ASSIGN_OR_RETURN(std::string_view raw, ReadBlob(boff, block_offsets_[b + 1], &scratch));
  blk->Clear();
  const uint64_t lo = b * kSeriesPerBlock;
  const uint64_t n = std::min<uint64_t>(kSeriesPerBlock, num_series_ - lo);
  Cursor c{raw.data(), raw.data(), raw.data() + raw.size(), boff};
  blk->pair_start.push_back(0);
  blk->chunk_start.push_back(0);
  // The current series' pairs: the next one shares a prefix of them, kept
  // or not.
  thread_local std::vector<uint32_t> cur;
  cur.clear();
  int64_t prev_mint = 0, last_maxt = 0;
  uint64_t prev_ref = 0;
  auto bad = [&](std::string_view what, uint64_t s) {
    return Corrupt("series " + std::to_string(lo + s) + ": " + std::string(what) + " in series block", boff);
  };
  for (uint64_t s = 0; s < n; ++s) {
    uint32_t shared, rest;
    if (!c.Varint32(&shared) || !c.Varint32(&rest) || 2 * uint64_t{shared} > cur.size() || rest > c.Left() / 2) {
      return bad("bad label count", s);
    }
    cur.resize(2 * size_t{shared});
    for (uint32_t i = 0; i < rest; ++i) {
      uint32_t ns, vs;
      if (!c.Varint32(&ns) || !c.Varint32(&vs) || ns >= symbols_.size() || vs >= symbols_.size()) {
        return bad("bad label symbol", s);
      }
      cur.push_back(ns);
      cur.push_back(vs);
    }
    const size_t total = cur.size() / 2;
    if (total == 0) return bad("no labels", s);
    for (size_t i = 1; i < total; ++i) {
      if (cur[2 * i] <= cur[2 * (i - 1)]) return bad("unsorted label names", s);
    }
    const bool kept = keep(s);
    if (kept) {
      blk->syms.insert(blk->syms.end(), cur.begin(), cur.end());
      blk->pair_start.push_back(static_cast<uint32_t>(blk->syms.size() / 2));
    }
    uint32_t nchunks;
    if (!c.Varint32(&nchunks) || nchunks > c.Left() / 3) return bad("bad chunk count", s);
    for (uint32_t i = 0; i < nchunks; ++i) {
      uint64_t dmint, dmaxt, dref;
      if (!c.Varint64(&dmint) || !c.Varint64(&dmaxt) || !c.Varint64(&dref)) return bad("truncated chunk meta", s);
      ChunkMeta m;
      m.mint = i == 0 ? Undelta(prev_mint, dmint) : Undelta(last_maxt, dmint);
      if (i == 0) prev_mint = m.mint;
      m.maxt = Undelta(m.mint, dmaxt);
      last_maxt = m.maxt;
      m.ref = prev_ref + static_cast<uint64_t>(ZigZagDecode(dref));
      prev_ref = m.ref;
      if (kept) blk->chunks.push_back(m);
    }
    if (kept) blk->chunk_start.push_back(static_cast<uint32_t>(blk->chunks.size()));
  }
  if (c.Left() != 0) return Corrupt("trailing bytes in series block", boff);
  return Status::OK();
}

Result<std::shared_ptr<const IndexReader::DecodedBlock>> IndexReader::DecodeBlock(uint64_t b) const {
  auto blk = std::make_shared<DecodedBlock>();
  RETURN_IF_ERROR(WalkBlock(b, [](uint64_t) { return true; }, blk.get()));
  return std::shared_ptr<const DecodedBlock>(std::move(blk));
}

std::shared_ptr<const IndexReader::DecodedBlock> IndexReader::CachedBlock(uint64_t b) const {
  const size_t slot = b & (cache_->size - 1);
  base::MutexLock l(&cache_->mu);
  if (cache_->val[slot] && cache_->key[slot] == b) return cache_->val[slot];
  return nullptr;
}

Result<std::shared_ptr<const IndexReader::DecodedBlock>> IndexReader::GetBlock(uint64_t b) const {
  if (auto blk = CachedBlock(b)) return blk;
  ASSIGN_OR_RETURN(std::shared_ptr<const DecodedBlock> blk, DecodeBlock(b));
  const size_t slot = b & (cache_->size - 1);
  base::MutexLock l(&cache_->mu);
  cache_->key[slot] = b;
  cache_->val[slot] = blk;
  return blk;
}

void IndexReader::Fill(const DecodedBlock& blk, size_t s, model::Labels* labels, std::vector<ChunkMeta>* chunks) const {
  if (labels != nullptr) {
    const uint32_t first = blk.pair_start[s];
    labels->Assign(blk.pair_start[s + 1] - first, [&](size_t i) {
      return std::pair<std::string_view, std::string_view>{symbols_[blk.syms[2 * (first + i)]],
                                                           symbols_[blk.syms[2 * (first + i) + 1]]};
    });
  }
  if (chunks != nullptr) {
    chunks->assign(blk.chunks.begin() + blk.chunk_start[s], blk.chunks.begin() + blk.chunk_start[s + 1]);
  }
}

Status IndexReader::Series(SeriesRef id, model::Labels* labels, std::vector<ChunkMeta>* chunks) const {
  if (id >= num_series_) return Status::NotFound("index " + path_ + ": series " + std::to_string(id) + " not found");
  ASSIGN_OR_RETURN(std::shared_ptr<const DecodedBlock> blk, GetBlock(id / kSeriesPerBlock));
  Fill(*blk, id % kSeriesPerBlock, labels, chunks);
  return Status::OK();
}

IndexReader::SeriesBatch::SeriesBatch() = default;
IndexReader::SeriesBatch::~SeriesBatch() = default;

void IndexReader::SeriesBatch::Get(size_t i, model::Labels* labels, std::vector<ChunkMeta>* chunks) const {
  r_->Fill(*blk_, pos_[i], labels, chunks);
}

void IndexReader::SeriesBatch::GetViews(size_t i, std::vector<std::pair<std::string_view, std::string_view>>* labels,
                                        std::vector<ChunkMeta>* chunks) const {
  const DecodedBlock& blk = *blk_;
  const size_t s = pos_[i];
  const uint32_t first = blk.pair_start[s], n = blk.pair_start[s + 1] - first;
  labels->resize(n);
  bool sorted = true;
  for (uint32_t j = 0; j < n; ++j) {
    (*labels)[j] = {r_->symbols_[blk.syms[2 * (first + j)]], r_->symbols_[blk.syms[2 * (first + j) + 1]]};
    if (j > 0 && !((*labels)[j - 1].first < (*labels)[j].first)) sorted = false;
  }
  // As model::Labels::Assign: a writer's labels come sorted.
  if (!sorted) std::sort(labels->begin(), labels->end());
  r_->Fill(blk, s, nullptr, chunks);
}

Status IndexReader::ReadSeries(std::span<const SeriesRef> ids, SeriesBatch* out) const {
  out->r_ = this;
  out->pos_.clear();
  if (ids.empty()) return Status::OK();
  const uint64_t b = ids.front() / kSeriesPerBlock;
  if (ids.back() >= num_series_ || ids.back() / kSeriesPerBlock != b) {
    return Status::InvalidArgument("index " + path_ + ": series batch beyond one block");
  }
  // A cached block; else one of a quarter of the block or more, or of an
  // index whose every block has a slot of its own (then the next query finds
  // it): decoded whole, cached.
  out->blk_ = CachedBlock(b);
  if (out->blk_ == nullptr && (ids.size() * 4 >= kSeriesPerBlock || block_offsets_.size() - 1 <= cache_->size)) {
    ASSIGN_OR_RETURN(out->blk_, GetBlock(b));
  }
  if (out->blk_ != nullptr) {
    for (SeriesRef id : ids) out->pos_.push_back(static_cast<uint32_t>(id % kSeriesPerBlock));
    return Status::OK();
  }
  // A few series of the block (a selector's in a large index): only they
  // are kept, in the batch's own storage, reused from block to block.
  if (out->own_ == nullptr) out->own_ = std::make_shared<DecodedBlock>();
  size_t next = 0;
  RETURN_IF_ERROR(WalkBlock(
      b,
      [&](uint64_t s) {
        if (next == ids.size() || ids[next] % kSeriesPerBlock != s) return false;
        next++;
        return true;
      },
      out->own_.get()));
  for (size_t i = 0; i < ids.size(); i++) out->pos_.push_back(static_cast<uint32_t>(i));
  out->blk_ = out->own_;
  return Status::OK();
}

}  // namespace trainwatch::index
