#include "app/serve.h"

#include <malloc.h>
#include <signal.h>

#include <cstring>

#include "app/config.h"
#include "base/clock.h"
#include "base/log.h"
#include "http/server.h"
#include "promql/engine.h"
#include "runs/store.h"
#include "scrape/manager.h"
#include "tsdb/db.h"

// TW_VERSION, TW_REVISION and TW_BRANCH come from src/app/CMakeLists.txt.
namespace trainwatch::app {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);  // reload the config file
  return set;
}

// The address our own /metrics is reachable at, from the listen address.
std::string SelfAddress(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + port;
}

// The scrape jobs of the config file, plus a "trainwatch" job scraping
// ourselves unless disabled or some job already targets our address.
Result<std::vector<scrape::ScrapeConfig>> LoadScrapeConfigs(const ServeOptions& o) {
  Config cfg;
  if (!o.config_file.empty()) { ASSIGN_OR_RETURN(cfg, LoadConfigFile(o.config_file)); }
  scrape::GlobalDefaults g{cfg.scrape_interval_ms, cfg.scrape_timeout_ms};
  auto jobs = scrape::ParseScrapeConfigs(cfg.prometheus, g);
  if (!jobs.ok()) return jobs.error().Annotate(o.config_file.empty() ? "config" : "config file " + o.config_file);
  if (!o.scrape_self) return jobs;
  const std::string self = SelfAddress(o.listen);
  const std::string port = self.substr(self.rfind(':') + 1);
  for (const scrape::ScrapeConfig& j : *jobs) {
    if (j.job_name == "trainwatch") return jobs;
    for (const scrape::TargetGroup& tg : j.static_configs) {
      for (const std::string& t : tg.targets) {
        if (t == self || t == o.listen || t == "localhost:" + port) return jobs;
      }
    }
  }
  YAML::Node root = YAML::Load("scrape_configs: [{job_name: trainwatch, static_configs: [{targets: ['" + self + "']}]}]");
  ASSIGN_OR_RETURN(auto own, scrape::ParseScrapeConfigs(root, g));
  jobs->push_back(std::move(own[0]));
  return jobs;
}

http::BuildInfo MakeBuildInfo() {
  return http::BuildInfo{TW_VERSION, TW_REVISION, TW_BRANCH, "trainwatch", __DATE__ " " __TIME__,
                         std::string("gcc ") + __VERSION__};
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer closing a connection must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

int RunServe(const ServeOptions& o) {
  log::SetLevel(o.log_level);
  TW_LOG(Info, "starting trainwatch {} (data dir {}, listen {})", TW_VERSION, o.data_dir, o.listen);

  tsdb::Options db_opts;
  db_opts.dir = o.data_dir;
  db_opts.retention_ms = o.retention_ms;
  db_opts.retention_bytes = o.retention_bytes;
  db_opts.wal_sync = o.wal_sync;
  int64_t t0 = MonoNanos();
  auto db = tsdb::DB::Open(db_opts);
  if (!db.ok()) {
    TW_LOG(Error, "open tsdb {}: {}", o.data_dir, db.error().ToString());
    return 1;
  }
  TW_LOG(Info, "tsdb opened in {} ms", (MonoNanos() - t0) / 1000000);

  // Experiment tracking: run metadata in <data-dir>/runs.db, as durable per
  // 2xx as the WAL (synchronous=FULL with --wal.sync per-request).
  runs::RunStoreOptions runs_opts;
  runs_opts.path = o.data_dir + "/runs.db";
  runs_opts.sync_full = o.wal_sync == tsdb::WalSync::kPerRequest;
  runs_opts.heartbeat_timeout_ms = o.runs_heartbeat_timeout_ms;
  auto run_store = runs::RunStore::Open(runs_opts, db->get(), db->get());
  if (!run_store.ok()) {
    TW_LOG(Error, "{}", run_store.error().ToString());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  (*run_store)->StartHeartbeatChecker();

  auto scrape_configs = LoadScrapeConfigs(o);
  if (!scrape_configs.ok()) {
    TW_LOG(Error, "{}", scrape_configs.error().message());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  scrape::Manager scraper(db->get());
  // POST /-/reload and SIGHUP: re-read the config file; a bad one changes nothing.
  auto reload = [&]() -> Status {
    auto jobs = LoadScrapeConfigs(o);
    if (!jobs.ok()) return jobs.error();
    scraper.ApplyConfig(std::move(*jobs));
    TW_LOG(Info, "completed loading of configuration file {}", o.config_file);
    return Status::OK();
  };

  promql::Engine engine{promql::EngineOptions{}};
  http::ServerOptions srv_opts;
  srv_opts.listen = o.listen;
  http::ApiDeps deps{db->get(), &engine, MakeBuildInfo()};
  deps.runs = run_store->get();
  deps.scrape = &scraper;
  deps.reload = reload;
  auto srv = http::Server::Start(srv_opts, std::move(deps));
  if (!srv.ok()) {
    TW_LOG(Error, "start http server: {}", srv.error().ToString());
    Status s = (*db)->Close();
    if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }

  sigset_t set = TerminationSignals();
  int sig = 0;
  // While waiting for a termination signal, hand memory that request
  // buffers and queries freed back to the OS every few seconds: glibc keeps
  // it in per-thread arenas otherwise (~20% of RSS under ingest).
  const timespec kTrimEvery{5, 0};
  scraper.ApplyConfig(std::move(*scrape_configs));
  for (;;) {
    sig = sigtimedwait(&set, nullptr, &kTrimEvery);
    if (sig == SIGTERM || sig == SIGINT) break;
    if (sig == SIGHUP) {
      Status s = reload();
      if (!s.ok()) TW_LOG(Error, "reload on SIGHUP: {}", s.message());
      continue;
    }
    ::malloc_trim(0);
  }
  TW_LOG(Info, "received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  scraper.Stop();  // no scrape appends after this, before the server and the DB go

  (*srv)->Stop();  // in-flight requests finish first, so every 2xx is in the WAL
  (*run_store)->Stop();  // no heartbeat checks after this
  Status s = (*db)->Close();
  if (!s.ok()) {
    TW_LOG(Error, "close tsdb: {}", s.ToString());
    return 1;
  }
  TW_LOG(Info, "shutdown complete");
  return 0;
}

}  // namespace trainwatch::app
