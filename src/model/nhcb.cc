#include "model/nhcb.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace trainwatch::model {

Status NhcbBuilder::SetBucketCount(double le, double count) {
  if (!err_.ok()) return err_;
  if (std::isnan(le)) return err_ = Status::InvalidArgument("bucket boundary must not be NaN");
  if (count < 0) {
    return err_ = Status::InvalidArgument(fmt::format("bucket count must be non-negative: le={:g}, count={:g}", le, count));
  }
  auto not_cumulative = [&](double a, const char* op, double b) {
    return err_ = Status::InvalidArgument(fmt::format("count is not cumulative: {:g} {} {:g}", a, op, b));
  };
  if (buckets_.empty() || buckets_.back().le < le) {
    if (!buckets_.empty() && count < buckets_.back().count) return not_cumulative(count, "<", buckets_.back().count);
    buckets_.push_back({le, count});
    return Status::OK();
  }
  // Out of order (rare): insert in place; a repeated bound keeps the first.
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), le, [](const Bucket& b, double v) { return b.le < v; });
  if (it->le == le) return Status::OK();
  if (it != buckets_.begin() && count < std::prev(it)->count) return not_cumulative(count, "<", std::prev(it)->count);
  if (count > it->count) return not_cumulative(count, ">", it->count);
  buckets_.insert(it, {le, count});
  return Status::OK();
}

Status NhcbBuilder::SetCount(double count) {
  if (!err_.ok()) return err_;
  if (count < 0) return err_ = Status::InvalidArgument(fmt::format("count must be non-negative: count={:g}", count));
  count_ = count;
  has_count_ = true;
  return Status::OK();
}

Status NhcbBuilder::SetSum(double sum) {
  if (!err_.ok()) return err_;
  sum_ = sum;
  return Status::OK();
}

void NhcbBuilder::Reset() {
  buckets_.clear();
  count_ = sum_ = 0;
  has_count_ = false;
  err_ = Status::OK();
}

Result<FloatHistogram> NhcbBuilder::Convert() const {
  if (!err_.ok()) return err_;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<Bucket> b = buckets_;
  double count = count_;
  if (!has_count_ && !b.empty()) count = b.back().count;
  if (b.empty() || b.back().le != kInf) b.push_back({kInf, count});
  bool integers = count == std::round(count);
  for (const Bucket& x : b) integers = integers && x.count == std::round(x.count);
  if (count != b.back().count) {
    return Status::InvalidArgument(fmt::format("count mismatch: count={:g} != le={:g} count={:g}", count, b.back().le,
                                               b.back().count));
  }
  FloatHistogram h;
  h.schema = kCustomBucketsSchema;
  h.count = count;
  h.sum = sum_;
  h.positive_spans = {Span{0, static_cast<uint32_t>(b.size())}};
  double prev = 0;
  for (const Bucket& x : b) {
    h.positive_buckets.push_back(x.count - prev);
    prev = x.count;
    if (x.le != kInf) h.custom_values.push_back(x.le);
  }
  // Prometheus compacts an integer histogram with 2 and a float one with 0.
  h.Compact(integers ? 2 : 0);
  return h;
}

}  // namespace trainwatch::model
