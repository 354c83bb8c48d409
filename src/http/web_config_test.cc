#include "http/web_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "base/file.h"
#include "http/basic_auth.h"

namespace trainwatch::http {
namespace {

// A temporary directory with a stand-in certificate and key (the parser
// reads the files; only TlsContext looks inside).
class WebConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_web_config_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Write("cert.pem", "CERT");
    Write("key.pem", "KEY");
    Write("ca.pem", "CA");
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::string& name, const std::string& data) {
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/" + name, data, file::Sync::kNo).ok());
  }
  Result<WebConfig> Parse(const std::string& yaml) { return ParseWebConfig(yaml, dir_); }
  // The error of `yaml`, or "ok".
  std::string Error(const std::string& yaml) {
    auto c = Parse(yaml);
    return c.ok() ? "ok" : c.error().message();
  }
  std::string dir_;
};

// A real bcrypt hash (cost 4, password "pw").
const std::string& Hash() {
  static const std::string h = BcryptHash("pw", 4).value();
  return h;
}

TEST_F(WebConfigTest, EmptyFileMeansNoTlsAndNoAuthentication) {
  for (std::string yaml : {"", "# nothing\n", "{}"}) {
    auto c = Parse(yaml);
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_FALSE(c->tls.enabled);
    EXPECT_TRUE(c->users.empty());
    EXPECT_TRUE(c->headers.empty());
  }
}

TEST_F(WebConfigTest, PrometheusDocumentationExampleLoads) {
  // Every field exporter-toolkit documents for Prometheus 2.42's web config.
  auto c = Parse(R"(tls_server_config:
  cert_file: cert.pem
  key_file: )" + dir_ + R"(/key.pem
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.pem
  min_version: TLS12
  max_version: TLS13
  cipher_suites:
    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
  prefer_server_cipher_suites: false
  curve_preferences: [X25519, CurveP256]
http_server_config:
  http2: false
  headers:
    Content-Security-Policy: "default-src 'self'"
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    X-XSS-Protection: "1; mode=block"
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  alice: )" + Hash() + R"(
  bob: ")" + Hash() + R"("
)");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->tls.enabled);
  EXPECT_EQ(c->tls.cert_pem, "CERT");  // relative to the file's directory
  EXPECT_EQ(c->tls.key_pem, "KEY");
  EXPECT_EQ(c->tls.client_ca_pem, "CA");
  EXPECT_EQ(c->tls.cert_where, "line 2: tls_server_config.cert_file (" + dir_ + "/cert.pem)");
  EXPECT_EQ(c->tls.client_auth, ClientAuth::kRequireAndVerifyClientCert);
  EXPECT_EQ(c->tls.min_version, 0x0303);
  EXPECT_EQ(c->tls.max_version, 0x0304);
  EXPECT_EQ(c->tls.cipher_suites, (std::vector<std::string>{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                                                            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}));
  EXPECT_FALSE(c->tls.prefer_server_cipher_suites);
  EXPECT_EQ(c->tls.curve_preferences, (std::vector<std::string>{"X25519", "P-256"}));
  EXPECT_FALSE(c->http2);
  ASSERT_EQ(c->headers.size(), 5u);
  EXPECT_EQ(c->headers[0], (std::pair<std::string, std::string>{"Content-Security-Policy", "default-src 'self'"}));
  EXPECT_EQ(c->users.size(), 2u);
  EXPECT_EQ(c->users.at("alice"), Hash());
  EXPECT_TRUE(c->warnings.empty());
}

TEST_F(WebConfigTest, NewerFieldsInlinePemAllowedSansAndRateLimit) {
  auto c = Parse(R"(tls_server_config:
  cert: "CERT TEXT"
  key: "KEY TEXT"
  client_ca: "CA TEXT"
  client_auth_type: RequireAnyClientCert
  client_allowed_sans: [client.example, 10.0.0.1]
rate_limit:
  interval: 100ms
  burst: 5
)");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->tls.cert_pem, "CERT TEXT");
  EXPECT_EQ(c->tls.key_where, "line 3: tls_server_config.key");
  EXPECT_EQ(c->tls.client_allowed_sans, (std::vector<std::string>{"client.example", "10.0.0.1"}));
  EXPECT_EQ(c->rate_limit_interval_ms, 100);
  EXPECT_EQ(c->rate_limit_burst, 5);
}

