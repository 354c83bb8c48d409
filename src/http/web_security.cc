#include "http/web_security.h"

#include <openssl/rand.h>

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "http/basic_auth.h"
#include "http/tls.h"

namespace trainwatch::http {

struct WebSecurity::State {
  std::shared_ptr<const internal::TlsContext> tls;
  std::unique_ptr<BasicAuth> auth;
  std::vector<std::pair<std::string, std::string>> headers;
  // rate_limit as a token bucket (Go's rate.Limiter): `burst` tokens, one
  // more every interval.
  int64_t interval_ns = 0;  // 0: no limit
  double burst = 0;
  std::mutex rate_mu;
  double tokens = 0;       // GUARDED_BY(rate_mu)
  int64_t last_ns = 0;     // GUARDED_BY(rate_mu): when `tokens` was computed

  bool Allow() {
    if (interval_ns <= 0) return true;
    std::lock_guard<std::mutex> l(rate_mu);
    int64_t now = MonoNanos();
    tokens = std::min(burst, tokens + static_cast<double>(now - last_ns) / static_cast<double>(interval_ns));
    last_ns = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

namespace {

std::string Summary(const WebConfig& c, const std::string& path) {
  std::string s = "web config file " + path + ": TLS " + (c.tls.enabled ? "on" : "off");
  s += ", basic auth " + (c.users.empty() ? std::string("off")
                                          : "on for " + std::to_string(c.users.size()) +
                                                (c.users.size() == 1 ? " user" : " users"));
  if (!c.headers.empty()) s += ", " + std::to_string(c.headers.size()) + " response headers";
  if (c.rate_limit_interval_ms > 0) s += ", rate limited";
  return s;
}

}  // namespace

WebSecurity::~WebSecurity() = default;

Result<std::shared_ptr<WebSecurity::State>> WebSecurity::MakeState(const WebConfig& c) const {
  auto st = std::make_shared<State>();
  if (c.tls.enabled) {
    auto t = internal::TlsContext::Make(c.tls);
    if (!t.ok()) return t.error().Annotate("web config file " + path_);
    st->tls = std::move(*t);
  }
  auto a = BasicAuth::Make(c.users, self_token_);
  if (!a.ok()) return a.error().Annotate("web config file " + path_);
  st->auth = std::move(*a);
  st->headers = c.headers;
  st->interval_ns = c.rate_limit_interval_ms * 1000000;
  st->burst = static_cast<double>(c.rate_limit_burst);
  st->tokens = st->burst;
  st->last_ns = MonoNanos();
  return st;
}

Result<std::shared_ptr<WebSecurity>> WebSecurity::Load(const std::string& path) {
  std::shared_ptr<WebSecurity> w(new WebSecurity());
  w->path_ = path;
  unsigned char r[32];
  if (RAND_bytes(r, sizeof r) != 1) return Status::IOError("web config: no random bytes for the self-scrape token");
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : r) {
    w->self_token_ += kHex[c >> 4];
    w->self_token_ += kHex[c & 15];
  }
  ASSIGN_OR_RETURN(WebConfig c, LoadWebConfigFile(path));
  w->tls_ = c.tls.enabled;
  ASSIGN_OR_RETURN(w->state_, w->MakeState(c));
  for (const std::string& warning : c.warnings) TW_LOG(Warn, "web config file {}: {}", path, warning);
  TW_LOG(Info, "{}", Summary(c, path));
  return w;
}

Status WebSecurity::Reload() {
  ASSIGN_OR_RETURN(WebConfig c, LoadWebConfigFile(path_));
  if (c.tls.enabled != tls_) {
    return Status::InvalidArgument("web config file " + path_ + ": it turns TLS " + (tls_ ? "off" : "on") +
                                   ", which needs a restart; kept the running web config");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<State> st, MakeState(c));
  {
    std::lock_guard<std::mutex> l(mu_);
    state_ = std::move(st);
  }
  for (const std::string& warning : c.warnings) TW_LOG(Warn, "web config file {}: {}", path_, warning);
  TW_LOG(Info, "reloaded {}", Summary(c, path_));
  return Status::OK();
}

std::shared_ptr<WebSecurity::State> WebSecurity::Current() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

bool WebSecurity::requires_client_cert() const {
  std::shared_ptr<State> st = Current();
  if (st->tls == nullptr) return false;
  ClientAuth a = st->tls->client_auth();
  return a == ClientAuth::kRequireAnyClientCert || a == ClientAuth::kRequireAndVerifyClientCert;
}

std::shared_ptr<const internal::TlsContext> WebSecurity::tls_context() const { return Current()->tls; }

WebSecurity::Verdict WebSecurity::Check(std::string_view authorization,
                                        std::vector<std::pair<std::string, std::string>>* headers) const {
  std::shared_ptr<State> st = Current();
  *headers = st->headers;
  // As exporter-toolkit: the rate limit first, then the credentials.
  if (!st->Allow()) return Verdict::kRateLimited;
  return st->auth->Check(authorization) ? Verdict::kServe : Verdict::kUnauthorized;
}

}  // namespace trainwatch::http
