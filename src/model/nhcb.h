#pragma once

// Classic histogram (cumulative `le` buckets, _count, _sum) to a native
// histogram with custom buckets (NHCB, schema -53), as Prometheus 3's
// util/convertnhcb does. Not thread-safe; one per histogram being built.

#include <string>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"

namespace trainwatch::model {

class NhcbBuilder {
 public:
  // A cumulative bucket. Bounds may come in any order; a repeated bound keeps
  // the first count. Errors (sticky): NaN bound, negative count, a count
  // smaller than a lower bound's or larger than a higher bound's.
  Status SetBucketCount(double le, double count);
  // _count; negative is an error. Without it the highest bucket's count.
  Status SetCount(double count);
  Status SetSum(double sum);
  // The NHCB: +Inf is added with the count when missing; custom_values are
  // the finite bounds; buckets are compacted as Prometheus does (2 empty
  // buckets allowed between populated ones when every count is an integer,
  // else 0). Error when _count differs from the +Inf bucket's count.
  Result<FloatHistogram> Convert() const;
  void Reset();

 private:
  struct Bucket {
    double le;
    double count;
  };
  std::vector<Bucket> buckets_;  // sorted by le, no repeats
  double count_ = 0;
  double sum_ = 0;
  bool has_count_ = false;
  Status err_;  // sticky
};

}  // namespace trainwatch::model
