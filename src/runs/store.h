#pragma once
// RunStore: the experiment-tracking runs of docs/runs-api.md. Run metadata,
// the last batch ids of each run and run alerts live in SQLite at
// <data-dir>/runs.db; logged values and the run series go to the TSDB
// through storage::Appendable and are read back through storage::Queryable.
//
// Durability: a batch's samples are committed to the TSDB (durable per the
// WAL sync policy) before its batch id and the run row are committed to
// SQLite (WAL journal; synchronous=FULL by default, NORMAL with
// `sync_full = false`). A crash between the two leaves the id unrecorded; the
// client's retry re-appends the same (series, timestamp, value) samples,
// which the TSDB ignores as duplicates, so every step is stored once.
//
// Thread-safe. Mutations of one run are serialized; different runs proceed
// in parallel.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runs/filter.h"
#include "runs/request.h"
#include "runs/run.h"
#include "storage/storage.h"

struct sqlite3;

namespace trainwatch::runs {

struct RunStoreOptions {
  std::string path;                  // the SQLite file, e.g. <data-dir>/runs.db
  bool sync_full = true;             // synchronous=FULL (a 2xx survives power loss) or NORMAL
  int64_t heartbeat_timeout_ms = 5 * 60 * 1000;
  std::function<int64_t()> now_ms;   // unix ms; default: the wall clock
};

struct BatchResult {
  size_t accepted = 0;  // values stored (trainwatch_run_step not counted)
  bool duplicate = false;
  std::vector<Rejection> rejected;
};

struct ListOptions {
  std::string sort = "start_time";  // any filter field
  bool descending = true;
  size_t limit = 1000;
  size_t offset = 0;
};

// GET /api/v1/runs/metrics
struct MetricsQuery {
  std::vector<std::string> ids;
  std::vector<std::string> keys;  // empty: every key the runs logged
  bool by_step = true;            // x = step, else x = time
  int64_t points = 1000;          // bucket budget per series, >= 1
  double smoothing = 0;           // EMA weight in [0, 1); 0: none
  std::optional<int64_t> start, end;  // inclusive, in x units (step, or unix ms)
};

class RunStore {
 public:
  // Opens (creating) the database. `app` and `queryable` must outlive the store.
  static Result<std::unique_ptr<RunStore>> Open(const RunStoreOptions& opts, storage::Appendable* app,
                                                 storage::Queryable* queryable);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // POST /api/v1/runs: creates the run, or resumes the run with that id.
  Result<Run> CreateOrResume(const CreateRequest& req);
  // POST /api/v1/runs/{id}/batches. NotFound for an unknown run.
  Result<BatchResult> WriteBatch(std::string_view id, const BatchRequest& batch);
  Status Heartbeat(std::string_view id);
  Result<Run> Finish(std::string_view id, const FinishRequest& req);
  // Keeps `alert` with the run; its time is set to now. Once stored, the
  // alert goes to the alert sink, if one is set.
  Status AddAlert(std::string_view id, RunAlert alert);
  // Called after each stored run alert with the run and the alert, on the
  // thread of the request, without the store's lock held (so it may call the
  // store). app/ routes them to the notifier. Empty: none.
  using AlertSink = std::function<void(const Run& run, const RunAlert& alert)>;
  void SetAlertSink(AlertSink sink);

  Result<Run> Get(std::string_view id) const;
  Result<std::vector<RunAlert>> Alerts(std::string_view id) const;
  std::vector<Run> List(const Filter& filter, const ListOptions& opts) const;
  // Per run and key series, as the JSON array the API answers.
  Result<Json> ReadMetrics(const MetricsQuery& q) const;

  // Marks running runs whose last heartbeat (or the store's opening, if
  // later) is older than the timeout as crashed; returns how many.
  int CheckHeartbeats();
  // Runs CheckHeartbeats periodically in a background thread until Stop.
  void StartHeartbeatChecker();
  void Stop();

 struct Live;  // internal: per-run live state (store_internal.h)

 private:
  // WriteBatch once the points the TSDB would refuse for their time are
  // moved to the rejections.
  Result<BatchResult> WriteCheckedBatch(std::string_view id, const BatchRequest& batch);
  RunStore(RunStoreOptions opts, storage::Appendable* app, storage::Queryable* q);
  Status Init();
  int64_t Now() const { return opts_.now_ms(); }
  Live& LiveOf(const std::string& id);  // REQUIRES: mu_ held
  Status SaveRun(const Run& r);         // REQUIRES: mu_ held
  std::string UniqueName(const std::string& project, const std::string& name) const;  // REQUIRES: mu_ held
  // Appends the run series of `r` at now (heartbeat, active, start, total,
  // and with `progress` the progress ratio and ETA) and commits.
  Status WriteRunSeries(const Run& r, Live& live, bool progress, bool ended);

  const RunStoreOptions opts_;
  storage::Appendable* const app_;
  storage::Queryable* const queryable_;
  const int64_t opened_ms_;

  mutable std::mutex mu_;
  sqlite3* db_ = nullptr;             // guarded by mu_
  std::map<std::string, Run> runs_;   // by id; guarded by mu_
  std::map<std::string, std::unique_ptr<Live>> live_;  // by id; never erased; guarded by mu_
  AlertSink alert_sink_;              // guarded by mu_

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread checker_;
};

}  // namespace trainwatch::runs