TEST_F(WebConfigTest, BasicAuthAndHeadersWithoutTlsStayPlainHttp) {
  auto c = Parse("basic_auth_users:\n  u: " + Hash() + "\nhttp_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n"
                 "    Content-Security-Policy: ''\n");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(c->tls.enabled);
  EXPECT_EQ(c->users.size(), 1u);
  ASSERT_EQ(c->headers.size(), 1u);  // a blank header is left out
  EXPECT_EQ(c->headers[0].first, "X-Frame-Options");
}

TEST_F(WebConfigTest, SettingsThatDoNothingAreWarnedAbout) {
  auto c = Parse("tls_server_config:\n  min_version: TLS13\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->tls.enabled);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_EQ(c->warnings[0], "line 2: tls_server_config.min_version has no effect: without cert_file and key_file TLS "
                            "is off (as in Prometheus)");
  c = Parse("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256, "
            "TLS_RSA_WITH_AES_128_GCM_SHA256]\n");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->tls.cipher_suites, std::vector<std::string>{"TLS_RSA_WITH_AES_128_GCM_SHA256"});
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_EQ(c->warnings[0], "line 4: tls_server_config.cipher_suites: TLS_AES_128_GCM_SHA256 ignored: TLS 1.3 suites "
                            "are not configurable (as in Prometheus)");
}

TEST_F(WebConfigTest, EveryErrorNamesItsLineAndField) {
  const std::string tls = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n";
  auto check = [&](const std::string& yaml, const std::string& want) {
    EXPECT_EQ(Error(yaml), want) << yaml;
  };
  check("foo: 1\n", "line 1: top level: unknown field \"foo\"");
  check("auth_excluded_paths: [/metrics]\n",
        "line 1: auth_excluded_paths: not supported by trainwatch; remove it");
  check("- a\n", "line 1: web config: expected a mapping at the top");
  check("tls_server_config: [\n", "line 2: yaml: end of sequence flow not found");
  check("tls_server_config: 3\n", "line 1: tls_server_config: expected a mapping");
  check(tls + "  cert_flie: x\n",
        "line 4: tls_server_config: unknown field \"cert_flie\" (did you mean \"cert_file\"?)");
  check(tls + "  client_fingerprints: [x]\n",
        "line 4: tls_server_config.client_fingerprints: not supported by trainwatch; remove it");
  check("tls_server_config:\n  cert_file: missing.pem\n  key_file: key.pem\n",
        "line 2: tls_server_config.cert_file: open " + dir_ + "/missing.pem: No such file or directory");
  check("tls_server_config:\n  cert_file: cert.pem\n", "line 2: tls_server_config: missing one of key or key_file");
  check("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
        "line 2: tls_server_config: missing one of cert or cert_file");
  check(tls + "  cert: inline\n", "line 2: tls_server_config.cert_file: give cert or cert_file, not both");
  check(tls + "  client_auth_type: Always\n",
        "line 4: tls_server_config.client_auth_type: invalid ClientAuth \"Always\" (one of NoClientCert, "
        "RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)");
  check(tls + "  client_ca_file: ca.pem\n",
        "line 4: tls_server_config.client_ca_file: client CAs are configured without a client_auth_type, so no "
        "client certificate would be checked (set client_auth_type: RequireAndVerifyClientCert)");
  check(tls + "  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [a]\n",
        "line 5: tls_server_config.client_allowed_sans: needs client_auth_type RequireAnyClientCert or "
        "RequireAndVerifyClientCert");
  check(tls + "  min_version: TLS14\n",
        "line 4: tls_server_config.min_version: unknown TLS version \"TLS14\" (one of TLS10, TLS11, TLS12, TLS13)");
  check(tls + "  min_version: TLS13\n  max_version: TLS12\n",
        "line 5: tls_server_config.max_version: is below min_version: no TLS version would be left");
  check(tls + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
        "line 4: tls_server_config.cipher_suites: unknown cipher \"TLS_RSA_WITH_RC4_128_SHA\"");
  check(tls + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
        "line 4: tls_server_config.cipher_suites: names only TLS 1.3 suites, so TLS 1.2 would have none (add TLS 1.2 "
        "suites or set min_version: TLS13)");
  check(tls + "  cipher_suites: TLS_AES_128_GCM_SHA256\n",
        "line 4: tls_server_config.cipher_suites: expected a list of strings");
  check(tls + "  curve_preferences: [CurveP224]\n",
        "line 4: tls_server_config.curve_preferences: unknown curve \"CurveP224\" (one of CurveP256, CurveP384, "
        "CurveP521, X25519)");
  check(tls + "  prefer_server_cipher_suites: maybe\n",
        "line 4: tls_server_config.prefer_server_cipher_suites: invalid boolean \"maybe\"");
  check("http_server_config:\n  http2: 7\n", "line 2: http_server_config.http2: invalid boolean \"7\"");
  check("http_server_config:\n  headers:\n    X-Powered-By: trainwatch\n",
        "line 3: http_server_config.headers: HTTP header \"X-Powered-By\" can not be configured (only "
        "Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection and "
        "Content-Security-Policy, as in Prometheus)");
  check("http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
        "line 3: http_server_config.headers.X-Frame-Options: invalid value \"allow\" (one of \"deny\", \"sameorigin\")");
  check("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: x\"\n",
        "line 3: http_server_config.headers.Content-Security-Policy: control characters are not allowed in a header "
        "value");
  check("basic_auth_users:\n  alice: secret\n",
        "line 2: basic_auth_users.alice: not a bcrypt hash: expected $2y$, $2b$ or $2a$, a cost of 04 to 31 and 53 "
        "more characters, 60 in all (make one with htpasswd -nBC 10 \"\" | tr -d ':\\n')");
  check("basic_auth_users:\n  alice: " + Hash() + "\n  alice: " + Hash() + "\n",
        "line 3: basic_auth_users.alice: given twice");
  check("basic_auth_users:\n  \"a:b\": " + Hash() + "\n",
        "line 2: basic_auth_users.a:b: a user name can not contain ':' (basic auth could never send it)");
  check("basic_auth_users: [alice]\n", "line 1: basic_auth_users: expected a mapping");
  check("rate_limit:\n  interval: 1.5s\n  burst: 1\n",
        "line 2: rate_limit.interval: invalid duration \"1.5s\"");
  check("rate_limit:\n  interval: 1s\n", "line 2: rate_limit: burst 0 would refuse every request (give burst: 1 or more)");
  check("rate_limit:\n  interval: 1s\n  burst: -1\n", "line 3: rate_limit.burst: must not be negative");
}

