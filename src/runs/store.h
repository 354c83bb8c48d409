#pragma once
// RunStore: the experiment-tracking runs of docs/runs-api.md. Run metadata,
// the last batch ids of each run, run alerts and the step store (every
// logged value by run, rank, key and step, in compressed chunks: steps.h)
// live in SQLite at <data-dir>/runs.db. The TSDB gets the time view of the
// logged values (at most one sample per series, batch and second, never
// later than the server's clock; docs/training-metrics.md) and the run
// series through storage::Appendable.
//
// Durability: a batch's time-view samples are committed to the TSDB (durable
// per the WAL sync policy) before its batch id, its step-store chunks and the
// run row are committed to SQLite in one transaction (WAL journal;
// synchronous=FULL by default, NORMAL with `sync_full = false`). The step
// store therefore holds a batch exactly once; a crash between the two leaves
// the id unrecorded, and the client's retry re-appends the same
// (series, timestamp, value) samples, which the TSDB ignores as duplicates.
//
// Thread-safe. Mutations of one run are serialized; different runs proceed
// in parallel.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "runs/filter.h"
#include "runs/request.h"
#include "runs/run.h"
#include "runs/steps.h"
#include "storage/storage.h"

struct sqlite3;

namespace trainwatch::runs {

struct RunStoreOptions {
  std::string path;                  // the SQLite file, e.g. <data-dir>/runs.db
  bool sync_full = true;             // synchronous=FULL (a 2xx survives power loss) or NORMAL
  int64_t heartbeat_timeout_ms = 5 * 60 * 1000;
  std::function<int64_t()> now_ms;   // unix ms; default: the wall clock
  // Uploaded artifact content, one file per SHA-256; default: "artifacts"
  // beside `path`.
  std::string artifacts_dir;
  // --runs.artifact-keep-versions: the newest versions of an artifact whose
  // stored content is kept when another is logged; 0: all.
  int64_t artifact_keep_versions = 0;
  // Where trainwatch_runs_db_set_aside registers once the store is open
  // (outlives it); null: nowhere.
  common::metrics::Registry* metrics = nullptr;
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

// One series of the step store: the values of one key logged by one rank
// (or by a run without ranks).
struct StepSeries {
  std::string metric;           // KeyToMetricName(key)
  std::optional<int64_t> rank;  // absent: batches without a rank
  std::string host;             // the rank's host (ranked series only)
  std::vector<StepPoint> points;  // by step, each step once (the last write)
};

// {"host", "rank"} of a ranked series, {} of a rankless one: the labels its
// TSDB time view carries besides project and run.
Json StepLabelsJson(const StepSeries& s);

// GET /api/v1/runs/histograms and /api/v1/runs/media (docs/runs-api.md
// "Rich values"); every bound inclusive.
struct MediaQuery {
  std::vector<std::string> ids;
  std::string key;
  std::optional<int64_t> rank;        // -1: only rankless values
  std::optional<int64_t> step;        // per run and rank, the last entry at or before it
  std::optional<int64_t> start, end;  // steps
  int64_t limit = 1000;  // media: entries per run; histograms: steps per run and rank
};

// An image as stored.
struct MediaContent {
  std::string format;  // "png" or "jpeg"
  std::string bytes;
};

// An artifact version (docs/runs-api.md "Artifacts").
struct Artifact {
  int64_t id = 0;
  std::string project, name, type;
  int64_t version = 0;
  std::string sha256;
  int64_t size = 0;
  std::string uri;
  Json metadata = Json::object();
  bool stored = false;   // its content is under the artifacts dir
  bool deleted = false;  // its stored content was removed
  int64_t created_ms = 0;
  std::string producer;  // run id
  std::vector<std::string> consumers;  // run ids, in order of first use
};
Json ArtifactJson(const Artifact& a);


// What ReadSteps returns; every bound inclusive.
struct StepQuery {
  std::vector<std::string> metrics;  // empty: every metric the run logged
  std::optional<int64_t> rank;       // -1: only rankless series
  std::optional<int64_t> start_step, end_step;
  std::optional<int64_t> start_ms, end_ms;  // on the points' wall time
};

class RunStore {
 public:
  // Opens (creating) the database. `app` and `queryable` must outlive the
  // store. A damaged database is set aside ("runs.db.corrupt", logged,
  // counted) and a new one started. So is one found damaged while serving
  // (SQLITE_CORRUPT, a step chunk that does not decode): the new one holds
  // every run's row from memory (their step history and alerts stay in the
  // copy), and the operation that met the damage runs once more.
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
  // Adds GPU use to the run named `run` in `project` (the collectors' meter,
  // collect/gpu/usage.h, every collection) and writes the run's counters
  // trainwatch_run_gpu_seconds_total, trainwatch_run_gpu_energy_joules_total,
  // trainwatch_run_gpu_idle_seconds_total and trainwatch_run_gpu_cost_total
  // (totals kept in runs.db, so they only go up). Unknown runs are skipped.
  struct GpuUsageDelta {
    std::string project, run;
    Run::GpuUsage add;
  };
  Status AddGpuUsage(const std::vector<GpuUsageDelta>& usage);
  Result<Run> Finish(std::string_view id, const FinishRequest& req);
  // Keeps `alert` with the run; its time is set to now. Once stored, the
  // alert goes to the alert sink, if one is set.
  Status AddAlert(std::string_view id, RunAlert alert);
  // Called after each stored run alert with the run and the alert, on the
  // thread of the request, without the store's lock held (so it may call the
  // store). app/ routes them to the notifier. Empty: none.
  using AlertSink = std::function<void(const Run& run, const RunAlert& alert)>;
  void SetAlertSink(AlertSink sink);

