#pragma once
// The scrape manager: one pool per scrape_configs job, one ScrapeLoop per
// target. ApplyConfig diffs against the running set: jobs whose config is
// unchanged keep their loops (and series caches) for targets that are still
// there; loops of targets that went away stop with staleness markers.
// file_sd files are polled (glob + mtime) every second and re-read on change
// or after refresh_interval. Thread-safe.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "scrape/config.h"
#include "scrape/scrape_loop.h"
#include "scrape/target.h"
#include "storage/storage.h"

namespace trainwatch::scrape {

struct ManagerOptions {
  int64_t sd_poll_ms = 1000;
};

// One target as /api/v1/targets shows it.
struct TargetInfo {
  common::LabelSet discovered;
  model::Labels labels;
  std::string pool;
  std::string url;
  TargetState state;
  int64_t interval_ms = 0;
  int64_t timeout_ms = 0;
};

struct PoolsSnapshot {
  std::vector<TargetInfo> active;
  std::vector<TargetInfo> dropped;  // discovered labels and pool only
};

class Manager {
 public:
  Manager(storage::Appendable* db, ManagerOptions opts = {});
  ~Manager();

  // Starts scraping `configs`, replacing the running set.
  void ApplyConfig(std::vector<ScrapeConfig> configs);
  // Stops every loop (no staleness markers: the process is going away).
  void Stop();

  PoolsSnapshot Snapshot() const;
  // Metric family -> distinct metadata seen by the active targets.
  std::map<std::string, std::vector<MetricMetadata>> Metadata() const;
  // Per target: (target labels, family -> metadata), for /api/v1/targets/metadata.
  std::vector<std::pair<model::Labels, std::map<std::string, MetricMetadata>>> TargetMetadata() const;

 private:
  struct FileState {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    std::vector<TargetGroup> groups;
  };
  // A pool's fields (not annotated: guarded by the Manager's mutexes) are
  // changed with apply_mu_ held; loops and dropped also with mu_ held, so
  // readers hold either.
  struct Pool {
    std::shared_ptr<const ScrapeConfig> cfg;
    std::map<uint64_t, std::unique_ptr<ScrapeLoop>> loops;  // by target hash
    std::vector<TargetSpec> dropped;
    std::map<std::string, FileState> files;  // file_sd path -> last read
    int64_t last_refresh_ms = 0;
  };

  // Re-reads changed file_sd files of `p`; true when anything changed.
  bool RefreshFiles(Pool* p, bool force) TW_REQUIRES(apply_mu_);
  // Computes the pool's targets and starts/stops loops; loops to stop are
  // moved to `stopped` (stopped by the caller outside the lock).
  void SyncPool(Pool* p, std::vector<std::unique_ptr<ScrapeLoop>>* stopped) TW_REQUIRES(apply_mu_) TW_EXCLUDES(mu_);
  void SdLoop();

  storage::Appendable* db_;
  ManagerOptions opts_;
  mutable base::Mutex mu_;
  std::map<std::string, std::unique_ptr<Pool>> pools_ TW_GUARDED_BY(mu_);
  base::Mutex apply_mu_;  // serializes ApplyConfig and the file_sd poller
  std::thread sd_thread_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
};

}  // namespace trainwatch::scrape