TEST_F(WebConfigTest, LoadNamesTheFile) {
  Write("web.yml", "tls_server_config:\n  min_version: TLS9\n");
  auto c = LoadWebConfigFile(dir_ + "/web.yml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "web config file " + dir_ +
                                     "/web.yml: line 2: tls_server_config.min_version: unknown TLS version \"TLS9\" "
                                     "(one of TLS10, TLS11, TLS12, TLS13)");
  c = LoadWebConfigFile(dir_ + "/absent.yml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "web config file " + dir_ + "/absent.yml: open " + dir_ + "/absent.yml: No such file or directory");
}

// "Basic " + base64(user_pass).
std::string BasicHeader(const std::string& user_pass) {
  static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < user_pass.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(user_pass[i])) << 16;
    if (i + 1 < user_pass.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(user_pass[i + 1])) << 8;
    if (i + 2 < user_pass.size()) v |= static_cast<unsigned char>(user_pass[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < user_pass.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < user_pass.size() ? kB64[v & 63] : '=';
  }
  return "Basic " + out;
}

TEST(BasicAuthTest, RecognizesBcryptHashes) {
  EXPECT_TRUE(IsBcryptHash("$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));
  EXPECT_TRUE(IsBcryptHash("$2b$04$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));
  EXPECT_TRUE(IsBcryptHash("$2a$31$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));
  EXPECT_FALSE(IsBcryptHash("$2x$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));   // version
  EXPECT_FALSE(IsBcryptHash("$2y$03$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));   // cost
  EXPECT_FALSE(IsBcryptHash("$2y$32$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"));   // cost
  EXPECT_FALSE(IsBcryptHash("$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7z"));    // short
  EXPECT_FALSE(IsBcryptHash("$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7z+"));   // alphabet
  EXPECT_FALSE(IsBcryptHash("$6$saltsalt$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC"));  // sha512-crypt
  EXPECT_FALSE(IsBcryptHash(""));
}

TEST(BasicAuthTest, ParsesTheAuthorizationHeaderAsGo) {
  std::string u, p;
  auto f = [&](std::string_view header, bool ok, std::string_view user = "", std::string_view pass = "") {
    u = p = "-";
    EXPECT_EQ(ParseBasicAuth(header, &u, &p), ok) << header;
    if (ok) {
      EXPECT_EQ(u, user) << header;
      EXPECT_EQ(p, pass) << header;
    }
  };
  f("Basic YWxpY2U6cHc=", true, "alice", "pw");
  f("basic YWxpY2U6cHc=", true, "alice", "pw");
  f("BASIC YWxpY2U6cDpx", true, "alice", "p:q");  // the password may hold ':'
  f("Basic OnB3", true, "", "pw");
  f("Basic YWxpY2U=", false);       // no ':'
  f("Basic YWxpY2U6cHc", false);    // unpadded
  f("Basic YWxp!2U6cHc=", false);   // not base64
  f("Bearer YWxpY2U6cHc=", false);
  f("Basic", false);
  f("", false);
}

TEST(BasicAuthTest, ChecksPasswordsAndCachesOnlySuccesses) {
  auto hash = BcryptHash("correct horse", 4);
  ASSERT_TRUE(hash.ok());
  auto a = BasicAuth::Make({{"alice", *hash}}, "");
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto basic = [](std::string_view user, std::string_view pass) {
    return BasicHeader(std::string(user) + ":" + std::string(pass));
  };
  EXPECT_TRUE((*a)->enabled());
  EXPECT_FALSE((*a)->Check(""));
  EXPECT_EQ((*a)->bcrypt_runs(), 0u);  // no credentials: no bcrypt
  EXPECT_TRUE((*a)->Check(basic("alice", "correct horse")));
  EXPECT_EQ((*a)->bcrypt_runs(), 1u);
  for (int i = 0; i < 100; i++) ASSERT_TRUE((*a)->Check(basic("alice", "correct horse")));
  EXPECT_EQ((*a)->bcrypt_runs(), 1u);  // cached
  // A wrong password and an unknown user both cost a bcrypt, every time.
  EXPECT_FALSE((*a)->Check(basic("alice", "wrong")));
  EXPECT_FALSE((*a)->Check(basic("alice", "wrong")));
  EXPECT_FALSE((*a)->Check(basic("mallory", "correct horse")));
  EXPECT_FALSE((*a)->Check(basic("mallory", "correct horse")));
  EXPECT_EQ((*a)->bcrypt_runs(), 5u);
  EXPECT_FALSE((*a)->Check(basic("Alice", "correct horse")));
  EXPECT_FALSE((*a)->Check(basic("alice", "correct horsE")));
  EXPECT_FALSE((*a)->Check("Bearer x"));  // no internal token configured
}

TEST(BasicAuthTest, RefusesPasswordsBcryptWouldTruncate) {
  std::string pw72(72, 'p');
  auto hash = BcryptHash(pw72, 4);
  ASSERT_TRUE(hash.ok());
  auto a = BasicAuth::Make({{"u", *hash}}, "");
  ASSERT_TRUE(a.ok());
  auto basic = BasicHeader;
  EXPECT_TRUE((*a)->Check(basic("u:" + pw72)));
  // libxcrypt would read only the first 72 bytes, or up to the NUL: refused.
  EXPECT_FALSE((*a)->Check(basic("u:" + pw72 + "extra")));
  auto short_hash = BcryptHash("pw", 4);
  auto b = BasicAuth::Make({{"u", *short_hash}}, "");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE((*b)->Check(basic("u:pw")));
  EXPECT_FALSE((*b)->Check(basic(std::string("u:pw\0anything", 13))));
}

TEST(BasicAuthTest, AcceptsEveryBcryptPrefixAndTheInternalToken) {
  auto hash = BcryptHash("pw", 4);
  ASSERT_TRUE(hash.ok());
  ASSERT_TRUE(hash->starts_with("$2b$"));
  // htpasswd writes $2y$, older tools $2a$: the same algorithm.
  std::string y = "$2y$" + hash->substr(4), a2 = "$2a$" + hash->substr(4);
  auto a = BasicAuth::Make({{"b", *hash}, {"y", y}, {"a", a2}}, "token123");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_TRUE((*a)->Check("Basic Yjpwdw=="));  // b:pw
  EXPECT_TRUE((*a)->Check("Basic eTpwdw=="));  // y:pw
  EXPECT_TRUE((*a)->Check("Basic YTpwdw=="));  // a:pw
  EXPECT_TRUE((*a)->Check("Bearer token123"));
  EXPECT_FALSE((*a)->Check("Bearer token12"));
  EXPECT_FALSE((*a)->Check("Bearer token1234"));
  EXPECT_FALSE((*a)->Check("bearer token123"));
}

TEST(BasicAuthTest, NoUsersLetsEveryRequestThrough) {
  auto a = BasicAuth::Make({}, "t");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE((*a)->enabled());
  EXPECT_TRUE((*a)->Check(""));
  EXPECT_TRUE((*a)->Check("Basic Zm9vOmJhcg=="));
}

TEST(BasicAuthTest, MakeRefusesWhatIsNotBcrypt) {
  auto a = BasicAuth::Make({{"u", "$6$x$y"}}, "");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message(), "basic_auth_users.u: not a bcrypt hash");
}

}  // namespace
}  // namespace trainwatch::http
