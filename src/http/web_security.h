#pragma once
// The web config in force (--web.config.file, http/web_config.h): the TLS
// context new connections handshake with, the basic auth users every
// request is checked against, the headers added to every response and the
// rate limit. Load reads the file at start; Reload (SIGHUP, POST /-/reload)
// re-reads it and swaps the whole config at once, or keeps the running one
// when the new file is bad. Thread-safe.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/web_config.h"

namespace trainwatch::http {

namespace internal {
class TlsContext;
}

class WebSecurity {
 public:
  // Reads `path` (which must not be empty); the error names the file, the
  // line and the field. Logs what is on and the file's warnings.
  static Result<std::shared_ptr<WebSecurity>> Load(const std::string& path);
  ~WebSecurity();

  // Re-reads the file. On an error the running config stays. TLS is on or
  // off for the process's life (as in Prometheus): a file that would turn
  // it on or off is refused; certificates and every other setting change.
  Status Reload();

  const std::string& path() const { return path_; }
  bool tls() const { return tls_; }
  // The current config requires a client certificate of every connection.
  bool requires_client_cert() const;
  // A random bearer token for this process only (never written anywhere),
  // accepted in place of a password: trainwatch's own self-scrape.
  const std::string& self_token() const { return self_token_; }

  // For a new connection: the TLS context to handshake with (null: plain).
  std::shared_ptr<const internal::TlsContext> tls_context() const;

  enum class Verdict { kServe, kUnauthorized, kRateLimited };
  // Checks one request by its Authorization header (empty when absent) and
  // the rate limit; *headers gets the configured response headers, which
  // every answer carries, a refusal too.
  Verdict Check(std::string_view authorization, std::vector<std::pair<std::string, std::string>>* headers) const;

 private:
  struct State;
  WebSecurity() = default;
  Result<std::shared_ptr<State>> MakeState(const WebConfig& c) const;
  std::shared_ptr<State> Current() const;

  std::string path_;
  bool tls_ = false;
  std::string self_token_;
  mutable std::mutex mu_;
  std::shared_ptr<State> state_;  // GUARDED_BY(mu_); replaced whole on reload
};

}  // namespace trainwatch::http
