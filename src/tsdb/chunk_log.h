#pragma once
// The head chunk log: every closed head chunk written once, beside the WAL,
// so that replay after a crash attaches chunks instead of re-applying every
// sample they hold (restart time was bound by re-applying a full head).
// Layout: docs/format/wal.md ("Chunk log").
//
// A generation is a directory "chunks_head.<S>" of WAL-framed segments, S
// being the checkpoint replay starts from (0 when there is none). It begins
// with a base (every closed chunk and out-of-order sample in the head when a
// head cut or an open starts it); each flush then appends the chunks closed
// since, the out-of-order samples of series that got new ones, and a mark
// {P, T} that promises: every sample logged in checkpoint.S or in a WAL
// segment before P is in the log when its time is before T, or not after
// the end of the last logged chunk of its series. Replay skips those.
// Records after the last mark promise nothing and are cut at open.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tsdb/head.h"

namespace trainwatch::tsdb::chunklog {

// Record types continue the WAL's (tsdb/wal/records.h) so that neither log
// mistakes the other's records for its own.
enum class RecordType : uint8_t {
  kChunks = 16,  // closed chunks of any series
  kOoo = 17,     // all out-of-order samples of one series (replaces earlier ones)
  kMark = 18,
  kOooHistograms = 19,  // all out-of-order histograms of one series (replaces earlier ones)
  // kOoo and kOooHistograms with each sample's start timestamp, written
  // where any has one; decoded by the same functions.
  kOooST = 20,
  kOooHistogramsST = 21,
};

// WAL segments from `first_segment` up to the next span's (the last one's:
// up to the mark's P) hold samples no later than `maxt`.
struct SegmentSpan {
  int first_segment = 0;
  int64_t maxt = INT64_MIN;
  bool operator==(const SegmentSpan&) const = default;
};

struct Mark {
  int wal_segment = 0;                  // P
  int64_t covered_before = INT64_MIN;   // T
  // Since the generation began, in order: replay need not even decode the
  // samples records of a segment whose span ends before T.
  std::vector<SegmentSpan> spans;
  bool operator==(const Mark&) const = default;
  // The first segment from `from` on that may hold a sample at or after T
  // (every samples record before it is covered).
  int FirstUncoveredSegment(int from) const;
};

// Replace *out with the encoded record.
void EncodeChunks(const RefChunk* chunks, size_t n, std::string* out);
// `st`: empty, or the start timestamps of ooo's samples.
void EncodeOoo(const RefOoo& ooo, const std::vector<int64_t>& st, std::string* out);
void EncodeOooHistograms(const RefOooHist& ooo, std::string* out);
void EncodeMark(const Mark& mark, std::string* out);
// Corruption on a wrong type byte, truncated or trailing bytes, an unknown
// chunk encoding, a chunk ending before it starts or out-of-order samples
// not strictly increasing. With `slabs`, the chunks' bytes are copied
// into its blocks, grouped by the span of group_ms their last time falls in
// (a head cut frees them together; 0: one group); else each on its own.
Status DecodeChunks(std::string_view rec, std::vector<RefChunk>* out, ChunkSlabs* slabs = nullptr,
                    int64_t group_ms = 0);
// *st: the samples' start timestamps, or empty when the record has none.
Status DecodeOoo(std::string_view rec, RefOoo* out, std::vector<int64_t>* st);
// Corruption as DecodeOoo, and on a histogram the WAL's decoder refuses.
Status DecodeOooHistograms(std::string_view rec, RefOooHist* out);
Status DecodeMark(std::string_view rec, Mark* out);

// A generation as replay takes it: what its last mark covers.
struct Loaded {
  std::optional<Mark> mark;  // none: the log promises nothing
  // By series ref: chunks in time order, none overlapping the one before
  // (a chunk logged twice, by a flush and a base racing, is dropped);
  // out-of-order samples, the last record of each series.
  std::unordered_map<uint64_t, std::vector<HeadChunk>> chunks;
  std::unordered_map<uint64_t, std::vector<model::Sample>> ooo;
  std::unordered_map<uint64_t, std::vector<int64_t>> ooo_st;  // of the series in ooo whose samples have any
  std::unordered_map<uint64_t, std::vector<storage::HistogramSample>> ooo_hist;
  uint64_t num_chunks = 0, dropped_overlaps = 0;
};

// Reads the generation in `dir` and cuts off (wal::Repair) everything after
// its last mark, torn or damaged records included, so that appending to it
// again leaves no unpromised record before a later mark.
// REQUIRES: no writer open on dir. group_ms: as DecodeChunks's (the
// head's block span). `spill`: where the chunks' full blocks go, as the
// head's (HeadOptions::spill).
Result<Loaded> Load(const std::string& dir, int64_t group_ms = 0, const SpillOptions& spill = {});

}  // namespace trainwatch::tsdb::chunklog
