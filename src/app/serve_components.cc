#include "app/serve_components.h"

#include "app/wiring.h"
#include "base/check.h"
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
      db_(db) {}

Status RemoteComponent::Start(const ConfigSnapshot& s) {
  RETURN_IF_ERROR(Apply(s));
  store_ = write_.Wrap(db_);
  return Status::OK();
}

Status RemoteComponent::Apply(const ConfigSnapshot& s) {
  RETURN_IF_ERROR(write_.ApplyConfig(s.remote_write));
  read_.Apply(s.remote_read);
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
  Forwarders none;
  RETURN_IF_ERROR(MakeForwarders(cfg.forward, &none, &forwarders_));
  tail_files_ = !cfg.files.empty();
  return Status::OK();
}

// The forwarders for `targets`: those in *running are moved over (they keep
// running), the others made (not started). *running keeps the rest. On an
// error nothing moves.
Status LogsComponent::MakeForwarders(const std::vector<logs::ForwardTarget>& targets, Forwarders* running,
                                     Forwarders* out) {
  Forwarders made;
  std::vector<std::string> kept;
  for (logs::ForwardTarget t : targets) {
    t.state_path = dir_ + "/forward-" +
                   std::to_string(std::hash<std::string>{}(t.url + "|" + t.index + "|" +
                                                           std::to_string(static_cast<int>(t.kind)))) + ".json";
    if (running->count(t.state_path)) {
      kept.push_back(t.state_path);
      continue;
    }
    std::string path = t.state_path;
    auto f = logs::Forwarder::Make(std::move(t), store_.get());
    if (!f.ok()) return f.error().Annotate("trainwatch.logs.forward");
    made[path] = std::move(*f);
  }
  for (const std::string& path : kept) {
    (*out)[path] = std::move((*running)[path]);
    running->erase(path);
  }
  for (auto& [path, f] : made) (*out)[path] = std::move(f);
  return Status::OK();
}

void LogsComponent::Start() {
  metrics_->Start();
  base::MutexLock l(&mu_);  // a POST /-/reload may have replaced them
  if (tail_files_) tailer_->Start();
  for (auto& [path, f] : forwarders_) f->Start();
  started_ = true;
}

Status LogsComponent::Apply(const ConfigSnapshot& s) {
  const LogsConfig& cfg = s.config.logs;
  // The files section is checked before anything changes (a tailer made
  // with no state file reads and writes none), so a bad one changes nothing.
  if (auto probe = logs::Tailer::Make(logs::TailerOptions{cfg.files, ""}, store_.get()); !probe.ok()) {
    return probe.error().Annotate("trainwatch.logs.files");
  }
  base::MutexLock l(&mu_);
  Forwarders next;
  RETURN_IF_ERROR(MakeForwarders(cfg.forward, &forwarders_, &next));
  for (auto& [path, f] : forwarders_) f->Stop();  // removed targets
  for (auto& [path, f] : next) {
    if (started_ && !f->IsStarted()) f->Start();
  }
  forwarders_ = std::move(next);
  RETURN_IF_ERROR(metrics_->SetPatterns(cfg.patterns));
  tailer_->Stop();
  auto t = logs::Tailer::Make(logs::TailerOptions{cfg.files, dir_ + "/tail-offsets.json"}, store_.get());
  if (!t.ok()) return t.error().Annotate("trainwatch.logs.files");
  tailer_ = std::move(*t);
  tail_files_ = !cfg.files.empty();
  if (started_ && tail_files_) tailer_->Start();
  return Status::OK();
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
