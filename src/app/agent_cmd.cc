#include "app/agent_cmd.h"

#include "app/build_info.h"
#include "app/collect_loop.h"
#include "app/snapshot.h"
#include "app/wiring.h"
#include "base/log.h"
#include "base/mutex.h"
#include "common/metrics.h"
#include "http/server.h"
#include "remote/manager.h"
#include "scrape/manager.h"

namespace trainwatch::app {

int RunAgent(const AgentOptions& o) {
  log::SetLevel(o.log_level);
  TW_LOG(Info, "starting trainwatch agent {} (data dir {}, listen {})", kVersion, o.data_dir, o.listen);
  auto loaded_web = LoadWebSecurity(o.web_config_file, o.web_tokens_file);
  if (!loaded_web.ok()) {
    TW_LOG(Error, "{}", loaded_web.error().message());
    return 1;
  }
  std::shared_ptr<http::WebSecurity> web = std::move(*loaded_web);
  if (std::string w = OpenToTheNetworkWarning(o.listen, web.get()); !w.empty()) TW_LOG(Warn, "{}", w);
  // The config file read once per (re)load (app/snapshot.h): scrape jobs and
  // remote_write from the same parse.
  SnapshotInputs inputs;
  inputs.config_file = o.config_file;
  inputs.listen = o.listen;
  inputs.scrape_self = o.scrape_self;
  inputs.web = web.get();
  inputs.remote_write_urls = o.remote_write_urls;
  inputs.serve = false;
  auto first = FirstConfigSnapshot(inputs, o.config);  // the file as ParseCommandLine parsed it: no second read
  if (!first.ok()) {
    TW_LOG(Error, "{}", first.error().message());
    return 1;
  }
  if ((*first)->remote_write.empty()) {
    TW_LOG(Error, "agent: nothing to forward to: give --remote-write URL or remote_write: in --config.file");
    return 1;
  }
  remote::ManagerOptions mo;
  mo.dir = o.data_dir + "/remote_write";
  mo.queue.max_bytes = o.remote_write_queue_max_bytes;
  mo.user_agent = UserAgent();
  common::metrics::Registry metrics;  // /metrics; outlives the components registered there
  mo.metrics = &metrics;
  remote::Manager remote_write(mo);
  if (Status s = remote_write.ApplyConfig((*first)->remote_write); !s.ok()) {
    TW_LOG(Error, "{}", s.message());
    return 1;
  }
  // The queue is the agent's only store: collectors and scrapes append to it.
  storage::Appendable* store = remote_write.queue();
  scrape::Manager scraper(store);
  CollectOptions co = o.collect;
  co.hostname = HostName();
  co.instance = co.hostname + SelfAddress(o.listen).substr(SelfAddress(o.listen).rfind(':'));
  CollectLoop collector(co, store, nullptr);

  bool reloaded = false;  // under reload_mu
  base::Mutex reload_mu;  // SIGHUP and POST /-/reload may overlap: one reload at a time
  auto reload_config = [&]() -> Status {
    base::MutexLock l(&reload_mu);
    ASSIGN_OR_RETURN(std::shared_ptr<const ConfigSnapshot> next, LoadConfigSnapshot(inputs));
    if (next->remote_write.empty()) {
      return Status::InvalidArgument("agent: the new config has no remote_write destination; kept the old one");
    }
    RETURN_IF_ERROR(remote_write.ApplyConfig(next->remote_write));
    scraper.ApplyConfig(next->scrape);
    reloaded = true;
    TW_LOG(Info, "completed loading of configuration file {}", o.config_file);
    return Status::OK();
  };
  // The web config first; each file keeps its running version when bad (as serve).
  auto reload = [&]() -> Status {
    Status w = web != nullptr ? web->Reload() : Status::OK();
    Status c = reload_config();
    if (w.ok()) return c;
    return c.ok() ? w : Status(w.code(), w.message() + "; " + c.message());
  };
  http::ServerOptions so;
  so.listen = o.listen;
  so.web = web;
  http::ApiDeps deps;  // no db: agent mode
  deps.build = MakeBuildInfo();
  deps.scrape = &scraper;
  deps.collected = collector.snapshot();
  deps.metrics = &metrics;
  deps.reload = reload;
  auto srv = http::Server::Start(so, std::move(deps));
  if (!srv.ok()) {
    TW_LOG(Error, "start http server: {}", srv.error().ToString());
    return 1;
  }
  {
    base::MutexLock l(&reload_mu);  // unless a POST /-/reload already applied a newer one
    if (!reloaded) scraper.ApplyConfig((*first)->scrape);
  }
  collector.Start();
  WaitForTermination(reload);
  scraper.Stop();
  collector.Stop();
  (*srv)->Stop();
  remote_write.Stop();  // what is queued and unsent stays on disk for the next start
  TW_LOG(Info, "shutdown complete");
  return 0;
}

}  // namespace trainwatch::app
