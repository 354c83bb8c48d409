#pragma once
// What `serve` and `agent` wire the same way: the scrape jobs with the
// self-scrape, the remote_write destinations, the build info, and the wait
// for a termination signal with SIGHUP reloads.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/api.h"
#include "remote/config.h"
#include "scrape/config.h"

namespace trainwatch::http {
class WebSecurity;
}

namespace trainwatch::app {

struct Config;

// Blocks the termination signals in the calling thread; call first thing in
// main, before any thread starts, so every thread inherits the mask and only
// WaitForTermination sees them.
void BlockTerminationSignals();

// The address our own /metrics is reachable at, from the listen address
// ("0.0.0.0:9800" -> "127.0.0.1:9800").
std::string SelfAddress(const std::string& listen);

// The scrape jobs of `config_file` (empty: none), plus a "trainwatch" job
// scraping our own /metrics when `scrape_self` and no job already targets
// `listen`. The self-scrape drops the built-in collectors' series, which are
// stored directly. Under a web config (`web`) it goes over https when TLS is
// on and authenticates with the process's own token; it is left out while
// the web config requires client certificates (a job with one can scrape).
Result<std::vector<scrape::ScrapeConfig>> LoadScrapeConfigs(const std::string& config_file, const std::string& listen,
                                                            bool scrape_self, const http::WebSecurity* web = nullptr);

// The same from `cfg`, the already parsed `config_file` (empty: none, and
// `cfg` is default). Errors are annotated with the file as above.
Result<std::vector<scrape::ScrapeConfig>> ScrapeConfigsOf(const Config& cfg, const std::string& config_file,
                                                          const std::string& listen, bool scrape_self,
                                                          const http::WebSecurity* web = nullptr);

// The `remote_write:` entries of `config_file` (empty: none), then one entry
// per URL of `urls` (--remote-write, named "cli-<i>").
Result<std::vector<remote::RemoteWriteConfig>> LoadRemoteWriteConfigs(const std::string& config_file,
                                                                      const std::vector<std::string>& urls);
// The `remote_read:` entries of `config_file` (empty: none).
Result<std::vector<remote::RemoteReadConfig>> LoadRemoteReadConfigs(const std::string& config_file);
// The same two from `cfg`, the already parsed `config_file`.
Result<std::vector<remote::RemoteWriteConfig>> RemoteWriteConfigsOf(const Config& cfg, const std::string& config_file,
                                                                    const std::vector<std::string>& urls);
Result<std::vector<remote::RemoteReadConfig>> RemoteReadConfigsOf(const Config& cfg, const std::string& config_file);

// Whether `listen` ("host:port", ":port") binds loopback only: 127.0.0.0/8,
// localhost or [::1]. An empty host, 0.0.0.0 and [::] bind every interface.
bool IsLoopbackListen(const std::string& listen);
// The warning when `listen` is reachable beyond loopback with no web config
// or tokens file (anyone who reaches the port may read and write,
// docs/security.md), logged at start and shown by the UI; empty otherwise.
std::string OpenToTheNetworkWarning(const std::string& listen, const http::WebSecurity* web);

// --web.config.file and --web.tokens.file of serve and agent: nullptr when
// both are empty (plain HTTP, open to all); an error naming file, line and
// field when one is bad.
Result<std::shared_ptr<http::WebSecurity>> LoadWebSecurity(const std::string& file, const std::string& tokens_file);

http::BuildInfo MakeBuildInfo();
// "trainwatch/<version>", the User-Agent of outgoing requests.
std::string UserAgent();

// Waits for SIGTERM or SIGINT, calling `reload` on SIGHUP (its error is
// logged) and returning memory to the OS every few seconds. Returns the
// signal. REQUIRES: the signals are blocked (BlockTerminationSignals).
int WaitForTermination(const std::function<Status()>& reload);

// For the client commands (demo, gpus): waits up to `seconds` (0: only
// looks) for SIGINT, SIGTERM or SIGHUP; true when one came. REQUIRES: the
// signals are blocked (BlockTerminationSignals), so none is lost meanwhile.
bool StopSignalWithin(double seconds);

}  // namespace trainwatch::app
