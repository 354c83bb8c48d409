#include "http/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace trainwatch::http::internal {
namespace {

// The reason of the oldest queued OpenSSL error (the queue is cleared), or `fallback`.
std::string OpenSslError(std::string_view fallback) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return std::string(fallback);
  const char* r = ERR_reason_error_string(e);
  return r != nullptr ? r : "openssl error " + std::to_string(e);
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemBio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

// Every certificate of PEM text `pem`, in order; empty when there is none.
std::vector<X509*> ReadCerts(const std::string& pem) {
  std::vector<X509*> out;
  Bio b = MemBio(pem);
  while (b != nullptr) {
    X509* x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr);
    if (x == nullptr) break;
    out.push_back(x);
  }
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

// An encrypted key gets no passphrase (and no prompt on a terminal).
int NoPassphrase(char*, int, int, void*) { return 0; }

std::string IpString(const unsigned char* p, int len) {
  char buf[INET6_ADDRSTRLEN] = {};
  static const unsigned char kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (len == 16 && std::memcmp(p, kV4Mapped, 12) == 0) {  // as Go's net.IP.String()
    p += 12;
    len = 4;
  }
  if (len == 4) inet_ntop(AF_INET, p, buf, sizeof buf);
  else if (len == 16) inet_ntop(AF_INET6, p, buf, sizeof buf);
  return buf;
}

// True when `cert` has a DNS, e-mail, IP or URI SAN equal to one of `allowed`.
bool SanAllowed(X509* cert, const std::vector<std::string>& allowed) {
  if (cert == nullptr) return false;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return false;
  bool ok = false;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && !ok; i++) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    std::string v;
    if (g->type == GEN_DNS || g->type == GEN_EMAIL || g->type == GEN_URI) {
      const ASN1_IA5STRING* s = g->d.ia5;
      v.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (g->type == GEN_IPADD) {
      v = IpString(ASN1_STRING_get0_data(g->d.ip), ASN1_STRING_length(g->d.ip));
    } else {
      continue;
    }
    ok = !v.empty() && std::find(allowed.begin(), allowed.end(), v) != allowed.end();
  }
  GENERAL_NAMES_free(names);
  return ok;
}

}  // namespace

int TlsContext::VerifyClient(x509_store_ctx_st* store, void* arg) {
  const auto* t = static_cast<const TlsContext*>(arg);
  // RequestClientCert and RequireAnyClientCert take any certificate, as Go.
  if (t->verify_chain_ && X509_verify_cert(store) != 1) return 0;
  if (!t->allowed_sans_.empty() && !SanAllowed(X509_STORE_CTX_get0_cert(store), t->allowed_sans_)) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
    return 0;
  }
  return 1;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Make(const WebTlsConfig& c) {
  std::shared_ptr<TlsContext> t(new TlsContext());
  ERR_clear_error();
  t->ctx_ = SSL_CTX_new(TLS_server_method());
  SSL_CTX* ctx = t->ctx_;
  if (ctx == nullptr) return Status::IOError("tls: " + OpenSslError("SSL_CTX_new failed"));
  auto fail = [](const std::string& where, const std::string& why) {
    return Status::InvalidArgument(where + ": " + why);
  };
  if (SSL_CTX_set_min_proto_version(ctx, c.min_version) != 1 || SSL_CTX_set_max_proto_version(ctx, c.max_version) != 1) {
    return fail("tls_server_config.min_version/max_version", OpenSslError("not supported by this OpenSSL"));
  }
  uint64_t opts = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION;
  if (c.prefer_server_cipher_suites) opts |= SSL_OP_CIPHER_SERVER_PREFERENCE;
  SSL_CTX_set_options(ctx, opts);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  static const unsigned char kSessionContext[] = "trainwatch";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);

  std::vector<X509*> chain = ReadCerts(c.cert_pem);
  if (chain.empty()) return fail(c.cert_where, "no PEM certificate in it");
  int used = SSL_CTX_use_certificate(ctx, chain[0]);
  X509_free(chain[0]);
  bool chain_ok = used == 1;
  for (size_t i = 1; i < chain.size(); i++) {
    if (!chain_ok || SSL_CTX_add0_chain_cert(ctx, chain[i]) != 1) {
      X509_free(chain[i]);
      chain_ok = false;
    }
  }
  if (!chain_ok) return fail(c.cert_where, "certificate refused: " + OpenSslError("unusable"));
  {
    Bio b = MemBio(c.key_pem);
    EVP_PKEY* key = b == nullptr ? nullptr : PEM_read_bio_PrivateKey(b.get(), nullptr, NoPassphrase, nullptr);
    if (key == nullptr) {
      return fail(c.key_where, "no usable PEM private key in it (encrypted keys are not supported): " +
                                   OpenSslError("unreadable"));
    }
    int ok = SSL_CTX_use_PrivateKey(ctx, key);
    EVP_PKEY_free(key);
    int reason = ERR_GET_REASON(ERR_peek_error());
    if ((ok == 1 && SSL_CTX_check_private_key(ctx) != 1) ||
        (ok != 1 && (reason == X509_R_KEY_VALUES_MISMATCH || reason == X509_R_KEY_TYPE_MISMATCH))) {
      ERR_clear_error();
      return fail(c.key_where, "the key does not match the certificate of " + c.cert_where);
    }
    if (ok != 1) return fail(c.key_where, "key refused: " + OpenSslError("unusable"));
  }
  if (!c.cipher_suites.empty()) {
    std::string list;
    for (const std::string& s : c.cipher_suites) {
      const char* name = OPENSSL_cipher_name(s.c_str());
      if (name == nullptr || std::strcmp(name, "(NONE)") == 0) {
        return fail("tls_server_config.cipher_suites", s + " is not available in this OpenSSL");
      }
      list += (list.empty() ? "" : ":") + std::string(name);
    }
    if (SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1) {
      return fail("tls_server_config.cipher_suites", "OpenSSL refused " + list + ": " + OpenSslError("no usable suite"));
    }
  }
  if (!c.curve_preferences.empty()) {
    std::string list;
    for (const std::string& g : c.curve_preferences) list += (list.empty() ? "" : ":") + g;
    if (SSL_CTX_set1_groups_list(ctx, list.c_str()) != 1) {
      return fail("tls_server_config.curve_preferences", "OpenSSL refused " + list + ": " + OpenSslError("unsupported"));
    }
  }
  t->client_auth_ = c.client_auth;
  t->allowed_sans_ = c.client_allowed_sans;
  t->verify_chain_ = c.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                     c.client_auth == ClientAuth::kRequireAndVerifyClientCert;
  if (c.client_auth != ClientAuth::kNoClientCert) {
    int mode = SSL_VERIFY_PEER;
    if (c.client_auth == ClientAuth::kRequireAnyClientCert || c.client_auth == ClientAuth::kRequireAndVerifyClientCert) {
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    }
    SSL_CTX_set_verify(ctx, mode, nullptr);
    SSL_CTX_set_cert_verify_callback(ctx, &TlsContext::VerifyClient, t.get());
  }
  if (!c.client_ca_pem.empty()) {
    std::vector<X509*> cas = ReadCerts(c.client_ca_pem);
    if (cas.empty()) return fail(c.client_ca_where, "no PEM certificate in it");
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    bool ok = names != nullptr;
    for (X509* x : cas) {
      if (ok && X509_STORE_add_cert(store, x) != 1) ok = false;
      // The names a client may pick its certificate by (CertificateRequest).
      X509_NAME* n = ok ? X509_NAME_dup(X509_get_subject_name(x)) : nullptr;
      if (n != nullptr && sk_X509_NAME_push(names, n) == 0) X509_NAME_free(n);
      X509_free(x);
    }
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    if (!ok) return fail(c.client_ca_where, "certificate refused: " + OpenSslError("unusable"));
  } else if (t->verify_chain_) {
    // As Go: with no client CA, client certificates are verified against the system's roots.
    SSL_CTX_set_default_verify_paths(ctx);
  }
  ERR_clear_error();
  return std::shared_ptr<const TlsContext>(std::move(t));
}