  // Actions on alerts (issue 19): queues `a` for the run named `run` in
  // `project`, once per `dedupe` (an alert's fingerprint and start: its
  // resends queue nothing more); NotFound for an unknown run. Every rank of a
  // running run gets it (PendingActions) until that rank acknowledges it.
  Result<int64_t> QueueAction(std::string_view project, std::string_view run, RunAction a, std::string_view dedupe);
  // The actions rank `rank` of run `id` has not acknowledged, while it runs.
  std::vector<RunAction> PendingActions(std::string_view id, int64_t rank) const;
  // POST /api/v1/runs/{id}/actions/{n}: rank `rank` ran it with `status`
  // ("done", "failed" or "unhandled") and `result` (free text); the first
  // acknowledgement of a rank stands. InvalidArgument for an unknown action.
  Status AckAction(std::string_view id, int64_t action_id, int64_t rank, const std::string& status,
                   const std::string& result);
  // Every action of the run, oldest first.
  Result<std::vector<RunAction>> Actions(std::string_view id) const;

  // The processes of running runs on `host` (or registered as "localhost"),
  // by pid: every rank that registered with its pid and host, for the GPU
  // collector to attribute GPU processes to runs and ranks.
  struct RankProcess {
    std::string project, run;
    int64_t rank = 0;
  };
  std::unordered_map<int64_t, RankProcess> ProcessesOn(std::string_view host) const;

  Result<Run> Get(std::string_view id) const;
  Result<std::vector<RunAlert>> Alerts(std::string_view id) const;
  std::vector<Run> List(const Filter& filter, const ListOptions& opts) const;
  // Per run and key series, as the JSON array the API answers.
  Result<Json> ReadMetrics(const MetricsQuery& q) const;
  // The step store's series of run `id`, sorted by metric, then rank.
  Result<std::vector<StepSeries>> ReadSteps(std::string_view id, const StepQuery& q) const;

