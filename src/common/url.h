#pragma once

// One URL type for every module that is handed a URL in a config file or on
// the command line (scrape targets, remote_write/read, Alertmanagers,
// notification receivers, log forwarders, the CLIs' --server, templates'
// external URL): split once, here, the way Go's net/url splits the absolute
// URLs Prometheus's configs hold, instead of a find("://") in each module.

#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch::common {

// scheme://[userinfo@]host[:port][/path][?query][#fragment]
struct Url {
  std::string scheme;    // as written ("http", "https", ...)
  std::string userinfo;  // "user" or "user:password"; empty: none
  std::string host;      // host[:port] as written, an IPv6 address in brackets
  std::string path;      // empty or starting with '/'
  std::string query;     // after '?', without it
  std::string fragment;  // after '#', without it
  bool has_query = false;

  // An absolute URL. The error names what is wrong: no scheme, a scheme with
  // characters Go refuses, no host, a port that is not a number, a space or
  // control character.
  static Result<Url> Parse(std::string_view s);

  // scheme://host: what an HTTP client connects to (no userinfo).
  std::string Base() const;
  // What goes on the request line: the path ("/" when empty) and ?query.
  std::string RequestUri() const;
  // The host without the port, an IPv6 address without its brackets.
  std::string Hostname() const;
  // The port, empty when the URL names none.
  std::string Port() const;
  // The URL again, as written.
  std::string String() const;
  // As Go's URL.Redacted: a password shown as "xxxxx".
  std::string Redacted() const;
};

// Go's URL.Redacted over a string that may not parse (or lacks its scheme):
// the string unchanged unless it holds user:password@.
std::string RedactUrl(std::string_view url);

}  // namespace trainwatch::common
