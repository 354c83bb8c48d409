#pragma once
// The server side of TLS, internal to http/: an OpenSSL context built from a
// web config's tls_server_config (certificate chain, key, versions, cipher
// suites, curves, client certificate policy with client_allowed_sans), and
// the handshake of one accepted connection. GuardedServer (http/conn.h)
// reads and writes through the SSL object under its usual bounds.

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/web_config.h"

struct ssl_ctx_st;
struct ssl_st;
struct x509_store_ctx_st;

namespace trainwatch::http::internal {

// Immutable once made; shared by the connections that use it. Thread-safe.
class TlsContext {
 public:
  // InvalidArgument naming the field (cert_where, ...) for PEM that does not
  // load, a key that does not match the certificate, or a setting OpenSSL
  // refuses.
  static Result<std::shared_ptr<const TlsContext>> Make(const WebTlsConfig& c);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Runs the server handshake on connected socket `sock` (made non-blocking
  // here) until `deadline_ms` passes or `wake_fd` becomes readable. Returns
  // the SSL object (free with FreeSsl), or null with *error set. A client
  // that speaks plain HTTP gets a plain 400 answer first, as Go's server
  // gives, and *answered is set: close the socket gracefully.
  ssl_st* Accept(int sock, int wake_fd, int deadline_ms, std::string* error, bool* answered) const;
  ClientAuth client_auth() const { return client_auth_; }

 private:
  TlsContext() = default;
  static int VerifyClient(x509_store_ctx_st* store, void* arg);

  ssl_ctx_st* ctx_ = nullptr;
  ClientAuth client_auth_ = ClientAuth::kNoClientCert;
  bool verify_chain_ = false;              // VerifyClientCertIfGiven, RequireAndVerifyClientCert
  std::vector<std::string> allowed_sans_;  // empty: any
};

// Sends close_notify (without waiting for the peer's) unless the connection
// failed, and frees `ssl`.
void FreeSsl(ssl_st* ssl, bool close_notify);

}  // namespace trainwatch::http::internal
