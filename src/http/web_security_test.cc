// The server under a web config: TLS (handshake, versions, client
// certificates, SANs), basic auth on every route, response headers, rate
// limit, reload; against httplib's real TLS client and raw sockets.
#include "http/web_security.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/file.h"
#include "http/basic_auth.h"
#include "http/server.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

std::string Pem(X509* x) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, x);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

std::string Pem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

void AddExt(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* e = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(e, nullptr) << value;
  X509_add_ext(x, e, -1);
  X509_EXTENSION_free(e);
}

// A P-256 key and a certificate for it, signed by `issuer` (null: self-signed).
struct KeyCert {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  KeyCert() = default;
  KeyCert(const std::string& cn, const std::string& san, const KeyCert* issuer, bool ca, const char* eku) {
    static long serial = 1;
    key = EVP_EC_gen("P-256");
    cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509* iss = issuer != nullptr ? issuer->cert : cert;
    X509_set_issuer_name(cert, X509_get_subject_name(iss));
    AddExt(cert, iss, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (ca) AddExt(cert, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    if (!san.empty()) AddExt(cert, iss, NID_subject_alt_name, san.c_str());
    if (eku != nullptr) AddExt(cert, iss, NID_ext_key_usage, eku);
    X509_sign(cert, issuer != nullptr ? issuer->key : key, EVP_sha256());
  }
  ~KeyCert() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  KeyCert(const KeyCert&) = delete;
  KeyCert& operator=(const KeyCert&) = delete;
};

class WebSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ca_ = new KeyCert("trainwatch test CA", "", nullptr, true, nullptr);
    server_ = new KeyCert("127.0.0.1", "IP:127.0.0.1,DNS:localhost", ca_, false, "serverAuth");
    client_ = new KeyCert("good client", "DNS:good.client", ca_, false, "clientAuth");
    other_ = new KeyCert("other client", "DNS:other.client", ca_, false, "clientAuth");
    rogue_ = new KeyCert("rogue", "DNS:good.client", nullptr, false, "clientAuth");
    hash_ = new std::string(BcryptHash("s3cret", 4).value());
  }
  static void TearDownTestSuite() {
    for (KeyCert* k : {ca_, server_, client_, other_, rogue_}) delete k;
    delete hash_;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/tw_web_security_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Write("ca.pem", Pem(ca_->cert));
    Write("server.pem", Pem(server_->cert));
    Write("server.key", Pem(server_->key));
    for (auto [name, kc] : {std::pair{"client", client_}, std::pair{"other", other_}, std::pair{"rogue", rogue_}}) {
      Write(std::string(name) + ".pem", Pem(kc->cert));
      Write(std::string(name) + ".key", Pem(kc->key));
    }
  }
  void TearDown() override {
    srv_.reset();
    (void)file::RemoveAll(dir_);
  }
  void Write(const std::string& name, const std::string& data) {
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/" + name, data, file::Sync::kNo).ok());
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Starts a server with web config `yaml` (written to web.yml).
  void Start(const std::string& yaml, ServerOptions o = {}) {
    Write("web.yml", yaml);
    auto w = WebSecurity::Load(Path("web.yml"));
    ASSERT_TRUE(w.ok()) << w.error().message();
    web_ = *w;
    o.listen = "127.0.0.1:0";
    o.threads = 2;
    o.web = web_;
    auto s = Server::Start(o, ApiDeps{db_.get(), &engine_, {}});
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    srv_ = std::move(*s);
  }

  // A TLS client trusting the test CA, with client certificate `name` (empty: none).
  std::unique_ptr<httplib::SSLClient> Tls(const std::string& name = "") {
    auto c = name.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", srv_->port())
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", srv_->port(), Path(name + ".pem"),
                                                                 Path(name + ".key"));
    c->set_ca_cert_path(Path("ca.pem"));
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(10);
    c->set_read_timeout(10);
    return c;
  }
  // Status of GET `path` over TLS with basic auth "u:s3cret"; -1 when no answer.
  int TlsGet(httplib::SSLClient& c, const std::string& path = "/-/healthy", bool auth = true) {
    if (auth) c.set_basic_auth("u", "s3cret");
    auto r = c.Get(path.c_str());
    return r ? r->status : -1;
  }

