#include "http/web_security.h"

#include <openssl/rand.h>

#include <openssl/crypto.h>

#include <algorithm>
#include <unordered_map>

#include "base/ascii.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mutex.h"
#include "http/basic_auth.h"
#include "http/tls.h"

namespace trainwatch::http {

struct WebSecurity::State {
  std::shared_ptr<const internal::TlsContext> tls;
  std::unique_ptr<BasicAuth> auth;
  std::unordered_map<std::string, Token> bearer;  // --web.tokens.file's, by SHA-256 hex
  std::vector<std::pair<std::string, std::string>> headers;
  // rate_limit as a token bucket (Go's rate.Limiter): `burst` tokens, one
  // more every interval.
  int64_t interval_ns = 0;  // 0: no limit
  double burst = 0;
  base::Mutex rate_mu;
  double tokens TW_GUARDED_BY(rate_mu) = 0;
  int64_t last_ns TW_GUARDED_BY(rate_mu) = 0;  // when `tokens` was computed

  bool Allow() {
    if (interval_ns <= 0) return true;
    base::MutexLock l(&rate_mu);
    int64_t now = MonoNanos();
    tokens = std::min(burst, tokens + static_cast<double>(now - last_ns) / static_cast<double>(interval_ns));
    last_ns = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

namespace {

std::string Summary(const WebConfig& c, const std::string& path, size_t tokens, const std::string& tokens_path) {
  std::string s = (path.empty() ? std::string("no web config file") : "web config file " + path) + ": TLS " +
                  (c.tls.enabled ? "on" : "off");
  s += ", basic auth " + (c.users.empty() ? std::string("off")
                                          : "on for " + std::to_string(c.users.size()) +
                                                (c.users.size() == 1 ? " user" : " users"));
  if (!c.headers.empty()) s += ", " + std::to_string(c.headers.size()) + " response headers";
  if (c.rate_limit_interval_ms > 0) s += ", rate limited";
  if (!tokens_path.empty()) s += ", " + std::to_string(tokens) + " bearer tokens from " + tokens_path;
  return s;
}

}  // namespace

WebSecurity::~WebSecurity() = default;

Result<std::shared_ptr<WebSecurity::State>> WebSecurity::MakeState(const WebConfig& c, std::vector<Token> tokens) const {
  auto st = std::make_shared<State>();
  for (Token& t : tokens) {
    std::string key = t.sha256;
    st->bearer.emplace(std::move(key), std::move(t));
  }
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
  {
    base::MutexLock l(&st->rate_mu);  // not shared yet; for the analysis
    st->tokens = st->burst;
    st->last_ns = MonoNanos();
  }
  return st;
}

Result<std::pair<WebConfig, std::vector<Token>>> WebSecurity::ReadFiles() const {
  std::pair<WebConfig, std::vector<Token>> out;
  if (!path_.empty()) { ASSIGN_OR_RETURN(out.first, LoadWebConfigFile(path_)); }
  if (!tokens_path_.empty()) { ASSIGN_OR_RETURN(out.second, LoadTokensFile(tokens_path_)); }
  return out;
}

Result<std::shared_ptr<WebSecurity>> WebSecurity::Load(const std::string& path, const std::string& tokens_path) {
  if (path.empty() && tokens_path.empty()) return Status::InvalidArgument("web security: neither a web config nor a tokens file");
  std::shared_ptr<WebSecurity> w(new WebSecurity());
  w->path_ = path;
  w->tokens_path_ = tokens_path;
  unsigned char r[32];
  if (RAND_bytes(r, sizeof r) != 1) return Status::IOError("web config: no random bytes for the self-scrape token");
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : r) {
    w->self_token_ += kHex[c >> 4];
    w->self_token_ += kHex[c & 15];
  }
  ASSIGN_OR_RETURN(auto files, w->ReadFiles());
  const WebConfig& c = files.first;
  w->tls_ = c.tls.enabled;
  size_t n = files.second.size();
  ASSIGN_OR_RETURN(auto state, w->MakeState(c, std::move(files.second)));
  {
    base::MutexLock l(&w->mu_);  // not shared yet; for the analysis
    w->state_ = std::move(state);
  }
  for (const std::string& warning : c.warnings) TW_LOG(Warn, "web config file {}: {}", path, warning);
  TW_LOG(Info, "{}", Summary(c, path, n, tokens_path));
  return w;
}

Status WebSecurity::Reload() {
  ASSIGN_OR_RETURN(auto files, ReadFiles());
  const WebConfig& c = files.first;
  if (c.tls.enabled != tls_) {
    return Status::InvalidArgument("web config file " + path_ + ": it turns TLS " + (tls_ ? "off" : "on") +
                                   ", which needs a restart; kept the running web config");
  }
  size_t n = files.second.size();
  ASSIGN_OR_RETURN(std::shared_ptr<State> st, MakeState(c, std::move(files.second)));
  {
    base::MutexLock l(&mu_);
    state_ = std::move(st);
  }
  for (const std::string& warning : c.warnings) TW_LOG(Warn, "web config file {}: {}", path_, warning);
  TW_LOG(Info, "reloaded {}", Summary(c, path_, n, tokens_path_));
  return Status::OK();
}

std::shared_ptr<WebSecurity::State> WebSecurity::Current() const {
  base::MutexLock l(&mu_);
  return state_;
}

bool WebSecurity::requires_client_cert() const {
  std::shared_ptr<State> st = Current();
  if (st->tls == nullptr) return false;
  ClientAuth a = st->tls->client_auth();
  return a == ClientAuth::kRequireAnyClientCert || a == ClientAuth::kRequireAndVerifyClientCert;
}

std::shared_ptr<const internal::TlsContext> WebSecurity::tls_context() const { return Current()->tls; }

WebSecurity::Verdict WebSecurity::Check(const Request& req, std::vector<std::pair<std::string, std::string>>* headers,
                                        std::string* why) const {
  std::shared_ptr<State> st = Current();
  *headers = st->headers;
  // As exporter-toolkit: the rate limit first, then the credentials.
  if (!st->Allow()) return Verdict::kRateLimited;
  // Open only with neither users nor a tokens file: a tokens file emptied
  // (every token revoked) locks everything, it does not open it.
  if (!st->auth->enabled() && tokens_path_.empty()) return Verdict::kServe;
  std::string_view a = req.authorization;
  constexpr std::string_view kBearer = "bearer ";
  if (a.size() > kBearer.size() && StartsWithIgnoreCase(a, kBearer)) {
    std::string_view token = a.substr(kBearer.size());
    // The self-scrape's: reads /metrics, nothing else.
    if (token.size() == self_token_.size() && CRYPTO_memcmp(token.data(), self_token_.data(), token.size()) == 0) {
      if (RequiredRole(req.method, req.path) == Role::kRead) return Verdict::kServe;
      if (why != nullptr) *why = "the self-scrape token only reads";
      return Verdict::kForbidden;
    }
    // A hash lookup: the SHA-256 of a wrong token tells nothing of a right one.
    auto it = st->bearer.find(Sha256Hex(token));
    if (it != st->bearer.end()) {
      Role need = RequiredRole(req.method, req.path);
      if (it->second.role >= need) return Verdict::kServe;
      if (why != nullptr) {
        *why = "token \"" + it->second.name + "\" has role " + std::string(RoleName(it->second.role)) + "; " +
               std::string(req.method) + " " + std::string(req.path) + " needs " + std::string(RoleName(need));
      }
      return Verdict::kForbidden;
    }
    return Verdict::kUnauthorized;
  }
  // Basic auth users may do everything, as in Prometheus.
  return st->auth->enabled() && st->auth->Check(a) ? Verdict::kServe : Verdict::kUnauthorized;
}

std::string WebSecurity::Challenge() const {
  return Current()->auth->enabled() ? "Basic" : "Bearer realm=\"trainwatch\"";
}

}  // namespace trainwatch::http
