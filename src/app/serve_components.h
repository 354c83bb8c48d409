#pragma once
// The parts of `trainwatch serve` with a lifetime: each starts from the
// first ConfigSnapshot (app/snapshot.h), applies every reloaded one, and
// stops. RunServe (app/serve.cc) composes them; Shutdown stops what has
// started in one fixed order, on a normal exit and on every error path alike.
//
// Thread safety: Apply may run on the signal thread and on an HTTP thread;
// RunServe serializes reloads. Start and Stop run on RunServe's thread.

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/flags.h"
#include "app/snapshot.h"
#include "base/mutex.h"
#include "base/status.h"
#include "logs/store.h"
#include "promql/engine.h"
#include "remote/manager.h"
#include "remote/read.h"
#include "rules/manager.h"

namespace trainwatch::common::metrics {
class Registry;
}
namespace trainwatch::logs {
class Forwarder;
class LogMetrics;
class Tailer;
}  // namespace trainwatch::logs
namespace trainwatch::notify {
class Notifier;
}
namespace trainwatch::tsdb {
class DB;
}

namespace trainwatch::app {

// serve's shutdown order, first to last; RunServe's comments say why.
enum class StopStep { kScrape, kRules, kCollectors, kLogInputs, kHttp, kLogMetrics, kNotifier, kRuns, kRemote, kTsdb };
inline constexpr size_t kStopSteps = 10;

// What to stop, by step. Each component registers its stop once it has
// something to stop; Run stops the registered ones in StopStep order. Not
// thread-safe: RunServe's thread only. REQUIRES: Run before the registered
// components go.
class Shutdown {
 public:
  Shutdown() = default;
  Shutdown(const Shutdown&) = delete;
  Shutdown& operator=(const Shutdown&) = delete;
  // REQUIRES: `step` not registered yet.
  void Add(StopStep step, std::function<void()> stop);
  // Runs every registered step in order, each once.
  void Run();

 private:
  std::array<std::function<void()>, kStopSteps> stops_;
};

// remote_write (every commit also queued on disk and forwarded while the
// config names destinations) and remote_read (PromQL, the rules and
// /api/v1/series also read the long-term stores).
class RemoteComponent {
 public:
  RemoteComponent(const ServeOptions& o, tsdb::DB* db, common::metrics::Registry* metrics);
  // Applies the snapshot's destinations; on success store() is ready.
  Status Start(const ConfigSnapshot& s);
  // A reload, in two steps (RunServe prepares every component, then commits
  // every one). Prepare changes nothing: it checks each remote_write
  // destination's send position file (<data-dir>/remote_write/<name>.position)
  // as a new sender would read it, so an unreadable one fails the reload with
  // remote_write's message ("remote_write <name>: ...") before anything is
  // applied.
  struct Prepared {
    std::vector<remote::RemoteWriteConfig> write;
    std::vector<remote::RemoteReadConfig> read;
  };
  Result<Prepared> Prepare(const ConfigSnapshot& s) const;
  // What Prepare cannot check without changing anything stays here, so this
  // can still fail (and the reload reports it; RunServe commits remote last,
  // after everything else is applied): remote::Manager::ApplyConfig opens the
  // on-disk queue (<data-dir>/remote_write/queue, created on disk) when the
  // first destination is configured, writes a new destination's first
  // position file, and starts its sender threads; each is the change itself,
  // and remote::Manager (src/remote) has no step that does them without
  // starting to send. On such an error remote_write keeps its running
  // destinations (as ApplyConfig does) and remote_read is not changed.
  Status Commit(Prepared p);
  void Stop();  // nothing appends any more; send positions are saved
  // What every writer appends through (the DB, and the queue while it sends).
  storage::Appendable* store() const { return store_.get(); }
  storage::Queryable* queryable() { return &queryable_; }

