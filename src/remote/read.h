#pragma once
// `remote_read:` of a prometheus.yml: trainwatch's PromQL, rules and series
// API read from long-term stores (a Prometheus, Thanos, VictoriaMetrics,
// another trainwatch) besides the local TSDB, as Prometheus 2.42 does
// (storage/remote/read.go, fanout.go):
//
// - Each Select sends one remote read request (ReadRequest with one Query,
//   SAMPLES response, snappy) to every configured store and merges the
//   series into the local ones; the local store wins equal timestamps.
// - read_recent: false (the default) asks a store only for the part of the
//   range before the oldest local sample, and not at all when the range
//   starts after it. required_matchers: a store is asked only when the
//   query's selector has each of them as an equality matcher.
// - External labels: equality matchers for the ones the selector does not
//   name are added to the request, and removed from the answer, unless
//   filter_external_labels is false.
// - Label names and values come from the local TSDB only (the remote read
//   protocol has no such query).
// - A store that fails (unreachable, non-2xx, an answer that does not
//   decode) is logged and counted; the query is answered from the others,
//   as Prometheus answers it with a warning.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "remote/config.h"
#include "storage/storage.h"

namespace trainwatch::remote {

class RemoteRead : public storage::Queryable {
 public:
  // `local_start`: the time of the oldest local sample (ms; INT64_MAX when
  // there is none), for read_recent: false.
  // trainwatch_remote_read_{queries,failures}_total{remote_name} register in
  // `metrics` (outlives it) unless null.
  RemoteRead(std::function<int64_t()> local_start, std::string user_agent,
             common::metrics::Registry* metrics = nullptr);
  ~RemoteRead() override;
  // Replaces the stores (a reload); queries under way keep the old ones.
  void Apply(std::vector<RemoteReadConfig> configs);
  bool empty() const;
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;

  struct Store;  // one remote_read entry and its client

 private:
  std::function<int64_t()> local_start_;
  std::string user_agent_;
  mutable base::Mutex mu_;
  std::shared_ptr<const std::vector<std::shared_ptr<Store>>> stores_ TW_GUARDED_BY(mu_);
  common::metrics::Collector metrics_;  // the stores' counters, at scrape time
  common::metrics::Registration metrics_registration_;  // last: unregisters first
};

// Reads `primary` and merges `secondary` into every Select (primary wins
// equal timestamps); label names and values from `primary` alone. Either's
// error is the querier's.
class FanoutQueryable : public storage::Queryable {
 public:
  FanoutQueryable(storage::Queryable* primary, RemoteRead* secondary) : primary_(primary), secondary_(secondary) {}
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;

 private:
  storage::Queryable* primary_;
  RemoteRead* secondary_;
};

// Decodes a STREAMED_XOR_CHUNKS answer: CRC-checked frames of
// ChunkedReadResponse with XOR, HISTOGRAM and FLOAT_HISTOGRAM chunks
// (remote/prom_chunks.h). Keeps samples in [mint, maxt], joins a series split
// over frames, removes the `drop` labels; series sorted by labels. Errors
// name the frame, series, chunk and problem.
Result<std::vector<std::shared_ptr<storage::Series>>> DecodeChunkedReadResponse(std::string_view body, int64_t mint,
                                                                                int64_t maxt, const model::Labels& drop);

}  // namespace trainwatch::remote