  // Rich values (store_media.cc): the rich keys of runs `ids`
  // ([{"run", "key", "kind", "steps", "first_step", "last_step"}]), the
  // histograms and the media entries of one key as the API answers them
  // (images without their bytes), and one image's bytes (NotFound: none;
  // `rank` absent: the lowest rank with an image there).
  Result<Json> MediaKeys(const std::vector<std::string>& ids) const;
  Result<Json> ReadHistograms(const MediaQuery& q) const;
  Result<Json> ReadMedia(const MediaQuery& q) const;
  Result<MediaContent> ReadMediaContent(std::string_view id, std::string_view key, int64_t step,
                                        std::optional<int64_t> rank) const;

  // Artifacts (store_artifacts.cc). LogArtifact: the version of `req`'s
  // content, a new one produced by run `id` unless the artifact already
  // has that sha256. StoreArtifactContent: keeps `bytes` (their SHA-256
  // and size must be the version's) durably, then marks it stored.
  Result<Artifact> LogArtifact(std::string_view id, const ArtifactRequest& req);
  Result<Artifact> StoreArtifactContent(int64_t artifact, std::string_view bytes);
  Result<Artifact> UseArtifact(std::string_view id, const ArtifactUse& use);
  Result<Artifact> GetArtifact(int64_t artifact) const;
  // {"logged": [...], "used": [...]} of run `id`.
  Result<Json> RunArtifacts(std::string_view id) const;
  // Every version of the project's artifacts (of `name` if not empty), newest first.
  Result<std::vector<Artifact>> ListArtifacts(std::string_view project, std::string_view name) const;
  // The path of a stored version's content; NotFound when it has none.
  Result<std::string> ArtifactContentPath(int64_t artifact) const;
  Result<Artifact> DeleteArtifactContent(int64_t artifact);

  // Marks running runs whose last heartbeat (or the store's opening, if
  // later) is older than the timeout as crashed; returns how many.
  int CheckHeartbeats();
  // Runs CheckHeartbeats periodically in a background thread until Stop.
  void StartHeartbeatChecker();
  void Stop();


 struct Live;  // internal: per-run live state (store_internal.h)

 private:
  struct StepSeriesState;
  RunStore(RunStoreOptions opts, storage::Appendable* app, storage::Queryable* q);
  Status Init();
  // The write connection (created with the schema) and the read one.
  Status OpenWriter() const TW_REQUIRES(mu_);
  Status OpenReader() const TW_REQUIRES(mu_, read_mu_);
  // Damage met while serving: sets the file aside and starts a new one with
  // every run's row, unless another thread already did since `generation`.
  Status ReplaceDamaged(const Status& damage, uint64_t generation) const TW_EXCLUDES(mu_, read_mu_);
  // Runs `op`, a public operation; when it meets damage, replaces the
  // database and runs it once more.
  template <typename F>
  auto RetryOnDamage(F op) const -> decltype(op()) {
    const uint64_t generation = db_generation_.load();
    auto r = op();
    Status s;
    if constexpr (std::is_same_v<decltype(r), Status>) {
      s = r;
    } else {
      s = r.status();
    }
    if (!s.IsCorruption() || !ReplaceDamaged(s, generation).ok()) return r;
    return op();
  }
  Result<Run> DoCreateOrResume(const CreateRequest& req);
  Result<BatchResult> DoWriteBatch(std::string_view id, const BatchRequest& batch);
  Status DoHeartbeat(std::string_view id);
  Status DoAddGpuUsage(const std::vector<GpuUsageDelta>& usage);
  Result<Run> DoFinish(std::string_view id, const FinishRequest& req);
  Status DoAddAlert(std::string_view id, RunAlert alert);
  Result<std::vector<RunAlert>> DoAlerts(std::string_view id) const;
  Result<std::vector<StepSeries>> DoReadSteps(std::string_view id, const StepQuery& q) const;
  int64_t Now() const { return opts_.now_ms(); }
  Live& LiveOf(const std::string& id) TW_REQUIRES(mu_);
  Status SaveRun(const Run& r) const TW_REQUIRES(mu_);
  std::string UniqueName(const std::string& project, const std::string& name) const TW_REQUIRES(mu_);
  // Appends the run series of `r` at now (heartbeat, active, start, total,
  // and with `progress` the progress ratio and ETA) and commits.
  Status WriteRunSeries(const Run& r, Live& live, bool progress, bool ended);
  // Step store (store_steps.cc). REQUIRES: mu_ and the run's write_mu held.
  // The state of series (rank, metric) of run `id`, created if `create`
  // (the row is then written in the caller's transaction); nullptr if absent.
  Result<StepSeriesState*> StepSeriesOf(Live& live, const std::string& id, int64_t rank, const std::string& host,
                                        const std::string& metric) TW_REQUIRES(mu_);
  // Writes `pts` (in logged order) as chunks of `s`, in the caller's transaction.
  Status AppendSteps(StepSeriesState& s, std::vector<StepPoint> pts) TW_REQUIRES(mu_);
  // Merges the newest small chunks of `s` into one once there are enough of
  // them, in a transaction of its own.
  Status CompactSteps(StepSeriesState& s) TW_REQUIRES(mu_);
  // Data dirs from before the step store: copies each run's logged values
  // from the TSDB (joined with trainwatch_run_step on timestamp) into it.
  // In Init.
  Status MigrateFromTsdb() TW_REQUIRES(mu_);