TlsContext::~TlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

ssl_st* TlsContext::Accept(int sock, int wake_fd, int deadline_ms, std::string* error, bool* answered) const {
  *answered = false;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  int flags = ::fcntl(sock, F_GETFL, 0);
  if (flags < 0 || ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0) {
    *error = "fcntl: " + std::string(std::strerror(errno));
    return nullptr;
  }
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr || SSL_set_fd(ssl, sock) != 1) {
    *error = OpenSslError("SSL_new failed");
    if (ssl != nullptr) SSL_free(ssl);
    return nullptr;
  }
  for (;;) {
    ERR_clear_error();
    int r = SSL_accept(ssl);
    if (r == 1) return ssl;
    int e = SSL_get_error(ssl, r);
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev == 0) {
      unsigned long err = ERR_peek_error();
      if (ERR_GET_LIB(err) == ERR_LIB_SSL && ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST) {
        static constexpr char kPlain[] =
            "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
            "Client sent an HTTP request to an HTTPS server.\n";
        [[maybe_unused]] ssize_t n = ::send(sock, kPlain, sizeof kPlain - 1, MSG_NOSIGNAL);
        *error = "plain HTTP request on the TLS port";
        *answered = true;
      } else {
        *error = e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN ? OpenSslError("connection closed by the client")
                                                                      : OpenSslError("handshake failed");
      }
      SSL_free(ssl);  // no close_notify after a fatal error
      return nullptr;
    }
    pollfd p[2] = {{sock, ev, 0}, {wake_fd, POLLIN, 0}};
    int ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count(), 0, INT_MAX));
    int pr;
    do {
      pr = ::poll(p, wake_fd >= 0 ? 2 : 1, ms);
    } while (pr < 0 && errno == EINTR);
    if (pr <= 0 || (wake_fd >= 0 && (p[1].revents & POLLIN) != 0)) {
      *error = pr == 0 ? "handshake not done within " + std::to_string(deadline_ms) + "ms" : "server stopping";
      SSL_free(ssl);
      return nullptr;
    }
  }
}

void FreeSsl(ssl_st* ssl, bool close_notify) {
  if (ssl == nullptr) return;
  if (close_notify) {
    ERR_clear_error();
    SSL_shutdown(ssl);  // non-blocking: queues close_notify, does not wait for the peer's
    ERR_clear_error();
  }
  SSL_free(ssl);
}

}  // namespace trainwatch::http::internal
