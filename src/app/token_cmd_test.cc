#include "app/token_cmd.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "app/api_client.h"
#include "base/file.h"
#include "http/tokens.h"

namespace trainwatch::app {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(TokenCmdTest, AddsHashesOnlyAndKeepsTheFilesText) {
  std::string path = ::testing::TempDir() + "/tw_token_cmd_test.yml";
  (void)file::RemoveAll(path);
  auto a = AddToken({path, "training \"jobs\"", "write"});
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto t = http::LoadTokensFile(path);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].name, "training \"jobs\"");
  EXPECT_EQ((*t)[0].role, http::Role::kWrite);
  EXPECT_EQ((*t)[0].sha256, http::Sha256Hex(*a));
  EXPECT_EQ(Read(path).find(*a), std::string::npos) << "the token itself is never written";
  // A comment of the user's stays; the next token is appended.
  std::ofstream(path, std::ios::app) << "  # the dashboards' one follows\n";
  auto b = AddToken({path, "grafana", "read"});
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  EXPECT_NE(*a, *b);
  EXPECT_NE(Read(path).find("# the dashboards' one follows"), std::string::npos) << Read(path);
  t = http::LoadTokensFile(path);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].role, http::Role::kRead);
  // A file whose list is not last is written anew, the tokens kept.
  std::ofstream(path) << "tokens:\n  - {name: a, role: admin, sha256: " << http::Sha256Hex("x") << "}\n# end\n...\n";
  auto c = AddToken({path, "b", "admin"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  t = http::LoadTokensFile(path);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "a");
  EXPECT_EQ((*t)[1].name, "b");
  // Refusals.
  auto dup = AddToken({path, "a", "read"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message().find("a token named \"a\" is already there"), std::string::npos);
  EXPECT_FALSE(AddToken({path, "c", "root"}).ok());
  std::ofstream(path) << "tokens:\n  - {name: a, role: root, sha256: " << http::Sha256Hex("x") << "}\n";
  auto bad = AddToken({path, "c", "read"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("line 2: tokens[0].role"), std::string::npos) << bad.error().message();
  (void)file::RemoveAll(path);
}

TEST(ApiClientTest, UrlsAndRedaction) {
  auto c = NewApiClient("http://user:s%40cret@127.0.0.1:9800/tw/");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->prefix, "/tw");
  EXPECT_EQ(c->display, "http://user:xxxxx@127.0.0.1:9800/tw/");
  EXPECT_EQ(RedactUrl("https://a:b@h:1"), "https://a:xxxxx@h:1");
  EXPECT_EQ(RedactUrl("http://h:1/p"), "http://h:1/p");
  EXPECT_TRUE(NewApiClient("https://h").ok());
  auto bad = NewApiClient("ftp://u:pw@h");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message().find("pw"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(NewApiClient("http://").ok());
}

}  // namespace
}  // namespace trainwatch::app