  const RunStoreOptions opts_;
  storage::Appendable* const app_;
  storage::Queryable* const queryable_;
  const int64_t opened_ms_;
  // "<path>.corrupt*" present once opened, plus those set aside since.
  mutable std::atomic<size_t> set_aside_ = 0;
  common::metrics::Collector metrics_;  // trainwatch_runs_db_set_aside, from set_aside_
  // Bumped by each ReplaceDamaged (under mu_ and read_mu_): a Live's step
  // series states of an older generation name rows of the replaced file.
  mutable std::atomic<uint64_t> db_generation_ = 0;

  mutable base::Mutex mu_ TW_ACQUIRED_BEFORE(read_mu_);
  mutable sqlite3* db_ TW_GUARDED_BY(mu_) = nullptr;
  // A second connection for the step store's reads, so a long read never
  // holds up writes (WAL mode: readers see the last commit).
  mutable base::Mutex read_mu_;
  mutable sqlite3* rdb_ TW_GUARDED_BY(read_mu_) = nullptr;
  std::map<std::string, Run> runs_ TW_GUARDED_BY(mu_);  // by id
  std::map<std::string, std::unique_ptr<Live>> live_ TW_GUARDED_BY(mu_);  // by id; never erased
  AlertSink alert_sink_ TW_GUARDED_BY(mu_);
  // Actions not yet acknowledged by every rank, by run id.
  std::map<std::string, std::vector<RunAction>> pending_actions_ TW_GUARDED_BY(mu_);
  // run id -> rank -> (host, pid) of each rank's process.
  std::map<std::string, std::map<int64_t, std::pair<std::string, int64_t>>> rank_processes_ TW_GUARDED_BY(mu_);
  Status LoadPendingActions() TW_REQUIRES(mu_);
  // Writes the batch's rich values in the caller's transaction; a value of
  // another kind than its key's joins `rejected`.
  Status WriteMedia(const std::string& id, int64_t rank, const BatchRequest& b, size_t* accepted,
                    std::vector<Rejection>* rejected) TW_REQUIRES(mu_);
  // Reads one artifact row.
  Result<Artifact> ArtifactRow(int64_t artifact) const TW_REQUIRES(mu_);
  // --runs.artifact-keep-versions for (project, name).
  Status ApplyArtifactPolicy(const std::string& project, const std::string& name) TW_REQUIRES(mu_);
  // Removes the content file of sha256 unless another stored version has it.
  Status RemoveContentIfUnused(const std::string& sha256) TW_REQUIRES(mu_);

  base::Mutex stop_mu_;
  base::CondVar stop_cv_;
  bool stopping_ TW_GUARDED_BY(stop_mu_) = false;
  std::thread checker_;
  common::metrics::Registration metrics_registration_;  // last: unregisters first
};

}  // namespace trainwatch::runs
