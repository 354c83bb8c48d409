#include "app/token_cmd.h"

#include <iostream>

#include "base/file.h"
#include "base/json.h"
#include "http/tokens.h"

namespace trainwatch::app {

Result<std::string> AddToken(const TokenAddOptions& o) {
  if (o.role != "read" && o.role != "write" && o.role != "admin") {
    return Status::InvalidArgument("--role: \"" + o.role + "\": expected read, write or admin");
  }
  if (o.name.empty()) return Status::InvalidArgument("--name: must not be empty");
  std::string text;
  std::vector<http::Token> had;
  if (file::Exists(o.file)) {
    if (Status s = file::ReadFile(o.file, &text); !s.ok()) return s;
    ASSIGN_OR_RETURN(had, http::LoadTokensFile(o.file));
    for (const http::Token& t : had) {
      if (t.name == o.name) return Status::InvalidArgument("tokens file " + o.file + ": a token named \"" + o.name + "\" is already there");
    }
  }
  ASSIGN_OR_RETURN(std::string token, http::NewToken());
  std::string entry = "  - {name: ";
  AppendJsonString(&entry, o.name);  // a JSON string is a YAML double-quoted scalar
  entry += ", role: " + o.role + ", sha256: " + http::Sha256Hex(token) + "}\n";
  // Appended, so the file's comments and layout stay; when the file does
  // not end in its block list of tokens, it is written anew.
  std::string appended = text;
  if (!appended.empty() && appended.back() != '\n') appended += '\n';
  if (had.empty() && appended.find("tokens:") == std::string::npos) appended += "tokens:\n";
  appended += entry;
  auto check = http::ParseTokens(appended);
  if (!check.ok() || check->size() != had.size() + 1 || check->back().name != o.name) {
    appended = "# trainwatch bearer tokens (--web.tokens.file): SHA-256 hashes only (docs/security.md).\n"
               "# Add one with: trainwatch token add --file FILE --name NAME --role read|write|admin\ntokens:\n";
    for (const http::Token& t : had) {
      appended += "  - {name: ";
      AppendJsonString(&appended, t.name);
      appended += ", role: " + std::string(http::RoleName(t.role)) + ", sha256: " + t.sha256 + "}\n";
    }
    appended += entry;
  }
  RETURN_IF_ERROR(file::WriteFileAtomic(o.file, appended));
  return token;
}

int RunTokenAdd(const TokenAddOptions& o) {
  auto token = AddToken(o);
  if (!token.ok()) {
    std::cerr << "trainwatch token add: " << token.error().message() << "\n";
    return 1;
  }
  std::cout << *token << std::endl;
  std::cerr << "trainwatch token add: added token \"" << o.name << "\" (role " << o.role << ") to " << o.file
            << ". It is shown only this once: give it to its user as TRAINWATCH_TOKEN. A server with "
               "--web.tokens.file "
            << o.file << " takes it at its next reload (SIGHUP or POST /-/reload).\n";
  return 0;
}

}  // namespace trainwatch::app
