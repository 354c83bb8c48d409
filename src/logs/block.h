#pragma once
// Internal to the log store: the block codec (docs/format/logs.md). A block
// holds up to StoreOptions::block_lines lines of one stream, in sequence
// order, as two zstd frames: `meta` (sequence numbers, times, levels, flags
// and lengths, a few bytes a line) and `body` (messages, then fields). A
// query that only needs times and levels (histograms, level filters) reads
// the meta frame alone; the body is decompressed only when a line is kept.

#include <zstd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::logs {

inline constexpr uint8_t kFlagTruncated = 1;
inline constexpr uint8_t kFlagZstd = 2;  // a message compressed on its own (schema 1 rows only)

// Bit of a level in a block's `levels` mask: bit 0 the empty level, bits
// 1..6 the canonical levels in kLevels order, bit 7 any other text.
int LevelCode(std::string_view level);
inline uint32_t LevelBit(std::string_view level) { return 1u << LevelCode(level); }

// One line handed to the encoder; the views must outlive EncodeBlock.
struct LineRef {
  uint64_t seq = 0;
  int64_t t = 0;
  std::string_view level, message, fields;
  uint8_t flags = 0;
};

struct EncodedBlock {
  std::string meta, body;  // zstd frames (EncodeChunk: uncompressed)
  int64_t t_min = 0, t_max = 0;
  uint64_t seq_min = 0, seq_max = 0;
  uint32_t levels = 0;     // LevelBit of every line, ORed
  std::string text;        // the messages joined by '\n', for the full-text index
};

// REQUIRES: !lines.empty(), seqs strictly increasing. `cctx` is reused between calls.
Status EncodeBlock(ZSTD_CCtx* cctx, const std::vector<LineRef>& lines, EncodedBlock* out);
// The same columns with both frames left uncompressed and no `text`: a chunk
// of lines waiting for their block (the store's `chunks` table).
void EncodeChunk(const std::vector<LineRef>& lines, EncodedBlock* out);

// Decodes one block; the meta frame on Open, the body frame on LoadBody.
// Not thread-safe; reusable (Open again).
class BlockReader {
 public:
  // `where` names the block in errors ("<path>: block 12").
  Status Open(ZSTD_DCtx* dctx, std::string_view meta, std::string where);
  size_t size() const { return seq_.size(); }
  uint64_t seq(size_t i) const { return seq_[i]; }
  int64_t time(size_t i) const { return t_[i]; }
  std::string_view level(size_t i) const { return level_[i]; }
  uint8_t flags(size_t i) const { return flags_[i]; }

  Status LoadBody(ZSTD_DCtx* dctx, std::string_view body);
  // A chunk's uncompressed frames (EncodeChunk), copied.
  Status OpenRaw(std::string_view meta, std::string where);
  Status LoadRawBody(std::string_view body);
  bool body_loaded() const { return body_loaded_; }
  // REQUIRES: LoadBody succeeded.
  std::string_view message(size_t i) const { return std::string_view(body_).substr(msg_off_[i], msg_len_[i]); }
  std::string_view fields(size_t i) const { return std::string_view(body_).substr(fld_off_[i], fld_len_[i]); }

 private:
  Status ParseMeta();
  Status IndexBody();

  std::string where_;
  std::string meta_, body_;  // decompressed frames
  bool body_loaded_ = false;
  std::vector<uint64_t> seq_;
  std::vector<int64_t> t_;
  std::vector<std::string_view> level_;  // into meta_ or static storage
  std::vector<uint8_t> flags_;
  std::vector<uint32_t> msg_len_, fld_len_;
  std::vector<size_t> msg_off_, fld_off_;
};

}  // namespace trainwatch::logs
