#include "http/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/file.h"
#include "logs/store.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

using std::chrono::steady_clock;

// A raw TCP client of a Server on 127.0.0.1, for what httplib's client
// cannot send. Every wait has a generous bound (kWait) so a broken server
// fails the test instead of hanging it.
constexpr auto kWait = std::chrono::seconds(60);

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() { Close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // False once the server has closed or reset the connection.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Sends `data` from another thread, so that a server that answers before
  // reading it all cannot deadlock the test; Join before reading further.
  void SendInBackground(std::string data) {
    sender_ = std::thread([this, d = std::move(data)] { (void)Send(d); });
  }
  void Join() {
    if (sender_.joinable()) sender_.join();
  }

  // Reads until `pred(received)` holds, the peer closes, or kWait passes.
  std::string ReadUntil(const std::function<bool(const std::string&)>& pred) {
    auto deadline = steady_clock::now() + kWait;
    while (!pred(in_) && steady_clock::now() < deadline) {
      pollfd p = {fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      in_.append(buf, static_cast<size_t>(n));
    }
    return in_;
  }
  // Takes what has arrived without waiting; true when anything has.
  bool Poll() {
    pollfd p = {fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) in_.append(buf, static_cast<size_t>(n));
      if (n <= 0) closed_ = true;
    }
    return !in_.empty() || closed_;
  }
  // One whole answer with a Content-Length (or up to the close): its status.
  int ReadStatus() {
    ReadUntil([](const std::string& s) {
      size_t head = s.find("\r\n\r\n");
      if (head == std::string::npos) return false;
      size_t cl = s.find("Content-Length: ");
      if (cl == std::string::npos || cl > head) return false;
      return s.size() >= head + 4 + std::stoul(s.substr(cl + 16));
    });
    if (!in_.starts_with("HTTP/1.1 ") || in_.size() < 12) return -1;
    return std::stoi(in_.substr(9, 3));
  }
  // True when the server closes the connection within kWait.
  bool WaitClosed() {
    ReadUntil([](const std::string&) { return false; });
    return closed_;
  }
  const std::string& received() const { return in_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string in_;
  std::thread sender_;
};

std::string Chunked(std::string_view body, size_t chunk) {
  std::string out;
  char hex[32];
  for (size_t i = 0; i < body.size(); i += chunk) {
    std::string_view c = body.substr(i, chunk);
    std::snprintf(hex, sizeof hex, "%zx\r\n", c.size());
    out += hex;
    out += c;
    out += "\r\n";
  }
  return out + "0\r\n\r\n";
}

// `n` zero bytes compressed with zlib's framing (windowBits 15 + 16: gzip).
std::string Deflated(size_t n, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string zeros(1 << 20, '\0'), out;
  char buf[65536];
  for (size_t left = n;;) {
    size_t take = std::min(left, zeros.size());
    left -= take;
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = static_cast<uInt>(take);
    int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    int rc;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      rc = deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
    if (flush == Z_FINISH) {
      EXPECT_EQ(rc, Z_STREAM_END);
      break;
    }
  }
  deflateEnd(&z);
  return out;
}

std::string Post(std::string_view path, std::string_view extra_headers) {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n" +
         std::string(extra_headers) + "\r\n";
}

struct TestServer {
  explicit TestServer(ServerOptions o, logs::LogStore* logs = nullptr) {
    o.listen = "127.0.0.1:0";
    ApiDeps deps{db.get(), &engine, {}};
    deps.logs = logs;
    deps.enable_admin_api = true;  // the flush below
    auto s = Server::Start(o, std::move(deps));
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    srv = std::move(*s);
  }
  int Healthy() {
    httplib::Client c("127.0.0.1", srv->port());
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    auto r = c.Get("/-/healthy");
    return r ? r->status : -1;
  }
  tsdb::testing::TempDB db;
  promql::Engine engine{promql::EngineOptions{}};
  std::unique_ptr<Server> srv;
};

TEST(ServerTest, ServesOverTcpWithFormBodiesAndStreaming) {
  tsdb::testing::TempDB db;
  promql::Engine engine{promql::EngineOptions{}};
  auto s = Server::Start(ServerOptions{.listen = "127.0.0.1:0", .threads = 4}, ApiDeps{db.get(), &engine, {}});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_GT((*s)->port(), 0);
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/-/healthy");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "trainwatch is Healthy.\n");
  std::string body;
  for (int i = 0; i < 20000; i++) body += "m{i=\"" + std::to_string(i % 100) + "\"} " + std::to_string(i) + " " + std::to_string(i) + "\n";
  r = c.Post("/api/v1/import/prometheus?extra_label=a%3Db", body, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(db.NumSamples(), 20000u);
  r = c.Get("/api/v1/export?match[]=%7Ba%3D%22b%22%7D");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(std::count(r->body.begin(), r->body.end(), '\n'), 100);
  // Form-encoded POST parameters, as Grafana sends them.
  r = c.Post("/api/v1/query", "query=1%2B1&time=1796207149", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1796207149,\"2\"]}}");
  // JSON goes out gzipped when the client takes gzip (browsers offer br too,
  // which the server does not use), and as it is otherwise.
  const std::string series = "/api/v1/series?match[]=m";
  auto plain = c.Get(series, {{"Accept-Encoding", "identity"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");
  EXPECT_GT(plain->body.size(), 1024u);
  for (const char* ae : {"gzip, deflate, br, zstd", "br;q=1, gzip;q=0.5"}) {
    auto z = c.Get(series, {{"Accept-Encoding", ae}});
    ASSERT_TRUE(z);
    EXPECT_EQ(z->get_header_value("Content-Encoding"), "gzip") << ae;
    EXPECT_EQ(z->body, plain->body) << ae;  // httplib's client inflated it
  }
  for (const char* ae : {"br", "gzip;q=0, br", "gzip;q=0.0"}) {
    auto z = c.Get(series, {{"Accept-Encoding", ae}});
    ASSERT_TRUE(z);
    EXPECT_EQ(z->get_header_value("Content-Encoding"), "") << ae;
    EXPECT_EQ(z->body, plain->body) << ae;
  }
  r = c.Post("/api/v1/import/prometheus", "bad line here\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  (*s)->Stop();
  (*s)->Stop();  // idempotent
}

// A browser's POST from another site is refused before its body is read
// (http/origin.h); the same request from the UI's own origin, or from a
// client that is not a browser, is served.
TEST(ServerTest, CrossSiteWritesAreRefused) {
  TestServer t(ServerOptions{});
  httplib::Client c("127.0.0.1", t.srv->port());
  const std::string host = "127.0.0.1:" + std::to_string(t.srv->port());
  auto r = c.Post("/api/v1/import/prometheus", {{"Origin", "http://evil.example"}}, "cross 1\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("cross-origin request refused: Origin \"http://evil.example\""), std::string::npos) << r->body;
  r = c.Post("/api/v1/import/prometheus", {{"Sec-Fetch-Site", "cross-site"}}, "cross 1\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(t.db.NumSamples(), 0u);
  r = c.Post("/api/v1/import/prometheus", {{"Origin", "http://" + host}, {"Sec-Fetch-Site", "same-origin"}}, "same 1\n",
             "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  r = c.Post("/api/v1/import/prometheus", "plain 1\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(t.db.NumSamples(), 2u);
  // Reads from anywhere stay open (the answers carry no CORS grant).
  auto g = c.Get("/api/v1/labels", {{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "cross-site"}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
}

TEST(ServerTest, BadListenAddressFailsStart) {
  tsdb::testing::TempDB db;
  EXPECT_FALSE(Server::Start(ServerOptions{.listen = "127.0.0.1"}, ApiDeps{db.get(), nullptr, {}}).ok());
  EXPECT_FALSE(Server::Start(ServerOptions{.listen = "127.0.0.1:99999"}, ApiDeps{db.get(), nullptr, {}}).ok());
  auto a = Server::Start(ServerOptions{.listen = "127.0.0.1:0"}, ApiDeps{db.get(), nullptr, {}});
  ASSERT_TRUE(a.ok());
  auto b = Server::Start(ServerOptions{.listen = "127.0.0.1:" + std::to_string((*a)->port())}, ApiDeps{db.get(), nullptr, {}});
  EXPECT_FALSE(b.ok());
}

TEST(ServerHostileTest, ChunkedAndLengthlessBodiesObeyTheSizeCap) {
  TestServer t(ServerOptions{.threads = 2, .max_body_bytes = 1 << 20});
  const std::string kLimit = "request body exceeds 1048576 bytes\n";
  // Under the cap, chunked works.
  std::string ok;
  for (int i = 0; i < 1000; i++) ok += "chunked_ok " + std::to_string(i) + " " + std::to_string(i) + "\n";
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send(Post("/api/v1/import/prometheus", "Transfer-Encoding: chunked\r\n") + Chunked(ok, 1000)));
    EXPECT_EQ(c.ReadStatus(), 204) << c.received();
    EXPECT_EQ(t.db.NumSamples(), 1000u);
  }
  // 8 MiB chunked: 413 naming the limit, and the connection is closed.
  {
    RawConn c(t.srv->port());
    c.SendInBackground(Post("/api/v1/import/prometheus", "Transfer-Encoding: chunked\r\n") +
                       Chunked(std::string(8 << 20, 'x'), 65536));
    EXPECT_EQ(c.ReadStatus(), 413) << c.received();
    EXPECT_TRUE(c.received().ends_with(kLimit)) << c.received();
    EXPECT_TRUE(c.WaitClosed());
    c.Join();
  }
  // A request with neither Content-Length nor Transfer-Encoding has no body
  // (RFC 9112 6.3): what follows is not read as one, and an empty POST such
  // as `curl -X POST .../admin/tsdb/flush` is served (issue 17).
  {
    RawConn c(t.srv->port());
    c.SendInBackground(Post("/api/v1/import/prometheus", "Connection: close\r\n") + std::string(4 << 20, 'x'));
    c.Join();
    c.ShutdownWrite();
    EXPECT_EQ(c.ReadStatus(), 204) << c.received();
    EXPECT_EQ(t.db.NumSamples(), 1000u);
  }
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send(Post("/api/v1/admin/tsdb/flush", "")));
    EXPECT_EQ(c.ReadStatus(), 204) << c.received();
  }
  // A declared size over the cap is refused before any of it is read.
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send(Post("/api/v1/import/prometheus", "Content-Length: 10000000000\r\n")));
    EXPECT_EQ(c.ReadStatus(), 413) << c.received();
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send(Post("/api/v1/import/prometheus", "Content-Length: 99999999999999999999999\r\n")));
    EXPECT_EQ(c.ReadStatus(), 413) << c.received();
  }
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send(Post("/api/v1/import/prometheus", "Content-Length: 12abc\r\n")));
    EXPECT_EQ(c.ReadStatus(), 400) << c.received();
  }
  // DELETE bodies go through the same cap; bodies httplib does not read
  // (a chunked DELETE, a GET's) end the connection after the answer, so
  // none of it is taken for requests; PATCH (not routed) is not read.
  {
    RawConn c(t.srv->port());
    c.SendInBackground("DELETE /api/v1/series HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n" + std::string(2000000, 'x'));
    EXPECT_EQ(c.ReadStatus(), 413) << c.received();
    c.Join();
  }
  for (std::string method : {"DELETE", "GET"}) {
    RawConn c(t.srv->port());
    std::string smuggled = "GET /-/healthy HTTP/1.1\r\n\r\n";
    c.SendInBackground(method + " /nothing HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunked(smuggled, 1000));
    EXPECT_EQ(c.ReadStatus(), 404) << c.received();
    EXPECT_TRUE(c.WaitClosed());
    EXPECT_EQ(c.received().find("Healthy"), std::string::npos) << c.received();
    c.Join();
  }
  {
    RawConn c(t.srv->port());
    c.SendInBackground("PATCH /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunked(std::string(4 << 20, 'x'), 65536));
    EXPECT_EQ(c.ReadStatus(), 405) << c.received();
    c.Join();
  }
  EXPECT_EQ(t.Healthy(), 200);
}

TEST(ServerHostileTest, CompressedBodiesAreCappedAfterDecoding) {
  TestServer t(ServerOptions{.threads = 2, .max_body_bytes = 1 << 20});
  // A small gzip body is inflated by httplib and imported.
  {
    std::string body;
    for (int i = 0; i < 100; i++) body += "gz_ok " + std::to_string(i) + " " + std::to_string(i) + "\n";
    httplib::Client c("127.0.0.1", t.srv->port());
    c.set_compress(true);
    auto r = c.Post("/api/v1/import/prometheus", body, "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 204) << r->body;
    EXPECT_EQ(t.db.NumSamples(), 100u);
  }
  // 64 MiB of zeros in ~64 KiB: gzip and deflate (zlib framing) bombs.
  for (auto [encoding, bits] : {std::pair{"gzip", 15 + 16}, std::pair{"deflate", 15}}) {
    std::string bomb = Deflated(64 << 20, bits);
    ASSERT_LT(bomb.size(), 1u << 20);
    RawConn c(t.srv->port());
    c.SendInBackground(Post("/api/v1/import/prometheus", "Content-Encoding: " + std::string(encoding) +
                                                             "\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n") +
                       bomb);
    EXPECT_EQ(c.ReadStatus(), 413) << encoding << ": " << c.received();
    EXPECT_TRUE(c.received().ends_with("request body exceeds 1048576 bytes\n")) << c.received();
    c.Join();
  }
  // A gzip stream of empty deflate blocks decodes to nothing however long it
  // runs: the bytes on the wire are capped too (at twice the limit).
  {
    std::string gz = Deflated(0, 15 + 16);  // header, empty final block, trailer
    std::string empty_blocks;
    while (empty_blocks.size() < (3u << 20)) empty_blocks += std::string("\x00\x00\x00\xff\xff", 5);
    std::string body = gz.substr(0, 10) + empty_blocks + gz.substr(10);
    RawConn c(t.srv->port());
    c.SendInBackground(Post("/api/v1/import/prometheus", "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n") +
                       Chunked(body, 65536));
    EXPECT_EQ(c.ReadStatus(), 413) << c.received();
    c.Join();
  }
  EXPECT_EQ(t.Healthy(), 200);
}

TEST(ServerHostileTest, RequestLineAndHeadersAreBounded) {
  TestServer t(ServerOptions{.threads = 2});
  auto check = [&](std::string request, int want, std::string_view body) {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.connected());
    c.SendInBackground(std::move(request));
    EXPECT_EQ(c.ReadStatus(), want) << c.received().substr(0, 200);
    EXPECT_TRUE(c.received().ends_with(body)) << c.received().substr(0, 200);
    EXPECT_TRUE(c.WaitClosed());
    c.Join();
  };
  // A 1 MB request line, a 1 MB header, 100k headers.
  check("GET /" + std::string(1 << 20, 'a') + " HTTP/1.1\r\n\r\n", 414, "request line exceeds 8192 bytes\n");
  check("GET /-/healthy HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n", 431,
        "request headers exceed 65536 bytes\n");
  std::string many = "GET /-/healthy HTTP/1.1\r\n";
  for (int i = 0; i < 100000; i++) many += "a:\r\n";
  check(many + "\r\n", 431, "request has more than 256 header fields\n");
  // A line with no end and 100k short headers under the byte bound.
  check("GET /-/healthy HTTP/1.1\r\nX: " + std::string(16 << 20, 'a'), 431, "exceed 65536 bytes\n");
  // At the bounds, requests are served, twice on one connection.
  std::string fine = "GET /-/healthy HTTP/1.1\r\n";
  for (int i = 0; i < 256; i++) fine += "X-" + std::to_string(i) + ": v\r\n";
  fine += "\r\n";
  RawConn c(t.srv->port());
  ASSERT_TRUE(c.Send(fine));
  EXPECT_EQ(c.ReadStatus(), 200) << c.received();
  ASSERT_TRUE(c.Send(fine));
  c.ReadUntil([](const std::string& s) { return s.find("HTTP/1.1 200", 1) != std::string::npos && s.ends_with("Healthy.\n"); });
  EXPECT_NE(c.received().find("HTTP/1.1 200", 1), std::string::npos) << c.received();
  EXPECT_EQ(t.Healthy(), 200);
}

TEST(ServerHostileTest, SlowLorisGets408AndIdleConnectionsAreClosed) {
  TestServer t(ServerOptions{.threads = 2, .header_timeout_ms = 300, .keep_alive_ms = 300});
  RawConn loris(t.srv->port());
  RawConn idle(t.srv->port());
  // A byte every 20 ms, never finishing the head: 408 after the deadline
  // whatever the pace, where a per-read timeout would wait forever.
  std::string head = "GET /-/healthy HTTP/1.1\r\nX-Slow: ";
  auto deadline = steady_clock::now() + kWait;
  for (size_t i = 0; steady_clock::now() < deadline; i++) {
    if (!loris.Send(i < head.size() ? head.substr(i, 1) : "a")) break;
    if (loris.Poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(loris.ReadStatus(), 408) << loris.received();
  EXPECT_TRUE(loris.received().ends_with("request headers not received within 300ms\n"));
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_TRUE(idle.received().empty());
}

TEST(ServerHostileTest, HealthyAnswersWhile64SlowClientsHoldConnections) {
  char tmpl[] = "/tmp/tw_test_logs_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto store = logs::LogStore::Open(logs::StoreOptions{.dir = dir});
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  // 2 core threads; the defaults keep these clients for seconds.
  TestServer t(ServerOptions{.threads = 2, .max_streams = 16}, store->get());
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < 16; i++) {
    // Idle keep-alive: a request answered, then nothing.
    auto c = std::make_unique<RawConn>(t.srv->port());
    ASSERT_TRUE(c->Send("GET /-/healthy HTTP/1.1\r\n\r\n"));
    EXPECT_EQ(c->ReadStatus(), 200);
    conns.push_back(std::move(c));
    // Slow-loris: half a head.
    c = std::make_unique<RawConn>(t.srv->port());
    ASSERT_TRUE(c->Send("GET /-/healthy HTTP/1.1\r\nX-Slow: a"));
    conns.push_back(std::move(c));
    // Slow body: 10 of 1000 bytes.
    c = std::make_unique<RawConn>(t.srv->port());
    ASSERT_TRUE(c->Send(Post("/api/v1/import/prometheus", "Content-Length: 1000\r\n") + "slow_body "));
    conns.push_back(std::move(c));
    // A log tail, subscribed.
    c = std::make_unique<RawConn>(t.srv->port());
    ASSERT_TRUE(c->Send("GET /api/v1/logs/tail HTTP/1.1\r\n\r\n"));
    EXPECT_NE(c->ReadUntil([](const std::string& s) { return s.find(": tailing") != std::string::npos; }).find("200"),
              std::string::npos);
    conns.push_back(std::move(c));
  }
  // A 17th tail is refused; everything else is still served.
  {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send("GET /api/v1/logs/tail HTTP/1.1\r\n\r\n"));
    EXPECT_EQ(c.ReadStatus(), 503) << c.received();
    EXPECT_TRUE(c.received().ends_with("too many concurrent log tails (limit 16)\n"));
  }
  for (int i = 0; i < 8; i++) EXPECT_EQ(t.Healthy(), 200);
  // A tail that leaves frees its slot (noticed at its next keepalive write).
  conns.back()->Close();
  bool served = false;
  for (auto deadline = steady_clock::now() + kWait; !served && steady_clock::now() < deadline;) {
    RawConn c(t.srv->port());
    ASSERT_TRUE(c.Send("GET /api/v1/logs/tail HTTP/1.1\r\n\r\n"));
    served = c.ReadUntil([](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; })
                 .starts_with("HTTP/1.1 200");
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
  (*store)->Shutdown();  // ends the tails, as serve does before stopping the server
  conns.clear();
  t.srv->Stop();
  store->reset();
  (void)file::RemoveAll(dir);
}

}  // namespace
}  // namespace trainwatch::http
