#include "http/server.h"

#include <httplib.h>
#include <strings.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <exception>
#include <memory>

#include "base/clock.h"
#include "base/log.h"
#include "http/conn.h"
#include "http/ingest_gate.h"
#include "http/origin.h"

namespace trainwatch::http {

static constexpr size_t kKeepBodyBytes = 8u << 20;

Status SplitHostPort(const std::string& addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("listen address \"" + addr + "\": missing port");
  std::string h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) h = "0.0.0.0";
  std::string_view p = std::string_view(addr).substr(colon + 1);
  int n = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), n);
  if (ec != std::errc() || end != p.data() + p.size() || n < 0 || n > 65535) {
    return Status::InvalidArgument("listen address \"" + addr + "\": invalid port");
  }
  *host = h;
  *port = n;
  return Status::OK();
}

namespace {

Request Convert(const httplib::Request& in, std::string_view body) {
  Request r;
  r.receive_time_ms = NowMillis();
  r.method = in.method;
  r.path = in.path;
  r.body = body;
  r.content_type = in.get_header_value("Content-Type");
  r.accept = in.get_header_value("Accept");
  // Parameters come from the raw target and the form body, not httplib's
  // params, so their order and the form handling are ours.
  size_t q = in.target.find('?');
  if (q != std::string::npos) ParseQueryString(std::string_view(in.target).substr(q + 1), &r.params);
  // curl --data-binary labels import bodies as forms too; they are not.
  if (in.method == "POST" && r.content_type.starts_with("application/x-www-form-urlencoded") &&
      !r.path.starts_with("/api/v1/import") && r.path != "/api/v1/logs" && !r.path.ends_with("/_bulk") &&
      r.path != "/loki/api/v1/push") {
    ParseQueryString(body, &r.params);
  }
  return r;
}

// Debian's httplib 0.11 compresses JSON and text answers itself, with brotli
// at quality 11 whenever the client offers br, as every browser does: about
// 1 MB/s, 20 s for a 5 MB runs-metrics answer to the UI. So the server
// chooses the encoding: gzip at level 1 (≈100 MB/s, a quarter of the JSON's
// size) for bodies worth it, and takes Accept-Encoding out of the request
// so that httplib adds nothing on top.
constexpr size_t kCompressMinBytes = 1024;

bool Compressible(std::string_view content_type) {
  return content_type.starts_with("application/json") ||
         (content_type.starts_with("text/") && !content_type.starts_with("text/event-stream"));
}

bool AcceptsGzip(std::string_view accept_encoding) {
  // Tokens are "gzip" or "gzip;q=..."; q=0 refuses it.
  for (size_t pos = 0; pos < accept_encoding.size();) {
    size_t comma = accept_encoding.find(',', pos);
    std::string_view tok = accept_encoding.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? accept_encoding.size() : comma + 1;
    while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
    size_t semi = tok.find(';');
    std::string_view name = tok.substr(0, semi);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name != "gzip") continue;
    if (semi == std::string_view::npos) return true;
    std::string_view q = tok.substr(semi + 1);
    while (!q.empty() && q.front() == ' ') q.remove_prefix(1);
    return !(q.starts_with("q=0") && q.find_first_not_of("0.", 2) == std::string_view::npos);
  }
  return false;
}

// gzip of `in` at level 1, or false when zlib fails (the body then goes out
// as it is).
bool Gzip(std::string_view in, std::string* out) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

// Counts a log tail (SSE) while its answer lives.
struct StreamSlot {
  std::shared_ptr<std::atomic<int>> active;
  ~StreamSlot() { active->fetch_sub(1); }
};

struct StreamLimit {
  std::shared_ptr<std::atomic<int>> active;
  int max = 0;
};

void Text(httplib::Response& out, int status, const std::string& msg) {
  out.status = status;
  out.set_content(msg, "text/plain; charset=utf-8");
}

// As httplib decides it: then Content-Length is ignored.
bool Chunked(const httplib::Request& req) {
  return strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
}

// After an answer given before the whole request was read.
void CloseAfter(httplib::Response& out) {
  out.set_header("Connection", "close");
  if (internal::ConnState* c = internal::CurrentConn()) c->close = true;
}

