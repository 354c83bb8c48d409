#include "runs/downsample.h"

#include <cmath>

namespace trainwatch::runs {

std::vector<double> DebiasedEma(const std::vector<XY>& points, double w) {
  std::vector<double> out(points.size());
  bool constant = true;
  for (const XY& p : points) {
    if (!(p.y == points[0].y)) constant = false;
  }
  double last = 0;
  int64_t n = 0;
  for (size_t i = 0; i < points.size(); i++) {
    double y = points[i].y;
    if (constant || !std::isfinite(y)) {
      out[i] = y;
      continue;
    }
    last = last * w + (1 - w) * y;
    n++;
    double debias = w == 1 ? 1 : 1 - std::pow(w, static_cast<double>(n));
    out[i] = last / debias;
  }
  return out;
}

std::vector<Bucket> Downsample(const std::vector<XY>& points, int64_t max_buckets, const std::vector<double>& ema) {
  std::vector<Bucket> out;
  if (points.empty()) return out;
  bool each = static_cast<int64_t>(points.size()) <= max_buckets;
  // Width as a fraction so [x0, x1] splits into exactly max_buckets buckets;
  // __int128 keeps (x - x0) * max_buckets exact for any int64 range. Points
  // are sorted, so a point's bucket is computed only when it passes the
  // current bucket's end: one division per bucket instead of per point.
  const __int128 x0 = points.front().x;
  const __int128 span = static_cast<__int128>(points.back().x) - x0 + 1;
  // The smallest x whose bucket is >= b: x0 + ceil(b * span / max_buckets).
  auto bucket_start = [&](int64_t b) {
    return x0 + (static_cast<__int128>(b) * span + max_buckets - 1) / max_buckets;
  };
  if (!each) out.reserve(static_cast<size_t>(max_buckets));
  __int128 next_start = x0;  // where the bucket after the current one begins
  for (size_t i = 0; i < points.size(); i++) {
    const XY& p = points[i];
    bool start = each;
    if (!each && p.x >= next_start) {
      auto b = static_cast<int64_t>((static_cast<__int128>(p.x) - x0) * max_buckets / span);
      next_start = bucket_start(b + 1);
      start = true;
    }
    if (start) {
      Bucket nb;
      nb.x = p.x;
      nb.min = nb.max = std::nan("");
      out.push_back(nb);
    }
    Bucket& k = out.back();
    k.count++;
    if (std::isnan(p.y)) {
      k.nan++;
    } else {
      if (std::isnan(k.min) || p.y < k.min) k.min = p.y;
      if (std::isnan(k.max) || p.y > k.max) k.max = p.y;
    }
    k.last = p.y;
    if (!ema.empty()) k.ema = ema[i];
  }
  return out;
}

}  // namespace trainwatch::runs
