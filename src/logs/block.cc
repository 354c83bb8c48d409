#include "logs/block.h"

#include <algorithm>

#include "base/coding.h"
#include "logs/record.h"

namespace trainwatch::logs {

namespace {

// zstd level 1: within a few percent of level 3 on log blocks (the block is
// the unit of redundancy), at about twice the speed.
constexpr int kZstdLevel = 1;
constexpr uint32_t kCodeOther = 7;
constexpr size_t kMaxFrame = 256u << 20;

Status Compress(ZSTD_CCtx* cctx, std::string_view in, std::string* out) {
  out->resize(ZSTD_compressBound(in.size()));
  size_t n = ZSTD_compressCCtx(cctx, out->data(), out->size(), in.data(), in.size(), kZstdLevel);
  if (ZSTD_isError(n)) return Status::IOError(std::string("logs: compress block: ") + ZSTD_getErrorName(n));
  out->resize(n);
  return Status::OK();
}

Status Decompress(ZSTD_DCtx* dctx, std::string_view in, std::string* out, const std::string& where) {
  unsigned long long n = ZSTD_getFrameContentSize(in.data(), in.size());
  if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > kMaxFrame) {
    return Status::Corruption("logs: " + where + ": bad zstd frame header");
  }
  out->resize(n);
  size_t got = ZSTD_decompressDCtx(dctx, out->data(), n, in.data(), in.size());
  if (ZSTD_isError(got) || got != n) return Status::Corruption("logs: " + where + ": bad zstd frame");
  return Status::OK();
}

}  // namespace

int LevelCode(std::string_view level) {
  if (level.empty()) return 0;
  for (size_t i = 0; i < std::size(kLevels); ++i) {
    if (kLevels[i] == level) return static_cast<int>(i) + 1;
  }
  return static_cast<int>(kCodeOther);
}

namespace {

// The meta and body columns of `lines`, uncompressed; the messages joined
// into out->text when `index`.
void EncodeColumns(const std::vector<LineRef>& lines, std::string* meta_out, std::string* body_out, bool index,
                   EncodedBlock* out) {
  std::string& meta = *meta_out;
  std::string& body = *body_out;
  meta.clear();
  body.clear();
  size_t text_bytes = 0;
  for (const LineRef& l : lines) text_bytes += l.message.size() + l.fields.size();
  meta.reserve(lines.size() * 12 + 8);
  body.reserve(text_bytes);
  PutVarint64(&meta, lines.size());
  out->t_min = out->t_max = lines[0].t;
  out->seq_min = lines.front().seq;
  out->seq_max = lines.back().seq;
  out->levels = 0;
  uint64_t prev_seq = 0;
  int64_t prev_t = 0;
  for (const LineRef& l : lines) {
    PutVarint64(&meta, l.seq - prev_seq);
    prev_seq = l.seq;
  }
  for (const LineRef& l : lines) {
    PutVarint64(&meta, ZigZagEncode(static_cast<int64_t>(static_cast<uint64_t>(l.t) - static_cast<uint64_t>(prev_t))));
    prev_t = l.t;
    out->t_min = std::min(out->t_min, l.t);
    out->t_max = std::max(out->t_max, l.t);
  }
  for (const LineRef& l : lines) {
    int code = LevelCode(l.level);
    out->levels |= 1u << code;
    meta += static_cast<char>(code);
  }
  for (const LineRef& l : lines) {
    if (LevelCode(l.level) == static_cast<int>(kCodeOther)) PutLengthPrefixed(&meta, l.level);
  }
  for (const LineRef& l : lines) meta += static_cast<char>(l.flags);
  for (const LineRef& l : lines) PutVarint64(&meta, l.message.size());
  for (const LineRef& l : lines) PutVarint64(&meta, l.fields.size());
  out->text.clear();
  if (index) out->text.reserve(text_bytes + lines.size());
  for (const LineRef& l : lines) {
    body.append(l.message);
    if (!index) continue;
    if (!out->text.empty()) out->text += '\n';
    out->text.append(l.message);
  }
  for (const LineRef& l : lines) body.append(l.fields);
}

}  // namespace

