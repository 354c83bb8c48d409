#pragma once
// The web config in force (--web.config.file, http/web_config.h): the TLS
// context new connections handshake with, the basic auth users every
// request is checked against, the headers added to every response and the
// rate limit; and the bearer tokens with their roles (--web.tokens.file,
// http/tokens.h). Load reads the files at start; Reload (SIGHUP, POST
// /-/reload) re-reads them and swaps the whole config at once, or keeps the
// running one when a new file is bad. Thread-safe.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "http/tokens.h"
#include "http/web_config.h"

namespace trainwatch::http {

namespace internal {
class TlsContext;
}

class WebSecurity {
 public:
  // Reads the web config `path` and the tokens file `tokens_path` (either
  // may be empty, not both); the error names the file, the line and the
  // field. Logs what is on and the files' warnings.
  static Result<std::shared_ptr<WebSecurity>> Load(const std::string& path, const std::string& tokens_path = "");
  ~WebSecurity();

  // Re-reads the file. On an error the running config stays. TLS is on or
  // off for the process's life (as in Prometheus): a file that would turn
  // it on or off is refused; certificates and every other setting change.
  Status Reload();

  // The web config's path (empty: none, tokens only), else the tokens file's.
  const std::string& path() const { return path_.empty() ? tokens_path_ : path_; }
  bool tls() const { return tls_; }
  // The current config requires a client certificate of every connection.
  bool requires_client_cert() const;
  // A random bearer token for this process only (never written anywhere),
  // accepted in place of a password: trainwatch's own self-scrape.
  const std::string& self_token() const { return self_token_; }

  // For a new connection: the TLS context to handshake with (null: plain).
  std::shared_ptr<const internal::TlsContext> tls_context() const;

  enum class Verdict { kServe, kUnauthorized, kForbidden, kRateLimited };
  struct Request {
    std::string_view authorization;  // the Authorization header; empty when absent
    std::string_view method, path;   // for the role a token needs (http/tokens.h)
  };
  // Checks one request by its credentials and the rate limit: a basic auth
  // user, or a bearer token whose role covers the request (kForbidden, with
  // *why, when it does not). Without users and tokens every request passes.
  // *headers gets the configured response headers, which every answer
  // carries, a refusal too.
  Verdict Check(const Request& req, std::vector<std::pair<std::string, std::string>>* headers,
                std::string* why = nullptr) const;
  // The WWW-Authenticate challenge of a 401: Basic when there are users.
  std::string Challenge() const;

 private:
  struct State;
  WebSecurity() = default;
  Result<std::shared_ptr<State>> MakeState(const WebConfig& c, std::vector<Token> tokens) const;
  // Reads both files (the absent one as empty).
  Result<std::pair<WebConfig, std::vector<Token>>> ReadFiles() const;
  std::shared_ptr<State> Current() const;

  std::string path_, tokens_path_;
  bool tls_ = false;
  std::string self_token_;
  mutable base::Mutex mu_;
  std::shared_ptr<State> state_ TW_GUARDED_BY(mu_);  // replaced whole on reload
};

}  // namespace trainwatch::http
