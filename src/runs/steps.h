#pragma once
// The step store's chunk codec (docs/training-metrics.md, "Step store"): the
// points of one series of a run (run, rank, key) indexed by step, each with
// the wall time it was logged at. A chunk holds points with strictly
// increasing steps in two columns, both in the TSDB blocks' dense codec
// (tsdb/chunkenc): (step, value) and (step, wall time in ms as a double), so
// the common shapes (steps +1 apart, times a few ms apart, decimal values)
// cost a few bits per point and any float64 round-trips bit-exactly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::runs {

struct StepPoint {
  int64_t step;
  int64_t ts_ms;  // unix ms of the log() call, as the client sent it
  double value;
};

// Most points one chunk holds; a longer run of points is split.
inline constexpr size_t kMaxChunkPoints = size_t{1} << 16;

// Encodes `n` points (REQUIRES: 1 <= n <= kMaxChunkPoints, strictly
// increasing steps) and appends the chunk to *out.
void EncodeStepChunk(const StepPoint* pts, size_t n, std::string* out);
// Appends the chunk's points to *out. Corruption when the bytes are not a
// chunk EncodeStepChunk wrote.
Status DecodeStepChunk(std::string_view data, std::vector<StepPoint>* out);

// Orders points by step; where a step occurs more than once the last of them
// in the input order wins ("last write wins": callers pass points in the
// order they were written). Linear when already strictly increasing.
void SortLastWins(std::vector<StepPoint>* pts);

}  // namespace trainwatch::runs
