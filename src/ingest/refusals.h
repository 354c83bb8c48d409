#pragma once
// What a push (remote_write, import) refuses beyond its bounds.
//
// SeriesRefusals: samples of new series that the store refused at one of
// its series limits (--storage.max-series, --ingest.max-labels-per-series,
// ...: ResourceExhausted from Append). A push skips them, stores the rest of
// its batch and then answers 400 naming them, as Prometheus's receiver does
// for samples it cannot take: existing series keep flowing, and the sender
// does not retry what can never be stored.
//
// RequestLimits: bounds on one request's series and samples, checked while
// the body is decoded, so a body within the byte cap cannot make the decoder
// hold tens of millions of entries. A request beyond one is refused whole.

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "common/metrics.h"

namespace trainwatch::ingest {

// --web.max-request-body-bytes by default: the largest request body, as sent
// or once decoded.
inline constexpr size_t kDefaultMaxBodyBytes = size_t{256} << 20;

// --ingest.max-series-per-request and --ingest.max-samples-per-request (0:
// no bound). Refusals are counted in the counters when given
// (trainwatch_ingest_requests_refused_total).
struct RequestLimits {
  uint64_t max_series = 0;
  uint64_t max_samples = 0;
  // --web.max-request-body-bytes for bodies the handler decodes itself
  // (snappy); the HTTP server holds bodies as sent and gzip-decoded to it.
  size_t max_decoded_bytes = kDefaultMaxBodyBytes;
  common::metrics::Counter* series_refused = nullptr;
  common::metrics::Counter* samples_refused = nullptr;

  bool SeriesOk(size_t n) const { return max_series == 0 || n <= max_series; }
  bool SamplesOk(size_t n) const { return max_samples == 0 || n <= max_samples; }
  // Counts one refused request; InvalidArgument naming the bound and flag.
  Status TooManySeries() const {
    if (series_refused != nullptr) series_refused->Inc();
    return Status::InvalidArgument("request has more than " + std::to_string(max_series) +
                                   " series (--ingest.max-series-per-request); nothing of it was stored");
  }
  Status TooManySamples() const {
    if (samples_refused != nullptr) samples_refused->Inc();
    return Status::InvalidArgument("request has more than " + std::to_string(max_samples) +
                                   " samples (--ingest.max-samples-per-request); nothing of it was stored");
  }
};

class SeriesRefusals {
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
