#include "app/serve_components.h"

#include "app/wiring.h"
#include "base/check.h"
#include "base/file.h"
#include "base/log.h"
#include "logs/forward.h"
#include "logs/metrics.h"
#include "logs/store.h"
#include "logs/tailer.h"
#include "notify/notifier.h"
#include "tsdb/db.h"

namespace trainwatch::app {
namespace {

remote::ManagerOptions RemoteWriteOptions(const ServeOptions& o, common::metrics::Registry* metrics) {
  remote::ManagerOptions rw;
  rw.dir = o.data_dir + "/remote_write";
  rw.queue.max_bytes = o.remote_write_queue_max_bytes;
  rw.user_agent = UserAgent();
  rw.metrics = metrics;
  return rw;
}

promql::EngineOptions RulesEngineOptions(const ServeOptions& o) {
  promql::EngineOptions e;
  e.timeout_ms = o.query_timeout_ms;
  e.max_samples = o.query_max_samples;
  e.max_concurrent = o.query_max_concurrency;
  e.lookback_delta_ms = o.query_lookback_delta_ms;
  return e;
}

}  // namespace

void Shutdown::Add(StopStep step, std::function<void()> stop) {
  auto& slot = stops_[static_cast<size_t>(step)];
  CHECK(!slot, "BUG: a shutdown step registered twice");
  slot = std::move(stop);
}

void Shutdown::Run() {
  for (auto& stop : stops_) {
    if (!stop) continue;
    std::function<void()> f = std::move(stop);
    stop = nullptr;
    f();
  }
}

// --- remote -----------------------------------------------------------------

RemoteComponent::RemoteComponent(const ServeOptions& o, tsdb::DB* db, common::metrics::Registry* metrics)
    : write_(RemoteWriteOptions(o, metrics)),
      read_([db] { return db->StartTime(); }, UserAgent(), metrics),
      queryable_(db, &read_),
      db_(db),
      dir_(o.data_dir + "/remote_write") {}

Status RemoteComponent::Start(const ConfigSnapshot& s) {
  RETURN_IF_ERROR(write_.ApplyConfig(s.remote_write));
  read_.Apply(s.remote_read);
  store_ = write_.Wrap(db_);
  return Status::OK();
}

Result<RemoteComponent::Prepared> RemoteComponent::Prepare(const ConfigSnapshot& s) const {
  // As remote::Sender::Start reads a destination's position file: one that is
  // there but cannot be read fails the reload before anything changes.
  for (const remote::RemoteWriteConfig& c : s.remote_write) {
    const std::string path = dir_ + "/" + c.name + ".position";
    if (!file::Exists(path)) continue;
    std::string text;
    if (Status r = file::ReadFile(path, &text); !r.ok()) return r.Annotate("remote_write " + c.name);
  }
  return Prepared{s.remote_write, s.remote_read};
}

Status RemoteComponent::Commit(Prepared p) {
  RETURN_IF_ERROR(write_.ApplyConfig(std::move(p.write)));
  read_.Apply(p.read);
  return Status::OK();
}

void RemoteComponent::Stop() { write_.Stop(); }

// --- logs -------------------------------------------------------------------

LogsComponent::LogsComponent(const ServeOptions& o, storage::Appendable* store, common::metrics::Registry* metrics)
    : dir_(o.data_dir + "/logs"), out_(store), metrics_interval_ms_(o.logs_metrics_interval_ms) {
  opts_.dir = dir_;
  opts_.sync_full = o.wal_sync == tsdb::WalSync::kPerRequest;
  opts_.retention_ms = o.logs_retention_ms >= 0 ? o.logs_retention_ms : o.retention_ms;
  opts_.retention_bytes = o.logs_retention_bytes;
  opts_.max_future_ms = o.max_future_ms;
  opts_.metrics = metrics;
}

LogsComponent::~LogsComponent() = default;

Status LogsComponent::Open(const ConfigSnapshot& s) {
  const LogsConfig& cfg = s.config.logs;
  ASSIGN_OR_RETURN(store_, logs::LogStore::Open(opts_));
  ASSIGN_OR_RETURN(metrics_, logs::LogMetrics::Make(cfg.patterns, out_, metrics_interval_ms_));
  base::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(tailer_, logs::Tailer::Make(logs::TailerOptions{cfg.files, dir_ + "/tail-offsets.json"},
                                               store_.get()));
  store_->SetObserver(metrics_.get());
  std::vector<std::string> kept;  // none: nothing runs yet
  RETURN_IF_ERROR(MakeForwarders(cfg.forward, &forwarders_, &kept));
  tail_files_ = !cfg.files.empty();
  return Status::OK();
}

Status LogsComponent::MakeForwarders(const std::vector<logs::ForwardTarget>& targets, Forwarders* made,
                                     std::vector<std::string>* kept) {
  for (logs::ForwardTarget t : targets) {
    t.state_path = dir_ + "/forward-" +
                   std::to_string(std::hash<std::string>{}(t.url + "|" + t.index + "|" +
                                                           std::to_string(static_cast<int>(t.kind)))) + ".json";
    if (forwarders_.count(t.state_path)) {
      kept->push_back(t.state_path);
      continue;
    }
    std::string path = t.state_path;
    auto f = logs::Forwarder::Make(std::move(t), store_.get());  // reads its saved positions; writes nothing
    if (!f.ok()) return f.error().Annotate("trainwatch.logs.forward");
    (*made)[path] = std::move(*f);
  }
  return Status::OK();
}

void LogsComponent::Start() {
  metrics_->Start();
  base::MutexLock l(&mu_);  // a POST /-/reload may have replaced them
  if (tail_files_) tailer_->Start();
  for (auto& [path, f] : forwarders_) f->Start();
  started_ = true;
}

LogsComponent::Prepared::Prepared() = default;
LogsComponent::Prepared::~Prepared() = default;
LogsComponent::Prepared::Prepared(Prepared&&) noexcept = default;
LogsComponent::Prepared& LogsComponent::Prepared::operator=(Prepared&&) noexcept = default;

Result<LogsComponent::Prepared> LogsComponent::Prepare(const ConfigSnapshot& s) {
  const LogsConfig& cfg = s.config.logs;
  Prepared p;
  // The files section and the offsets file (a tailer reads it when made and
  // writes it only once started): a bad one changes nothing.
  auto t = logs::Tailer::Make(logs::TailerOptions{cfg.files, dir_ + "/tail-offsets.json"}, store_.get());
  if (!t.ok()) return t.error().Annotate("trainwatch.logs.files");
  p.tailer = std::move(*t);
  p.files = cfg.files;
  p.tail_files = !cfg.files.empty();
  {
    base::MutexLock l(&mu_);  // reads forwarders_ only; reloads are serialized, so the kept ones stay until Commit
    RETURN_IF_ERROR(MakeForwarders(cfg.forward, &p.made, &p.kept));
  }
  // The patterns compile (LogMetrics::SetPatterns's only error), checked on
  // a LogMetrics that is never started.
  RETURN_IF_ERROR(logs::LogMetrics::Make(cfg.patterns, nullptr, metrics_interval_ms_).status());
  p.patterns = cfg.patterns;
  return p;
}

void LogsComponent::Commit(Prepared p) {
  base::MutexLock l(&mu_);
  Forwarders next = std::move(p.made);
  for (const std::string& path : p.kept) {
    auto it = forwarders_.find(path);
    CHECK(it != forwarders_.end(), "BUG: a kept forwarder went between Prepare and Commit");
    next[path] = std::move(it->second);
    forwarders_.erase(it);
  }
  for (auto& [path, f] : forwarders_) f->Stop();  // removed targets
  for (auto& [path, f] : next) {
    if (started_ && !f->IsStarted()) f->Start();
  }
  forwarders_ = std::move(next);
  if (Status ps = metrics_->SetPatterns(std::move(p.patterns)); !ps.ok()) {
    TW_LOG(Error, "BUG: logs patterns checked by Prepare: {}", ps.ToString());  // compiled once already
  }
  // The tailer restarts from the offsets the running one saved when it
  // stopped (neither skipping nor repeating a line), so it is made again
  // here. Prepare read the same file, so this fails only when the file went
  // bad in between (written by the stopped tailer, atomically); then the
  // tailer Prepare made is used, from the offsets read then: the lines read
  // in between are stored again, none is skipped.
  tailer_->Stop();
  auto t = logs::Tailer::Make(logs::TailerOptions{std::move(p.files), dir_ + "/tail-offsets.json"}, store_.get());
  if (t.ok()) {
    tailer_ = std::move(*t);
  } else {
    TW_LOG(Error, "trainwatch.logs.files: {}; tailing from the offsets read when the reload began",
           t.error().ToString());
    tailer_ = std::move(p.tailer);
  }
  tail_files_ = p.tail_files;
  if (started_ && tail_files_) tailer_->Start();
}

Status LogsComponent::Apply(const ConfigSnapshot& s) {
  ASSIGN_OR_RETURN(Prepared p, Prepare(s));
  Commit(std::move(p));
  return Status::OK();
}

std::vector<std::string> LogsComponent::forward_state_paths() {
  base::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [path, f] : forwarders_) out.push_back(path);
  return out;
}