void Serve(Api* api, const StreamLimit& streams, const httplib::Request& in, std::string_view body,
           httplib::Response& out) {
  const bool gzip_ok = AcceptsGzip(in.get_header_value("Accept-Encoding"));
  // httplib hands its own, non-const Request to the handler and reads the
  // header again when writing the answer (see above).
  const_cast<httplib::Request&>(in).headers.erase("Accept-Encoding");
  Response resp;
  try {
    resp = api->Handle(Convert(in, body));
  } catch (const std::exception& e) {
    resp = Response{};
    resp.status = 500;
    resp.content_type = "text/plain; charset=utf-8";
    resp.body = std::string("internal error: ") + e.what() + "\n";
  }
  out.status = resp.status;
  // A handler's header replaces the web config's of the same name (as a Go
  // handler's Header().Set after exporter-toolkit's).
  for (const auto& h : resp.headers) out.headers.erase(h.first);
  for (const auto& [name, value] : resp.headers) out.set_header(name, value);
  if (resp.stream) {
    // A log tail holds its thread for as long as the client stays; the pool
    // grows for them, but only up to max_streams of them at once.
    std::shared_ptr<StreamSlot> slot;
    if (resp.content_type.starts_with("text/event-stream")) {
      if (streams.active->fetch_add(1) >= streams.max) {
        streams.active->fetch_sub(1);
        out.set_header("Retry-After", "5");
        Text(out, 503, "too many concurrent log tails (limit " + std::to_string(streams.max) + ")\n");
        return;
      }
      slot.reset(new StreamSlot{streams.active});
    }
    auto gen = std::move(resp.stream);
    out.set_chunked_content_provider(resp.content_type, [gen, slot](size_t, httplib::DataSink& sink) {
      std::string chunk;
      Response::Chunk state;
      try {
        state = gen(&chunk);
      } catch (const std::exception& e) {
        TW_LOG(Error, "streaming response: {}", e.what());
        return false;
      }
      if (state == Response::Chunk::kError) return false;
      if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;
      if (state == Response::Chunk::kDone) sink.done();
      return true;
    });
    return;
  }
  if (resp.status == 204) return;
  if (resp.body.size() >= kCompressMinBytes && Compressible(resp.content_type)) {
    out.set_header("Vary", "Accept-Encoding");
    std::string z;
    if (gzip_ok && Gzip(resp.body, &z)) {
      resp.body = std::move(z);
      out.set_header("Content-Encoding", "gzip");
    }
  }
  out.set_content(std::move(resp.body), resp.content_type.c_str());
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& opts, ApiDeps deps) {
  std::unique_ptr<Server> s(new Server());
  RETURN_IF_ERROR(SplitHostPort(opts.listen, &s->host_, &s->port_));
  s->api_ = std::make_unique<Api>(std::move(deps));
  const size_t max_body = opts.max_body_bytes;
  internal::ConnLimits limits;
  limits.max_header_bytes = opts.max_header_bytes;
  limits.max_headers = opts.max_headers;
  // Chunk framing on top of the body, or deflate's empty blocks under it.
  limits.max_body_wire_bytes = max_body > (SIZE_MAX - (64u << 10)) / 2 ? SIZE_MAX : 2 * max_body + (64u << 10);
  // A client that comes back later than keep_alive_ms reconnects; waiting
  // longer would hold a thread per idle client.
  limits.keep_alive_ms = opts.keep_alive_ms;
  limits.header_timeout_ms = opts.header_timeout_ms;
  limits.body_timeout_ms = opts.body_timeout_ms;
  std::shared_ptr<WebSecurity> web = opts.web;
  internal::GuardedServer::TlsSource tls;
  if (web != nullptr && web->tls()) tls = [web] { return web->tls_context(); };
  s->srv_ = std::make_unique<internal::GuardedServer>(limits, std::move(tls));
  int threads = opts.threads > 0 ? opts.threads : std::max(8, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  int max_threads = opts.max_threads > 0 ? std::max(opts.max_threads, threads) : std::max(256, 4 * threads);
  s->srv_->new_task_queue = [threads, max_threads] {
    return new internal::ElasticPool(static_cast<size_t>(threads), static_cast<size_t>(max_threads),
                                     std::chrono::seconds(10));
  };
  StreamLimit streams{std::make_shared<std::atomic<int>>(0),
                      opts.max_streams > 0 ? opts.max_streams : std::max(1, max_threads / 4)};
  s->streams_ = streams.active;
  s->srv_->set_payload_max_length(max_body);
  s->srv_->set_keep_alive_max_count(limits.keep_alive_max);
  // Only what the Keep-Alive answer header says; GuardedServer waits.
  s->srv_->set_keep_alive_timeout(std::max(1, opts.keep_alive_ms / 1000));
  // httplib's default adds SO_REUSEPORT, which would let a second server
  // silently share the port; SO_REUSEADDR alone still allows quick restarts.
  s->srv_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // httplib writes a response's headers and body in two send()s; with Nagle
  // on, the body waits for the client's delayed ACK of the headers (40 ms
  // on Linux), so every small keep-alive POST (a client batch) took ~45 ms.
  s->srv_->set_tcp_nodelay(true);
  s->srv_->set_read_timeout(60, 0);
  s->srv_->set_write_timeout(60, 0);
  Api* api = s->api_.get();
  auto handler = [api, streams](const httplib::Request& req, httplib::Response& res) {
    Serve(api, streams, req, req.body, res);
  };
  // Bodies are read through a content reader: httplib's own body reading
  // rejects form-encoded bodies over 8 KiB (413), which is what curl
  // --data-binary sends to the import endpoint. Size limit and gzip/br
  // decoding still apply; httplib inflates gzip, deflate and br bodies
  // inside the reader, so the cap below bounds the decoded size.
  IdlePool<std::string>* bodies = &s->bodies_;
  auto with_body = [api, bodies, streams, max_body](const httplib::Request& req, httplib::Response& res,
                                                    const httplib::ContentReader& reader) {
    // Reused: fresh multi-megabyte buffers per request cost page faults and
    // allocator churn (a fifth of ingest CPU). Bodies beyond kKeepBodyBytes
    // are not kept; idle ones are freed (base/idle_pool.h).
    // A push (remote_write, import, ...) passes the ingest gate twice: over
    // the memory bound, before its body is read; then for a slot, with its
    // body read (http/ingest_gate.h). Refused: 503 with Retry-After.
    IngestGate* gate = api->ingest_gate();
    const bool push = gate != nullptr && IsIngestRoute(req.method, req.path);
    auto refuse = [&](IngestGate::Verdict v) {
      api->metrics().CountIngestRefusal(v);
      res.set_header("Retry-After", std::string(IngestGate::kRetryAfterSeconds));
      Text(res, 503, gate->Message(v));
    };
    const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
    if (push) {
      if (IngestGate::Verdict v = gate->Check(); v != IngestGate::Verdict::kAdmitted) {
        if (has_body) CloseAfter(res);  // the body is left unread
        refuse(v);
        return;
      }
    }
    auto lease = bodies->Acquire();
    std::string& body = *lease;
    body.clear();
    std::string len = req.get_header_value("Content-Length");
    size_t n = 0;
    std::from_chars(len.data(), len.data() + len.size(), n);
    if (n > 0 && n <= max_body) body.reserve(n);
    // httplib 0.11 enforces payload_max_length only on Content-Length, not
    // on chunked, length-less or compressed bodies: the cap is here.
    bool too_large = false;
    // A request with neither Content-Length nor Transfer-Encoding has no
    // body (RFC 9112 6.3): `curl -X POST .../admin/tsdb/flush` must work,
    // where httplib's reader would fail waiting for the end of the stream.
    if (has_body && !reader([&](const char* data, size_t len) {
          if (len > max_body - body.size()) {
            too_large = true;
            return false;
          }
          body.append(data, len);
          return true;
        })) {
      // The rest of the body is unread: the connection cannot carry another request.
      CloseAfter(res);
      internal::ConnState* c = internal::CurrentConn();
      if (too_large || res.status == 413 || (c != nullptr && c->body_too_large)) {
        Text(res, 413, "request body exceeds " + std::to_string(max_body) + " bytes\n");
      } else if (res.status == 415) {
        Text(res, 415, "unsupported Content-Encoding \"" + req.get_header_value("Content-Encoding") + "\"\n");
      } else {
        Text(res, 400, "cannot read request body\n");
      }
      if (body.capacity() > kKeepBodyBytes) std::string().swap(body);
      return;
    }
    IngestGate::Slot slot;
    if (IngestGate::Verdict v = push ? gate->Enter(&slot) : IngestGate::Verdict::kAdmitted;
        v != IngestGate::Verdict::kAdmitted) {
      refuse(v);
    } else {
      Serve(api, streams, req, body, res);
    }
    if (body.capacity() > kKeepBodyBytes) std::string().swap(body);
  };
  // Every path goes to the Api router, which answers 404 itself.
  s->srv_->Get(".*", handler);
  s->srv_->Post(".*", with_body);
  s->srv_->Put(".*", with_body);
  s->srv_->Delete(".*", with_body);
  s->srv_->Options(".*", handler);
  // Before httplib reads a body: a declared size over the cap is refused
  // unread (httplib would read and drop all of it), and methods we do not
  // route never get their body buffered (httplib reads a PATCH's chunked
  // body whole).
  s->srv_->set_pre_routing_handler([max_body, web](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    const std::string& m = req.method;
    // The web config first, for every route and method: a refused request
    // has its body left unread.
    if (web != nullptr) {
      std::vector<std::pair<std::string, std::string>> headers;
      std::string why;
      const std::string authorization = req.get_header_value("Authorization");
      WebSecurity::Verdict v = web->Check({authorization, req.method, req.path}, &headers, &why);
      for (const auto& [name, value] : headers) res.set_header(name, value);
      if (v != WebSecurity::Verdict::kServe) {
        if (Chunked(req) || (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
          CloseAfter(res);
        }
        if (v == WebSecurity::Verdict::kRateLimited) {
          Text(res, 429, "Too Many Requests\n");
        } else if (v == WebSecurity::Verdict::kForbidden) {
          Text(res, 403, "Forbidden: " + why + "\n");
        } else {
          res.set_header("WWW-Authenticate", web->Challenge());
          Text(res, 401, "Unauthorized\n");
        }
        return R::Handled;
      }
    }
    if (m != "GET" && m != "HEAD" && m != "POST" && m != "PUT" && m != "DELETE" && m != "OPTIONS") {
      CloseAfter(res);
      Text(res, 405, "method not allowed\n");
      return R::Handled;
    }
    // A browser's state-changing request from another site (http/origin.h).
    if (auto why = CrossSiteRefusal(OriginHeaders{m, req.get_header_value("Sec-Fetch-Site"), req.get_header_value("Origin"),
                                                  req.get_header_value("Host"), req.get_header_value("X-Forwarded-Host")})) {
      if (Chunked(req) || (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
        CloseAfter(res);
      }
      Text(res, 403, *why + "\n");
      return R::Handled;
    }
    // httplib leaves unread the body of a GET, HEAD or OPTIONS, and a
    // DELETE's unless sized; what follows on the connection is no request.
    bool unread_body = (m != "POST" && m != "PUT" && (m != "DELETE" || !req.has_header("Content-Length"))) &&
                       (Chunked(req) || (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0"));
    if (unread_body) CloseAfter(res);
    if (req.has_header("Content-Length") && !Chunked(req)) {
      std::string v = req.get_header_value("Content-Length");
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == v.data() + v.size() && n > max_body)) {
        CloseAfter(res);
        Text(res, 413, "request body exceeds " + std::to_string(max_body) + " bytes\n");
        return R::Handled;
      }
      if (ec != std::errc() || end != v.data() + v.size()) {
        CloseAfter(res);
        Text(res, 400, "invalid Content-Length \"" + v + "\"\n");
        return R::Handled;
      }
    }
    return R::Unhandled;
  });
  s->srv_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content("internal error\n", "text/plain; charset=utf-8");
  });
  if (s->port_ == 0) {
    int p = s->srv_->bind_to_any_port(s->host_);
    if (p <= 0) return Status::IOError("listen on " + opts.listen + ": cannot bind");
    s->port_ = p;
  } else if (!s->srv_->bind_to_port(s->host_, s->port_)) {
    return Status::IOError("listen on " + opts.listen + ": cannot bind (address in use or not permitted)");
  }
  s->srv_->RaiseListenBacklog();
  httplib::Server* srv = s->srv_.get();
  auto exited = std::make_shared<std::atomic<bool>>(false);
  s->thread_ = std::thread([srv, exited] {
    srv->listen_after_bind();
    exited->store(true);
  });
  // httplib's stop() is a no-op until the accept loop runs; wait for it so a
  // Stop right after Start cannot leave the loop blocked in accept forever.
  while (!srv->is_running() && !exited->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  TW_LOG(Info, "http: listening on {}:{} with {} threads{}", s->host_, s->port_, threads,
         web == nullptr ? "" : web->tls() ? " (TLS, web config " + web->path() + ")" : " (web config " + web->path() + ")");
  return s;
}

void Server::Stop() {
  if (stopped_ || srv_ == nullptr) return;
  stopped_ = true;
  srv_->Wake();
  srv_->stop();
  if (thread_.joinable()) thread_.join();
  TW_LOG(Info, "http: stopped");
}

Server::~Server() { Stop(); }

}  // namespace trainwatch::http