Status EncodeBlock(ZSTD_CCtx* cctx, const std::vector<LineRef>& lines, EncodedBlock* out) {
  std::string meta, body;
  EncodeColumns(lines, &meta, &body, true, out);
  RETURN_IF_ERROR(Compress(cctx, meta, &out->meta));
  return Compress(cctx, body, &out->body);
}

void EncodeChunk(const std::vector<LineRef>& lines, EncodedBlock* out) {
  EncodeColumns(lines, &out->meta, &out->body, false, out);
}

Status BlockReader::Open(ZSTD_DCtx* dctx, std::string_view meta, std::string where) {
  where_ = std::move(where);
  body_loaded_ = false;
  RETURN_IF_ERROR(Decompress(dctx, meta, &meta_, where_ + " meta"));
  return ParseMeta();
}

Status BlockReader::OpenRaw(std::string_view meta, std::string where) {
  where_ = std::move(where);
  body_loaded_ = false;
  meta_.assign(meta);
  return ParseMeta();
}

Status BlockReader::ParseMeta() {
  std::string_view in(meta_);
  auto bad = [&](const char* what) { return Status::Corruption("logs: " + where_ + ": meta: bad " + what); };
  uint64_t n = 0;
  if (!GetVarint64(&in, &n) || n == 0 || n > in.size()) return bad("line count");
  seq_.resize(n);
  t_.resize(n);
  level_.resize(n);
  flags_.resize(n);
  msg_len_.resize(n);
  fld_len_.resize(n);
  uint64_t seq = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t d;
    if (!GetVarint64(&in, &d)) return bad("sequence column");
    seq_[i] = seq += d;
  }
  uint64_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t d;
    if (!GetVarint64(&in, &d)) return bad("time column");
    t += static_cast<uint64_t>(ZigZagDecode(d));
    t_[i] = static_cast<int64_t>(t);
  }
  if (in.size() < n) return bad("level column");
  std::string_view codes = in.substr(0, n);
  in.remove_prefix(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = static_cast<uint8_t>(codes[i]);
    if (c == 0) level_[i] = {};
    else if (c <= std::size(kLevels)) level_[i] = kLevels[c - 1];
    else if (c == kCodeOther) {
      if (!GetLengthPrefixed(&in, &level_[i])) return bad("level text");
    } else {
      return bad("level code");
    }
  }
  if (in.size() < n) return bad("flags column");
  for (size_t i = 0; i < n; ++i) flags_[i] = static_cast<uint8_t>(in[i]);
  in.remove_prefix(n);
  for (auto* col : {&msg_len_, &fld_len_}) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      if (!GetVarint32(&in, &v)) return bad("length column");
      (*col)[i] = v;
    }
  }
  if (!in.empty()) return bad("trailing bytes");
  return Status::OK();
}

Status BlockReader::LoadBody(ZSTD_DCtx* dctx, std::string_view body) {
  RETURN_IF_ERROR(Decompress(dctx, body, &body_, where_ + " body"));
  return IndexBody();
}

Status BlockReader::LoadRawBody(std::string_view body) {
  body_.assign(body);
  return IndexBody();
}

Status BlockReader::IndexBody() {
  size_t n = seq_.size(), off = 0;
  msg_off_.resize(n);
  fld_off_.resize(n);
  for (size_t i = 0; i < n; ++i) msg_off_[i] = off, off += msg_len_[i];
  for (size_t i = 0; i < n; ++i) fld_off_[i] = off, off += fld_len_[i];
  if (off != body_.size()) return Status::Corruption("logs: " + where_ + ": body size does not match the lengths");
  body_loaded_ = true;
  return Status::OK();
}

}  // namespace trainwatch::logs
