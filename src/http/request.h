#pragma once
// The HTTP request and response as handlers see them: plain structs with no
// dependency on the HTTP library, so handlers are tested without a socket.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainwatch::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query string
  // Query-string parameters, then form-body parameters (POST
  // application/x-www-form-urlencoded), in order; names may repeat (match[]).
  std::vector<std::pair<std::string, std::string>> params;
  std::string_view body;     // decompressed body; valid during the call
  std::string content_type;  // Content-Type header
  std::string accept;        // Accept header
  int64_t receive_time_ms = 0;

  // The first value of `name`, or empty.
  std::string_view Param(std::string_view name) const;
  bool Has(std::string_view name) const;
  // Every value of `name`, in order.
  std::vector<std::string_view> Params(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra response headers (e.g. Cache-Control), in order.
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed instead: each call appends the next chunk
  // to *chunk; kError aborts the connection so the client sees a truncated
  // body rather than a silently short one.
  enum class Chunk { kMore, kDone, kError };
  std::function<Chunk(std::string* chunk)> stream;
};

// Appends the decoded pairs of "a=1&b=%20x+y" to *out ('+' is a space).
void ParseQueryString(std::string_view qs, std::vector<std::pair<std::string, std::string>>* out);
// Percent-decodes `s`; '+' becomes a space when `plus_is_space`.
std::string UrlDecode(std::string_view s, bool plus_is_space);

}  // namespace trainwatch::http
