#pragma once
// remote_write out: the front of remote/. A Manager owns the on-disk Queue
// (opened when the first destination is configured) and one Sender per
// `remote_write:` entry. `trainwatch serve` puts Wrap(db) in front of the
// TSDB so every committed sample is also queued; `trainwatch agent` appends
// to the Manager's queue directly and stores nothing else.
//
//   <dir>/queue/          the Queue (docs/format/remote_write.md)
//   <dir>/<name>.position each destination's send position
//
// Thread safety: every method may be called from any thread.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "remote/config.h"
#include "remote/queue.h"
#include "remote/sender.h"
#include "storage/storage.h"

namespace trainwatch::remote {

struct ManagerOptions {
  std::string dir;         // e.g. <data-dir>/remote_write
  QueueOptions queue;      // .dir is set to <dir>/queue
  std::string user_agent = "trainwatch";
  // Where prometheus_remote_storage_* and trainwatch_remote_write_* register
  // (outlives the Manager); null: nowhere.
  common::metrics::Registry* metrics = nullptr;
};

class Manager {
 public:
  explicit Manager(ManagerOptions opts);
  ~Manager();  // Stop()s
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Starts senders for new entries, keeps those whose YAML is unchanged
  // (with their position), stops removed ones. The queue is opened on the
  // first call with an entry. On error nothing changes.
  Status ApplyConfig(std::vector<RemoteWriteConfig> cfgs);

  // An Appendable that commits to `primary` and, while destinations are
  // configured, queues the same samples first (so a crash between the two
  // resends rather than loses). Refs are `primary`'s.
  // REQUIRES: `primary` outlives the result; the result outlives no Stop.
  std::unique_ptr<storage::Appendable> Wrap(storage::Appendable* primary);

  // The queue itself as the store (agent mode); null before a destination
  // is configured.
  storage::Appendable* queue();

  // Stops the senders (saving their positions) and closes the queue.
  void Stop();

  size_t destinations() const;

 private:
  void Housekeep();
  Queue* active_queue() const { return active_.load(std::memory_order_acquire) ? queue_ptr_.load() : nullptr; }

  void CollectMetrics(common::metrics::Emitter* e) const;

  const ManagerOptions opts_;
  mutable base::Mutex mu_;
  std::unique_ptr<Queue> queue_ TW_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Sender>> senders_ TW_GUARDED_BY(mu_);
  std::atomic<Queue*> queue_ptr_{nullptr};           // queue_.get(), for appenders
  std::atomic<bool> active_{false};                  // at least one destination
  bool stopped_ TW_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> queue_errors_{0};            // batches Wrap()'s appenders failed to queue
  base::CondVar cv_;
  std::thread housekeeper_;  // deletes sent segments every second
  common::metrics::Collector metrics_;  // per destination and of the queue, at scrape time
  common::metrics::Registration metrics_registration_;  // last: unregisters first
};

}  // namespace trainwatch::remote
