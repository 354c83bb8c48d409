#include "http/routes.h"

#include <vector>

#include "http/api.h"

namespace trainwatch::http {
namespace {

constexpr uint8_t kGetPost = kGet | kPost;
constexpr uint8_t kPostPut = kPost | kPut;
constexpr Role kR = Role::kRead, kW = Role::kWrite, kA = Role::kAdmin;
constexpr BodyLimit kNoBody = BodyLimit::kNone, kBody = BodyLimit::kServer, kDecoded = BodyLimit::kDecoded;
constexpr bool kPush = true;

bool IsExact(std::string_view pattern) { return pattern.find_first_of(":*") == std::string_view::npos; }

}  // namespace

uint8_t MethodBit(std::string_view m) {
  if (m == "GET" || m == "HEAD") return kGet;
  if (m == "POST") return kPost;
  if (m == "PUT") return kPut;
  if (m == "DELETE") return kDelete;
  return kOther;
}

// A friend of Api (api.h), so the table names its handlers.
std::span<const Route> Routes() {
  using A = Api;
  // A browser asking for "/" (Accept: text/html) gets the UI; other clients
  // the Elasticsearch banner, which log shippers check first.
  constexpr auto kNotBrowser = [](std::string_view m, std::string_view, std::string_view accept) {
    return (m == "GET" || m == "HEAD") && accept.find("text/html") == std::string_view::npos;
  };
  constexpr auto kUiPath = [](std::string_view, std::string_view p, std::string_view) { return A::UiServes(p); };
  // path, methods, handler label, role, agent, admin, body limit, serve, router, when, push.
  static const Route kRoutes[] = {
      {"/-/healthy", kGet, "/-/healthy", kR, true, false, kNoBody, &A::Healthy},
      {"/-/ready", kGet, "/-/ready", kR, true, false, kNoBody, &A::Ready},
      {"/-/reload", kPostPut, "/-/reload", kA, true, false, kBody, &A::Reload},
      {"/metrics", kGet, "/metrics", kR, true, false, kNoBody, &A::MetricsHandler},
      {"/federate", kGet, "/federate", kR, false, false, kNoBody, &A::Federate},
      // Pushes.
      {"/api/v1/import/prometheus", kPost, "/api/v1/import/prometheus", kW, false, false, kDecoded, &A::Import, nullptr, nullptr, kPush},
      {"/api/v1/write", kPost, "/api/v1/write", kW, false, false, kDecoded, &A::Write, nullptr, nullptr, kPush},
      {"/api/v1/otlp/v1/metrics", kPost, "/api/v1/otlp/v1/metrics", kW, false, false, kDecoded, &A::Otlp, nullptr, nullptr, kPush},
      {"/api/v1/read", kPost, "/api/v1/read", kR, false, false, kDecoded, &A::RemoteRead},
      // Queries: GET, or POST with a form when the URL would be too long.
      {"/api/v1/query", kGetPost, "/api/v1/query", kR, false, false, kBody, &A::Query},
      {"/api/v1/query_range", kGetPost, "/api/v1/query_range", kR, false, false, kBody, &A::QueryRange},
      {"/api/v1/query_exemplars", kGetPost, "/api/v1/query_exemplars", kR, false, false, kBody, &A::QueryExemplars},
      {"/api/v1/format_query", kGetPost, "/api/v1/format_query", kR, false, false, kBody, &A::FormatQuery},
      {"/api/v1/labels", kGetPost, "/api/v1/labels", kR, false, false, kBody, &A::Labels},
      {"/api/v1/label/*name/values", kGetPost, "/api/v1/label/:name/values", kR, false, false, kBody,
       &A::LabelValuesRoute},
      {"/api/v1/series", kGetPost, "/api/v1/series", kR, false, false, kBody, &A::Series},
      {"/api/v1/export", kGetPost, "/api/v1/export", kR, false, false, kBody, &A::Export},
      {"/api/v1/status/buildinfo", kGet, "/api/v1/status/buildinfo", kR, true, false, kNoBody, &A::BuildInfoHandler},
      {"/api/v1/status/tsdb", kGet, "/api/v1/status/tsdb", kR, false, false, kNoBody, &A::TsdbStatus},
      {"/api/v1/status/security", kGet, "/api/v1/status/security", kR, false, false, kNoBody, &A::SecurityStatus},
      {"/api/v1/targets", kGet, "/api/v1/targets", kR, true, false, kNoBody, &A::Targets},
      {"/api/v1/targets/metadata", kGet, "/api/v1/targets/metadata", kR, true, false, kNoBody, &A::TargetsMetadata},
      {"/api/v1/metadata", kGet, "/api/v1/metadata", kR, true, false, kNoBody, &A::Metadata},
      // The admin API (PUT too, as Prometheus's); its other paths are 404.
      {"/api/v1/admin/tsdb/flush", kPostPut, "/api/v1/admin/tsdb/flush", kA, false, true, kBody, &A::Flush},
      {"/api/v1/admin/tsdb/snapshot", kPostPut, "/api/v1/admin/tsdb/snapshot", kA, false, true, kBody, &A::Snapshot},
      {"/api/v1/admin/*", kAnyMethod, "other", kA, false, true, kNoBody},
      // Runs and artifacts (api_runs.cc, api_media.cc).
      {"/api/v1/runs", kGetPost, "/api/v1/runs", kW, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/runs/metrics", kGetPost, "/api/v1/runs/metrics", kR, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/runs/media", kGet, "/api/v1/runs/media", kR, false, false, kNoBody, nullptr, &A::Runs},
      {"/api/v1/runs/histograms", kGet, "/api/v1/runs/histograms", kR, false, false, kNoBody, nullptr, &A::Runs},
      {"/api/v1/runs/media/keys", kGet, "/api/v1/runs/media/keys", kR, false, false, kNoBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id", kGet, "/api/v1/runs/:id", kR, false, false, kNoBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id/history", kGet, "/api/v1/runs/:id/history", kR, false, false, kNoBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id/batches", kPost, "/api/v1/runs/:id/batches", kW, false, false, kBody, nullptr, &A::Runs,
       nullptr, kPush},
      {"/api/v1/runs/:id/heartbeat", kPost, "/api/v1/runs/:id/heartbeat", kW, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id/finish", kPost, "/api/v1/runs/:id/finish", kW, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id/alerts", kPost, "/api/v1/runs/:id/alerts", kW, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/runs/:id/actions/:n", kPost, "/api/v1/runs/:id/actions/:n", kW, false, false, kBody, nullptr,
       &A::Runs},
      {"/api/v1/runs/:id/media/content", kGet, "/api/v1/runs/:id/media/content", kR, false, false, kNoBody, nullptr,
       &A::Runs},
      {"/api/v1/runs/:id/artifacts", kGetPost, "/api/v1/runs/:id/artifacts", kW, false, false, kBody, nullptr,
       &A::Runs},
      {"/api/v1/runs/:id/artifacts/use", kPost, "/api/v1/runs/:id/artifacts/use", kW, false, false, kBody, nullptr,
       &A::Runs},
      {"/api/v1/runs/*", kAnyMethod, "other", kW, false, false, kBody, nullptr, &A::Runs},
      {"/api/v1/artifacts", kGet, "/api/v1/artifacts", kR, false, false, kNoBody, nullptr, &A::Artifacts},
      {"/api/v1/artifacts/:id", kGet, "/api/v1/artifacts/:id", kR, false, false, kNoBody, nullptr, &A::Artifacts},
      {"/api/v1/artifacts/:id/content", kGet | kPut | kDelete, "/api/v1/artifacts/:id/content", kW, false, false,
       kBody, nullptr, &A::Artifacts},
      {"/api/v1/artifacts/*", kAnyMethod, "other", kW, false, false, kBody, nullptr, &A::Artifacts},
      // Logs (api_logs.cc): native, Elasticsearch and Loki pushes, queries.
      {"/", kGet, "/ (elasticsearch)", kR, false, false, kNoBody, nullptr, &A::Logs, kNotBrowser},
      {"/_bulk", kPostPut, "/_bulk", kW, false, false, kBody, nullptr, &A::Logs, nullptr, kPush},
      {"/:index/_bulk", kPostPut, "/_bulk", kW, false, false, kBody, nullptr, &A::Logs, nullptr, kPush},
      {"/loki/api/v1/push", kPostPut, "/loki/api/v1/push", kW, false, false, kDecoded, nullptr, &A::Logs, nullptr,
       kPush},
      {"/api/v1/logs", kPostPut, "/api/v1/logs", kW, false, false, kBody, nullptr, &A::Logs, nullptr, kPush},
      {"/api/v1/logs/query", kGetPost, "/api/v1/logs/query", kR, false, false, kBody, nullptr, &A::Logs},
      {"/api/v1/logs/histogram", kGetPost, "/api/v1/logs/histogram", kR, false, false, kBody, nullptr, &A::Logs},
      {"/api/v1/logs/tail", kGetPost, "/api/v1/logs/tail", kR, false, false, kBody, nullptr, &A::Logs},
      {"/api/v1/logs/labels", kGetPost, "/api/v1/logs/labels", kR, false, false, kBody, nullptr, &A::Logs},
      {"/api/v1/logs/label/*name/values", kGet, "/api/v1/logs/label/:name/values", kR, false, false, kNoBody, nullptr,
       &A::Logs},
      {"/api/v1/logs/*", kAnyMethod, "other", kW, false, false, kBody, nullptr, &A::Logs},
      // Rules (api_rules.cc) and the embedded Alertmanager (api_alertmanager.cc).
      {"/api/v1/rules", kGetPost, "/api/v1/rules", kR, false, false, kBody, nullptr, &A::RulesApi},
      {"/api/v1/alerts", kGetPost, "/api/v1/alerts", kR, false, false, kBody, nullptr, &A::RulesApi},
      {"/api/v1/notifications", kGet, "/api/v1/notifications", kR, false, false, kNoBody, nullptr, &A::Alertmanager},
      {"/api/v2/alerts", kGetPost, "/api/v2/alerts", kW, false, false, kBody, nullptr, &A::Alertmanager},
      {"/api/v2/alerts/groups", kGet, "/api/v2/alerts/groups", kR, false, false, kNoBody, nullptr, &A::Alertmanager},
      {"/api/v2/silences", kGetPost, "/api/v2/silences", kW, false, false, kBody, nullptr, &A::Alertmanager},
      {"/api/v2/silence/*id", kGet | kDelete, "/api/v2/silence/:id", kW, false, false, kNoBody, nullptr,
       &A::Alertmanager},
      {"/api/v2/status", kGet, "/api/v2/status", kR, false, false, kNoBody, nullptr, &A::Alertmanager},
      {"/api/v2/receivers", kGet, "/api/v2/receivers", kR, false, false, kNoBody, nullptr, &A::Alertmanager},
      {"/api/v2/*", kAnyMethod, "/api/v2", kW, false, false, kBody, nullptr, &A::Alertmanager},
      // Last: the web UI's files and client routes (api_ui.cc), never an API path.
      {"/*", kGet, "/ui", kR, false, false, kNoBody, nullptr, &A::Ui, kUiPath},
  };
  return kRoutes;
}

bool PathMatches(std::string_view pat, std::string_view s) {
  while (!pat.empty()) {
    if (pat == "/*") return s.starts_with('/');
    if (pat[0] == ':' || pat[0] == '*') {
      const bool any = pat[0] == '*';
      std::string_view rest = pat.substr(std::min(pat.find('/'), pat.size()));
      for (size_t n = 1; n <= s.size(); n++) {
        if (!any && s[n - 1] == '/') break;
        if (PathMatches(rest, s.substr(n))) return true;
      }
      return false;
    }
    if (s.empty() || s[0] != pat[0]) return false;
    pat.remove_prefix(1);
    s.remove_prefix(1);
  }
  return s.empty();
}

const Route* FindRoute(std::string_view method, std::string_view path, std::string_view accept) {
  // The table split once into its exact paths and its patterns, each in
  // table order: a request (up to three lookups: the route, its role, the
  // ingest gate) then tests no route path for pattern syntax.
  struct Split {
    std::vector<const Route*> exact, patterns;
  };
  static const Split kSplit = [] {
    Split s;
    for (const Route& r : Routes()) (IsExact(r.path) ? s.exact : s.patterns).push_back(&r);
    return s;
  }();
  auto takes = [&](const Route& r) { return r.when == nullptr || r.when(method, path, accept); };
  for (const Route* r : kSplit.exact) {
    if (r->path == path && takes(*r)) return r;
  }
  for (const Route* r : kSplit.patterns) {
    if (PathMatches(r->path, path) && takes(*r)) return r;
  }
  return nullptr;
}

std::string RoutesMarkdown() {
  std::string out;
  for (const Route& r : Routes()) {
    out += "| `" + std::string(r.path) + "` | ";
    std::string m;
    for (auto [bit, name] : {std::pair{kGet, "GET"}, std::pair{kPost, "POST"}, std::pair{kPut, "PUT"},
                             std::pair{kDelete, "DELETE"}}) {
      if ((r.methods & bit) == 0) continue;
      if (!m.empty()) m += ", ";
      m += name;
    }
    if (r.methods == kAnyMethod) m = "any";
    out += m + " | " + std::string(RoleName(r.role)) + " | ";
    out += r.agent ? "yes" : "";
    out += " |\n";
  }
  return out;
}

}  // namespace trainwatch::http
