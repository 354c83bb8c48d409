#pragma once
// Samples of new series that the store refused at its series limit
// (--storage.max-series: ResourceExhausted from Append). A push skips them,
// stores the rest of its batch and then answers 400 naming them, as
// Prometheus's receiver does for samples it cannot take: existing series
// keep flowing, and the sender does not retry what can never be stored.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace trainwatch::ingest {

class SeriesLimitRefusals {
 public:
  // True, and counted, when `s` is such a refusal: skip the sample.
  bool Take(const Status& s) {
    if (s.code() != StatusCode::kResourceExhausted) return false;
    if (samples_++ == 0) first_ = s.message();
    return true;
  }
  uint64_t samples() const { return samples_; }
  // OK when none were refused; else InvalidArgument "N of M samples
  // refused: <the first refusal>; the other samples were stored".
  Status After(uint64_t total) const {
    if (samples_ == 0) return Status::OK();
    return Status::InvalidArgument(std::to_string(samples_) + " of " + std::to_string(total) +
                                   " samples refused: " + first_ + (samples_ < total ? "; the other samples were stored" : ""));
  }
  void Clear() {
    samples_ = 0;
    first_.clear();
  }

 private:
  uint64_t samples_ = 0;
  std::string first_;
};

}  // namespace trainwatch::ingest
