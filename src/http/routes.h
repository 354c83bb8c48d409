#pragma once
// The one table of every HTTP route trainwatch serves (routes.cc): its
// methods, path pattern, the `handler` label of the request metrics, the
// role a bearer token needs, whether agent mode serves it, whether
// --web.enable-admin-api gates it and its body limit. Api::Route dispatches
// from it, RequiredRole (tokens.h) reads roles from it, and docs/security.md's
// route table is checked against it (routes_test.cc). Immutable: thread-safe.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "http/request.h"
#include "http/tokens.h"

namespace trainwatch::http {

class Api;

// Method bits. kGet stands for GET and HEAD together (HEAD is served
// wherever GET is); kOther is any other method (OPTIONS, PATCH, ...).
enum Method : uint8_t {
  kGet = 1,
  kPost = 2,
  kPut = 4,
  kDelete = 8,
  kOther = 16,
  kAnyMethod = 31,
};
uint8_t MethodBit(std::string_view method);

// What bounds a route's request body.
enum class BodyLimit : uint8_t {
  kNone,     // reads no body (GET only)
  kServer,   // --web.max-request-body-bytes, as received and gzip-decoded (ServerOptions.max_body_bytes)
  kDecoded,  // that, and also the body it decodes itself (snappy) and its series and samples (ApiDeps.request_limits)
};

struct Route {
  // Exact ("/api/v1/query"); ":x" matches one non-empty segment, "*x" a
  // non-empty run that may hold '/', and a final "/*" any rest (a
  // sub-router's other paths, which it answers 404 itself). An exact
  // pattern wins over the others, which are tried in table order.
  std::string_view path;
  uint8_t methods;           // those it serves; others get 405
  std::string_view handler;  // the `handler` label of the request metrics
  // The role its methods need: GET, HEAD and OPTIONS need read and the
  // methods it does not serve write, except on admin routes (admin for all).
  Role role;
  bool agent = false;  // served in agent mode (`trainwatch agent`, no TSDB); else 503
  bool admin = false;  // 503 "admin APIs disabled" without --web.enable-admin-api
  BodyLimit limit = BodyLimit::kNone;
  // Exactly one of these serves it, or neither (404). `serve`: Api::Route
  // sets the handler label and answers 405 itself; `router`: a sub-router
  // (api_runs.cc, api_logs.cc, ...) that parses the path, sets the label
  // and answers 404 and 405 itself, in its own order.
  Response (Api::*serve)(const Request&) = nullptr;
  Response (Api::*router)(const Request&, std::string_view* handler) = nullptr;
  // When set, the route takes the request only if it says so (the
  // Elasticsearch banner at "/" for non-browsers; the UI's own paths).
  bool (*when)(std::string_view method, std::string_view path, std::string_view accept) = nullptr;
  // A push (samples, log lines, a run's batches): its POST and PUT pass the
  // ingest gate (http/ingest_gate.h), bounded by memory and concurrency.
  bool push = false;
};

// Every route, in table order.
std::span<const Route> Routes();
// Whether `path` matches `pattern` (the syntax of Route::path).
bool PathMatches(std::string_view pattern, std::string_view path);
// The route that takes the request, or null (404). `accept`: the Accept
// header; "" for RequiredRole, which has none.
const Route* FindRoute(std::string_view method, std::string_view path, std::string_view accept);

// The route table as docs/security.md lists it: one Markdown row per route
// ("| `/api/v1/query` | GET, POST | read | agent |").
std::string RoutesMarkdown();

}  // namespace trainwatch::http
