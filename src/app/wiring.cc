#include "app/wiring.h"

#include <malloc.h>
#include <signal.h>

#include <cerrno>
#include <cmath>

#include <yaml-cpp/yaml.h>

#include "app/build_info.h"
#include "app/config.h"
#include "base/idle_pool.h"
#include "base/log.h"
#include "base/memory.h"
#include "http/web_security.h"

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

}  // namespace

bool StopSignalWithin(double seconds) {
  sigset_t set = TerminationSignals();
  timespec ts{static_cast<time_t>(seconds), static_cast<long>(std::fmod(seconds, 1.0) * 1e9)};
  for (;;) {
    if (sigtimedwait(&set, nullptr, &ts) > 0) return true;
    if (errno != EINTR) return false;
  }
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer closing a connection must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

std::string SelfAddress(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + port;
}

bool IsLoopbackListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  return host == "localhost" || host == "[::1]" || host.starts_with("127.");
}

std::string OpenToTheNetworkWarning(const std::string& listen, const http::WebSecurity* web) {
  if (web != nullptr || IsLoopbackListen(listen)) return "";
  return "listening on " + listen + " with no authentication: anyone who can reach this port can read, write and "
         "delete data; give a --web.config.file with basic_auth_users (and TLS) or a --web.tokens.file before "
         "exposing it (docs/security.md)";
}

Result<std::vector<scrape::ScrapeConfig>> LoadScrapeConfigs(const std::string& config_file, const std::string& listen,
                                                            bool scrape_self, const http::WebSecurity* web) {
  Config cfg;
  if (!config_file.empty()) { ASSIGN_OR_RETURN(cfg, LoadConfigFile(config_file)); }
  return ScrapeConfigsOf(cfg, config_file, listen, scrape_self, web);
}

Result<std::vector<scrape::ScrapeConfig>> ScrapeConfigsOf(const Config& cfg, const std::string& config_file,
                                                          const std::string& listen, bool scrape_self,
                                                          const http::WebSecurity* web) {
  scrape::GlobalDefaults g{cfg.scrape_interval_ms, cfg.scrape_timeout_ms};
  auto jobs = scrape::ParseScrapeConfigs(cfg.prometheus, g);
  if (!jobs.ok()) return jobs.error().Annotate(config_file.empty() ? "config" : "config file " + config_file);
  if (!scrape_self) return jobs;
  const std::string self = SelfAddress(listen);
  const std::string port = self.substr(self.rfind(':') + 1);
  for (const scrape::ScrapeConfig& j : *jobs) {
    if (j.job_name == "trainwatch") return jobs;
    for (const scrape::TargetGroup& tg : j.static_configs) {
      for (const std::string& t : tg.targets) {
        if (t == self || t == listen || t == "localhost:" + port) return jobs;
      }
    }
  }
  std::string auth;
  if (web != nullptr) {
    if (web->requires_client_cert()) {
      TW_LOG(Warn, "self-scrape off: web config {} requires client certificates; scrape trainwatch with a job that "
                   "has one (--scrape.self=false silences this)", web->path());
      return jobs;
    }
    // Our own address, so the certificate need not name it; the token is
    // this process's (http/web_security.h), hex, so plain in YAML.
    auth = std::string(web->tls() ? ", scheme: https, tls_config: {insecure_skip_verify: true}" : "") +
           ", authorization: {credentials: '" + web->self_token() + "'}";
  }
  // The built-in collectors' series are stored directly (jobs node and dcgm);
  // the self-scrape drops them from /metrics so they are not stored twice.
  YAML::Node root = YAML::Load("scrape_configs: [{job_name: trainwatch, static_configs: [{targets: ['" + self +
                               "']}]" + auth + ", metric_relabel_configs: [{source_labels: [__name__], "
                               "regex: 'node_.+|DCGM_.+|trainwatch_gpu_process_.+', action: drop}]}]");
  ASSIGN_OR_RETURN(auto own, scrape::ParseScrapeConfigs(root, g));
  jobs->push_back(std::move(own[0]));
  return jobs;
}

Result<std::vector<remote::RemoteWriteConfig>> LoadRemoteWriteConfigs(const std::string& config_file,
                                                                      const std::vector<std::string>& urls) {
  Config cfg;
  if (!config_file.empty()) { ASSIGN_OR_RETURN(cfg, LoadConfigFile(config_file)); }
  return RemoteWriteConfigsOf(cfg, config_file, urls);
}

