#pragma once
// How the command-line tools (query, logs, import, export, demo) reach a
// trainwatch server: one URL "http(s)://[user:password@]host[:port][/prefix]"
// and the same credentials as the Python and C++ clients, so a server
// behind a web config or a tokens file (docs/security.md) is reached the
// same way from every tool:
//   - the URL's user and password (basic auth), else
//   - $TRAINWATCH_TOKEN (Authorization: Bearer), else
//   - $TRAINWATCH_USERNAME and $TRAINWATCH_PASSWORD (basic auth);
//   - https: the server certificate is verified against $TRAINWATCH_CA_FILE
//     when set, else the system's CAs.

#include <httplib.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "common/url.h"

namespace trainwatch::app {

struct ApiClient {
  std::unique_ptr<httplib::Client> http;
  std::string prefix;    // the URL's path, without a trailing '/': put before every API path
  std::string display;   // the URL with its password replaced by "xxxxx", for messages
};

// InvalidArgument naming the URL (its password hidden) when it is not an
// http or https URL with a host.
Result<ApiClient> NewApiClient(const std::string& url);

// `url` with the password of its userinfo replaced by "xxxxx".
using common::RedactUrl;

}  // namespace trainwatch::app
