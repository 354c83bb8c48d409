// The route table (routes.h): RequiredRole's answers pinned as they were
// before the table existed, the table's own invariants, and the route table
// of docs/security.md, which must be the table's.

#include "http/routes.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "http/api.h"
#include "http/tokens.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

// RequiredRole for GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH (r, w, a),
// recorded from tokens.cc's own path classification at c17acef, run on
// these paths before it was replaced by the table.
TEST(RoutesTest, RequiredRoleKeepsItsAnswers) {
  static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
  struct Case {
    std::string_view path, roles;
  };
  static constexpr Case kCases[] = {
      {"/", "rrwwwrw"},
      {"/index.html", "rrwwwrw"},
      {"/assets/app.js", "rrwwwrw"},
      {"/assets/_bulk", "rrwwwrw"},
      {"/runs/abc", "rrwwwrw"},
      {"/compare", "rrwwwrw"},
      {"/explore/x", "rrwwwrw"},
      {"/nope", "rrwwwrw"},
      {"/-/healthy", "rrwwwrw"},
      {"/-/ready", "rrwwwrw"},
      {"/-/reload", "aaaaaaa"},
      {"/-/reload/", "rrwwwrw"},
      {"/-/quit", "rrwwwrw"},
      {"/metrics", "rrwwwrw"},
      {"/federate", "rrwwwrw"},
      {"/api/v1/query", "rrrwwrw"},
      {"/api/v1/query_range", "rrrwwrw"},
      {"/api/v1/query_exemplars", "rrrwwrw"},
      {"/api/v1/format_query", "rrrwwrw"},
      {"/api/v1/labels", "rrrwwrw"},
      {"/api/v1/series", "rrrwwrw"},
      {"/api/v1/export", "rrrwwrw"},
      {"/api/v1/read", "rrrwwrw"},
      {"/api/v1/write", "rrwwwrw"},
      {"/api/v1/import/prometheus", "rrwwwrw"},
      {"/api/v1/otlp/v1/metrics", "rrwwwrw"},
      {"/api/v1/label/job/values", "rrrwwrw"},
      {"/api/v1/label/a/b/values", "rrrwwrw"},
      {"/api/v1/label//values", "rrwwwrw"},
      {"/api/v1/label/values", "rrwwwrw"},
      {"/api/v1/label/job/valuesx", "rrwwwrw"},
      {"/api/v1/status/buildinfo", "rrwwwrw"},
      {"/api/v1/status/tsdb", "rrwwwrw"},
      {"/api/v1/status/security", "rrwwwrw"},
      {"/api/v1/status/config", "rrwwwrw"},
      {"/api/v1/targets", "rrwwwrw"},
      {"/api/v1/targets/metadata", "rrwwwrw"},
      {"/api/v1/metadata", "rrwwwrw"},
      {"/api/v1/rules", "rrrwwrw"},
      {"/api/v1/alerts", "rrrwwrw"},
      {"/api/v1/notifications", "rrwwwrw"},
      {"/api/v1/admin/tsdb/flush", "aaaaaaa"},
      {"/api/v1/admin/tsdb/snapshot", "aaaaaaa"},
      {"/api/v1/admin/tsdb/delete_series", "aaaaaaa"},
      {"/api/v1/admin/", "aaaaaaa"},
      {"/api/v1/admin", "rrwwwrw"},
      {"/api/v1/adminx/tsdb/flush", "rrwwwrw"},
      {"/api/v1/runs", "rrwwwrw"},
      {"/api/v1/runs/", "rrwwwrw"},
      {"/api/v1/runs/metrics", "rrrwwrw"},
      {"/api/v1/runs/media", "rrwwwrw"},
      {"/api/v1/runs/media/keys", "rrwwwrw"},
      {"/api/v1/runs/histograms", "rrwwwrw"},
      {"/api/v1/runs/r1", "rrwwwrw"},
      {"/api/v1/runs/r1/history", "rrwwwrw"},
      {"/api/v1/runs/r1/batches", "rrwwwrw"},
      {"/api/v1/runs/r1/heartbeat", "rrwwwrw"},
      {"/api/v1/runs/r1/finish", "rrwwwrw"},
      {"/api/v1/runs/r1/alerts", "rrwwwrw"},
      {"/api/v1/runs/r1/actions/3", "rrwwwrw"},
      {"/api/v1/runs/r1/metrics", "rrwwwrw"},
      {"/api/v1/runs/r1/media/content", "rrwwwrw"},
      {"/api/v1/runs/r1/artifacts", "rrwwwrw"},
      {"/api/v1/runs/r1/artifacts/use", "rrwwwrw"},
      {"/api/v1/runs/r1/nope", "rrwwwrw"},
      {"/api/v1/artifacts", "rrwwwrw"},
      {"/api/v1/artifacts/7", "rrwwwrw"},
      {"/api/v1/artifacts/7/content", "rrwwwrw"},
      {"/api/v1/artifacts/7/nope", "rrwwwrw"},
      {"/api/v1/logs", "rrwwwrw"},
      {"/api/v1/logs/query", "rrrwwrw"},
      {"/api/v1/logs/histogram", "rrrwwrw"},
      {"/api/v1/logs/tail", "rrrwwrw"},
      {"/api/v1/logs/labels", "rrrwwrw"},
      {"/api/v1/logs/label/app/values", "rrwwwrw"},
      {"/api/v1/logs/nope", "rrwwwrw"},
      {"/_bulk", "rrwwwrw"},
      {"/myindex/_bulk", "rrwwwrw"},
      {"//_bulk", "rrwwwrw"},
      {"/a/b/_bulk", "rrwwwrw"},
      {"/loki/api/v1/push", "rrwwwrw"},
      {"/api/v2/alerts", "rrwwwrw"},
      {"/api/v2/alerts/groups", "rrwwwrw"},
      {"/api/v2/silences", "rrwwwrw"},
      {"/api/v2/silence/abc", "rrwwwrw"},
      {"/api/v2/status", "rrwwwrw"},
      {"/api/v2/receivers", "rrwwwrw"},
      {"/api/v2/nope", "rrwwwrw"},
      {"/api/v2/", "rrwwwrw"},
      {"/api/v1/query/", "rrwwwrw"},
      {"/API/V1/QUERY", "rrwwwrw"},
  };
  for (const Case& c : kCases) {
    std::string got;
    for (std::string_view m : kMethods) got += "rwa"[static_cast<int>(RequiredRole(m, c.path))];
    EXPECT_EQ(got, c.roles) << c.path;
  }
}

