#include "common/url.h"

#include <gtest/gtest.h>

namespace trainwatch::common {
namespace {

TEST(UrlTest, SplitsEveryPart) {
  auto u = Url::Parse("https://user:secret@example.com:9443/api/v1/write?x=1&y=2#frag");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->userinfo, "user:secret");
  EXPECT_EQ(u->host, "example.com:9443");
  EXPECT_EQ(u->Hostname(), "example.com");
  EXPECT_EQ(u->Port(), "9443");
  EXPECT_EQ(u->path, "/api/v1/write");
  EXPECT_EQ(u->query, "x=1&y=2");
  EXPECT_EQ(u->fragment, "frag");
  EXPECT_EQ(u->Base(), "https://example.com:9443");
  EXPECT_EQ(u->RequestUri(), "/api/v1/write?x=1&y=2");
  EXPECT_EQ(u->String(), "https://user:secret@example.com:9443/api/v1/write?x=1&y=2#frag");
  EXPECT_EQ(u->Redacted(), "https://user:xxxxx@example.com:9443/api/v1/write?x=1&y=2#frag");
}

TEST(UrlTest, NoPathMeansSlashOnTheRequestLine) {
  auto u = Url::Parse("http://127.0.0.1:9093");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->path, "");
  EXPECT_EQ(u->RequestUri(), "/");
  EXPECT_EQ(u->String(), "http://127.0.0.1:9093");
  auto q = Url::Parse("http://h?a=b");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->host, "h");
  EXPECT_EQ(q->RequestUri(), "/?a=b");
  auto e = Url::Parse("http://h/p?");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->has_query);
  EXPECT_EQ(e->String(), "http://h/p?");
}

TEST(UrlTest, Ipv6HostsKeepTheirBrackets) {
  auto u = Url::Parse("http://[::1]:9090/metrics");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "[::1]:9090");
  EXPECT_EQ(u->Hostname(), "::1");
  EXPECT_EQ(u->Port(), "9090");
  auto n = Url::Parse("http://[fe80::1]/x");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->Hostname(), "fe80::1");
  EXPECT_EQ(n->Port(), "");
}

TEST(UrlTest, RedactsOnlyAPassword) {
  EXPECT_EQ(RedactUrl("http://user@h/p"), "http://user@h/p");
  EXPECT_EQ(RedactUrl("http://user:pw@h/p"), "http://user:xxxxx@h/p");
  EXPECT_EQ(RedactUrl("http://h/p"), "http://h/p");
  EXPECT_EQ(RedactUrl("not a url"), "not a url");
  EXPECT_EQ(RedactUrl("http://u:pw@host:bad port/"), "http://u:xxxxx@host:bad port/");  // does not parse
  EXPECT_EQ(RedactUrl("u:pw@host:9800"), "u:xxxxx@host:9800");  // no scheme
  // The last '@' ends the userinfo, as in Go (a password may hold '@').
  EXPECT_EQ(RedactUrl("http://u:p@ss@h/"), "http://u:xxxxx@h/");
}

TEST(UrlTest, ErrorsNameTheProblem) {
  auto expect = [](std::string_view url, std::string_view want) {
    auto u = Url::Parse(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find(want), std::string::npos) << u.status().message();
  };
  expect("example.com/metrics", "no scheme");
  expect("://example.com", "no scheme");
  expect("ht tp://x", "space or control character");
  expect("1http://x", "invalid character in scheme");
  expect("http://", "no host");
  expect("http:///path", "no host");
  expect("http://user@:80/", "no host");
  expect("http://host:port/", "invalid port \":port\" after host");
  expect("http://h/a\nb", "control character");
}

}  // namespace
}  // namespace trainwatch::common
