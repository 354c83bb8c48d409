#pragma once
// The HTTP server: cpp-httplib with a fixed thread pool, keep-alive, and every
// request handed to an Api. Start binds before returning, so a bad address
// fails Start rather than a background thread.

#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "http/api.h"

namespace httplib {
class Server;
}

namespace trainwatch::http {

struct ServerOptions {
  std::string listen = "127.0.0.1:9800";  // "host:port", "[v6]:port" or ":port"; port 0 picks one
  int threads = 0;                         // worker threads; 0: 2 per core, at least 8
  size_t max_body_bytes = 256ull << 20;    // larger request bodies get 413
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
  std::unique_ptr<httplib::Server> srv_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  bool stopped_ = false;
};

// Splits "host:port" ("[::1]:9800", ":9800" = all interfaces).
Status SplitHostPort(const std::string& addr, std::string* host, int* port);

}  // namespace trainwatch::http
