#pragma once
// Server-side downsampling of run metrics to a point budget (docs/runs-api.md
// "Metrics"): equal-width buckets over x that keep each bucket's min, max and
// last, so no extreme is sampled away at any zoom, and TensorBoard's debiased
// EMA computed on the full-resolution series before bucketing.

#include <cstdint>
#include <vector>

namespace trainwatch::runs {

struct XY {
  int64_t x;  // step, or unix milliseconds
  double y;
};

struct Bucket {
  int64_t x = 0;     // x of the bucket's first point
  double min = 0;    // over the non-NaN values (NaN when all are NaN)
  double max = 0;
  double last = 0;   // the bucket's last value, as stored
  double ema = 0;    // the EMA at the bucket's last point (when smoothing)
  int64_t count = 0; // points in the bucket
  int64_t nan = 0;   // NaN values among them
};

// TensorBoard's smoothing (tensorboard/components/vz_line_chart2): last =
// last*w + (1-w)*y over finite values, divided by 1 - w^n; non-finite values
// pass through unchanged and do not advance it; a constant series stays as
// is. REQUIRES: 0 <= w < 1.
std::vector<double> DebiasedEma(const std::vector<XY>& points, double w);

// Groups `points` (sorted by x) into at most `max_buckets` equal-width
// buckets over [first x, last x]; when there are no more points than
// buckets, each point is its own bucket. `ema` (same size as points, or
// empty) supplies Bucket::ema. REQUIRES: max_buckets >= 1.
std::vector<Bucket> Downsample(const std::vector<XY>& points, int64_t max_buckets, const std::vector<double>& ema);

}  // namespace trainwatch::runs
