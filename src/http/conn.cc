#include "http/conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/log.h"
#include "http/tls.h"

namespace trainwatch::http::internal {

namespace {

using Clock = std::chrono::steady_clock;

thread_local ConnState* tls_conn = nullptr;

int MsUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

// poll() on one or two descriptors, retried on EINTR; the poll result.
int Poll(pollfd* fds, nfds_t n, Clock::time_point deadline) {
  for (;;) {
    int r = ::poll(fds, n, MsUntil(deadline));
    if (r >= 0 || errno != EINTR) return r;
  }
}

void IpAndPort(const sockaddr_storage& a, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

const char* Reason(int status) {
  switch (status) {
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    default: return "Bad Request";
  }
}

// A Stream over a connected socket, or over TLS on it (`ssl`, on a
// non-blocking socket), that counts what httplib reads: the head (request
// line and headers, up to the blank line, which httplib reads a byte at a
// time) against ConnLimits' sizes and header deadline, the body against its
// wire size, per-read timeout and deadline. A head over a limit is answered
// here (414, 431, 408) and the stream then fails every call, so httplib's
// own answer goes nowhere.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int sock, SSL* ssl, int wake_fd, const ConnLimits& limits, ConnState* st)
      : sock_(sock), ssl_(ssl), wake_fd_(wake_fd), l_(limits), st_(st) {}

  // Waits up to keep_alive_ms for the next request's first byte; false when
  // none came, the peer failed, or the server is stopping. Then starts
  // counting that request's head.
  bool WaitRequest() {
    if (off_ == len_ && !TlsPending()) {
      pollfd p[2] = {{sock_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      int r = Poll(p, 2, Clock::now() + std::chrono::milliseconds(l_.keep_alive_ms));
      if (r <= 0 || (p[1].revents & POLLIN) != 0) return false;
    }
    head_bytes_ = line_bytes_ = lines_ = body_bytes_ = 0;
    prev_ = 0;
    in_head_ = true;
    head_deadline_ = Clock::now() + std::chrono::milliseconds(l_.header_timeout_ms);
    return true;
  }
  bool rejected() const { return rejected_; }
  // The TLS connection failed (no close_notify may be sent).
  bool tls_failed() const { return tls_failed_; }

  bool is_readable() const override {
    if (off_ < len_ || TlsPending()) return true;
    pollfd p = {sock_, POLLIN, 0};
    return Poll(&p, 1, Clock::now() + std::chrono::milliseconds(l_.read_timeout_ms)) > 0;
  }

  bool is_writable() const override {
    if (rejected_) return false;
    pollfd p = {sock_, POLLOUT, 0};
    if (Poll(&p, 1, Clock::now() + std::chrono::milliseconds(l_.write_timeout_ms)) <= 0) return false;
    if ((p.revents & (POLLERR | POLLHUP)) != 0) return false;
    // As httplib's SocketStream: a peer that has closed is not written to
    // (how a log tail notices its client left). Pipelined input is fine.
    char c;
    ssize_t n = ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (rejected_) return -1;
    if (off_ == len_) {
      Clock::time_point deadline = head_deadline_;
      if (!in_head_) {
        deadline = std::min(body_deadline_, Clock::now() + std::chrono::milliseconds(l_.read_timeout_ms));
      }
      // Checked here too: a client that trickles keeps data always there.
      bool timed_out = Clock::now() >= (in_head_ ? head_deadline_ : body_deadline_);
      ssize_t n = timed_out ? -1 : Fill(deadline, &timed_out);
      if (timed_out && in_head_) {
        Reject(408, "request headers not received within " + std::to_string(l_.header_timeout_ms) + "ms\n");
      }
      if (n <= 0) {
        st_->close = true;
        return n;
      }
    }
    if (!in_head_) {
      size_t n = std::min(size, len_ - off_);
      if (body_bytes_ + n > l_.max_body_wire_bytes) {
        st_->body_too_large = true;
        st_->close = true;
        return -1;
      }
      body_bytes_ += n;
      std::memcpy(ptr, buf_ + off_, n);
      off_ += n;
      return static_cast<ssize_t>(n);
    }
    size_t n = 0;
    while (n < size && off_ < len_) {
      char c = buf_[off_];
      ++head_bytes_;
      ++line_bytes_;
      if (lines_ == 0 && line_bytes_ > l_.max_request_line) {
        Reject(414, "request line exceeds " + std::to_string(l_.max_request_line) + " bytes\n");
        return -1;
      }
      if (head_bytes_ > l_.max_header_bytes) {
        Reject(431, "request headers exceed " + std::to_string(l_.max_header_bytes) + " bytes\n");
        return -1;
      }
      ptr[n++] = c;
      ++off_;
      if (c == '\n') {
        // httplib ends the head at a line that is exactly CRLF.
        if (lines_ > 0 && line_bytes_ == 2 && prev_ == '\r') {
          in_head_ = false;
          body_deadline_ = Clock::now() + std::chrono::milliseconds(l_.body_timeout_ms);
          break;
        }
        if (++lines_ > l_.max_headers + 1) {
          Reject(431, "request has more than " + std::to_string(l_.max_headers) + " header fields\n");
          return -1;
        }
        line_bytes_ = 0;
      }
      prev_ = c;
    }
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    if (ssl_ != nullptr) return TlsWrite(ptr, size);
    for (;;) {
      ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) IpAndPort(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) IpAndPort(a, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // Reads what the socket has into buf_: the byte count, 0 at end of
  // stream, -1 on error or when `deadline` passes first (*timed_out).
  ssize_t Fill(Clock::time_point deadline, bool* timed_out) {
    // Data already there (a body arriving) costs one call; poll only when
    // there is none.
    short want = POLLIN;  // what TLS waits for: a record to read, or room to write one
    for (bool waited = false;; waited = true) {
      if (waited) {
        pollfd p = {sock_, want, 0};
        int r = Poll(&p, 1, deadline);
        if (r < 0) return -1;
        if (r == 0) {
          *timed_out = true;
          return -1;
        }
      }
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int n = SSL_read(ssl_, buf_, sizeof buf_);
        if (n > 0) {
          off_ = 0;
          len_ = static_cast<size_t>(n);
          return n;
        }
        int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
          want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
          continue;
        }
        if (e == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify
        tls_failed_ = true;
        ERR_clear_error();
        return -1;
      }
      ssize_t n = ::recv(sock_, buf_, sizeof buf_, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n > 0) {
        off_ = 0;
        len_ = static_cast<size_t>(n);
      }
      return n;
    }
  }

  // Decrypted bytes OpenSSL holds that poll() on the socket cannot see.
  bool TlsPending() const { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

  // SSL_write of up to `size` bytes (partial writes are on), waiting for
  // the socket up to write_timeout_ms in all.
  ssize_t TlsWrite(const char* ptr, size_t size) {
    if (tls_failed_) return -1;
    const auto deadline = Clock::now() + std::chrono::milliseconds(l_.write_timeout_ms);
    for (;;) {
      ERR_clear_error();
      int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (n > 0) return n;
      int e = SSL_get_error(ssl_, n);
      short want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : e == SSL_ERROR_WANT_READ ? POLLIN : 0;
      pollfd p = {sock_, want, 0};
      if (want == 0 || Poll(&p, 1, deadline) <= 0) {
        tls_failed_ = true;
        ERR_clear_error();
        return -1;
      }
    }
  }

  // Answers `status` with `msg` and closes the connection after it.
  void Reject(int status, const std::string& msg) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(msg.size()) +
                      "\r\nConnection: close\r\n\r\n" + msg;
    for (size_t done = 0; done < out.size();) {
      ssize_t n = write(out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    rejected_ = true;
    st_->close = true;
  }

  const int sock_;
  SSL* const ssl_;  // null: plain TCP
  const int wake_fd_;
  const ConnLimits& l_;
  ConnState* const st_;
  char buf_[16384];
  size_t off_ = 0, len_ = 0;  // unread bytes are buf_[off_, len_)
  bool in_head_ = true;
  bool rejected_ = false;
  bool tls_failed_ = false;
  size_t head_bytes_ = 0;  // of this request's head so far
  size_t line_bytes_ = 0;  // of the head's current line, terminator included
  size_t lines_ = 0;       // complete head lines, the request line included
  char prev_ = 0;
  size_t body_bytes_ = 0;
  Clock::time_point head_deadline_, body_deadline_;
};

// After an answer that leaves input unread, closing at once would make the
// kernel reset the connection, and the client might lose the answer: stop
// sending, then read and drop what comes for a short while.
void LingeringClose(int sock) {
  ::shutdown(sock, SHUT_WR);
  auto deadline = Clock::now() + std::chrono::seconds(1);
  char buf[16384];
  for (size_t total = 0; total < (16u << 20);) {
    pollfd p = {sock, POLLIN, 0};
    if (Poll(&p, 1, deadline) <= 0) break;
    ssize_t n = ::recv(sock, buf, sizeof buf, 0);
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
}

// OpenSSL writes with write(2), which raises SIGPIPE on a connection the
// peer has closed; the binary ignores SIGPIPE, but a library must not rely
// on that (test binaries do not). Blocks it in this thread for the
// connection's life and discards one that came.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    sigset_t pending;
    if (!sigismember(&old_, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_, old_;
};

// Failed TLS handshakes (scanners, clients that do not trust the
// certificate, plain HTTP on the TLS port): at most one log line a second,
// with how many were not logged.
void LogHandshakeFailure(int sock, const std::string& error) {
  static std::atomic<int64_t> last_ms{0};
  static std::atomic<uint64_t> unlogged{0};
  int64_t now = MonoNanos() / 1000000, last = last_ms.load();
  if (now - last < 1000 || !last_ms.compare_exchange_strong(last, now)) {
    unlogged.fetch_add(1);
    return;
  }
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string ip;
  int port = 0;
  if (getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len) == 0) IpAndPort(a, ip, port);
  uint64_t more = unlogged.exchange(0);
  TW_LOG(Warn, "http: TLS handshake with {}:{}: {}{}", ip, port, error,
         more > 0 ? " (and " + std::to_string(more) + " more not logged)" : std::string());
}

}  // namespace

ConnState* CurrentConn() { return tls_conn; }

ElasticPool::ElasticPool(size_t core, size_t max, std::chrono::milliseconds idle_exit)
    : core_(core), max_(std::max(core, max)), idle_exit_(idle_exit) {
  base::MutexLock lock(&mu_);
  for (size_t i = 0; i < core_; ++i) {
    threads_.emplace_back([this] { Work(true); });
    ++running_;
  }
}

ElasticPool::~ElasticPool() { shutdown(); }

void ElasticPool::enqueue(std::function<void()> fn) {
  base::MutexLock lock(&mu_);
  ReapLocked();
  jobs_.push_back(std::move(fn));
  // Each idle thread takes one job; start one more for a job none will take.
  if (jobs_.size() > idle_ && running_ < max_ && !shutdown_) {
    threads_.emplace_back([this] { Work(false); });
    ++running_;
  }
  cv_.Signal();
}

void ElasticPool::shutdown() {
  std::list<std::thread> threads;
  {
    base::MutexLock lock(&mu_);
    shutdown_ = true;
    threads.swap(threads_);
    ended_.clear();
  }
  cv_.SignalAll();
  for (std::thread& t : threads) t.join();
}

size_t ElasticPool::threads() {
  base::MutexLock lock(&mu_);
  return running_;
}

void ElasticPool::ReapLocked() {
  for (std::thread::id id : ended_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [id](const std::thread& t) { return t.get_id() == id; });
    if (it == threads_.end()) continue;
    it->join();  // it has left Work and needs no lock
    threads_.erase(it);
  }
  ended_.clear();
}

void ElasticPool::Work(bool core) {
  for (;;) {
    std::function<void()> fn;
    {
      base::MutexLock lock(&mu_);
      ++idle_;
      bool ready = true;
      if (core) {
        while (jobs_.empty() && !shutdown_) cv_.Wait(&mu_);
      } else {
        auto deadline = std::chrono::steady_clock::now() + idle_exit_;
        while (jobs_.empty() && !shutdown_ && cv_.WaitUntil(&mu_, deadline)) {
        }
        ready = !jobs_.empty() || shutdown_;
      }
      --idle_;
      if (!ready || (shutdown_ && jobs_.empty())) {
        --running_;
        if (!shutdown_) ended_.push_back(std::this_thread::get_id());
        return;
      }
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      fn();
    } catch (const std::exception& e) {
      TW_LOG(Error, "http: connection task: {}", e.what());
    }
  }
}

GuardedServer::GuardedServer(const ConnLimits& limits, TlsSource tls) : limits_(limits), tls_(std::move(tls)) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
}

GuardedServer::~GuardedServer() {
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void GuardedServer::RaiseListenBacklog() {
  socket_t s = svr_sock_;
  // listen(2) again on a listening socket sets its backlog anew.
  if (s != INVALID_SOCKET && ::listen(s, SOMAXCONN) != 0) {
    TW_LOG(Warn, "http: cannot raise the listen backlog: {}", std::strerror(errno));
  }
}

void GuardedServer::Wake() {
  if (wake_[1] < 0) return;
  char c = 1;
  // Nobody reads the pipe: once written it stays readable.
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &c, 1);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::shared_ptr<const TlsContext> tls = tls_ ? tls_() : nullptr;
  SSL* ssl = nullptr;
  std::optional<SigpipeBlock> no_sigpipe;
  if (tls != nullptr) {
    no_sigpipe.emplace();
    std::string error;
    bool answered = false;
    ssl = tls->Accept(sock, wake_[0], limits_.header_timeout_ms, &error, &answered);
    if (ssl == nullptr) {
      LogHandshakeFailure(sock, error);
      if (answered) LingeringClose(sock);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
  }
  ConnState st;
  tls_conn = &st;
  GuardedStream strm(sock, ssl, wake_[0], limits_, &st);
  bool ret = false;
  for (size_t left = limits_.keep_alive_max; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!strm.WaitRequest()) break;
    bool connection_closed = false;
    ret = process_request(strm, left == 1, connection_closed, nullptr);
    if (!ret || connection_closed || st.close || strm.rejected()) break;
  }
  tls_conn = nullptr;
  // close_notify before the lingering close shuts the sending side.
  if (ssl != nullptr) FreeSsl(ssl, !strm.tls_failed());
  if (st.close) LingeringClose(sock);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace trainwatch::http::internal
