#include "app/agent_cmd.h"

#include "app/collect_loop.h"
#include "app/wiring.h"
#include "base/log.h"
#include "common/metrics.h"
#include "http/server.h"
#include "remote/manager.h"
#include "scrape/manager.h"

namespace trainwatch::app {

int RunAgent(const AgentOptions& o) {
  log::SetLevel(o.log_level);
  TW_LOG(Info, "starting trainwatch agent {} (data dir {}, listen {})", TW_VERSION, o.data_dir, o.listen);
  auto loaded_web = LoadWebSecurity(o.web_config_file, o.web_tokens_file);
  if (!loaded_web.ok()) {
    TW_LOG(Error, "{}", loaded_web.error().message());
    return 1;
  }
  std::shared_ptr<http::WebSecurity> web = std::move(*loaded_web);
  if (std::string w = OpenToTheNetworkWarning(o.listen, web.get()); !w.empty()) TW_LOG(Warn, "{}", w);
  auto rw = LoadRemoteWriteConfigs(o.config_file, o.remote_write_urls);
  if (!rw.ok()) {
    TW_LOG(Error, "{}", rw.error().message());
    return 1;
  }
  if (rw->empty()) {
    TW_LOG(Error, "agent: nothing to forward to: give --remote-write URL or remote_write: in --config.file");
    return 1;
  }
  auto jobs = LoadScrapeConfigs(o.config_file, o.listen, o.scrape_self, web.get());
  if (!jobs.ok()) {
    TW_LOG(Error, "{}", jobs.error().message());
    return 1;
  }
  remote::ManagerOptions mo;
  mo.dir = o.data_dir + "/remote_write";
  mo.queue.max_bytes = o.remote_write_queue_max_bytes;
  mo.user_agent = UserAgent();
  common::metrics::Registry metrics;  // /metrics; outlives the components registered there
  mo.metrics = &metrics;
  remote::Manager remote_write(mo);
  if (Status s = remote_write.ApplyConfig(std::move(*rw)); !s.ok()) {
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

  auto reload_config = [&]() -> Status {
    ASSIGN_OR_RETURN(auto j, LoadScrapeConfigs(o.config_file, o.listen, o.scrape_self, web.get()));
    ASSIGN_OR_RETURN(auto r, LoadRemoteWriteConfigs(o.config_file, o.remote_write_urls));
    if (r.empty()) return Status::InvalidArgument("agent: the new config has no remote_write destination; kept the old one");
    RETURN_IF_ERROR(remote_write.ApplyConfig(std::move(r)));
    scraper.ApplyConfig(std::move(j));
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
  scraper.ApplyConfig(std::move(*jobs));
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
