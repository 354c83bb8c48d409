#pragma once
// `serve`'s built-in collectors: every interval, the host collector
// (job="node") and the GPU collector (job="dcgm") run, their series are
// appended to storage with job and instance labels as a scrape would add
// them (stale markers for series that vanish), and the latest families are
// kept for GET /metrics.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "collect/gpu/usage.h"
#include "collect/host/host.h"
#include "collect/snapshot.h"
#include "storage/storage.h"

namespace trainwatch::runs {
class RunStore;
}

namespace trainwatch::app {

struct CollectOptions {
  bool host = true;                           // --collect.host
  bool gpu = true;                            // --collect.gpu
  std::string nvml_path = "libnvidia-ml.so.1";  // --collect.nvml-path
  int64_t interval_ms = 15000;                // --collect.interval
  std::string instance;                       // instance label; <hostname>:<port>
  std::string hostname;                       // Hostname label and runs' host for pid lookups
  collect::host::Options host_options;        // /proc, /sys roots (tests point them at fixtures)
  // GPU time, energy, idle time and cost per run (--runs.gpu-hour-price);
  // its max_gap_ms is raised to 4 collection intervals where that is longer.
  collect::gpu::UsageOptions usage;
};

class CollectLoop {
 public:
  // `runs` (may be null) maps GPU processes to training runs of this host.
  CollectLoop(CollectOptions o, storage::Appendable* app, runs::RunStore* runs);
  ~CollectLoop();  // Stop()

  // Opens the collectors (a missing NVML is one log line). Start() calls it.
  void Open();
  // Opens the collectors unless open, and starts the thread (when any collector is on).
  void Start();
  void Stop();
  // Runs one collection and append now (tests, benchmarks); not concurrently with Start().
  void CollectOnce(int64_t now_ms);

  collect::Snapshot* snapshot() { return &snapshot_; }

  struct State;

 private:
  void Run();

  CollectOptions o_;
  storage::Appendable* app_;
  runs::RunStore* runs_;
  collect::Snapshot snapshot_;
  std::unique_ptr<State> state_;
  base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  bool opened_ = false;
  std::thread thread_;
};

// This machine's host name (gethostname), "localhost" when unknown.
std::string HostName();

}  // namespace trainwatch::app
