#include "runs/store.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/clock.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mutex.h"
#include "ingest/import.h"
#include "model/sample.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs(
  id TEXT PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
  config TEXT NOT NULL, tags TEXT NOT NULL, summary TEXT NOT NULL,
  total_steps INTEGER, step INTEGER, start_time_ms INTEGER NOT NULL, end_time_ms INTEGER,
  heartbeat_time_ms INTEGER NOT NULL, host TEXT NOT NULL, pid INTEGER, command TEXT NOT NULL,
  git_commit TEXT NOT NULL, world_size INTEGER, eta_seconds REAL,
  gpu_seconds REAL NOT NULL DEFAULT 0, gpu_energy_joules REAL NOT NULL DEFAULT 0,
  gpu_idle_seconds REAL NOT NULL DEFAULT 0, gpu_cost REAL NOT NULL DEFAULT 0,
  UNIQUE(project, name));
CREATE TABLE IF NOT EXISTS batches(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, batch_id TEXT NOT NULL,
  UNIQUE(run_id, batch_id));
CREATE INDEX IF NOT EXISTS batches_by_run ON batches(run_id, seq);
CREATE TABLE IF NOT EXISTS alerts(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, time_ms INTEGER NOT NULL,
  title TEXT NOT NULL, text TEXT NOT NULL, level TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS alerts_by_run ON alerts(run_id, seq);
CREATE TABLE IF NOT EXISTS rank_processes(
  run_id TEXT NOT NULL, rank INTEGER NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, PRIMARY KEY(run_id, rank));
CREATE TABLE IF NOT EXISTS actions(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, action TEXT NOT NULL, alert TEXT NOT NULL,
  labels TEXT NOT NULL, dedupe TEXT NOT NULL, time_ms INTEGER NOT NULL, acks TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0, UNIQUE(run_id, dedupe));
CREATE TABLE IF NOT EXISTS step_series(
  id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, rank INTEGER NOT NULL, host TEXT NOT NULL, metric TEXT NOT NULL,
  UNIQUE(run_id, rank, metric));
CREATE TABLE IF NOT EXISTS step_chunks(
  seq INTEGER PRIMARY KEY, series INTEGER NOT NULL, n INTEGER NOT NULL,
  min_step INTEGER NOT NULL, max_step INTEGER NOT NULL, min_ts INTEGER NOT NULL, max_ts INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS step_chunks_by_series ON step_chunks(series, seq);
CREATE TABLE IF NOT EXISTS media_keys(
  run_id TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(run_id, key));
CREATE TABLE IF NOT EXISTS media(
  run_id TEXT NOT NULL, key TEXT NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
  kind TEXT NOT NULL, meta TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY(run_id, key, rank, step));
CREATE TABLE IF NOT EXISTS artifacts(
  id INTEGER PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, version INTEGER NOT NULL,
  sha256 TEXT NOT NULL, size INTEGER NOT NULL, uri TEXT NOT NULL, metadata TEXT NOT NULL, producer TEXT NOT NULL,
  created_ms INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL DEFAULT 0,
  UNIQUE(project, name, sha256), UNIQUE(project, name, version));
CREATE INDEX IF NOT EXISTS artifacts_by_producer ON artifacts(producer);
CREATE INDEX IF NOT EXISTS artifacts_by_sha256 ON artifacts(sha256);
CREATE TABLE IF NOT EXISTS artifact_uses(
  artifact INTEGER NOT NULL, run_id TEXT NOT NULL, time_ms INTEGER NOT NULL, PRIMARY KEY(artifact, run_id));
CREATE INDEX IF NOT EXISTS artifact_uses_by_run ON artifact_uses(run_id);
)sql";

// PRAGMA user_version: 0 before the step store (logged values only in the
// TSDB), 1 with it.
constexpr int64_t kSchemaVersion = 1;

constexpr const char* kRunColumns =
    "id, project, name, status, config, tags, summary, total_steps, step, start_time_ms, end_time_ms, "
    "heartbeat_time_ms, host, pid, command, git_commit, world_size, eta_seconds, "
    "gpu_seconds, gpu_energy_joules, gpu_idle_seconds, gpu_cost";

// Columns added to the runs table after its first release: a database that
// predates one gets it (ALTER TABLE) when opened.
constexpr std::string_view kAddedRunColumns[] = {"gpu_seconds", "gpu_energy_joules", "gpu_idle_seconds", "gpu_cost"};

Status NotFound(std::string_view id) { return Status::NotFound("run \"" + std::string(id) + "\" not found"); }

// Summary values as stored: numbers stay, non-finite numbers become strings.
void MergeSummary(Json* into, const Json& from) {
  for (const auto& [k, v] : from.items()) (*into)[k] = v;
}

}  // namespace

