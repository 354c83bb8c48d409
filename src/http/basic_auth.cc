#include "http/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>

#include "base/ascii.h"
#include "base/mutex.h"

namespace trainwatch::http {
namespace {

constexpr std::string_view kBcryptAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
// bcrypt reads at most 72 bytes of a password; libxcrypt stops at a NUL.
constexpr size_t kBcryptMaxPassword = 72;

int Cost(std::string_view hash) { return (hash[4] - '0') * 10 + (hash[5] - '0'); }

// Standard base64 with padding, strictly (as Go's base64.StdEncoding).
bool DecodeBase64(std::string_view in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); i++) {
    char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') {
      // Only at the end: one or two, and the bits they cover are zero.
      size_t pad = in.size() - i;
      if (pad > 2 || in.substr(i).find_first_not_of('=') != std::string_view::npos) return false;
      return (acc & ((1u << bits) - 1)) == 0;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
      acc &= (1u << bits) - 1;
    }
  }
  return true;
}

std::string Sha256(std::string_view user, std::string_view password) {
  std::string in;
  in.reserve(user.size() + 1 + password.size());
  in.append(user).push_back('\0');
  in.append(password);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(in.data(), in.size(), md, &n, EVP_sha256(), nullptr) != 1) n = 0;
  OPENSSL_cleanse(in.data(), in.size());
  return std::string(reinterpret_cast<const char*>(md), n);
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

bool IsBcryptHash(std::string_view h) {
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' ||
      h[6] != '$') {
    return false;
  }
  if (h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9') return false;
  int cost = Cost(h);
  if (cost < 4 || cost > 31) return false;
  return h.substr(7).find_first_not_of(kBcryptAlphabet) == std::string_view::npos;
}

Result<std::string> BcryptHash(std::string_view password, int cost) {
  if (cost < 4 || cost > 31) return Status::InvalidArgument("bcrypt cost " + std::to_string(cost) + ": not in 4..31");
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, setting, sizeof setting) == nullptr) {
    return Status::IOError("bcrypt: crypt_gensalt_rn refused $2b$");
  }
  auto data = std::make_unique<crypt_data>();
  std::string pw(password);
  const char* h = crypt_rn(pw.c_str(), setting, data.get(), sizeof(crypt_data));
  OPENSSL_cleanse(pw.data(), pw.size());
  if (h == nullptr || !IsBcryptHash(h)) return Status::IOError("bcrypt: crypt_rn failed");
  return std::string(h);
}

bool ParseBasicAuth(std::string_view authorization, std::string* user, std::string* password) {
  constexpr std::string_view kPrefix = "basic ";
  if (!StartsWithIgnoreCase(authorization, kPrefix)) return false;
  std::string decoded;
  if (!DecodeBase64(authorization.substr(kPrefix.size()), &decoded)) return false;
  size_t colon = decoded.find(':');
  if (colon == std::string::npos) {
    OPENSSL_cleanse(decoded.data(), decoded.size());
    return false;
  }
  *user = decoded.substr(0, colon);
  *password = decoded.substr(colon + 1);
  OPENSSL_cleanse(decoded.data(), decoded.size());
  return true;
}

Result<std::unique_ptr<BasicAuth>> BasicAuth::Make(std::map<std::string, std::string> users,
                                                   std::string internal_token) {
  std::unique_ptr<BasicAuth> a(new BasicAuth());
  int cost = 0;
  for (const auto& [user, hash] : users) {
    if (!IsBcryptHash(hash)) return Status::InvalidArgument("basic_auth_users." + user + ": not a bcrypt hash");
    cost = std::max(cost, Cost(hash));
  }
  if (!users.empty()) {
    // Random password, never used: only its cost matters.
    unsigned char r[16];
    if (RAND_bytes(r, sizeof r) != 1) return Status::IOError("basic auth: no random bytes for the dummy hash");
    std::string pw;
    for (unsigned char c : r) pw += kBcryptAlphabet[c % kBcryptAlphabet.size()];
    ASSIGN_OR_RETURN(a->dummy_hash_, BcryptHash(pw, cost));
  }
  a->users_ = std::move(users);
  a->internal_token_ = std::move(internal_token);
  return a;
}

bool BasicAuth::Verify(std::string_view password, const std::string& hash) {
  // A password bcrypt would read only in part (past 72 bytes, or up to a
  // NUL) fails, after the same work as any other.
  const bool usable = password.size() <= kBcryptMaxPassword && password.find('\0') == std::string_view::npos;
  std::string pw = usable ? std::string(password) : std::string();
  auto data = std::make_unique<crypt_data>();
  const char* got = crypt_rn(pw.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  OPENSSL_cleanse(pw.data(), pw.size());
  bool ok = usable && got != nullptr && ConstantTimeEqual(got, hash);
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return ok;
}

bool BasicAuth::Check(std::string_view authorization) {
  if (users_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (!internal_token_.empty() && authorization.starts_with(kBearer)) {
    return ConstantTimeEqual(authorization.substr(kBearer.size()), internal_token_);
  }
  std::string user, password;
  if (!ParseBasicAuth(authorization, &user, &password)) return false;
  auto it = users_.find(user);
  // A wrong user takes the path of a wrong password: a cache miss, then a
  // bcrypt of the same cost.
  const std::string& hash = it != users_.end() ? it->second : dummy_hash_;
  std::string key = Sha256(user, password);
  auto cached = [&] {
    base::MutexLock l(&cache_mu_);
    return !key.empty() && cache_.contains(key);
  };
  bool ok = false;
  if (cached()) {
    ok = true;
  } else {
    base::MutexLock b(&bcrypt_mu_);
    // Concurrent first requests of one dashboard: one of them pays.
    if (cached()) {
      ok = true;
    } else {
      bcrypt_runs_++;
      ok = Verify(password, hash) && it != users_.end();
      if (ok && !key.empty()) {
        base::MutexLock l(&cache_mu_);
        if (cache_.size() >= kCacheMax) cache_.erase(cache_.begin());
        cache_.insert(key);
      }
    }
  }
  OPENSSL_cleanse(password.data(), password.size());
  return ok;
}

size_t BasicAuth::bcrypt_runs() {
  base::MutexLock b(&bcrypt_mu_);
  return bcrypt_runs_;
}

}  // namespace trainwatch::http