void LogsComponent::StopInputs() {
  {
    base::MutexLock l(&mu_);
    if (tailer_ != nullptr) tailer_->Stop();  // file tailing appends no more
    for (auto& [path, f] : forwarders_) f->Stop();  // what is not sent yet stays queued in the store
    started_ = false;
  }
  if (store_ != nullptr) store_->Shutdown();  // ends live tails, so the server's stop does not wait for them
}

void LogsComponent::StopMetrics() {
  if (metrics_ != nullptr) metrics_->Stop();
}

// --- rules ------------------------------------------------------------------

namespace {

rules::ManagerOptions RulesOptions(const ServeOptions& o, storage::Appendable* store, storage::Queryable* queryable,
                                   promql::Engine* engine, common::metrics::Registry* metrics) {
  rules::ManagerOptions r;
  r.appendable = store;
  r.queryable = queryable;
  r.engine = engine;
  r.outage_tolerance_ms = o.rules_outage_tolerance_ms;
  r.for_grace_period_ms = o.rules_for_grace_period_ms;
  r.resend_delay_ms = o.rules_resend_delay_ms;
  r.metrics = metrics;
  return r;
}

}  // namespace

RulesComponent::RulesComponent(const ServeOptions& o, storage::Appendable* store, storage::Queryable* queryable,
                               common::metrics::Registry* metrics)
    : engine_(RulesEngineOptions(o)), manager_(RulesOptions(o, store, queryable, &engine_, metrics)) {}

