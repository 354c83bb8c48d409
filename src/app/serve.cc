#include "app/serve.h"

#include <algorithm>
#include <thread>

#include "app/build_info.h"
#include "app/collect_loop.h"
#include "app/run_alerts.h"
#include "app/serve_components.h"
#include "app/serve_core.h"
#include "app/snapshot.h"
#include "app/wiring.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/memory.h"
#include "base/mutex.h"
#include "common/metrics.h"
#include "http/ingest_gate.h"
#include "http/server.h"
#include "notify/notifier.h"
#include "promql/engine.h"
#include "rules/manager.h"
#include "runs/store.h"
#include "scrape/manager.h"
#include "tsdb/db.h"

namespace trainwatch::app {

int RunServe(const ServeOptions& o) {
  log::SetLevel(o.log_level);
  TW_LOG(Info, "starting trainwatch {} (data dir {}, listen {})", kVersion, o.data_dir, o.listen);

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

  // The configuration, read once into the snapshot every component starts
  // from (app/snapshot.h); a bad one stops the start before anything opens.
  SnapshotInputs inputs;
  inputs.config_file = o.config_file;
  inputs.listen = o.listen;
  inputs.scrape_self = o.scrape_self;
  inputs.web = web.get();
  inputs.rules_default_pack = o.rules_default_pack;
  inputs.external_url = external_url;
  inputs.alertmanager_config_file = o.alertmanager_config_file;
  auto first = FirstConfigSnapshot(inputs, o.config);  // the file as ParseCommandLine parsed it: no second read
  if (!first.ok()) {
    TW_LOG(Error, "{}", first.error().message());
    return 1;
  }
  const ConfigSnapshot& snap = **first;
  // The snapshot last applied; each OTLP request reads its `otlp:`
  // (convert_histograms_to_nhcb).
  struct {
    base::Mutex mu;
    std::shared_ptr<const ConfigSnapshot> snap TW_GUARDED_BY(mu);
  } current;
  {
    base::MutexLock l(&current.mu);
    current.snap = *first;
  }

  TsdbComponent db;
  if (Status ds = db.Open(o); !ds.ok()) {
    TW_LOG(Error, "open tsdb {}: {}", o.data_dir, ds.ToString());
    return 1;
  }
  // What has started stops in one order (StopStep), on every error path as
  // on a normal shutdown: each component registers its stop as it starts.
  Shutdown shutdown;
  bool close_failed = false;
  shutdown.Add(StopStep::kTsdb, [&] { close_failed = !db.Close().ok(); });
  auto fail = [&shutdown] {
    shutdown.Run();
    return 1;
  };
  // trainwatch's own metrics (common/metrics.h): the components below
  // register there and GET /metrics renders it; declared before them, so it
  // outlives their registrations.
  common::metrics::Registry metrics;

  // remote_write out (remote/): while the config names destinations, every
  // commit to the TSDB is also queued on disk (<data-dir>/remote_write) and
  // forwarded. remote.store() is what every writer below appends through.
  // remote_read: PromQL, the rules and /api/v1/series also read the
  // long-term stores of `remote_read:` (remote.queryable()).
  RemoteComponent remote(o, db.get(), &metrics);
  shutdown.Add(StopStep::kRemote, [&remote] { remote.Stop(); });  // nothing appends any more; send positions are saved
  if (Status rs = remote.Start(snap); !rs.ok()) {
    TW_LOG(Error, "{}", rs.message());
    return fail();
  }
  storage::Appendable* store = remote.store();

  // Experiment tracking (runs/).
  RunsComponent run_tracking;
  if (Status rs = run_tracking.Start(o, store, db.get(), &metrics); !rs.ok()) {
    TW_LOG(Error, "{}", rs.ToString());
    return fail();
  }
  shutdown.Add(StopStep::kRuns, [&run_tracking] { run_tracking.Stop(); });  // no heartbeat checks after this
  runs::RunStore* run_store = run_tracking.get();

  // Logs (src/logs): the store, its counters, file tailing and forwarding
  // (trainwatch.logs); they run from logs.Start() below.
  LogsComponent logs(o, store, &metrics);
  shutdown.Add(StopStep::kLogInputs, [&logs] { logs.StopInputs(); });
  if (Status ls = logs.Open(snap); !ls.ok()) {
    TW_LOG(Error, "{}", ls.ToString());
    return fail();
  }

  // The embedded Alertmanager (notify/): --alertmanager.config.file (or
  // trainwatch.alertmanager.config_file), else the built-in record-only
  // configuration, so silences and the notification history work from the
  // first start; silences and the notification log in <data-dir>/alertmanager.
  NotifierComponent notifier;
  shutdown.Add(StopStep::kNotifier, [&notifier] { notifier.Stop(); });  // after rules and the API: nothing puts alerts any more
  if (Status ns = notifier.Start(o, external_url, &metrics, snap); !ns.ok()) {
    TW_LOG(Error, "alertmanager config: {}", ns.message());
    return fail();
  }

  ScrapeComponent scrape(store);
  scrape::Manager& scraper = *scrape.manager();
  shutdown.Add(StopStep::kScrape, [&scrape] { scrape.Stop(); });  // no scrape appends after this, before the server and the DB go
  // Recording and alerting rules (rules/), with their own query engine.
  // Alerts leave through senders: the embedded notifier, and external
  // Alertmanagers from `alerting:`.
  RulesComponent rules(o, store, remote.queryable(), &metrics);
  rules::Manager& rules_manager = *rules.manager();
  shutdown.Add(StopStep::kRules, [&rules] { rules.Stop(); });  // no rule evaluations either; queued alerts to Alertmanagers are sent
  rules_manager.AddSender(notifier.Sender());
  // run.alert() of the runs API: stored with the run, then handed to the
  // rules' senders like a rule's alert (embedded notifier, external
  // Alertmanagers, external labels added). The HTTP server, the only caller
  // of AddAlert, stops before rules_manager and run_store go away.
  run_store->SetAlertSink([&rules_manager, url = external_url](const runs::Run& run, const runs::RunAlert& alert) {
    rules_manager.Notify({RunAlertToOutgoing(run, alert, url)});
  });
  // Actions on alerts: a firing alert of a run whose rule names an `action`
  // annotation queues it for the run's clients (docs/runs-api.md "Actions").
  rules_manager.AddSender([rs = run_store](std::vector<rules::OutgoingAlert> alerts) {
    (void)QueueRunActions(*rs, alerts, NowMillis());
  });
  if (Status rs = rules.Apply(snap); !rs.ok()) {
    TW_LOG(Error, "{}", rs.message());
    return fail();
  }

  // POST /-/reload and SIGHUP: read a new snapshot, then apply it to each
  // component; a bad config file changes nothing.
  base::Mutex reload_mu;  // SIGHUP and POST /-/reload may overlap: one reload at a time
  auto reload_config = [&]() -> Status {
    base::MutexLock l(&reload_mu);
    ASSIGN_OR_RETURN(std::shared_ptr<const ConfigSnapshot> next, LoadConfigSnapshot(inputs));
    // All or nothing: every component that can fail prepares first (changing
    // nothing running), then each commits in the usual order. Rules prepare
    // and commit in one step (a bad rule file changes nothing), so they go
    // last of the prepares and first of the commits. What remote's commit
    // can still fail on is in RemoteComponent::Commit's comment.
    ASSIGN_OR_RETURN(LogsComponent::Prepared logs_next, logs.Prepare(*next));
    ASSIGN_OR_RETURN(RemoteComponent::Prepared remote_next, remote.Prepare(*next));
    RETURN_IF_ERROR(rules.Apply(*next));  // rules first: a bad rule file fails the whole reload
    scrape.Apply(*next);
    notifier.Apply(*next);
    {
      base::MutexLock c(&current.mu);
      current.snap = next;
    }
    logs.Commit(std::move(logs_next));
    RETURN_IF_ERROR(remote.Commit(std::move(remote_next)));
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

  // --query.*: the API's queries (the rules have their own engine).
  promql::EngineOptions engine_opts;
  engine_opts.timeout_ms = o.query_timeout_ms;
  engine_opts.max_samples = o.query_max_samples;
  engine_opts.max_concurrent = o.query_max_concurrency;
  engine_opts.lookback_delta_ms = o.query_lookback_delta_ms;
  promql::Engine engine{engine_opts};
  http::ServerOptions srv_opts;
  srv_opts.listen = o.listen;
  srv_opts.max_body_bytes = o.max_request_body_bytes;
  srv_opts.web = web;
  http::ApiDeps deps{db.get(), &engine, MakeBuildInfo()};
  deps.appendable = store;
  deps.enable_admin_api = o.enable_admin_api;
  deps.request_limits.max_series = o.max_series_per_request;
  deps.request_limits.max_samples = o.max_samples_per_request;
  deps.request_limits.max_decoded_bytes = o.max_request_body_bytes;
  deps.otlp_options = [&current] {
    base::MutexLock l(&current.mu);
    return current.snap->config.otlp;
  };
  http::IngestGate::Options gate;
  gate.memory_limit = *memory_bound;
  gate.max_concurrent = o.max_concurrent_pushes > 0
                            ? o.max_concurrent_pushes
                            : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  deps.ingest_gate = std::make_shared<http::IngestGate>(gate);
  deps.security_warning = open_warning;
  deps.metrics = &metrics;
  deps.queryable = remote.queryable();
  deps.runs = run_store;
  deps.logs = logs.store();
  // Host and GPU collectors (job="node", job="dcgm"), stored like a scrape and shown on /metrics.
  CollectOptions collect_opts = o.collect;
  collect_opts.hostname = HostName();
  collect_opts.instance = collect_opts.hostname + SelfAddress(o.listen).substr(SelfAddress(o.listen).rfind(':'));
  CollectLoop collector(collect_opts, store, run_store);
  deps.collected = collector.snapshot();
  deps.scrape = &scraper;
  deps.rules = &rules_manager;
  deps.notifier = notifier.get();
  deps.reload = reload;
  HttpComponent srv;
  if (Status hs = srv.Start(srv_opts, std::move(deps)); !hs.ok()) {
    TW_LOG(Error, "start http server: {}", hs.ToString());
    return fail();
  }
  shutdown.Add(StopStep::kHttp, [&srv] { srv.Stop(); });  // in-flight requests finish first, so every 2xx is in the WAL

  {
    // The snapshot last applied: a POST /-/reload may already have replaced the first.
    base::MutexLock l(&reload_mu);
    std::shared_ptr<const ConfigSnapshot> now;
    {
      base::MutexLock c(&current.mu);
      now = current.snap;
    }
    scrape.Apply(*now);
  }
  collector.Start();
  shutdown.Add(StopStep::kCollectors, [&collector] { collector.Stop(); });  // nor collector appends
  logs.Start();
  // Last write of the log-derived counters, after the server and before the DB closes.
  shutdown.Add(StopStep::kLogMetrics, [&logs] { logs.StopMetrics(); });
  WaitForTermination(reload);
  shutdown.Run();
  if (close_failed) return 1;
  TW_LOG(Info, "shutdown complete");
  return 0;
}

}  // namespace trainwatch::app
