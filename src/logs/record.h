#pragma once
// One log record as stored and answered: a stream (label set), a time in
// nanoseconds, a level, a message and structured fields; plus the parsing of
// the native NDJSON push format (docs/logs.md) and the answer's JSON shape.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/labels.h"

namespace trainwatch::logs {

// Messages (and fields JSON) longer than this are kept truncated and flagged.
inline constexpr size_t kMaxMessageBytes = 64 << 10;
// Raw input lines longer than this are not decoded: kept as a truncated plain message.
inline constexpr size_t kMaxLineBytes = 1 << 20;

struct Record {
  int64_t time_ns = 0;
  model::Labels labels;  // the stream
  std::string level;     // canonical (NormalizeLevel), empty when unknown
  std::string message;
  std::string fields;    // compact JSON object text; empty when there are none
  bool truncated = false;
};

// Upper-cases and maps aliases: WARN -> WARNING, ERR -> ERROR, CRIT/FATAL ->
// CRITICAL, TRACE kept, "E"/"W"/"I"/"D" single letters expanded.
std::string NormalizeLevel(std::string_view level);
// The level a plain line shows, for a line that arrives without one (a
// tailed file, stdout, a Loki or _bulk line with no level field): a level
// word in its first 80 bytes ("INFO:root:...", "[WARN]"), else ERROR for a
// Python traceback or exception line ("RuntimeError: CUDA error: ...",
// "torch.OutOfMemoryError: ...") and for CUDA, NCCL and segfault reports,
// WARNING for a Python warning ("UserWarning: "); empty when it shows none.
std::string InferLevel(std::string_view message);
// Sets r->level from InferLevel when it is empty.
void InferMissingLevel(Record* r);
// Rank of a canonical level for ordering (DEBUG 1 .. CRITICAL 5), 0 when unknown.
int LevelRank(std::string_view canonical);
inline constexpr std::string_view kLevels[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};

// ms * 1000000, saturated to the int64 range instead of overflowing.
inline int64_t MsToNsSaturated(int64_t ms) {
  if (ms > INT64_MAX / 1000000) return INT64_MAX;
  if (ms < INT64_MIN / 1000000) return INT64_MIN;
  return ms * 1000000;
}
// a / b rounded toward negative infinity; REQUIRES: b > 0. Never overflows.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

// RFC 3339 with optional fraction (to ns) and zone: unix nanoseconds.
Result<int64_t> ParseRfc3339(std::string_view s);
// Appends "2006-01-02T15:04:05.999999999Z" (trailing zeros of the fraction trimmed).
void AppendRfc3339Nano(std::string* out, int64_t ns);
// Cuts `s` to at most `max` bytes on a UTF-8 boundary; true when it cut.
bool TruncateUtf8(std::string* s, size_t max);
// Whether `s` is valid UTF-8 (no overlong forms, no surrogates).
bool IsValidUtf8(std::string_view s);
// `s` with each byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view s);
// The stream labels' first value that is not valid UTF-8 (they reach JSON
// answers and alert notifications), or null when every value is.
const model::Label* FirstNonUtf8Label(const model::Labels& labels);

// Decodes one line of the native format into *r: a JSON object with "time"
// (unix seconds number or RFC 3339 string; absent: `receive_ns`), "level",
// "message" (alias "msg"), optional "labels" (object of strings, merged into
// `*extra_labels`) and any other keys as fields. A line that is not a JSON
// object is a plain message. InvalidArgument naming the field for a JSON
// object whose time or labels cannot be used.
Status ParseNativeLine(std::string_view line, int64_t receive_ns, Record* r, std::vector<model::Label>* extra_labels);

// Why a line's time is refused at ingest (the `reason` label of
// trainwatch_logs_lines_rejected_total).
enum class TimeReject { kNone, kTooFarInFuture, kTooOld };
std::string_view TimeRejectName(TimeReject r);  // "too_far_in_future", "too_old"

// The times a log store accepts at ingest (LogStore::IngestBounds): in
// [min_ns, max_ns]. The default accepts every time.
struct TimeBounds {
  int64_t min_ns = INT64_MIN;  // older lines would be deleted by retention at once
  int64_t max_ns = INT64_MAX;  // newer lines are too far in the future
  int64_t now_ms = 0, max_future_ms = 0, retention_ms = 0;  // what the bounds came from, for messages
  TimeReject rejected = TimeReject::kNone;  // the reason of the last refusal by Check

  // OK when t_ns is in bounds; else InvalidArgument naming the time and the
  // bound, with `rejected` set.
  Status Check(int64_t t_ns);
};


// The answer's line object: {"time","labels","level","message","fields"[,"truncated"]}.
void AppendRecordJson(std::string* out, const Record& r);
void AppendJsonEscaped(std::string* out, std::string_view s);  // a quoted JSON string

}  // namespace trainwatch::logs
