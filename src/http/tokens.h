#pragma once
// Bearer tokens for machines (--web.tokens.file): training jobs, CI,
// dashboards. Each token has a role; the file holds only each token's
// SHA-256 (tokens are 192 random bits, so a fast hash is as safe as a slow
// one and costs nothing per request). `trainwatch token add` makes one.
//
//   tokens:
//     - name: training-jobs        # for logs and errors; unique
//       role: write                # read | write | admin
//       sha256: 3f1c...            # 64 hex digits: SHA-256 of the token
//
// Roles nest: read (every GET, and POSTs that only read: queries, series,
// export, log and run-metric queries), write (read, plus every push and
// change: remote_write, import, runs, logs, alerts, silences), admin (write,
// plus /api/v1/admin/* and /-/reload); each route's is in routes.h's table.
// Basic auth users of the web config are admins, as in Prometheus, where a
// user may do everything.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::http {

enum class Role { kRead = 0, kWrite = 1, kAdmin = 2 };
std::string_view RoleName(Role r);

struct Token {
  std::string name;
  Role role = Role::kRead;
  std::string sha256;  // lower-case hex
};

// The role a request needs, by method and path: its route's (routes.h); a
// path no route takes needs read for GET, HEAD and OPTIONS, else write.
Role RequiredRole(std::string_view method, std::string_view path);

// Parses a tokens file's YAML; errors are "line N: <field>: <why>".
Result<std::vector<Token>> ParseTokens(std::string_view yaml);
// Reads and parses the file; errors are prefixed "tokens file <path>: ".
Result<std::vector<Token>> LoadTokensFile(const std::string& path);

// SHA-256 of `s`, lower-case hex.
std::string Sha256Hex(std::string_view s);
// A new token: "tw_" and 48 hex digits (192 random bits).
Result<std::string> NewToken();

}  // namespace trainwatch::http