Json ParseStored(const std::string& text, Json fallback) {
  if (!CheckJsonDepth(text).ok()) return fallback;
  try {
    return Json::parse(text);
  } catch (const Json::exception&) {
    return fallback;
  }
}

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err); rc != SQLITE_OK) {
    Status s = SqliteStatus(rc, std::string("runs.db: ") + (err ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return Status::OK();
}

model::Labels RunLabels(std::string_view name, const Run& r,
                        std::initializer_list<std::pair<std::string_view, std::string_view>> extra) {
  std::vector<model::Label> v;
  v.push_back({std::string(model::kMetricName), std::string(name)});
  v.push_back({"project", r.project});
  v.push_back({"run", r.name});
  for (const auto& [n, val] : extra) {
    if (!val.empty()) v.push_back({std::string(n), std::string(val)});
  }
  return model::Labels(std::move(v));
}

RunStore::RunStore(RunStoreOptions opts, storage::Appendable* app, storage::Queryable* q)
    : opts_([&] {
        if (!opts.now_ms) opts.now_ms = [] { return NowMillis(); };
        if (opts.artifacts_dir.empty()) {
          size_t slash = opts.path.rfind('/');
          opts.artifacts_dir = (slash == std::string::npos ? std::string(".") : opts.path.substr(0, slash)) + "/artifacts";
        }
        return std::move(opts);
      }()),
      app_(app),
      queryable_(q),
      opened_ms_(opts_.now_ms()),
      metrics_({{"trainwatch_runs_db_set_aside",
                 "Damaged run databases set aside as runs.db.corrupt* beside the one in use.",
                 common::metrics::Type::kGauge,
                 {}}},
               [this](common::metrics::Emitter* e) {
                 e->Add("trainwatch_runs_db_set_aside", {}, static_cast<double>(set_aside_.load()));
               }) {}

RunStore::~RunStore() {
  metrics_registration_.Reset();
  Stop();
  base::MutexLock l(&mu_);
  base::MutexLock r(&read_mu_);
  if (rdb_ != nullptr) sqlite3_close(rdb_);
  if (db_ != nullptr) sqlite3_close(db_);
}

Result<std::unique_ptr<RunStore>> RunStore::Open(const RunStoreOptions& opts, storage::Appendable* app,
                                                  storage::Queryable* queryable) {
  std::unique_ptr<RunStore> s(new RunStore(opts, app, queryable));
  Status st = s->Init();
  if (st.IsCorruption()) {
    // A damaged runs.db (checksums, a page SQLite cannot read) is set aside,
    // not deleted, and a new one started, so that the server comes up and
    // goes on recording runs; the copy is kept for .recover.
    s.reset();
    auto to = file::SetAside(opts.path, {"-wal", "-shm"});
    if (!to.ok()) return st.Annotate("open " + opts.path + " (" + to.status().message() + ")");
    TW_LOG(Error, "runs: {} is damaged ({}); set aside as {} and a new one started. The runs it held are not shown; "
                  "`sqlite3 {} .recover` may restore them.",
           opts.path, st.message(), *to, *to);
    s.reset(new RunStore(opts, app, queryable));
    st = s->Init();
  }
  if (!st.ok()) return st.Annotate("open " + opts.path);
  if (opts.metrics != nullptr) s->metrics_registration_ = opts.metrics->MustRegister({&s->metrics_});
  return s;
}

Status RunStore::OpenWriter() const {
  if (sqlite3_open_v2(opts_.path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return Status::IOError(db_ ? sqlite3_errmsg(db_) : "out of memory");
  }
  sqlite3_busy_timeout(db_, 5000);
  RETURN_IF_ERROR(Exec(db_, "PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec(db_, opts_.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(Exec(db_, kSchema));
  std::set<std::string> have;
  {
    Stmt cols(db_, "PRAGMA table_info(runs)");
    while (cols.Step()) have.insert(cols.Text(1));
    RETURN_IF_ERROR(cols.status());
  }
  for (std::string_view c : kAddedRunColumns) {
    if (have.contains(std::string(c))) continue;
    RETURN_IF_ERROR(Exec(db_, ("ALTER TABLE runs ADD COLUMN " + std::string(c) + " REAL NOT NULL DEFAULT 0").c_str()));
  }
  return Status::OK();
}

Status RunStore::OpenReader() const {
  if (sqlite3_open_v2(opts_.path.c_str(), &rdb_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    return Status::IOError(rdb_ ? sqlite3_errmsg(rdb_) : "out of memory");
  }
  sqlite3_busy_timeout(rdb_, 5000);
  return Status::OK();
}

Status RunStore::ReplaceDamaged(const Status& damage, uint64_t generation) const {
  base::MutexLock l(&mu_);
  base::MutexLock r(&read_mu_);
  if (db_generation_.load() != generation) return Status::OK();  // replaced by another thread meanwhile
  sqlite3_close_v2(rdb_);
  sqlite3_close_v2(db_);
  rdb_ = db_ = nullptr;
  auto to = file::SetAside(opts_.path, {"-wal", "-shm"});
  if (!to.ok()) {
    // Not renamed: the damaged file stays in use, and the operation fails.
    TW_LOG(Error, "runs: {} is damaged ({}) and cannot be set aside: {}", opts_.path, damage.message(),
           to.status().message());
    Status s = OpenWriter();
    if (s.ok()) s = OpenReader();
    return s.ok() ? to.status() : s;
  }
  Status s = OpenWriter();
  if (s.ok()) s = Exec(db_, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
  if (s.ok()) s = Exec(db_, "BEGIN");
  for (auto it = runs_.begin(); s.ok() && it != runs_.end(); ++it) s = SaveRun(it->second);
  if (s.ok()) s = Exec(db_, "COMMIT");
  if (s.ok()) s = OpenReader();
  set_aside_++;
  db_generation_++;
  if (!s.ok()) {
    TW_LOG(Error, "runs: {} is damaged ({}); set aside as {}, but a new one cannot be started: {}", opts_.path,
           damage.message(), *to, s.ToString());
    return s;
  }
  TW_LOG(Error, "runs: {} is damaged ({}); set aside as {} and a new one started with the {} runs held in memory. "
                "Their step history and alerts are in the copy; `sqlite3 {} .recover` may restore them.",
         opts_.path, damage.message(), *to, runs_.size(), *to);
  return Status::OK();
}

Status RunStore::Init() {
  base::MutexLock l(&mu_);
  RETURN_IF_ERROR(OpenWriter());
  Stmt q(db_, std::string("SELECT ") + kRunColumns + " FROM runs");
  while (q.Step()) {
    Run r;
    r.id = q.Text(0);
    r.project = q.Text(1);
    r.name = q.Text(2);
    r.status = q.Text(3);
    r.config = ParseStored(q.Text(4), Json::object());
    r.tags = ParseStored(q.Text(5), Json::array());
    r.summary = ParseStored(q.Text(6), Json::object());
    r.total_steps = q.OptInt(7);
    r.step = q.OptInt(8);
    r.start_time_ms = q.Int(9);
    r.end_time_ms = q.OptInt(10);
    r.heartbeat_time_ms = q.Int(11);
    r.host = q.Text(12);
    r.pid = q.OptInt(13);
    r.command = q.Text(14);
    r.git_commit = q.Text(15);
    r.world_size = q.OptInt(16);
    if (!q.IsNull(17)) r.eta_seconds = q.Double(17);
    r.gpu = {q.Double(18), q.Double(19), q.Double(20), q.Double(21)};
    std::string id = r.id;
    runs_.emplace(std::move(id), std::move(r));
  }
  RETURN_IF_ERROR(q.status());
  int64_t version = 0;
  {
    Stmt v(db_, "PRAGMA user_version");
    if (v.Step()) version = v.Int(0);
    RETURN_IF_ERROR(v.status());
  }
  if (version < kSchemaVersion) {
    if (!runs_.empty()) RETURN_IF_ERROR(MigrateFromTsdb());
    RETURN_IF_ERROR(Exec(db_, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str()));
  } else if (version > kSchemaVersion) {
    return Status::NotSupported("runs.db has schema version " + std::to_string(version) +
                                      ", newer than this trainwatch knows (" + std::to_string(kSchemaVersion) + ")");
  }
  RETURN_IF_ERROR(LoadPendingActions());
  {
    Stmt procs(db_, "SELECT run_id, rank, host, pid FROM rank_processes");
    while (procs.Step()) rank_processes_[procs.Text(0)][procs.Int(1)] = {procs.Text(2), procs.Int(3)};
    RETURN_IF_ERROR(procs.status());
  }
  {
    base::MutexLock r(&read_mu_);
    RETURN_IF_ERROR(OpenReader());
  }
  const size_t slash = opts_.path.rfind('/');
  set_aside_ = slash == std::string::npos ? file::CountSetAside(".", opts_.path)
                                          : file::CountSetAside(opts_.path.substr(0, slash), opts_.path.substr(slash + 1));
  TW_LOG(Info, "runs: opened {} ({} runs, synchronous={})", opts_.path, runs_.size(), opts_.sync_full ? "FULL" : "NORMAL");
  return Status::OK();
}

RunStore::Live& RunStore::LiveOf(const std::string& id) {
  auto& p = live_[id];
  if (!p) p = std::make_unique<Live>();
  return *p;
}

Status RunStore::SaveRun(const Run& r) const {
  Stmt st(db_, std::string("INSERT INTO runs(") + kRunColumns +
                   ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22) "
                   "ON CONFLICT(id) DO UPDATE SET project=?2, name=?3, status=?4, config=?5, tags=?6, summary=?7, "
                   "total_steps=?8, step=?9, start_time_ms=?10, end_time_ms=?11, heartbeat_time_ms=?12, host=?13, "
                   "pid=?14, command=?15, git_commit=?16, world_size=?17, eta_seconds=?18, gpu_seconds=?19, "
                   "gpu_energy_joules=?20, gpu_idle_seconds=?21, gpu_cost=?22");
  st.Bind(1, r.id).Bind(2, r.project).Bind(3, r.name).Bind(4, r.status);
  st.Bind(5, DumpJson(r.config)).Bind(6, DumpJson(r.tags)).Bind(7, DumpJson(r.summary));
  st.Bind(8, r.total_steps).Bind(9, r.step).Bind(10, r.start_time_ms).Bind(11, r.end_time_ms);
  st.Bind(12, r.heartbeat_time_ms).Bind(13, r.host).Bind(14, r.pid).Bind(15, r.command).Bind(16, r.git_commit);
  st.Bind(17, r.world_size).Bind(18, r.eta_seconds);
  st.Bind(19, r.gpu.seconds).Bind(20, r.gpu.energy_joules).Bind(21, r.gpu.idle_seconds).Bind(22, r.gpu.cost);
  return st.Run();
}

std::string RunStore::UniqueName(const std::string& project, const std::string& name) const {
  auto taken = [&](const std::string& n) {
    mu_.AssertHeld();  // run in place, under the lock
    for (const auto& [id, r] : runs_) {
      if (r.project == project && r.name == n) return true;
    }
    return false;
  };
  if (!taken(name)) return name;
  for (int i = 2;; i++) {
    std::string n = name + "-" + std::to_string(i);
    if (!taken(n)) return n;
  }
}

Status RunStore::WriteRunSeries(const Run& r, Live& live, bool progress, bool ended) {
  int64_t t = std::max(Now(), live.last_series_ts + 1);
  Status s = ingest::AppendAndCommit(*app_, [&](storage::Appender* app) -> Status {
    auto add = [&](std::string_view name, double v) -> Status {
      auto ref = app->Append(0, RunLabels(name, r), t, v);
      return ref.ok() || SkippedAtSeriesLimit(ref.error()) ? Status::OK() : ref.error();
    };
    RETURN_IF_ERROR(add("trainwatch_run_heartbeat_timestamp_seconds", r.heartbeat_time_ms / 1000.0));
    RETURN_IF_ERROR(add("trainwatch_run_active", r.status == kRunning ? 1 : 0));
    RETURN_IF_ERROR(add("trainwatch_run_start_timestamp_seconds", r.start_time_ms / 1000.0));
    if (r.total_steps) RETURN_IF_ERROR(add("trainwatch_run_total_steps", static_cast<double>(*r.total_steps)));
    if (progress) {
      if (auto p = r.progress()) RETURN_IF_ERROR(add("trainwatch_run_progress_ratio", *p));
      if (r.eta_seconds) RETURN_IF_ERROR(add("trainwatch_run_eta_seconds", *r.eta_seconds));
    }
    // A run that ended has no ETA: a stale marker ends the series at once,
    // as Prometheus does for a target's vanished series.
    if (ended) RETURN_IF_ERROR(add("trainwatch_run_eta_seconds", model::StaleNaN()));
    return Status::OK();
  });
  if (s.ok()) live.last_series_ts = t;
  return s;
}

Result<Run> RunStore::CreateOrResume(const CreateRequest& req) {
  return RetryOnDamage([&] { return DoCreateOrResume(req); });
}

Status RunStore::Heartbeat(std::string_view id) {
  return RetryOnDamage([&] { return DoHeartbeat(id); });
}

Result<Run> RunStore::Finish(std::string_view id, const FinishRequest& req) {
  return RetryOnDamage([&] { return DoFinish(id, req); });
}

Status RunStore::AddAlert(std::string_view id, RunAlert a) {
  return RetryOnDamage([&] { return DoAddAlert(id, a); });
}

Result<std::vector<RunAlert>> RunStore::Alerts(std::string_view id) const {
  return RetryOnDamage([&] { return DoAlerts(id); });
}

Result<Run> RunStore::DoCreateOrResume(const CreateRequest& req) {
  base::MutexLock l(&mu_);
  Live& live = LiveOf(req.id);
  l.Unlock();
  base::MutexLock w(&live.write_mu);
  l.Lock();
  int64_t now = Now();
  auto it = runs_.find(req.id);
  bool owner = !req.rank || *req.rank == 0;
  Run r;
  // Every rank's process, for the GPU collector's attribution (ProcessesOn).
  auto note_process = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    if (!req.pid || !req.host) return Status::OK();
    const int64_t rank = req.rank.value_or(0);
    auto& procs = rank_processes_[req.id];
    auto p = procs.find(rank);
    if (p != procs.end() && p->second.first == *req.host && p->second.second == *req.pid) return Status::OK();
    Stmt st(db_, "INSERT OR REPLACE INTO rank_processes(run_id, rank, host, pid) VALUES(?1,?2,?3,?4)");
    st.Bind(1, req.id).Bind(2, rank).Bind(3, *req.host).Bind(4, *req.pid);
    RETURN_IF_ERROR(st.Run());
    procs[rank] = {*req.host, *req.pid};
    return Status::OK();
  };
  if (it != runs_.end()) {
    r = it->second;
    if (r.project != req.project) {
      return Status::InvalidArgument("field \"id\": run \"" + req.id + "\" belongs to project \"" + r.project + "\"");
    }
    if (!owner) {  // another rank joining: the run is rank 0's
      RETURN_IF_ERROR(note_process());
      return r;
    }
    r.status = std::string(kRunning);
    r.end_time_ms.reset();
  } else {
    r.id = req.id;
    r.project = req.project;
    r.name = UniqueName(req.project, req.name.value_or(req.id));
    r.start_time_ms = req.start_time_ms.value_or(now);
  }
  r.heartbeat_time_ms = now;
  if (req.config) r.config = *req.config;
  if (req.tags) r.tags = *req.tags;
  if (req.total_steps) r.total_steps = *req.total_steps;
  if (req.host) r.host = *req.host;
  if (req.pid) r.pid = *req.pid;
  if (req.command) r.command = *req.command;
  if (req.git_commit) r.git_commit = *req.git_commit;
  if (req.world_size) r.world_size = *req.world_size;
  RETURN_IF_ERROR(SaveRun(r));
  runs_[r.id] = r;
  RETURN_IF_ERROR(note_process());
  l.Unlock();
  RETURN_IF_ERROR(WriteRunSeries(r, live, true, false));
  return r;
}

std::unordered_map<int64_t, RunStore::RankProcess> RunStore::ProcessesOn(std::string_view host) const {
  std::unordered_map<int64_t, RankProcess> out;
  base::MutexLock l(&mu_);
  auto here = [&](const std::string& h) { return h == host || h == "localhost"; };
  for (const auto& [id, r] : runs_) {
    if (r.status != kRunning) continue;
    auto p = rank_processes_.find(id);
    if (p != rank_processes_.end()) {
      for (const auto& [rank, hp] : p->second) {
        if (here(hp.first)) out[hp.second] = {r.project, r.name, rank};
      }
    }
    // A run registered before ranks' processes were kept: rank 0's, from the run.
    if (r.pid && here(r.host) && (p == rank_processes_.end() || !p->second.contains(0))) {
      out.emplace(*r.pid, RankProcess{r.project, r.name, 0});
    }
  }
  return out;
}

Status RunStore::DoHeartbeat(std::string_view id) {
  base::MutexLock l(&mu_);
  if (!runs_.contains(std::string(id))) return NotFound(id);
  Live& live = LiveOf(std::string(id));
  l.Unlock();
  base::MutexLock w(&live.write_mu);
  l.Lock();
  Run r = runs_.at(std::string(id));
  r.heartbeat_time_ms = Now();
  if (r.status == kCrashed) {  // it was only silent: alive again
    r.status = std::string(kRunning);
    r.end_time_ms.reset();
  }
  RETURN_IF_ERROR(SaveRun(r));
  runs_[r.id] = r;
  l.Unlock();
  return WriteRunSeries(r, live, true, false);
}

Status RunStore::AddGpuUsage(const std::vector<GpuUsageDelta>& usage) {
  if (usage.empty()) return Status::OK();
  return RetryOnDamage([&] { return DoAddGpuUsage(usage); });
}

Status RunStore::DoAddGpuUsage(const std::vector<GpuUsageDelta>& usage) {
  std::vector<Run> updated;
  for (const GpuUsageDelta& d : usage) {
    base::MutexLock l(&mu_);
    auto it = std::find_if(runs_.begin(), runs_.end(),
                           [&](const auto& kv) { return kv.second.project == d.project && kv.second.name == d.run; });
    if (it == runs_.end()) continue;
    const std::string id = it->first;
    Live& live = LiveOf(id);
    l.Unlock();
    base::MutexLock w(&live.write_mu);
    l.Lock();
    Run r = runs_.at(id);
    r.gpu.seconds += d.add.seconds;
    r.gpu.energy_joules += d.add.energy_joules;
    r.gpu.idle_seconds += d.add.idle_seconds;
    r.gpu.cost += d.add.cost;
    RETURN_IF_ERROR(SaveRun(r));
    runs_[id] = r;
    updated.push_back(std::move(r));
  }
  if (updated.empty()) return Status::OK();
  const int64_t now = Now();
  return ingest::AppendAndCommit(*app_, [&](storage::Appender* app) -> Status {
    for (const Run& r : updated) {
      for (auto [name, v] : {std::pair<std::string_view, double>{"trainwatch_run_gpu_seconds_total", r.gpu.seconds},
                             {"trainwatch_run_gpu_energy_joules_total", r.gpu.energy_joules},
                             {"trainwatch_run_gpu_idle_seconds_total", r.gpu.idle_seconds},
                             {"trainwatch_run_gpu_cost_total", r.gpu.cost}}) {
        auto ref = app->Append(0, RunLabels(name, r), now, v);
        if (!ref.ok() && !SkippedAtSeriesLimit(ref.error())) return ref.error();
      }
    }
    return Status::OK();
  });
}

Result<Run> RunStore::DoFinish(std::string_view id, const FinishRequest& req) {
  base::MutexLock l(&mu_);
  if (!runs_.contains(std::string(id))) return NotFound(id);
  Live& live = LiveOf(std::string(id));
  l.Unlock();
  base::MutexLock w(&live.write_mu);
  l.Lock();
  Run r = runs_.at(std::string(id));
  int64_t now = Now();
  r.status = req.status;
  r.end_time_ms = req.end_time_ms.value_or(now);
  r.heartbeat_time_ms = now;
  r.eta_seconds.reset();
  MergeSummary(&r.summary, req.summary);
  RETURN_IF_ERROR(SaveRun(r));
  runs_[r.id] = r;
  l.Unlock();
  live.window.clear();
  live.last.reset();
  RETURN_IF_ERROR(WriteRunSeries(r, live, true, true));
  return r;
}

Status RunStore::DoAddAlert(std::string_view id, RunAlert a) {
  base::MutexLock l(&mu_);
  auto it = runs_.find(std::string(id));
  if (it == runs_.end()) return NotFound(id);
  a.time_ms = Now();
  // An alert_id is kept with the run's batch ids (prefixed "alert:"): a retry
  // of a stored alert is answered as stored, and neither kept nor routed again.
  const std::string key = "alert:" + a.alert_id;
  if (!a.alert_id.empty()) {
    Stmt q(db_, "SELECT 1 FROM batches WHERE run_id=?1 AND batch_id=?2");
    q.Bind(1, id).Bind(2, key);
    bool dup = q.Step();
    RETURN_IF_ERROR(q.status());
    if (dup) return Status::OK();
  }
  RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
  Status stored = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    Stmt st(db_, "INSERT INTO alerts(run_id, time_ms, title, text, level) VALUES(?1,?2,?3,?4,?5)");
    st.Bind(1, id).Bind(2, a.time_ms).Bind(3, a.title).Bind(4, a.text).Bind(5, a.level);
    RETURN_IF_ERROR(st.Run());
    if (a.alert_id.empty()) return Status::OK();
    Stmt ins(db_, "INSERT OR IGNORE INTO batches(run_id, batch_id) VALUES(?1, ?2)");
    ins.Bind(1, id).Bind(2, key);
    return ins.Run();
  }();
  if (!stored.ok()) {
    (void)Exec(db_, "ROLLBACK");
    return stored;
  }
  RETURN_IF_ERROR(Exec(db_, "COMMIT"));
  AlertSink sink = alert_sink_;
  Run run = it->second;
  l.Unlock();
  if (sink) sink(run, a);
  return Status::OK();
}

void RunStore::SetAlertSink(AlertSink sink) {
  base::MutexLock l(&mu_);
  alert_sink_ = std::move(sink);
}

Result<Run> RunStore::Get(std::string_view id) const {
  base::MutexLock l(&mu_);
  auto it = runs_.find(std::string(id));
  if (it == runs_.end()) return NotFound(id);
  return it->second;
}

Result<std::vector<RunAlert>> RunStore::DoAlerts(std::string_view id) const {
  base::MutexLock l(&mu_);
  if (!runs_.contains(std::string(id))) return NotFound(id);
  std::vector<RunAlert> out;
  Stmt q(db_, "SELECT time_ms, title, text, level FROM alerts WHERE run_id=?1 ORDER BY seq");
  q.Bind(1, id);
  while (q.Step()) out.push_back({q.Int(0), q.Text(1), q.Text(2), q.Text(3)});
  RETURN_IF_ERROR(q.status());
  return out;
}

std::vector<Run> RunStore::List(const Filter& filter, const ListOptions& o) const {
  std::vector<Run> out;
  {
    base::MutexLock l(&mu_);
    for (const auto& [id, r] : runs_) {
      if (filter.Matches(r)) out.push_back(r);
    }
  }
  // Nulls (absent fields) sort last either way; ties by start time, then id.
  std::vector<std::pair<Json, size_t>> keys;
  keys.reserve(out.size());
  for (size_t i = 0; i < out.size(); i++) keys.emplace_back(FieldValue(out[i], o.sort), i);
  auto rank = [](const Json& j) { return j.is_null() ? 1 : 0; };
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) {
    if (rank(a.first) != rank(b.first)) return rank(a.first) < rank(b.first);
    if (!a.first.is_null() && a.first != b.first) {
      bool less = a.first < b.first;
      return o.descending ? !less && b.first < a.first : less;
    }
    const Run& x = out[a.second];
    const Run& y = out[b.second];
    if (x.start_time_ms != y.start_time_ms) {
      return o.descending ? x.start_time_ms > y.start_time_ms : x.start_time_ms < y.start_time_ms;
    }
    return o.descending ? x.id > y.id : x.id < y.id;
  });
  std::vector<Run> page;
  for (size_t i = o.offset; i < keys.size() && page.size() < o.limit; i++) page.push_back(std::move(out[keys[i].second]));
  return page;
}

int RunStore::CheckHeartbeats() {
  int64_t now = Now();
  std::vector<std::string> stale;
  {
    base::MutexLock l(&mu_);
    for (const auto& [id, r] : runs_) {
      // Silence while this server was down is not the run's fault.
      if (r.status == kRunning && std::max(r.heartbeat_time_ms, opened_ms_) + opts_.heartbeat_timeout_ms < now) {
        stale.push_back(id);
      }
    }
  }
  int marked = 0;
  for (const std::string& id : stale) {
    base::MutexLock l(&mu_);
    Live& live = LiveOf(id);
    l.Unlock();
    base::MutexLock w(&live.write_mu);
    l.Lock();
    Run r = runs_.at(id);
    now = Now();
    if (r.status != kRunning || std::max(r.heartbeat_time_ms, opened_ms_) + opts_.heartbeat_timeout_ms >= now) continue;
    r.status = std::string(kCrashed);
    r.end_time_ms = now;
    r.eta_seconds.reset();
    // Series first, so that once the API says crashed, PromQL says inactive;
    // on failure the next check tries again.
    l.Unlock();
    Status s = WriteRunSeries(r, live, false, true);
    if (!s.ok()) {
      TW_LOG(Error, "runs: write series of {}: {}", id, s.ToString());
      continue;
    }
    l.Lock();
    const uint64_t generation = db_generation_.load();
    s = SaveRun(r);
    if (!s.ok()) {
      TW_LOG(Error, "runs: mark {} crashed: {}", id, s.ToString());
      if (s.IsCorruption()) {
        l.Unlock();
        (void)ReplaceDamaged(s, generation);  // the next check marks it
      }
      continue;
    }
    runs_[id] = r;
    l.Unlock();
    TW_LOG(Info, "runs: run {} ({}/{}) crashed: no heartbeat for {} s", id, r.project, r.name,
           (now - r.heartbeat_time_ms) / 1000);
    marked++;
  }
  return marked;
}

void RunStore::StartHeartbeatChecker() {
  int64_t period = std::clamp<int64_t>(opts_.heartbeat_timeout_ms / 4, 50, 10000);
  checker_ = std::thread([this, period] {
    base::MutexLock l(&stop_mu_);
    while (!stopping_) {
      stop_cv_.WaitFor(&stop_mu_, RealWait(period));
      if (stopping_) break;
      l.Unlock();
      CheckHeartbeats();
      l.Lock();
    }
  });
}

void RunStore::Stop() {
  {
    base::MutexLock l(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (checker_.joinable()) checker_.join();
}

}  // namespace trainwatch::runs