Status RulesComponent::Apply(const ConfigSnapshot& s) {
  RETURN_IF_ERROR(manager_.Update(s.rules));
  return manager_.ApplyAlertingConfig(s.alerting);
}

void RulesComponent::Stop() { manager_.Stop(); }

// --- notifier ---------------------------------------------------------------

NotifierComponent::NotifierComponent() = default;
NotifierComponent::~NotifierComponent() = default;

Status NotifierComponent::Start(const ServeOptions& o, const std::string& external_url,
                                common::metrics::Registry* metrics, const ConfigSnapshot& s) {
  notify::NotifierOptions no;
  no.dir = o.data_dir + "/alertmanager";
  no.external_url = external_url;
  no.metrics = metrics;
  ASSIGN_OR_RETURN(notifier_, notify::Notifier::Open(std::move(no), s.alertmanager));
  TW_LOG(Info, "embedded notifier on, config {}",
         o.alertmanager_config_file.empty() ? "built in (records notifications, sends none)"
                                            : o.alertmanager_config_file);
  return Status::OK();
}

void NotifierComponent::Apply(const ConfigSnapshot& s) { notifier_->ApplyConfig(s.alertmanager); }

void NotifierComponent::Stop() {
  if (notifier_ != nullptr) notifier_->Stop();
}

rules::AlertSender NotifierComponent::Sender() {
  return [n = notifier_.get()](std::vector<rules::OutgoingAlert> alerts) {
    std::vector<notify::Alert> out;
    out.reserve(alerts.size());
    for (rules::OutgoingAlert& a : alerts) {
      out.push_back(notify::Alert{std::move(a.labels), std::move(a.annotations), a.starts_at_ms, a.ends_at_ms,
                                  std::move(a.generator_url)});
    }
    Status st = n->PutAlerts(std::move(out));
    if (!st.ok()) TW_LOG(Warn, "embedded notifier rejected alerts from the rules: {}", st.message());
  };
}

}  // namespace trainwatch::app
