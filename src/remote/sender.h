#pragma once
// One remote_write destination: reads the Queue from its saved position,
// applies write_relabel_configs, and sends batches of samples as Prometheus's
// queue manager does (storage/remote/queue_manager.go): samples are spread
// over shards by series, so each series' samples stay in order (min_shards
// at start; doubled up to max_shards while the shards hold the reader back
// more than half of a 10 s window and sends succeed, halved after a minute
// of never holding it back; shards are drained before they change); a shard
// sends max_samples_per_send at once or what it has after
// batch_send_deadline; 5xx, network errors (and 429 with retry_on_http_429)
// are retried with exponential backoff from min_backoff to max_backoff
// until they succeed; other 4xx answers drop the batch, logged and counted.
//
// Nothing is lost across restarts or receiver outages: the position of the
// first record not wholly sent is saved to a file about once a second
// (without fsync: after a power loss it may be older, which resends more),
// and a restart resends from there (a receiver sees at most those samples
// twice; trainwatch, Prometheus and VictoriaMetrics store them once).
//
// Thread safety: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/file.h"
#include "base/mutex.h"
#include "base/status.h"
#include "remote/config.h"
#include "remote/queue.h"

namespace trainwatch::remote {

struct SenderStats {
  uint64_t samples_sent = 0;     // accepted by the receiver (2xx)
  uint64_t samples_failed = 0;   // dropped after a non-retryable answer
  uint64_t samples_retried = 0;  // sample-sends repeated after a retryable failure
  uint64_t samples_dropped = 0;  // dropped by write_relabel_configs
  uint64_t samples_pending = 0;  // read from the queue, not yet sent
  uint64_t bytes_sent = 0;       // compressed request bytes accepted
  uint64_t requests = 0;         // requests answered 2xx
  double request_seconds = 0;    // time of those requests, retries included
  uint64_t segments_skipped = 0; // unread queue segments lost to its size bound or corruption
  int64_t highest_sent_ms = 0;   // newest sample timestamp sent
  int shards = 0;
};

class Sender {
 public:
  // Starts at the position saved in `position_path`, or at the queue's end
  // when there is none (a new destination gets what arrives from now on).
  static Result<std::unique_ptr<Sender>> Start(RemoteWriteConfig cfg, Queue* q, std::string position_path,
                                               std::string user_agent);
  ~Sender();  // Stop()s
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Stops reading, aborts requests in flight and saves the position. What
  // was not acknowledged is sent again by the next Start. Idempotent.
  void Stop();
  // Every record before this position is sent or given up on.
  Position acked() const;
  const RemoteWriteConfig& config() const { return cfg_; }
  SenderStats stats() const;

 private:
  struct SeriesEntry {
    // After external labels and write_relabel_configs, as the protobuf
    // fields of TimeSeries.labels (proto.h AppendLabelFields).
    std::string label_fields;
    bool dropped = false;  // relabeling dropped the series
    int last_segment = 0;  // newest segment whose records named it
    uint64_t last_seq = 0; // newest record that sent samples of it
  };
  struct Pending {
    // Stable: series_ is node-based and an entry is forgotten only once
    // every sample of it is acknowledged (ForgetOldSeries).
    const SeriesEntry* series;
    int64_t t;
    double v;
    uint64_t seq;  // the queue record it came from, counted from 1
  };
  // A native-histogram sample: kept apart from the floats' Pending so
  // theirs stays as small as it was.
  struct HistPending {
    const SeriesEntry* series;
    int64_t t;
    model::FloatHistogram h;
    uint64_t seq;
  };
  struct Shard;  // sender.cc

  Sender(RemoteWriteConfig cfg, Queue* q, std::string position_path, std::string user_agent);
  void ReadLoop(Position start);
  void ShardLoop(Shard* s);
  // Sends one encoded batch until it succeeds, fails for good, or Stop.
  // Returns false only when stopped before it succeeded.
  bool SendWithRetries(Shard* s, const std::string& body, size_t samples, int64_t highest_ms);
  void UpdateAcked();
  // Starts n shard threads. REQUIRES: none running.
  void StartShards(size_t n);
  // Waits until every shard has sent what it holds (or Stop), then ends
  // their threads; false when stopped first.
  bool DrainAndStopShards();
  void SavePosition(Position p, file::Sync sync);
  void ForgetOldSeries(int segment);

  const RemoteWriteConfig cfg_;
  Queue* const q_;
  const std::string position_path_;
  const std::string user_agent_;

  // Replaced only by the reader thread while resharding (exclusively
  // locked; Open's first StartShards runs before the reader starts); others
  // iterate it under a shared lock. Not TW_GUARDED_BY: its one writer, the
  // reader thread, reads it without the lock (nothing else can replace it),
  // and so does Stop once the reader is joined.
  mutable base::SharedMutex shards_mu_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::thread reader_;
  std::atomic<bool> stop_{false};

  // The series met in the queue by queue id: only the reader thread uses
  // the map; shards read entries through Pending::series.
  std::unordered_map<uint64_t, SeriesEntry> series_;

  mutable base::Mutex mu_;
  base::CondVar cv_;        // a shard made room or finished a batch
  std::deque<std::pair<uint64_t, Position>> record_ends_ TW_GUARDED_BY(mu_);  // seq -> end, not yet acked
  uint64_t dispatched_seq_ TW_GUARDED_BY(mu_) = 0;  // records wholly handed to shards
  Position acked_ TW_GUARDED_BY(mu_);
  SenderStats stats_ TW_GUARDED_BY(mu_);
  bool stopped_ TW_GUARDED_BY(mu_) = false;
};

}  // namespace trainwatch::remote
