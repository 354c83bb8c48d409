#include "http/origin.h"

#include <gtest/gtest.h>

namespace trainwatch::http {
namespace {

std::optional<std::string> Check(std::string_view method, std::string_view sfs, std::string_view origin,
                                 std::string_view host = "127.0.0.1:9800", std::string_view fwd = "") {
  return CrossSiteRefusal(OriginHeaders{method, sfs, origin, host, fwd});
}

TEST(OriginTest, ReadsAndNonBrowsersAlwaysPass) {
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(Check(m, "cross-site", "http://evil.example"));
  EXPECT_FALSE(Check("POST", "", ""));  // curl, Prometheus, the clients
  EXPECT_FALSE(Check("DELETE", "", ""));
}

TEST(OriginTest, SecFetchSiteDecidesWhereBrowsersSendIt) {
  EXPECT_FALSE(Check("POST", "same-origin", "http://127.0.0.1:9800"));
  EXPECT_FALSE(Check("POST", "none", ""));  // typed in the address bar, a bookmark
  // same-origin wins even when a proxy rewrote Host.
  EXPECT_FALSE(Check("DELETE", "same-origin", "https://tw.example.com", "127.0.0.1:9800"));
  auto r = Check("POST", "cross-site", "http://evil.example");
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("Sec-Fetch-Site is \"cross-site\""), std::string::npos) << *r;
  EXPECT_TRUE(Check("PUT", "same-site", "http://other.127.0.0.1.nip.io:9800"));  // another port or subdomain
}

TEST(OriginTest, OriginMustNameThisServer) {
  EXPECT_FALSE(Check("POST", "", "http://127.0.0.1:9800"));
  EXPECT_FALSE(Check("POST", "", "HTTP://LocalHost:9800", "localhost:9800"));
  EXPECT_FALSE(Check("POST", "", "http://tw.example.com", "tw.example.com:80"));  // default ports
  EXPECT_FALSE(Check("POST", "", "https://tw.example.com", "tw.example.com"));
  EXPECT_FALSE(Check("POST", "", "http://[::1]:9800", "[::1]:9800"));
  EXPECT_FALSE(Check("POST", "", "https://tw.example.com", "127.0.0.1:9800", "tw.example.com"));
  EXPECT_FALSE(Check("POST", "", "https://b.example", "127.0.0.1:9800", "a.example, b.example"));
  auto r = Check("POST", "", "http://127.0.0.1:3000");  // another port: another origin
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("Origin \"http://127.0.0.1:3000\" is not this server (Host \"127.0.0.1:9800\")"), std::string::npos)
      << *r;
  EXPECT_TRUE(Check("POST", "", "null"));  // a sandboxed frame or a file: page
  EXPECT_TRUE(Check("DELETE", "", "http://evil.example", "127.0.0.1:9800", "tw.example.com"));
  EXPECT_TRUE(Check("POST", "", "http://127.0.0.1:9800", ""));
}

}  // namespace
}  // namespace trainwatch::http
