#pragma once
// The HTTP server: cpp-httplib with a thread pool that grows up to a hard
// maximum, keep-alive, bounds on every part of a request (http/conn.h), and
// every request handed to an Api. With a web config, TLS (http/tls.h) and
// basic auth guard every route, as in Prometheus: the credentials are
// checked before anything else, the body is not read for a 401. Start binds
// before returning, so a bad address fails Start rather than a background
// thread.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "http/api.h"
#include "http/web_security.h"

namespace trainwatch::http::internal {
class GuardedServer;
}

namespace trainwatch::http {

struct ServerOptions {
  std::string listen = "127.0.0.1:9800";  // "host:port", "[v6]:port" or ":port"; port 0 picks one
  int threads = 0;                         // worker threads; 0: 2 per core, at least 8
  // Threads beyond `threads`, started while all are busy (slow clients, log
  // tails), up to this many in all; 0: max(256, 4 * threads).
  int max_threads = 0;
  int max_streams = 0;                   // concurrent log tails (SSE), more get 503; 0: max_threads / 4
  size_t max_body_bytes = 256ull << 20;  // larger request bodies, sized, chunked or decoded, get 413
  size_t max_header_bytes = 64u << 10;   // request line and headers; more get 431
  size_t max_headers = 256;              // header fields; more get 431
  int header_timeout_ms = 10000;         // the request line and headers must arrive within; else 408
  int keep_alive_ms = 5000;              // an idle connection is closed after
  int body_timeout_ms = 300000;          // a request body must arrive within; else 400 and close
  // --web.config.file (http/web_security.h): TLS, basic auth, response
  // headers and rate limit for every route; null: plain HTTP, open to all.
  std::shared_ptr<WebSecurity> web;
};

// Thread-safe. Stop (or destruction) waits for in-flight requests.
class Server {
 public:
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& opts, ApiDeps deps);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops accepting, finishes in-flight requests, joins threads. Idempotent.
  void Stop();
  int port() const { return port_; }
  const std::string& host() const { return host_; }
  Api& api() { return *api_; }

 private:
  Server() = default;
  // Request bodies, reused by the worker threads, freed when idle; declared
  // before srv_ so it outlives the workers.
  IdlePool<std::string> bodies_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<internal::GuardedServer> srv_;
  std::shared_ptr<std::atomic<int>> streams_;  // log tails (SSE) being served
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  bool stopped_ = false;
};

// Splits "host:port" ("[::1]:9800", ":9800" = all interfaces).
Status SplitHostPort(const std::string& addr, std::string* host, int* port);

}  // namespace trainwatch::http
