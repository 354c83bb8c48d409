#include "http/tokens.h"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "base/file.h"
#include "common/yaml.h"

namespace trainwatch::http {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* p, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; i++) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

using common::yaml::Err;  // "line N: <field>: <message>", as every config file

// POSTs that only read: queries and lookups, which Prometheus, Loki and the
// UI send as forms when a GET's URL would be too long.
bool ReadOnlyPost(std::string_view p) {
  static constexpr std::string_view kPaths[] = {
      "/api/v1/query",        "/api/v1/query_range",   "/api/v1/query_exemplars", "/api/v1/format_query",
      "/api/v1/labels",       "/api/v1/series",        "/api/v1/export",          "/api/v1/runs/metrics",
      "/api/v1/logs/query",   "/api/v1/logs/histogram", "/api/v1/logs/tail",      "/api/v1/logs/labels",
      "/api/v1/rules",        "/api/v1/alerts",         "/api/v1/read",
  };
  for (std::string_view k : kPaths) {
    if (p == k) return true;
  }
  constexpr std::string_view kLabel = "/api/v1/label/", kValues = "/values";
  return p.size() > kLabel.size() + kValues.size() && p.starts_with(kLabel) && p.ends_with(kValues);
}

}  // namespace

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kRead: return "read";
    case Role::kWrite: return "write";
    case Role::kAdmin: return "admin";
  }
  return "?";
}

Role RequiredRole(std::string_view method, std::string_view path) {
  if (path.starts_with("/api/v1/admin/") || path == "/-/reload") return Role::kAdmin;
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return Role::kRead;
  if (method == "POST" && ReadOnlyPost(path)) return Role::kRead;
  return Role::kWrite;
}

std::string Sha256Hex(std::string_view s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  return Hex(d, sizeof d);
}

Result<std::string> NewToken() {
  unsigned char r[24];
  if (RAND_bytes(r, sizeof r) != 1) return Status::IOError("no random bytes for a token");
  return "tw_" + Hex(r, sizeof r);
}

Result<std::vector<Token>> ParseTokens(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  std::vector<Token> out;
  if (!root || root.IsNull()) return out;
  if (!root.IsMap()) return Err(root, "tokens file", "expected a mapping with a `tokens:` list");
  for (const auto& kv : root) {
    if (!kv.first.IsScalar() || kv.first.Scalar() != "tokens") {
      return Err(kv.first, "tokens file", "unknown field \"" + (kv.first.IsScalar() ? kv.first.Scalar() : "?") +
                                              "\" (the only field is tokens)");
    }
  }
  YAML::Node list = root["tokens"];
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) return Err(list, "tokens", "expected a list");
  std::set<std::string> names, hashes;
  for (size_t i = 0; i < list.size(); i++) {
    const YAML::Node& e = list[i];
    std::string where = "tokens[" + std::to_string(i) + "]";
    if (!e.IsMap()) return Err(e, where, "expected a mapping with name, role and sha256");
    Token t;
    bool has_role = false;
    for (const auto& kv : e) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      std::string field = where + "." + key;
      if (!kv.second.IsScalar()) return Err(kv.second, field, "expected a string");
      const std::string& v = kv.second.Scalar();
      if (key == "name") {
        t.name = v;
      } else if (key == "role") {
        has_role = true;
        if (v == "read") {
          t.role = Role::kRead;
        } else if (v == "write") {
          t.role = Role::kWrite;
        } else if (v == "admin") {
          t.role = Role::kAdmin;
        } else {
          return Err(kv.second, field, "unknown role \"" + v + "\" (read, write or admin)");
        }
      } else if (key == "sha256") {
        t.sha256 = v;
        bool hex = v.size() == 64;
        for (char c : v) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        if (!hex) {
          return Err(kv.second, field, "expected the token's SHA-256 as 64 lower-case hex digits, never the token "
                                       "itself (`trainwatch token add` writes it)");
        }
      } else {
        return Err(kv.first, where, "unknown field \"" + key + "\" (the fields are name, role, sha256)");
      }
    }
    if (t.name.empty()) return Err(e, where + ".name", "missing");
    if (!has_role) return Err(e, where + ".role", "missing (read, write or admin)");
    if (t.sha256.empty()) return Err(e, where + ".sha256", "missing");
    if (!names.insert(t.name).second) return Err(e, where + ".name", "\"" + t.name + "\" given twice");
    if (!hashes.insert(t.sha256).second) return Err(e, where + ".sha256", "the same token given twice");
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<Token>> LoadTokensFile(const std::string& path) {
  std::string text;
  if (Status s = file::ReadFile(path, &text); !s.ok()) return s.Annotate("tokens file " + path);
  auto t = ParseTokens(text);
  if (!t.ok()) return t.error().Annotate("tokens file " + path);
  return t;
}

}  // namespace trainwatch::http
