#include "http/tokens.h"

#include <gtest/gtest.h>

#include <fstream>

#include "http/web_security.h"

namespace trainwatch::http {
namespace {

TEST(TokensTest, RolesByMethodAndPath) {
  // Reads: every GET, and the POSTs that only read.
  for (const char* p : {"/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels",
                        "/api/v1/label/job/values", "/api/v1/export", "/api/v1/runs/metrics", "/api/v1/logs/query",
                        "/api/v1/format_query", "/api/v1/query_exemplars"}) {
    EXPECT_EQ(RequiredRole("POST", p), Role::kRead) << p;
    EXPECT_EQ(RequiredRole("GET", p), Role::kRead) << p;
  }
  for (const char* p : {"/", "/metrics", "/federate", "/api/v1/runs", "/api/v2/silences", "/-/healthy", "/runs/x"}) {
    EXPECT_EQ(RequiredRole("GET", p), Role::kRead) << p;
  }
  // Writes: pushes and changes.
  for (const char* p : {"/api/v1/write", "/api/v1/import/prometheus", "/api/v1/runs", "/api/v1/runs/r1/batches",
                        "/api/v1/runs/r1/finish", "/api/v1/logs", "/loki/api/v1/push", "/_bulk", "/x/_bulk",
                        "/api/v2/alerts", "/api/v2/silences", "/api/v1/label/job", "/api/v1/querysomething"}) {
    EXPECT_EQ(RequiredRole("POST", p), Role::kWrite) << p;
  }
  EXPECT_EQ(RequiredRole("DELETE", "/api/v2/silence/abc"), Role::kWrite);
  EXPECT_EQ(RequiredRole("PUT", "/api/v1/query"), Role::kWrite);  // only POST forms read
  // Admin: the admin API and reloads, whatever the method.
  for (const char* m : {"GET", "POST", "PUT"}) {
    EXPECT_EQ(RequiredRole(m, "/api/v1/admin/tsdb/flush"), Role::kAdmin);
    EXPECT_EQ(RequiredRole(m, "/-/reload"), Role::kAdmin);
  }
}

TEST(TokensTest, ParseAndErrorsNameLineAndField) {
  std::string h = Sha256Hex("tw_secret");
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  auto t = ParseTokens("tokens:\n  - name: jobs\n    role: write\n    sha256: " + h + "\n  - {name: ro, role: read, sha256: " +
                       Sha256Hex("x") + "}\n");
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "jobs");
  EXPECT_EQ((*t)[0].role, Role::kWrite);
  EXPECT_EQ((*t)[0].sha256, h);
  EXPECT_EQ((*t)[1].role, Role::kRead);
  EXPECT_TRUE(ParseTokens("").ok());
  EXPECT_TRUE(ParseTokens("tokens: []\n").ok());
  struct Bad {
    std::string yaml, want;
  };
  for (const Bad& b : std::vector<Bad>{
           {"tokens:\n  - name: a\n    role: root\n    sha256: " + h + "\n", "line 3: tokens[0].role: unknown role \"root\""},
           {"tokens:\n  - name: a\n    role: read\n    sha256: tw_secret\n", "line 4: tokens[0].sha256: expected the token's SHA-256"},
           {"tokens:\n  - name: a\n    role: read\n", "tokens[0].sha256: missing"},
           {"tokens:\n  - role: read\n    sha256: " + h + "\n", "tokens[0].name: missing"},
           {"tokens:\n  - name: a\n    sha256: " + h + "\n", "tokens[0].role: missing"},
           {"tokens:\n  - {name: a, role: read, sha256: " + h + "}\n  - {name: a, role: read, sha256: " + Sha256Hex("y") +
                "}\n",
            "line 3: tokens[1].name: \"a\" given twice"},
           {"tokens:\n  - {name: a, role: read, sha256: " + h + "}\n  - {name: b, role: read, sha256: " + h + "}\n",
            "tokens[1].sha256: the same token given twice"},
           {"tokens:\n  - {name: a, role: read, sha256: " + h + ", token: x}\n", "tokens[0]: unknown field \"token\""},
           {"users: []\n", "line 1: tokens file: unknown field \"users\""},
           {"tokens:\n  - name: a\n    role: read\n    role: write\n    sha256: " + h + "\n",
            "line 4: tokens[0].role: given twice"},
           {"tokens: {a: b}\n", "line 1: tokens: expected a list"},
           {"tokens: [\n", "line 2:"},
       }) {
    auto r = ParseTokens(b.yaml);
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_NE(r.error().message().find(b.want), std::string::npos) << r.error().message() << "\nwant: " << b.want;
  }
}

TEST(TokensTest, NewTokensAreRandomAndHashed) {
  auto a = NewToken(), b = NewToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 51u);
  EXPECT_EQ(a->substr(0, 3), "tw_");
  EXPECT_NE(*a, *b);
}

