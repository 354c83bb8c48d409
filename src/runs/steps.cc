#include "runs/steps.h"

#include <algorithm>

#include "base/check.h"
#include "base/coding.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::runs {
namespace {

constexpr char kVersion = 1;

}  // namespace

// Layout: version byte (1), uvarint length of the value column, the value
// column (dense chunk of (step, value)), the time column (dense chunk of
// (step, double(ts_ms))). Unix ms are integers below 2^53, exact as doubles.
void EncodeStepChunk(const StepPoint* pts, size_t n, std::string* out) {
  CHECK(n >= 1 && n <= kMaxChunkPoints, "BUG: EncodeStepChunk point count out of range");
  std::vector<int64_t> steps(n);
  std::vector<double> col(n);
  for (size_t i = 0; i < n; i++) {
    steps[i] = pts[i].step;
    col[i] = pts[i].value;
  }
  std::string values;
  chunkenc::EncodeDense(steps.data(), col.data(), n, &values);
  for (size_t i = 0; i < n; i++) col[i] = static_cast<double>(pts[i].ts_ms);
  out->push_back(kVersion);
  PutVarint64(out, values.size());
  out->append(values);
  chunkenc::EncodeDense(steps.data(), col.data(), n, out);
}

Status DecodeStepChunk(std::string_view data, std::vector<StepPoint>* out) {
  if (data.empty() || data[0] != kVersion) return Status::Corruption("step chunk: unknown version");
  data.remove_prefix(1);
  uint64_t len;
  if (!GetVarint64(&data, &len) || len > data.size()) return Status::Corruption("step chunk: bad column length");
  std::vector<int64_t> steps, steps2;
  std::vector<double> values, times;
  RETURN_IF_ERROR(chunkenc::DecodeAll(chunkenc::Encoding::kDense, data.substr(0, len), &steps, &values));
  RETURN_IF_ERROR(chunkenc::DecodeAll(chunkenc::Encoding::kDense, data.substr(len), &steps2, &times));
  if (steps != steps2) return Status::Corruption("step chunk: the columns disagree on the steps");
  out->reserve(out->size() + steps.size());
  for (size_t i = 0; i < steps.size(); i++) {
    double t = times[i];
    // A time that is not an integer ms in range is not one the encoder wrote.
    if (!(t >= -9.0e15 && t <= 9.0e15) || t != static_cast<double>(static_cast<int64_t>(t))) {
      return Status::Corruption("step chunk: bad time");
    }
    out->push_back({steps[i], static_cast<int64_t>(t), values[i]});
  }
  return Status::OK();
}

void SortLastWins(std::vector<StepPoint>* pts) {
  auto& v = *pts;
  bool increasing = true;
  for (size_t i = 1; i < v.size() && increasing; i++) increasing = v[i - 1].step < v[i].step;
  if (increasing) return;
  std::stable_sort(v.begin(), v.end(), [](const StepPoint& a, const StepPoint& b) { return a.step < b.step; });
  // Of equal steps the last (the latest write) stays.
  size_t w = 0;
  for (size_t i = 0; i < v.size(); i++) {
    if (i + 1 < v.size() && v[i + 1].step == v[i].step) continue;
    v[w++] = v[i];
  }
  v.resize(w);
}

}  // namespace trainwatch::runs