// Every route of the table: GET and POST read or write as its role says.
TEST(RoutesTest, RequiredRoleIsTheTablesRole) {
  for (const Route& r : Routes()) {
    if (r.when != nullptr || r.path.find('*') != std::string_view::npos || r.path.find(':') != std::string_view::npos) {
      continue;
    }
    Role post = RequiredRole("POST", r.path);
    if (r.role == Role::kAdmin) {
      EXPECT_EQ(RequiredRole("GET", r.path), Role::kAdmin) << r.path;
      EXPECT_EQ(post, Role::kAdmin) << r.path;
    } else {
      EXPECT_EQ(RequiredRole("GET", r.path), Role::kRead) << r.path;
      EXPECT_EQ(post, (r.methods & kPost) != 0 ? r.role : Role::kWrite) << r.path;
    }
  }
}

TEST(RoutesTest, TableIsConsistent) {
  std::set<std::string_view> paths;
  std::set<std::string_view> agent;
  for (const Route& r : Routes()) {
    EXPECT_TRUE(paths.insert(r.path).second) << "route given twice: " << r.path;
    EXPECT_TRUE(r.path.starts_with('/')) << r.path;
    EXPECT_FALSE(r.serve != nullptr && r.router != nullptr) << r.path;
    EXPECT_NE(r.methods, 0) << r.path;
    EXPECT_FALSE(r.handler.empty()) << r.path;
    // The admin gate covers /api/v1/admin/ and nothing else.
    EXPECT_EQ(r.admin, r.path.starts_with("/api/v1/admin/")) << r.path;
    if (r.admin) {
      EXPECT_EQ(r.role, Role::kAdmin) << r.path;
    }
    // A route that serves POST or PUT has a body limit, and only those.
    if (r.methods != kAnyMethod) {
      EXPECT_EQ((r.methods & (kPost | kPut)) != 0, r.limit != BodyLimit::kNone) << r.path;
    }
    // A route the table serves itself is labelled by its own path.
    if (r.serve != nullptr && r.path.find('*') == std::string_view::npos) {
      EXPECT_EQ(r.handler, r.path);
    }
    if (r.agent) agent.insert(r.path);
  }
  // Agent mode serves what it served before the table (api.cc's kAgent).
  EXPECT_EQ(agent, (std::set<std::string_view>{"/-/healthy", "/-/ready", "/metrics", "/api/v1/targets",
                                               "/api/v1/targets/metadata", "/api/v1/metadata",
                                               "/api/v1/status/buildinfo", "/-/reload"}));
}