 private:
  remote::Manager write_;
  remote::RemoteRead read_;
  remote::FanoutQueryable queryable_;  // the DB, then read_
  tsdb::DB* const db_;
  const std::string dir_;  // <data-dir>/remote_write
  std::unique_ptr<storage::Appendable> store_;  // write_.Wrap(db_), after Start
};

// Logs (src/logs): time-partitioned SQLite/FTS5 store in <data-dir>/logs,
// durable per 2xx like runs.db; log-derived counters go to the TSDB; file
// tailing and forwarding from trainwatch.logs.
class LogsComponent {
 public:
  using Forwarders = std::map<std::string, std::unique_ptr<logs::Forwarder>>;
  LogsComponent(const ServeOptions& o, storage::Appendable* store, common::metrics::Registry* metrics);
  ~LogsComponent();
  // Opens the store, the counters, the tailer and the forwarders; none runs yet.
  Status Open(const ConfigSnapshot& s);
  logs::LogStore* store() const { return store_.get(); }
  // Starts the counters, the tailer (when files are configured) and the forwarders.
  void Start();
  // Patterns at once; the tailer restarts from its saved offsets (neither
  // skipping nor repeating a line); forwarders of removed targets stop (their
  // positions stay on disk), new ones start, unchanged ones run on.
  // A reload in two steps: Prepare does everything that can fail (the files
  // section and the tailer's offsets file read, the new targets' forwarders
  // made with their saved positions, the patterns compiled) and changes
  // nothing running; Commit cannot fail. A reload is Prepare then Commit,
  // with the errors Apply had ("trainwatch.logs.files: ...",
  // "trainwatch.logs.forward: ...", "logs pattern ...").
  struct Prepared {
    Prepared();
    ~Prepared();
    Prepared(Prepared&&) noexcept;
    Prepared& operator=(Prepared&&) noexcept;
    std::vector<logs::Pattern> patterns;
    Forwarders made;                // new targets' forwarders, by state file; not started
    std::vector<std::string> kept;  // state files of running forwarders that run on
    std::vector<logs::TailInput> files;    // trainwatch.logs.files
    std::unique_ptr<logs::Tailer> tailer;  // from the offsets saved when Prepare ran; not started
    bool tail_files = false;
  };
  Result<Prepared> Prepare(const ConfigSnapshot& s);
  void Commit(Prepared p);
  Status Apply(const ConfigSnapshot& s);  // Prepare, then Commit
  // The running forwarders' state files (one per target), for tests.
  std::vector<std::string> forward_state_paths();
  // Tailing and forwarding stop (what is not sent stays queued in the
  // store), then live tails end, so the HTTP server's stop does not wait.
  void StopInputs();
  // Last write of the log-derived counters, before the DB closes.
  void StopMetrics();

 private:
  // The forwarders for `targets`: those running (by state file) go to *kept,
  // the others are made (not started) into *made. Changes nothing running.
  Status MakeForwarders(const std::vector<logs::ForwardTarget>& targets, Forwarders* made,
                        std::vector<std::string>* kept) TW_REQUIRES(mu_);

  logs::StoreOptions opts_;
  const std::string dir_;  // <data-dir>/logs
  storage::Appendable* const out_;
  const int64_t metrics_interval_ms_;
  std::unique_ptr<logs::LogStore> store_;
  std::unique_ptr<logs::LogMetrics> metrics_;
  base::Mutex mu_;  // Apply (a reload) against Start and StopInputs
  std::unique_ptr<logs::Tailer> tailer_ TW_GUARDED_BY(mu_);
  Forwarders forwarders_ TW_GUARDED_BY(mu_);  // by state file (one per target URL, index and kind)
  bool started_ TW_GUARDED_BY(mu_) = false;  // the tailer and forwarders run
  bool tail_files_ TW_GUARDED_BY(mu_) = false;
};

// Recording and alerting rules (rules/), with their own query engine so rule
// evaluation never waits behind a burst of dashboard queries. Alerts leave
// through senders (AddSender; external Alertmanagers from `alerting:`).
class RulesComponent {
 public:
  RulesComponent(const ServeOptions& o, storage::Appendable* store, storage::Queryable* queryable,
                 common::metrics::Registry* metrics);
  rules::Manager* manager() { return &manager_; }
  // Loads the rule files and `alerting:`; a bad rule file changes nothing.
  Status Apply(const ConfigSnapshot& s);
  void Stop();  // no evaluations after this; queued alerts to Alertmanagers are sent

 private:
  promql::Engine engine_;
  rules::Manager manager_;
};

// The embedded Alertmanager (notify/): silences and the notification log in
// <data-dir>/alertmanager; the snapshot's Alertmanager config.
class NotifierComponent {
 public:
  NotifierComponent();
  ~NotifierComponent();
  Status Start(const ServeOptions& o, const std::string& external_url, common::metrics::Registry* metrics,
               const ConfigSnapshot& s);
  void Apply(const ConfigSnapshot& s);
  void Stop();
  notify::Notifier* get() const { return notifier_.get(); }
  // Hands the rules' alerts to the notifier. REQUIRES: started.
  rules::AlertSender Sender();

 private:
  std::unique_ptr<notify::Notifier> notifier_;
};

}  // namespace trainwatch::app