Result<std::vector<remote::RemoteWriteConfig>> RemoteWriteConfigsOf(const Config& cfg, const std::string& config_file,
                                                                    const std::vector<std::string>& urls) {
  // A copy: the --remote-write entries are appended to it, never to `cfg`.
  YAML::Node root(YAML::NodeType::Map);
  if (cfg.prometheus && cfg.prometheus.IsMap()) root = YAML::Clone(cfg.prometheus);
  YAML::Node list = root["remote_write"];
  if (!list || list.IsNull()) list = YAML::Node(YAML::NodeType::Sequence);
  for (size_t i = 0; i < urls.size(); i++) {
    YAML::Node e(YAML::NodeType::Map);
    e["url"] = urls[i];
    e["name"] = "cli-" + std::to_string(i);
    list.push_back(e);
  }
  root["remote_write"] = list;
  auto cfgs = remote::ParseRemoteWriteConfigs(root);
  if (!cfgs.ok()) return cfgs.error().Annotate(config_file.empty() ? "--remote-write" : "config file " + config_file);
  return cfgs;
}

Result<std::vector<remote::RemoteReadConfig>> LoadRemoteReadConfigs(const std::string& config_file) {
  if (config_file.empty()) return std::vector<remote::RemoteReadConfig>{};
  ASSIGN_OR_RETURN(Config cfg, LoadConfigFile(config_file));
  return RemoteReadConfigsOf(cfg, config_file);
}

Result<std::vector<remote::RemoteReadConfig>> RemoteReadConfigsOf(const Config& cfg, const std::string& config_file) {
  if (config_file.empty()) return std::vector<remote::RemoteReadConfig>{};
  if (!cfg.prometheus || !cfg.prometheus.IsMap()) return std::vector<remote::RemoteReadConfig>{};
  auto cfgs = remote::ParseRemoteReadConfigs(cfg.prometheus);
  if (!cfgs.ok()) return cfgs.error().Annotate("config file " + config_file);
  return cfgs;
}

Result<std::shared_ptr<http::WebSecurity>> LoadWebSecurity(const std::string& file, const std::string& tokens_file) {
  if (file.empty() && tokens_file.empty()) return std::shared_ptr<http::WebSecurity>();
  return http::WebSecurity::Load(file, tokens_file);
}

http::BuildInfo MakeBuildInfo() {
  return http::BuildInfo{kVersion, kRevision, kBranch, "trainwatch", kBuildDate, kCompiler};
}

std::string UserAgent() { return std::string("trainwatch/") + kVersion; }

int WaitForTermination(const std::function<Status()>& reload) {
  sigset_t set = TerminationSignals();
  // While waiting: free the request buffers of pools unused for a second
  // (base/idle_pool.h), and hand memory that they and queries freed back to
  // the OS, at once after a release and every 5 s otherwise: glibc keeps it
  // in per-thread arenas (~20% of RSS under ingest). Within a minute of a
  // user's query, only when free memory is over 64 MiB and a quarter of the
  // heap in use (memory::ShouldTrim): the next query would page-fault its
  // buffers in again.
  const timespec kTick{1, 0};
  constexpr int64_t kIdleNs = 1'000'000'000;
  constexpr int64_t kQueryQuietNs = 60'000'000'000;
  for (int tick = 1;; tick++) {
    int sig = sigtimedwait(&set, nullptr, &kTick);
    if (sig == SIGTERM || sig == SIGINT) {
      TW_LOG(Info, "received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      return sig;
    }
    if (sig == SIGHUP) {
      Status s = reload();
      if (!s.ok()) TW_LOG(Error, "reload on SIGHUP: {}", s.message());
      continue;
    }
    if (ReleaseIdlePools(kIdleNs) > 0 || tick % 5 == 0) {
      const int64_t since = memory::SinceQueryNs();
      uint64_t free_bytes = 0, in_use = 0;
      if (since < kQueryQuietNs) memory::HeapBytes(&free_bytes, &in_use);
      if (memory::ShouldTrim(since, kQueryQuietNs, free_bytes, in_use)) ::malloc_trim(0);
    }
  }
}

}  // namespace trainwatch::app
