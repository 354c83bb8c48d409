#pragma once
// Forwarding of stored lines to an existing Elasticsearch/OpenSearch (_bulk)
// or Loki (push, JSON) endpoint. The log store itself is the disk-backed
// queue: the forwarder reads lines after its saved position (per partition,
// by row id; `state_path`, written after each accepted batch), so lines
// stored while the target is down are sent once it is back, across restarts
// too. A batch is retried until the target answers 2xx; documents that
// Elasticsearch rejects individually (4xx items) are logged and skipped.
// Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "logs/store.h"

namespace trainwatch::logs {

struct ForwardTarget {
  enum class Kind { kElasticsearch, kLoki };
  Kind kind = Kind::kElasticsearch;
  std::string url;           // base URL, e.g. http://es:9200 (paths /_bulk, /loki/api/v1/push are added)
  std::string index = "trainwatch-logs";  // Elasticsearch index
  std::string state_path;    // position file
  size_t batch = 1000;
  int64_t poll_ms = 1000;
};

// The request body for `records` (an Elasticsearch _bulk NDJSON or a Loki JSON push).
std::string ForwardBody(const ForwardTarget& t, const std::vector<Record>& records);

class Forwarder {
 public:
  static Result<std::unique_ptr<Forwarder>> Make(ForwardTarget t, LogStore* store);
  ~Forwarder();
  // Sends one batch if there is one; OK when there was nothing or it was accepted.
  Status SendOnce(bool* sent_any);
  void Start();
  void Stop();
  // Whether Start was called (not thread-safe against Start).
  bool IsStarted() const { return thread_.joinable(); }

 private:
  Forwarder() = default;
  Status SaveState();

  ForwardTarget t_;
  LogStore* store_ = nullptr;
  std::map<int64_t, int64_t> pos_;  // partition start ms -> last sequence number sent
  base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainwatch::logs
