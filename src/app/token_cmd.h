#pragma once
// `trainwatch token add --file F --name N --role read|write|admin`: a new
// bearer token for --web.tokens.file (http/tokens.h). The token is printed
// once on stdout; the file gets only its SHA-256. An existing file keeps its
// text and comments (the entry is appended), and a server reads it on its
// next reload (SIGHUP or POST /-/reload).

#include <string>

#include "base/status.h"

namespace trainwatch::app {

struct TokenAddOptions {
  std::string file;
  std::string name;
  std::string role;  // read, write or admin
};

// Adds a token named o.name with role o.role to the tokens file (created
// when missing) and returns the token. InvalidArgument for a bad role, a
// name already there or a file that does not parse (its line and field).
Result<std::string> AddToken(const TokenAddOptions& o);

int RunTokenAdd(const TokenAddOptions& o);

}  // namespace trainwatch::app