// WebSecurity with a tokens file and no web config: every request needs a
// token whose role covers it; 403 says which role it lacks.
TEST(TokensTest, WebSecurityChecksRoles) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/tw_tokens_test.yml";
  std::ofstream(path) << "tokens:\n  - {name: ro, role: read, sha256: " << Sha256Hex("tw_r") << "}\n"
                      << "  - {name: jobs, role: write, sha256: " << Sha256Hex("tw_w") << "}\n"
                      << "  - {name: ops, role: admin, sha256: " << Sha256Hex("tw_a") << "}\n";
  auto w = WebSecurity::Load("", path);
  ASSERT_TRUE(w.ok()) << w.error().ToString();
  EXPECT_FALSE((*w)->tls());
  std::vector<std::pair<std::string, std::string>> headers;
  std::string why;
  auto check = [&](std::string_view auth, std::string_view method, std::string_view p) {
    why.clear();
    return (*w)->Check({auth, method, p}, &headers, &why);
  };
  using V = WebSecurity::Verdict;
  EXPECT_EQ(check("", "GET", "/api/v1/query"), V::kUnauthorized);
  EXPECT_EQ(check("Bearer tw_nope", "GET", "/api/v1/query"), V::kUnauthorized);
  EXPECT_EQ(check("Basic dXNlcjpwYXNz", "GET", "/api/v1/query"), V::kUnauthorized);
  EXPECT_EQ((*w)->Challenge(), "Bearer realm=\"trainwatch\"");
  EXPECT_EQ(check("Bearer tw_r", "GET", "/api/v1/query"), V::kServe);
  EXPECT_EQ(check("bearer tw_r", "POST", "/api/v1/query"), V::kServe);
  EXPECT_EQ(check("Bearer tw_r", "POST", "/api/v1/write"), V::kForbidden);
  EXPECT_EQ(why, "token \"ro\" has role read; POST /api/v1/write needs write");
  EXPECT_EQ(check("Bearer tw_w", "POST", "/api/v1/write"), V::kServe);
  EXPECT_EQ(check("Bearer tw_w", "POST", "/api/v1/runs/r/batches"), V::kServe);
  EXPECT_EQ(check("Bearer tw_w", "POST", "/api/v1/admin/tsdb/flush"), V::kForbidden);
  EXPECT_EQ(why, "token \"jobs\" has role write; POST /api/v1/admin/tsdb/flush needs admin");
  EXPECT_EQ(check("Bearer tw_a", "POST", "/api/v1/admin/tsdb/flush"), V::kServe);
  EXPECT_EQ(check("Bearer tw_a", "POST", "/-/reload"), V::kServe);
  // The self-scrape's own token reads and nothing more.
  const std::string self = "Bearer " + (*w)->self_token();
  EXPECT_EQ(check(self, "GET", "/metrics"), V::kServe);
  EXPECT_EQ(check(self, "POST", "/api/v1/write"), V::kForbidden);
  // A reload with a bad file keeps the running tokens; a good one replaces them.
  std::ofstream(path) << "tokens:\n  - {name: ro, role: superuser, sha256: " << Sha256Hex("tw_r") << "}\n";
  Status s = (*w)->Reload();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tokens file " + path + ": line 2: tokens[0].role: unknown role"), std::string::npos)
      << s.message();
  EXPECT_EQ(check("Bearer tw_w", "POST", "/api/v1/write"), V::kServe);
  std::ofstream(path) << "tokens:\n  - {name: ro, role: admin, sha256: " << Sha256Hex("tw_r") << "}\n";
  ASSERT_TRUE((*w)->Reload().ok());
  EXPECT_EQ(check("Bearer tw_w", "POST", "/api/v1/write"), V::kUnauthorized);
  EXPECT_EQ(check("Bearer tw_r", "POST", "/api/v1/write"), V::kServe);
  // Every token revoked: everything is locked, not opened.
  std::ofstream(path) << "tokens: []\n";
  ASSERT_TRUE((*w)->Reload().ok());
  EXPECT_EQ(check("", "GET", "/api/v1/query"), V::kUnauthorized);
  EXPECT_EQ(check("Bearer tw_r", "GET", "/api/v1/query"), V::kUnauthorized);
  EXPECT_FALSE(WebSecurity::Load("", dir + "/tw_no_such_tokens.yml").ok());
}

}  // namespace
}  // namespace trainwatch::http
