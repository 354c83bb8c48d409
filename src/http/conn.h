#pragma once
// Connection handling for hostile clients, internal to http/server.cc.
// cpp-httplib 0.11 (Debian's shared build) buffers a request line or header
// of any length, any number of headers, chunked bodies of any size, and pins
// a pool thread per connection for as long as the client trickles bytes.
// GuardedServer replaces its per-connection loop (the virtual
// process_and_close_socket) with one that reads through GuardedStream, which
// bounds and times the head and the body of each request; ElasticPool adds
// threads beyond the core pool up to a hard maximum so that slow clients
// cannot starve the rest.

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace trainwatch::http::internal {

struct ConnLimits {
  size_t max_request_line = 8192;       // bytes with CRLF (httplib's own 414 bound); more gets 414
  size_t max_header_bytes = 64u << 10;  // request line + header lines; more gets 431
  size_t max_headers = 256;             // header lines; more gets 431
  size_t max_body_wire_bytes = 0;       // raw bytes after the head, chunk framing included
  int keep_alive_ms = 5000;             // wait for the next request's first byte
  int header_timeout_ms = 10000;        // the whole head, from its first byte; else 408
  int read_timeout_ms = 60000;          // one body read that gets nothing
  int body_timeout_ms = 300000;         // the whole body, from the end of the head
  int write_timeout_ms = 60000;         // one write that makes no progress
  size_t keep_alive_max = 10000;        // requests per connection
};

// The connection the calling thread serves; handlers set its flags. Null
// outside GuardedServer's connection loop.
struct ConnState {
  bool close = false;           // close after this answer: unread input may follow
  bool body_too_large = false;  // the body passed max_body_wire_bytes on the wire
};
ConnState* CurrentConn();

// A task queue of `core` threads that starts more, up to `max`, while every
// thread is busy; those extra threads end after `idle_exit` without work.
// Thread-safe.
class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(size_t core, size_t max, std::chrono::milliseconds idle_exit);
  ~ElasticPool() override;
  void enqueue(std::function<void()> fn) override;
  // Runs the queued tasks, then joins every thread. Idempotent.
  void shutdown() override;
  // Threads now running (core and extra); for tests.
  size_t threads();

 private:
  void Work(bool core);
  void ReapLocked() TW_REQUIRES(mu_);  // joins extra threads that have ended

  const size_t core_, max_;
  const std::chrono::milliseconds idle_exit_;
  base::Mutex mu_;
  base::CondVar cv_;
  std::deque<std::function<void()>> jobs_ TW_GUARDED_BY(mu_);
  std::list<std::thread> threads_ TW_GUARDED_BY(mu_);
  std::vector<std::thread::id> ended_ TW_GUARDED_BY(mu_);  // extra threads that returned, to join
  size_t idle_ TW_GUARDED_BY(mu_) = 0;                     // threads waiting for a job
  size_t running_ TW_GUARDED_BY(mu_) = 0;                  // threads not yet ended
  bool shutdown_ TW_GUARDED_BY(mu_) = false;
};

class TlsContext;

// httplib::Server with GuardedServer's connection loop (see the top). With
// a TLS source, each connection first completes a TLS handshake (within
// header_timeout_ms) with the context the source gives at accept time, then
// reads and writes through it under the same bounds.
class GuardedServer final : public httplib::Server {
 public:
  // The TLS context for a new connection; null: plain HTTP.
  using TlsSource = std::function<std::shared_ptr<const TlsContext>()>;
  explicit GuardedServer(const ConnLimits& limits, TlsSource tls = nullptr);
  ~GuardedServer() override;
  // Ends idle keep-alive waits at once; call before stop().
  void Wake();
  // httplib listens with a backlog of 5: a burst of new connections (100
  // senders) overflows it, and the kernel resets some of them. Raises it to
  // SOMAXCONN on the bound socket; call after bind.
  void RaiseListenBacklog();

 private:
  bool process_and_close_socket(socket_t sock) override;

  const ConnLimits limits_;
  const TlsSource tls_;
  int wake_[2] = {-1, -1};  // a pipe; readable once Wake was called
};

}  // namespace trainwatch::http::internal