  static KeyCert *ca_, *server_, *client_, *other_, *rogue_;
  static std::string* hash_;
  std::string dir_;
  tsdb::testing::TempDB db_;
  promql::Engine engine_{promql::EngineOptions{}};
  std::shared_ptr<WebSecurity> web_;
  std::unique_ptr<Server> srv_;
};
KeyCert *WebSecurityTest::ca_, *WebSecurityTest::server_, *WebSecurityTest::client_, *WebSecurityTest::other_,
    *WebSecurityTest::rogue_;
std::string* WebSecurityTest::hash_;

std::string TlsFiles() { return "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"; }

// A raw TCP connection to 127.0.0.1:port; `rcvbuf` > 0: that small a receive buffer.
int Connect(int port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Everything the peer sends until it closes (or 30 s pass).
std::string ReadAll(int fd) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST_F(WebSecurityTest, TlsWithBasicAuthAndHeadersOnEveryAnswer) {
  Start(TlsFiles() + "basic_auth_users:\n  u: " + *hash_ +
        "\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=60\n");
  EXPECT_TRUE(web_->tls());
  auto c = Tls();
  auto r = c->Get("/-/healthy");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Basic");
  EXPECT_EQ(r->get_header_value("X-Frame-Options"), "deny");
  EXPECT_EQ(r->body, "Unauthorized\n");
  c->set_basic_auth("u", "wrong");
  EXPECT_EQ(c->Get("/api/v1/labels")->status, 401);
  c->set_basic_auth("nobody", "s3cret");
  EXPECT_EQ(c->Get("/api/v1/labels")->status, 401);
  c->set_basic_auth("u", "s3cret");
  r = c->Get("/api/v1/labels");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Strict-Transport-Security"), "max-age=60");
  EXPECT_EQ(c->Get("/no/such/path")->status, 404);
  // Writes go through TLS as well.
  r = c->Post("/api/v1/import/prometheus", "tls_sample 1\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(db_.NumSamples(), 1u);
  // A large answer crosses many TLS records.
  std::string big;
  for (int i = 0; i < 20000; i++) big += "tls_big{i=\"" + std::to_string(i) + "\"} 1\n";
  ASSERT_EQ(c->Post("/api/v1/import/prometheus", big, "text/plain")->status, 204);
  r = c->Get("/api/v1/series?match[]=tls_big");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GT(r->body.size(), 20000u * 20);
}

TEST_F(WebSecurityTest, ClientsLeavingMidAnswerHarmNothing) {
  // A test binary does not ignore SIGPIPE: a TLS write to a peer that reset
  // the connection must not kill it (conn.cc blocks it per connection).
  Start(TlsFiles());
  std::string big;
  for (int i = 0; i < 20000; i++) big += "leave_big{i=\"" + std::to_string(i) + "\"} 1\n";
  auto c = Tls();
  ASSERT_EQ(c->Post("/api/v1/import/prometheus", big, "text/plain")->status, 204);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  for (int i = 0; i < 20; i++) {
    int fd = Connect(srv_->port(), 4096);  // the server blocks writing the answer
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ASSERT_EQ(SSL_connect(ssl), 1);
    std::string req = "GET /api/v1/series?match[]=leave_big HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_GT(SSL_write(ssl, req.data(), static_cast<int>(req.size())), 0);
    char b[100];
    SSL_read(ssl, b, sizeof b);  // the answer has begun
    linger l{1, 0};              // then a reset, not a close
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    SSL_free(ssl);
    ::close(fd);
  }
  SSL_CTX_free(ctx);
  auto after = Tls();
  EXPECT_EQ(TlsGet(*after, "/-/healthy", false), 200);
}

TEST_F(WebSecurityTest, PlainHttpOnTheTlsPortIsToldSo) {
  Start(TlsFiles());
  httplib::Client plain("127.0.0.1", srv_->port());
  plain.set_read_timeout(10);
  auto r = plain.Get("/-/healthy");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "Client sent an HTTP request to an HTTPS server.\n");
  auto c = Tls();
  EXPECT_EQ(TlsGet(*c, "/-/healthy", false), 200);  // no users: no authentication
}

TEST_F(WebSecurityTest, SlowHandshakeIsCutAtTheHeaderTimeout) {
  Start(TlsFiles(), ServerOptions{.header_timeout_ms = 300});
  int fd = Connect(srv_->port());
  auto t0 = std::chrono::steady_clock::now();
  ::send(fd, "\x16\x03\x01", 3, MSG_NOSIGNAL);  // the start of a ClientHello, then nothing
  ReadAll(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ::close(fd);
  auto c = Tls();
  EXPECT_EQ(TlsGet(*c, "/-/healthy", false), 200);
}

TEST_F(WebSecurityTest, HeadBoundsHoldUnderTls) {
  Start(TlsFiles());
  auto c = Tls();
  EXPECT_EQ(TlsGet(*c, "/api/v1/labels?x=" + std::string(9000, 'a'), false), 414);
  httplib::Headers many;
  for (int i = 0; i < 300; i++) many.emplace("X-H" + std::to_string(i), "v");
  auto c2 = Tls();
  auto r = c2->Get("/-/healthy", many);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
}

TEST_F(WebSecurityTest, MinVersionRefusesOlderClients) {
  Start(TlsFiles() + "  min_version: TLS13\n");
  auto c = Tls();
  SSL_CTX_set_max_proto_version(c->ssl_context(), TLS1_2_VERSION);
  EXPECT_EQ(TlsGet(*c, "/-/healthy", false), -1);
  auto c13 = Tls();
  EXPECT_EQ(TlsGet(*c13, "/-/healthy", false), 200);
}

TEST_F(WebSecurityTest, CipherSuitesAndCurvesApplyToTls12) {
  Start(TlsFiles() + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n"
                     "  curve_preferences: [CurveP384]\n");
  auto c = Tls();
  ASSERT_EQ(SSL_CTX_set_cipher_list(c->ssl_context(), "ECDHE-ECDSA-AES128-GCM-SHA256"), 1);
  EXPECT_EQ(TlsGet(*c, "/-/healthy", false), -1);  // no common suite
  auto ok = Tls();
  EXPECT_EQ(TlsGet(*ok, "/-/healthy", false), 200);
  auto p256 = Tls();
  ASSERT_EQ(SSL_CTX_set1_groups_list(p256->ssl_context(), "P-256"), 1);
  EXPECT_EQ(TlsGet(*p256, "/-/healthy", false), -1);  // no common curve
}

TEST_F(WebSecurityTest, RequireAndVerifyClientCert) {
  Start(TlsFiles() + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n");
  EXPECT_TRUE(web_->requires_client_cert());
  auto none = Tls();
  EXPECT_EQ(TlsGet(*none, "/-/healthy", false), -1);
  auto rogue = Tls("rogue");  // self-signed: not from the client CA
  EXPECT_EQ(TlsGet(*rogue, "/-/healthy", false), -1);
  auto good = Tls("client");
  EXPECT_EQ(TlsGet(*good, "/-/healthy", false), 200);
}

TEST_F(WebSecurityTest, ClientAllowedSansPickTheCertificate) {
  Start(TlsFiles() + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n"
                     "  client_allowed_sans: [good.client]\n");
  auto good = Tls("client");
  EXPECT_EQ(TlsGet(*good, "/-/healthy", false), 200);
  auto other = Tls("other");  // signed by the CA, but another SAN
  EXPECT_EQ(TlsGet(*other, "/-/healthy", false), -1);
}

TEST_F(WebSecurityTest, OtherClientAuthTypes) {
  Start(TlsFiles() + "  client_auth_type: RequireAnyClientCert\n");
  auto none = Tls();
  EXPECT_EQ(TlsGet(*none, "/-/healthy", false), -1);
  auto rogue = Tls("rogue");  // any certificate will do
  EXPECT_EQ(TlsGet(*rogue, "/-/healthy", false), 200);
  srv_.reset();
  Start(TlsFiles() + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.pem\n");
  EXPECT_FALSE(web_->requires_client_cert());
  auto none2 = Tls();
  EXPECT_EQ(TlsGet(*none2, "/-/healthy", false), 200);
  auto good = Tls("client");
  EXPECT_EQ(TlsGet(*good, "/-/healthy", false), 200);
  auto rogue2 = Tls("rogue");  // given, so verified
  EXPECT_EQ(TlsGet(*rogue2, "/-/healthy", false), -1);
}

TEST_F(WebSecurityTest, BadCertificateFilesAreRefusedAtLoad) {
  Write("web.yml", "tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n");
  auto w = WebSecurity::Load(Path("web.yml"));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message(), "web config file " + Path("web.yml") + ": line 2: tls_server_config.cert_file (" +
                                     Path("server.key") + "): no PEM certificate in it");
  Write("web.yml", "tls_server_config:\n  cert_file: server.pem\n  key_file: client.key\n");
  w = WebSecurity::Load(Path("web.yml"));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message(), "web config file " + Path("web.yml") + ": line 3: tls_server_config.key_file (" +
                                     Path("client.key") + "): the key does not match the certificate of line 2: "
                                     "tls_server_config.cert_file (" + Path("server.pem") + ")");
  Write("web.yml", "tls_server_config:\n  cert_file: server.pem\n  key_file: server.pem\n");
  w = WebSecurity::Load(Path("web.yml"));
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.error().message().find("no usable PEM private key in it") != std::string::npos) << w.error().message();
}

TEST_F(WebSecurityTest, AuthenticationWithoutTlsAndTheBodyIsNotRead) {
  Start("basic_auth_users:\n  u: " + *hash_ + "\n");
  EXPECT_FALSE(web_->tls());
  // A 1 GiB body declared, none sent: the 401 comes at once and the connection closes.
  int fd = Connect(srv_->port());
  std::string head = "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::string got = ReadAll(fd);
  ::close(fd);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 401 Unauthorized\r\n")) << got;
  EXPECT_NE(got.find("WWW-Authenticate: Basic\r\n"), std::string::npos) << got;
  // Odd methods are refused as unauthenticated too, before anything else.
  httplib::Client c("127.0.0.1", srv_->port());
  EXPECT_EQ(c.Patch("/api/v1/runs", "x", "text/plain")->status, 401);
  EXPECT_EQ(c.Options("/api/v1/query")->status, 401);
  c.set_basic_auth("u", "s3cret");
  EXPECT_EQ(c.Get("/metrics")->status, 200);
  EXPECT_EQ(c.Patch("/api/v1/runs", "x", "text/plain")->status, 405);
  // The internal token of the self-scrape.
  httplib::Client self("127.0.0.1", srv_->port());
  self.set_bearer_token_auth(web_->self_token());
  EXPECT_EQ(self.Get("/metrics")->status, 200);
  self.set_bearer_token_auth(web_->self_token() + "0");
  EXPECT_EQ(self.Get("/metrics")->status, 401);
}

TEST_F(WebSecurityTest, RateLimitAnswers429) {
  Start("rate_limit:\n  interval: 1h\n  burst: 3\n");
  httplib::Client c("127.0.0.1", srv_->port());
  for (int i = 0; i < 3; i++) EXPECT_EQ(c.Get("/-/healthy")->status, 200);
  EXPECT_EQ(c.Get("/-/healthy")->status, 429);
}

TEST_F(WebSecurityTest, ReloadSwapsTheConfigOrKeepsTheRunningOne) {
  Start(TlsFiles() + "basic_auth_users:\n  u: " + *hash_ + "\n");
  auto c = Tls();
  EXPECT_EQ(TlsGet(*c), 200);
  // A new password for u.
  auto h2 = BcryptHash("n3w", 4);
  ASSERT_TRUE(h2.ok());
  Write("web.yml", TlsFiles() + "basic_auth_users:\n  u: " + *h2 + "\n");
  ASSERT_TRUE(web_->Reload().ok());
  EXPECT_EQ(TlsGet(*c), 401);
  c->set_basic_auth("u", "n3w");
  EXPECT_EQ(c->Get("/-/healthy")->status, 200);
  // A bad file: an error naming it; the running config stays.
  Write("web.yml", TlsFiles() + "basic_auth_users:\n  u: plaintext\n");
  Status s = web_->Reload();
  EXPECT_EQ(s.message(), "web config file " + Path("web.yml") +
                             ": line 5: basic_auth_users.u: not a bcrypt hash: expected $2y$, $2b$ or $2a$, a cost of "
                             "04 to 31 and 53 more characters, 60 in all (make one with htpasswd -nBC 10 \"\" | tr -d "
                             "':\\n')");
  c->set_basic_auth("u", "n3w");
  EXPECT_EQ(c->Get("/-/healthy")->status, 200);
  // TLS stays on for the process's life.
  Write("web.yml", "basic_auth_users:\n  u: " + *h2 + "\n");
  s = web_->Reload();
  EXPECT_EQ(s.message(), "web config file " + Path("web.yml") +
                             ": it turns TLS off, which needs a restart; kept the running web config");
  EXPECT_EQ(c->Get("/-/healthy")->status, 200);
  // A client CA requirement comes with a reload, for new connections.
  Write("web.yml", TlsFiles() + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n");
  ASSERT_TRUE(web_->Reload().ok());
  auto fresh = Tls();
  EXPECT_EQ(TlsGet(*fresh, "/-/healthy", false), -1);
  auto with_cert = Tls("client");
  EXPECT_EQ(TlsGet(*with_cert, "/-/healthy", false), 200);
}

}  // namespace
}  // namespace trainwatch::http