TEST(RoutesTest, FindRoutePicksTheRoute) {
  auto f = [](std::string_view method, std::string_view path, std::string_view accept, std::string_view want) {
    const Route* r = FindRoute(method, path, accept);
    EXPECT_EQ(r == nullptr ? "<none>" : r->path, want) << method << " " << path;
  };
  f("GET", "/api/v1/query", "", "/api/v1/query");
  f("GET", "/api/v1/query/", "", "<none>");
  f("GET", "/api/v1/label/job/values", "", "/api/v1/label/*name/values");
  f("GET", "/api/v1/label/a/b/values", "", "/api/v1/label/*name/values");
  f("GET", "/api/v1/label//values", "", "<none>");
  f("GET", "/api/v1/runs/metrics", "", "/api/v1/runs/metrics");
  f("GET", "/api/v1/runs/r1", "", "/api/v1/runs/:id");
  f("POST", "/api/v1/runs/r1/actions/2", "", "/api/v1/runs/:id/actions/:n");
  f("POST", "/api/v1/runs/r1/actions/", "", "/api/v1/runs/*");
  f("GET", "/api/v1/runs/", "", "/api/v1/runs/*");
  f("POST", "/myindex/_bulk", "", "/:index/_bulk");
  f("POST", "/assets/_bulk", "", "/:index/_bulk");
  f("POST", "/a/b/_bulk", "", "<none>");
  f("POST", "//_bulk", "", "<none>");
  f("GET", "/", "", "/");
  f("GET", "/", "text/html,*/*", "/*");
  f("POST", "/", "", "/*");
  f("GET", "/compare", "text/html", "/*");
  f("GET", "/nope", "", "<none>");
  f("DELETE", "/api/v2/silence/a/b", "", "/api/v2/silence/*id");
  f("GET", "/api/v2/", "", "/api/v2/*");
  f("GET", "/api/v2", "", "<none>");
  f("PUT", "/api/v1/admin/tsdb/flush", "", "/api/v1/admin/tsdb/flush");
  f("GET", "/api/v1/admin/", "", "/api/v1/admin/*");
}

// Api::Route answers each route under the route's `handler` label (the
// sub-routers set it themselves; with no run store, log store, rules or
// notifier they still do), and none of them answers its first method 405.
TEST(RoutesTest, ApiCountsEachRouteUnderItsHandlerLabel) {
  tsdb::testing::TempDB db;
  promql::Engine engine{promql::EngineOptions{}};
  ApiDeps deps{db.get(), &engine, BuildInfo{"0.1.0", "abc", "main", "me", "today", "gcc"}};
  deps.enable_admin_api = true;
  Api api(std::move(deps));
  std::set<std::string> labels;
  for (const Route& r : Routes()) {
    if (r.path.ends_with("/*")) continue;  // the sub-routers' 404s
    std::string path;
    for (size_t i = 0; i < r.path.size(); i++) {
      if (r.path[i] != ':' && r.path[i] != '*') {
        path += r.path[i];
        continue;
      }
      path += "x1";
      while (i + 1 < r.path.size() && r.path[i + 1] != '/') i++;
    }
    Request req;
    req.method = (r.methods & kGet) != 0 ? "GET" : (r.methods & kPost) != 0 ? "POST" : "PUT";
    req.path = path;
    req.receive_time_ms = 1700000000000;
    if (r.path == "/api/v1/admin/tsdb/snapshot") continue;  // writes a snapshot; the label is checked in api_test
    Response resp = api.Handle(req);
    EXPECT_NE(resp.status, 405) << req.method << " " << path;
    labels.insert("handler=\"" + std::string(r.handler) + "\"");
  }
  Request m;
  m.method = "GET";
  m.path = "/metrics";
  std::string body = api.Handle(m).body;
  for (const std::string& l : labels) EXPECT_NE(body.find(l), std::string::npos) << l;
}

// docs/security.md lists the route table between two markers; it must be
// RoutesMarkdown()'s rows (the failure prints them, to paste).
TEST(RoutesTest, SecurityDocListsEveryRoute) {
  const char* src = std::getenv("TW_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "TW_SOURCE_DIR not set";
  std::ifstream in(std::string(src) + "/docs/security.md");
  ASSERT_TRUE(in) << "docs/security.md";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  constexpr std::string_view kBegin = "<!-- routes: begin (src/http/routes.cc; routes_test checks it) -->\n";
  constexpr std::string_view kEnd = "\n<!-- routes: end -->";  // after a blank line, which ends the table
  size_t b = doc.find(kBegin), e = doc.find(kEnd);
  ASSERT_NE(b, std::string::npos) << "docs/security.md: no route table marker";
  ASSERT_NE(e, std::string::npos);
  std::string table = doc.substr(b + kBegin.size(), e - b - kBegin.size());
  constexpr std::string_view kHeader = "| path | methods | role | agent mode |\n| --- | --- | --- | --- |\n";
  std::string want = std::string(kHeader) + RoutesMarkdown();
  if (table != want) ADD_FAILURE() << "docs/security.md's route table is not routes.cc's; it should read:\n" << want;
}

}  // namespace
}  // namespace trainwatch::http
