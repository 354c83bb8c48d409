#include "http/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

TEST(ServerTest, ServesOverTcpWithFormBodiesAndStreaming) {
  tsdb::testing::TempDB db;
  promql::Engine engine{promql::EngineOptions{}};
  auto s = Server::Start(ServerOptions{.listen = "127.0.0.1:0", .threads = 4}, ApiDeps{db.get(), &engine, {}});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_GT((*s)->port(), 0);
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/-/healthy");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "trainwatch is Healthy.\n");
  std::string body;
  for (int i = 0; i < 20000; i++) body += "m{i=\"" + std::to_string(i % 100) + "\"} " + std::to_string(i) + " " + std::to_string(i) + "\n";
  r = c.Post("/api/v1/import/prometheus?extra_label=a%3Db", body, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(db.NumSamples(), 20000u);
  r = c.Get("/api/v1/export?match[]=%7Ba%3D%22b%22%7D");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(std::count(r->body.begin(), r->body.end(), '\n'), 100);
  // Form-encoded POST parameters, as Grafana sends them.
  r = c.Post("/api/v1/query", "query=1%2B1&time=1796207149", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1796207149,\"2\"]}}");
  // JSON goes out gzipped when the client takes gzip (browsers offer br too,
  // which the server does not use), and as it is otherwise.
  const std::string series = "/api/v1/series?match[]=m";
  auto plain = c.Get(series, {{"Accept-Encoding", "identity"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");
  EXPECT_GT(plain->body.size(), 1024u);
  for (const char* ae : {"gzip, deflate, br, zstd", "br;q=1, gzip;q=0.5"}) {
    auto z = c.Get(series, {{"Accept-Encoding", ae}});
    ASSERT_TRUE(z);
    EXPECT_EQ(z->get_header_value("Content-Encoding"), "gzip") << ae;
    EXPECT_EQ(z->body, plain->body) << ae;  // httplib's client inflated it
  }
  for (const char* ae : {"br", "gzip;q=0, br", "gzip;q=0.0"}) {
    auto z = c.Get(series, {{"Accept-Encoding", ae}});
    ASSERT_TRUE(z);
    EXPECT_EQ(z->get_header_value("Content-Encoding"), "") << ae;
    EXPECT_EQ(z->body, plain->body) << ae;
  }
  r = c.Post("/api/v1/import/prometheus", "bad line here\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  (*s)->Stop();
  (*s)->Stop();  // idempotent
}

TEST(ServerTest, BadListenAddressFailsStart) {
  tsdb::testing::TempDB db;
  EXPECT_FALSE(Server::Start(ServerOptions{.listen = "127.0.0.1"}, ApiDeps{db.get(), nullptr, {}}).ok());
  EXPECT_FALSE(Server::Start(ServerOptions{.listen = "127.0.0.1:99999"}, ApiDeps{db.get(), nullptr, {}}).ok());
  auto a = Server::Start(ServerOptions{.listen = "127.0.0.1:0"}, ApiDeps{db.get(), nullptr, {}});
  ASSERT_TRUE(a.ok());
  auto b = Server::Start(ServerOptions{.listen = "127.0.0.1:" + std::to_string((*a)->port())}, ApiDeps{db.get(), nullptr, {}});
  EXPECT_FALSE(b.ok());
}

}  // namespace
}  // namespace trainwatch::http
