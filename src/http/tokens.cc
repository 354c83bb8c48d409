#include "http/tokens.h"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "base/file.h"
#include "common/yaml.h"
#include "http/routes.h"

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

using common::yaml::CheckKeys;
using common::yaml::Err;  // "line N: <field>: <message>", as every config file

}  // namespace

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kRead: return "read";
    case Role::kWrite: return "write";
    case Role::kAdmin: return "admin";
  }
  return "?";
}

// From the route table (routes.h): admin routes need admin whatever the
// method; GET, HEAD and OPTIONS need read; a method the route serves needs
// its role; anything else (a path no route takes, a method it does not
// serve) needs write.
Role RequiredRole(std::string_view method, std::string_view path) {
  const Route* r = FindRoute(method, path, "");
  if (r != nullptr && r->role == Role::kAdmin) return Role::kAdmin;
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return Role::kRead;
  if (r != nullptr && (r->methods & MethodBit(method)) != 0) return r->role;
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
  RETURN_IF_ERROR(CheckKeys(root, "tokens file", {"tokens"}));
  YAML::Node list = root["tokens"];
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) return Err(list, "tokens", "expected a list");
  std::set<std::string> names, hashes;
  for (size_t i = 0; i < list.size(); i++) {
    const YAML::Node& e = list[i];
    std::string where = "tokens[" + std::to_string(i) + "]";
    if (!e.IsMap()) return Err(e, where, "expected a mapping with name, role and sha256");
    RETURN_IF_ERROR(CheckKeys(e, where, {"name", "role", "sha256"}));
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
      } else {  // sha256: CheckKeys allowed no other key
        t.sha256 = v;
        bool hex = v.size() == 64;
        for (char c : v) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        if (!hex) {
          return Err(kv.second, field, "expected the token's SHA-256 as 64 lower-case hex digits, never the token "
                                       "itself (`trainwatch token add` writes it)");
        }
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
