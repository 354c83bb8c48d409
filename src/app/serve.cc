#include "app/serve.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "app/collect_loop.h"
#include "app/config.h"
#include "app/run_alerts.h"
#include "app/wiring.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/memory.h"
#include "base/mutex.h"
#include "common/metrics.h"
#include "http/ingest_gate.h"
#include "http/server.h"
#include "ingest/otlp.h"
#include "logs/forward.h"
#include "logs/metrics.h"
#include "logs/store.h"
#include "logs/tailer.h"
#include "notify/notifier.h"
#include "promql/engine.h"
#include "remote/manager.h"
#include "remote/read.h"
#include "rules/manager.h"
#include "runs/store.h"
#include "scrape/manager.h"
#include "tsdb/db.h"

// TW_VERSION, TW_REVISION and TW_BRANCH come from src/app/CMakeLists.txt.
namespace trainwatch::app {
namespace {

// Rules: the config's rule_files (globs relative to the config file's
// directory) plus the built-in training pack, global.evaluation_interval and
// global.external_labels; *alerting gets the `alerting:` section.
Result<rules::ManagerConfig> LoadRulesConfig(const ServeOptions& o, const std::string& external_url,
                                             YAML::Node* alerting) {
  rules::ManagerConfig rc;
  rc.external_url = external_url;
  if (o.rules_default_pack) {
    rc.sources.push_back({std::string(rules::kDefaultRulePackName), std::string(rules::DefaultRulePack()), true});
  }
  if (o.config_file.empty()) return rc;
  ASSIGN_OR_RETURN(Config cfg, LoadConfigFile(o.config_file));
  rc.evaluation_interval_ms = cfg.evaluation_interval_ms;
  const YAML::Node& p = cfg.prometheus;
  if (!p || !p.IsMap()) return rc;
  if (const YAML::Node a = p["alerting"]) *alerting = a;  // absent: a zombie node, whose assignment throws
  if (const YAML::Node g = p["global"]; g && g.IsMap()) {
    if (const YAML::Node ext = g["external_labels"]; ext && ext.IsMap()) {
      std::vector<model::Label> ls;
      for (const auto& kv : ext) ls.push_back({kv.first.Scalar(), kv.second.Scalar()});
      auto l = model::Labels::FromUnsorted(std::move(ls));
      if (!l.ok()) return l.error().Annotate("config file " + o.config_file + ": global.external_labels");
      rc.external_labels = std::move(*l);
    }
  }
  std::vector<std::string> patterns;
  if (const YAML::Node rf = p["rule_files"]; rf && rf.IsSequence()) {
    for (const auto& f : rf) patterns.push_back(f.Scalar());
  }
  size_t slash = o.config_file.rfind('/');
  std::string dir = slash == std::string::npos ? "." : o.config_file.substr(0, slash);
  ASSIGN_OR_RETURN(std::vector<std::string> files, rules::ExpandRuleFiles(patterns, dir));
  for (std::string& f : files) rc.sources.push_back({std::move(f), "", false});
  return rc;
}

}  // namespace

int RunServe(const ServeOptions& o) {
  log::SetLevel(o.log_level);
  TW_LOG(Info, "starting trainwatch {} (data dir {}, listen {})", TW_VERSION, o.data_dir, o.listen);

  // --web.config.file first: a bad one stops the start before anything opens.
  auto loaded_web = LoadWebSecurity(o.web_config_file, o.web_tokens_file);
  if (!loaded_web.ok()) {
    TW_LOG(Error, "{}", loaded_web.error().message());
    return 1;
  }
  std::shared_ptr<http::WebSecurity> web = std::move(*loaded_web);
  const uint64_t allowed_memory = memory::Allowed();
  auto memory_bound = memory::ParseMemoryBound(o.max_memory, allowed_memory);
  if (!memory_bound.ok()) {
    TW_LOG(Error, "--ingest.max-memory: {}", memory_bound.error().message());
    return 1;
  }
  if (*memory_bound == 0) {
    TW_LOG(Info, "ingest memory bound: none (--ingest.max-memory {})", o.max_memory);
  } else {
    TW_LOG(Info, "ingest memory bound: {} MiB (--ingest.max-memory {}; {} MiB allowed to this process)",
           *memory_bound >> 20, o.max_memory, allowed_memory >> 20);
  }
  const std::string open_warning = OpenToTheNetworkWarning(o.listen, web.get());
  if (!open_warning.empty()) TW_LOG(Warn, "{}", open_warning);
  const std::string external_url =
      !o.external_url.empty() ? o.external_url
                              : (web != nullptr && web->tls() ? "https://" : "http://") + SelfAddress(o.listen);

  tsdb::Options db_opts;
  db_opts.dir = o.data_dir;
  db_opts.retention_ms = o.retention_ms;
  db_opts.series_limits = o.series_limits;
  db_opts.max_future_ms = o.max_future_ms;
  db_opts.retention_bytes = o.retention_bytes;
  db_opts.downsample = o.downsample;
  db_opts.tier_retention_ms = {o.retention_5m_ms, o.retention_1h_ms};
  db_opts.wal_sync = o.wal_sync;
  int64_t t0 = MonoNanos();
  auto db = tsdb::DB::Open(db_opts);
  if (!db.ok()) {
    TW_LOG(Error, "open tsdb {}: {}", o.data_dir, db.error().ToString());
    return 1;
  }
  TW_LOG(Info, "tsdb opened in {} ms", (MonoNanos() - t0) / 1000000);
  // trainwatch's own metrics (common/metrics.h): the components below
  // register there and GET /metrics renders it; declared before them, so it
  // outlives their registrations.
  common::metrics::Registry metrics;

  // remote_write out (remote/): while the config names destinations, every
  // commit to the TSDB is also queued on disk (<data-dir>/remote_write) and
  // forwarded. `store` is what every writer below appends through.
  remote::ManagerOptions rw_opts;
  rw_opts.dir = o.data_dir + "/remote_write";
  rw_opts.queue.max_bytes = o.remote_write_queue_max_bytes;
  rw_opts.user_agent = UserAgent();
  rw_opts.metrics = &metrics;
  remote::Manager remote_write(rw_opts);
  // remote_read (remote/read.h): PromQL, the rules and /api/v1/series also
  // read the long-term stores of `remote_read:` (`queryable`).
  remote::RemoteRead remote_read([&db] { return (*db)->StartTime(); }, UserAgent(), &metrics);
  remote::FanoutQueryable queryable(db->get(), &remote_read);
  {
    auto rw = LoadRemoteWriteConfigs(o.config_file, {});
    Status rs = rw.ok() ? remote_write.ApplyConfig(std::move(*rw)) : rw.status();
    if (rs.ok()) {
      auto rr = LoadRemoteReadConfigs(o.config_file);
      if (rr.ok()) {
        remote_read.Apply(std::move(*rr));
      } else {
        rs = rr.status();
      }
    }
    if (!rs.ok()) {
      TW_LOG(Error, "{}", rs.message());
      remote_write.Stop();
      Status s = (*db)->Close();
      if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
      return 1;
    }
  }
  std::unique_ptr<storage::Appendable> store = remote_write.Wrap(db->get());

  // Experiment tracking: run metadata in <data-dir>/runs.db, as durable per
  // 2xx as the WAL (synchronous=FULL with --wal.sync per-request).
  runs::RunStoreOptions runs_opts;
  runs_opts.path = o.data_dir + "/runs.db";
  runs_opts.sync_full = o.wal_sync == tsdb::WalSync::kPerRequest;
  runs_opts.heartbeat_timeout_ms = o.runs_heartbeat_timeout_ms;
  runs_opts.artifact_keep_versions = o.runs_artifact_keep_versions;
  runs_opts.metrics = &metrics;
  auto run_store = runs::RunStore::Open(runs_opts, store.get(), db->get());
  if (!run_store.ok()) {
    TW_LOG(Error, "{}", run_store.error().ToString());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  (*run_store)->StartHeartbeatChecker();

  // Logs (src/logs): time-partitioned SQLite/FTS5 store in <data-dir>/logs,
  // durable per 2xx like runs.db; log-derived counters go to the TSDB.
  logs::StoreOptions logs_opts;
  logs_opts.dir = o.data_dir + "/logs";
  logs_opts.sync_full = o.wal_sync == tsdb::WalSync::kPerRequest;
  logs_opts.retention_ms = o.logs_retention_ms >= 0 ? o.logs_retention_ms : o.retention_ms;
  logs_opts.retention_bytes = o.logs_retention_bytes;
  logs_opts.max_future_ms = o.max_future_ms;
  logs_opts.metrics = &metrics;
  LogsConfig logs_cfg;  // trainwatch.logs: patterns, tailed files, forwarding (also on reload)
  Status logs_cfg_status = ParseLogsConfig(YAML::Node(), &logs_cfg);
  // `otlp:` (convert_histograms_to_nhcb), read by each OTLP request; a
  // reload replaces it.
  struct {
    base::Mutex mu;
    ingest::OtlpOptions opts TW_GUARDED_BY(mu);
  } otlp;
  if (!o.config_file.empty()) {
    auto c = LoadConfigFile(o.config_file);
    if (c.ok()) {
      logs_cfg = c->logs;
      base::MutexLock l(&otlp.mu);
      otlp.opts = c->otlp;
    } else {
      logs_cfg_status = c.error();
    }
  }
  auto log_store = logs::LogStore::Open(logs_opts);
  auto log_metrics = logs::LogMetrics::Make(logs_cfg.patterns, store.get(), o.logs_metrics_interval_ms);
  Result<std::unique_ptr<logs::Tailer>> log_tailer = Status::Unavailable("not opened");
  if (log_store.ok() && logs_cfg_status.ok()) {
    log_tailer = logs::Tailer::Make(logs::TailerOptions{logs_cfg.files, logs_opts.dir + "/tail-offsets.json"},
                                    log_store->get());
  }
  if (!logs_cfg_status.ok() || !log_store.ok() || !log_metrics.ok() || !log_tailer.ok()) {
    TW_LOG(Error, "{}", (!logs_cfg_status.ok() ? logs_cfg_status
                         : !log_store.ok()     ? log_store.error()
                         : !log_metrics.ok()   ? log_metrics.error()
                                               : log_tailer.error())
                            .ToString());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  (*log_store)->SetObserver(log_metrics->get());
  // trainwatch.logs.forward, by state file (one per target URL, index and kind).
  using Forwarders = std::map<std::string, std::unique_ptr<logs::Forwarder>>;
  Forwarders log_forwarders;
  // The forwarders for `targets`: those in *running are moved over (they keep
  // running), the others made (not started). *running keeps the rest. On an
  // error nothing moves.
  auto make_forwarders = [&](const std::vector<logs::ForwardTarget>& targets, Forwarders* running,
                             Forwarders* out) -> Status {
    Forwarders made;
    std::vector<std::string> kept;
    for (logs::ForwardTarget t : targets) {
      t.state_path = logs_opts.dir + "/forward-" +
                     std::to_string(std::hash<std::string>{}(t.url + "|" + t.index + "|" +
                                                             std::to_string(static_cast<int>(t.kind)))) + ".json";
      if (running->count(t.state_path)) {
        kept.push_back(t.state_path);
        continue;
      }
      std::string path = t.state_path;
      auto f = logs::Forwarder::Make(std::move(t), log_store->get());
      if (!f.ok()) return f.error().Annotate("trainwatch.logs.forward");
      made[path] = std::move(*f);
    }
    for (const std::string& path : kept) {
      (*out)[path] = std::move((*running)[path]);
      running->erase(path);
    }
    for (auto& [path, f] : made) (*out)[path] = std::move(f);
    return Status::OK();
  };
  {
    Forwarders none;
    if (Status fs = make_forwarders(logs_cfg.forward, &none, &log_forwarders); !fs.ok()) {
      TW_LOG(Error, "{}", fs.ToString());
      Status s = (*db)->Close();
      if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
      return 1;
    }
  }
  struct {
    base::Mutex mu;  // SIGHUP and POST /-/reload may overlap
    bool started TW_GUARDED_BY(mu) = false;  // the tailer and forwarders run
    bool tail_files TW_GUARDED_BY(mu) = false;
  } logs_reload;
  {
    base::MutexLock l(&logs_reload.mu);
    logs_reload.tail_files = !logs_cfg.files.empty();
  }
  // Applies a new trainwatch.logs section (already validated by its parser):
  // patterns at once; the tailer restarts from its saved offsets (neither
  // skipping nor repeating a line); forwarders of removed targets stop (their
  // positions stay on disk), new ones start, unchanged ones run on.
  auto apply_logs = [&](const LogsConfig& cfg) -> Status {
    base::MutexLock l(&logs_reload.mu);
    Forwarders next;
    RETURN_IF_ERROR(make_forwarders(cfg.forward, &log_forwarders, &next));
    for (auto& [path, f] : log_forwarders) f->Stop();  // removed targets
    for (auto& [path, f] : next) {
      if (logs_reload.started && !f->IsStarted()) f->Start();
    }
    log_forwarders = std::move(next);
    RETURN_IF_ERROR((*log_metrics)->SetPatterns(cfg.patterns));
    (*log_tailer)->Stop();
    auto t = logs::Tailer::Make(logs::TailerOptions{cfg.files, logs_opts.dir + "/tail-offsets.json"}, log_store->get());
    if (!t.ok()) return t.error().Annotate("trainwatch.logs.files");
    *log_tailer = std::move(*t);
    logs_reload.tail_files = !cfg.files.empty();
    if (logs_reload.started && logs_reload.tail_files) (*log_tailer)->Start();
    return Status::OK();
  };

  auto scrape_configs = LoadScrapeConfigs(o.config_file, o.listen, o.scrape_self, web.get());
  if (!scrape_configs.ok()) {
    TW_LOG(Error, "{}", scrape_configs.error().message());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  scrape::Manager scraper(store.get());
  // Recording and alerting rules (rules/), with their own query engine.
  // Alerts leave through senders: external Alertmanagers from `alerting:`;
  // the embedded notifier attaches with rules_manager.AddSender(...).
  // --query.*: the API's queries and the rules' (their own engine, so rule
  // evaluation never waits behind a burst of dashboard queries).
  promql::EngineOptions engine_opts;
  engine_opts.timeout_ms = o.query_timeout_ms;
  engine_opts.max_samples = o.query_max_samples;
  engine_opts.max_concurrent = o.query_max_concurrency;
  engine_opts.lookback_delta_ms = o.query_lookback_delta_ms;
  promql::Engine rules_engine{engine_opts};
  rules::ManagerOptions rules_opts;
  rules_opts.appendable = store.get();
  rules_opts.queryable = &queryable;
  rules_opts.engine = &rules_engine;
  rules_opts.outage_tolerance_ms = o.rules_outage_tolerance_ms;
  rules_opts.for_grace_period_ms = o.rules_for_grace_period_ms;
  rules_opts.resend_delay_ms = o.rules_resend_delay_ms;
  rules_opts.metrics = &metrics;
  rules::Manager rules_manager(rules_opts);
  // Loads rules and alerting config; a bad rule file changes nothing.
  auto apply_rules = [&]() -> Status {
    YAML::Node alerting;
    ASSIGN_OR_RETURN(rules::ManagerConfig rc, LoadRulesConfig(o, external_url, &alerting));
    if (auto ac = rules::ParseAlertingConfig(alerting); !ac.ok()) return ac.error().Annotate("config file " + o.config_file);
    RETURN_IF_ERROR(rules_manager.Update(rc));
    return rules_manager.ApplyAlertingConfig(alerting);
  };
  if (Status rs = apply_rules(); !rs.ok()) {
    TW_LOG(Error, "{}", rs.message());
    rules_manager.Stop();
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  // The embedded Alertmanager (notify/): --alertmanager.config.file (or
  // trainwatch.alertmanager.config_file), else the built-in record-only
  // configuration, so silences and the notification history work from the
  // first start; silences and the notification log in <data-dir>/alertmanager.
  // The rule evaluator's alerts go to it.
  auto load_am_config = [&]() -> Result<std::shared_ptr<const notify::Config>> {
    if (o.alertmanager_config_file.empty()) return notify::ParseConfig(notify::kDefaultConfigYaml);
    return notify::LoadConfigFile(o.alertmanager_config_file);
  };
  std::unique_ptr<notify::Notifier> notifier;
  {
    auto am = load_am_config();
    Status ns = am.status();
    if (ns.ok()) {
      notify::NotifierOptions no;
      no.dir = o.data_dir + "/alertmanager";
      no.external_url = external_url;
      no.metrics = &metrics;
      auto n = notify::Notifier::Open(std::move(no), *am);
      if (n.ok()) notifier = std::move(*n);
      ns = n.status();
    }
    if (!ns.ok()) {
      TW_LOG(Error, "alertmanager config: {}", ns.message());
      rules_manager.Stop();
      Status s = (*db)->Close();
      if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
      return 1;
    }
    TW_LOG(Info, "embedded notifier on, config {}",
           o.alertmanager_config_file.empty() ? "built in (records notifications, sends none)" : o.alertmanager_config_file);
    rules_manager.AddSender([n = notifier.get()](std::vector<rules::OutgoingAlert> alerts) {
      std::vector<notify::Alert> out;
      out.reserve(alerts.size());
      for (rules::OutgoingAlert& a : alerts) {
        out.push_back(notify::Alert{std::move(a.labels), std::move(a.annotations), a.starts_at_ms, a.ends_at_ms,
                                    std::move(a.generator_url)});
      }
      Status s = n->PutAlerts(std::move(out));
      if (!s.ok()) TW_LOG(Warn, "embedded notifier rejected alerts from the rules: {}", s.message());
    });
  }
  // run.alert() of the runs API: stored with the run, then handed to the
  // rules' senders like a rule's alert (embedded notifier, external
  // Alertmanagers, external labels added). The HTTP server, the only caller
  // of AddAlert, stops before rules_manager and run_store go away.
  (*run_store)->SetAlertSink([&rules_manager, url = external_url](const runs::Run& run, const runs::RunAlert& alert) {
    rules_manager.Notify({RunAlertToOutgoing(run, alert, url)});
  });
  // Actions on alerts: a firing alert of a run whose rule names an `action`
  // annotation queues it for the run's clients (docs/runs-api.md "Actions").
  rules_manager.AddSender([rs = run_store->get()](std::vector<rules::OutgoingAlert> alerts) {
    (void)QueueRunActions(*rs, alerts, NowMillis());
  });
  // POST /-/reload and SIGHUP: re-read the config file; a bad one changes nothing.
  auto reload_config = [&]() -> Status {
    auto jobs = LoadScrapeConfigs(o.config_file, o.listen, o.scrape_self, web.get());
    if (!jobs.ok()) return jobs.error();
    auto rw = LoadRemoteWriteConfigs(o.config_file, {});
    if (!rw.ok()) return rw.error();
    auto rr = LoadRemoteReadConfigs(o.config_file);
    if (!rr.ok()) return rr.error();
    LogsConfig new_logs;
    RETURN_IF_ERROR(ParseLogsConfig(YAML::Node(), &new_logs));
    ingest::OtlpOptions new_otlp;
    if (!o.config_file.empty()) {
      auto c = LoadConfigFile(o.config_file);
      if (!c.ok()) return c.error();
      new_logs = c->logs;
      new_otlp = c->otlp;
    }
    std::shared_ptr<const notify::Config> am_cfg;
    if (notifier != nullptr) {
      auto am = load_am_config();
      if (!am.ok()) return am.error().Annotate("alertmanager config");
      am_cfg = std::move(*am);
    }
    RETURN_IF_ERROR(apply_rules());  // rules first: a bad rule file fails the whole reload
    scraper.ApplyConfig(std::move(*jobs));
    {
      base::MutexLock l(&otlp.mu);
      otlp.opts = new_otlp;
    }
    if (notifier != nullptr) notifier->ApplyConfig(std::move(am_cfg));
    RETURN_IF_ERROR(apply_logs(new_logs));
    RETURN_IF_ERROR(remote_write.ApplyConfig(std::move(*rw)));
    remote_read.Apply(std::move(*rr));
    TW_LOG(Info, "completed loading of configuration file {}", o.config_file);
    return Status::OK();
  };
  // The web config too, first (the self-scrape follows its client
  // certificate policy); each file keeps its running version when bad.
  auto reload = [&]() -> Status {
    Status w = web != nullptr ? web->Reload() : Status::OK();
    Status c = reload_config();
    if (w.ok()) return c;
    return c.ok() ? w : Status(w.code(), w.message() + "; " + c.message());
  };

  promql::Engine engine{engine_opts};
  http::ServerOptions srv_opts;
  srv_opts.listen = o.listen;
  srv_opts.max_body_bytes = o.max_request_body_bytes;
  srv_opts.web = web;
  http::ApiDeps deps{db->get(), &engine, MakeBuildInfo()};
  deps.appendable = store.get();
  deps.enable_admin_api = o.enable_admin_api;
  deps.request_limits.max_series = o.max_series_per_request;
  deps.request_limits.max_samples = o.max_samples_per_request;
  deps.request_limits.max_decoded_bytes = o.max_request_body_bytes;
  deps.otlp_options = [&otlp] {
    base::MutexLock l(&otlp.mu);
    return otlp.opts;
  };
  http::IngestGate::Options gate;
  gate.memory_limit = *memory_bound;
  gate.max_concurrent = o.max_concurrent_pushes > 0
                            ? o.max_concurrent_pushes
                            : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  deps.ingest_gate = std::make_shared<http::IngestGate>(gate);
  deps.security_warning = open_warning;
  deps.metrics = &metrics;
  deps.queryable = &queryable;
  deps.runs = run_store->get();
  deps.logs = log_store->get();
  // Host and GPU collectors (job="node", job="dcgm"), stored like a scrape and shown on /metrics.
  CollectOptions collect_opts = o.collect;
  collect_opts.hostname = HostName();
  collect_opts.instance = collect_opts.hostname + SelfAddress(o.listen).substr(SelfAddress(o.listen).rfind(':'));
  CollectLoop collector(collect_opts, store.get(), run_store->get());
  deps.collected = collector.snapshot();
  deps.scrape = &scraper;
  deps.rules = &rules_manager;
  deps.notifier = notifier.get();
  deps.reload = reload;
  auto srv = http::Server::Start(srv_opts, std::move(deps));
  if (!srv.ok()) {
    TW_LOG(Error, "start http server: {}", srv.error().ToString());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }

  scraper.ApplyConfig(std::move(*scrape_configs));
  collector.Start();
  (*log_metrics)->Start();
  {
    base::MutexLock l(&logs_reload.mu);  // a POST /-/reload may have replaced them
    if (logs_reload.tail_files) (*log_tailer)->Start();
    for (auto& [path, f] : log_forwarders) f->Start();
    logs_reload.started = true;
  }
  WaitForTermination(reload);
  scraper.Stop();  // no scrape appends after this, before the server and the DB go
  rules_manager.Stop();  // no rule evaluations either; queued alerts to Alertmanagers are sent
  collector.Stop();  // nor collector appends

  {
    base::MutexLock l(&logs_reload.mu);
    (*log_tailer)->Stop();  // file tailing appends no more
    for (auto& [path, f] : log_forwarders) f->Stop();  // what is not sent yet stays queued in the store
  }
  (*log_store)->Shutdown();  // ends live tails, so the server's stop does not wait for them
  (*srv)->Stop();  // in-flight requests finish first, so every 2xx is in the WAL
  (*log_metrics)->Stop();  // last write of the log-derived counters, before the DB closes
  if (notifier != nullptr) notifier->Stop();  // after rules and the API: nothing puts alerts any more
  (*run_store)->Stop();  // no heartbeat checks after this
  remote_write.Stop();  // nothing appends any more; send positions are saved
  Status s = (*db)->Close();
  if (!s.ok()) {
    TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  TW_LOG(Info, "shutdown complete");
  return 0;
}

}  // namespace trainwatch::app
