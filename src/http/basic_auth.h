#pragma once
// HTTP basic authentication against bcrypt hashes (a web config's
// basic_auth_users), verified with libxcrypt. bcrypt is slow by design
// (~50 ms at cost 10), so verified credentials are cached: a dashboard's
// many requests cost one bcrypt. Unknown users are checked against a
// dummy hash of the same cost, so a wrong user and a wrong password take
// the same path and the same time.

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/mutex.h"
#include "base/status.h"

namespace trainwatch::http {

// True for a bcrypt hash crypt(3) verifies: "$2a$", "$2b$" or "$2y$", a
// two-digit cost 04..31, "$", 53 characters of bcrypt's base64: 60 in all.
bool IsBcryptHash(std::string_view hash);

// A bcrypt hash of `password` at `cost` (4..31) with a random salt; for the
// dummy hash and tests. IOError when libxcrypt refuses.
Result<std::string> BcryptHash(std::string_view password, int cost);

// Splits an Authorization header "Basic base64(user:password)" (scheme in
// any case, as Go's Request.BasicAuth); false when it is not one.
bool ParseBasicAuth(std::string_view authorization, std::string* user, std::string* password);

// Thread-safe.
class BasicAuth {
 public:
  static constexpr size_t kCacheMax = 1024;  // verified (user, password) pairs remembered

  // `users`: name -> bcrypt hash (IsBcryptHash). `internal_token`: also
  // accepted as "Authorization: Bearer <token>" (the server's own
  // self-scrape); empty: none. InvalidArgument for a hash that is not bcrypt.
  static Result<std::unique_ptr<BasicAuth>> Make(std::map<std::string, std::string> users,
                                                 std::string internal_token);

  // False when no users are configured: every request passes.
  bool enabled() const { return !users_.empty(); }
  // True when `authorization` (the header's value) names a user and that
  // user's password, or carries the internal token.
  bool Check(std::string_view authorization);
  // bcrypt verifications run so far (cache misses); for tests.
  size_t bcrypt_runs();

 private:
  BasicAuth() = default;
  bool Verify(std::string_view password, const std::string& hash);

  std::map<std::string, std::string> users_;
  std::string dummy_hash_;      // for unknown users: the highest cost of users_
  std::string internal_token_;  // empty: none
  base::Mutex cache_mu_;
  std::unordered_set<std::string> cache_ TW_GUARDED_BY(cache_mu_);  // SHA-256 of user NUL password, verified
  // One bcrypt at a time, as exporter-toolkit: a flood of wrong passwords
  // costs at most one core.
  base::Mutex bcrypt_mu_;
  size_t bcrypt_runs_ TW_GUARDED_BY(bcrypt_mu_) = 0;
};

}  // namespace trainwatch::http
