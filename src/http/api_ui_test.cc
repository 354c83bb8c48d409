#include <gtest/gtest.h>

#include "http/api.h"
#include "http/ui_assets.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

class ApiUiTest : public ::testing::Test {
 protected:
  ApiUiTest() : engine_(promql::EngineOptions{}), api_(ApiDeps{db_.get(), &engine_, BuildInfo{}}) {}

  void SetUp() override {
    if (UiAssets().empty()) GTEST_SKIP() << "built with TW_BUILD_UI=OFF";
  }

  Response Get(std::string path, std::string method = "GET") {
    Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.accept = "text/html,application/xhtml+xml";  // a browser ("/" without it is the logs API's probe)
    return api_.Handle(r);
  }
  static std::string Header(const Response& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  tsdb::testing::TempDB db_;
  promql::Engine engine_;
  Api api_;
};

TEST_F(ApiUiTest, ClientRoutesServeIndexHtmlRevalidated) {
  for (std::string path : {"/", "/index.html", "/runs/abc.1", "/compare", "/explore", "/dashboards/training", "/gpus"}) {
    Response r = Get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << path;
    EXPECT_NE(r.body.find("<main"), std::string::npos) << path;
    EXPECT_EQ(Header(r, "Cache-Control"), "no-cache") << path;
  }
}

TEST_F(ApiUiTest, HashedAssetsAreImmutableWithTheirContentType) {
  int js = 0;
  for (const UiAsset& a : UiAssets()) {
    if (!a.path.starts_with("/assets/")) continue;
    Response r = Get(std::string(a.path));
    EXPECT_EQ(r.status, 200) << a.path;
    EXPECT_EQ(r.body.size(), a.size) << a.path;
    EXPECT_EQ(Header(r, "Cache-Control"), "public, max-age=31536000, immutable") << a.path;
    if (a.path.ends_with(".js")) {
      ++js;
      EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
    }
    if (a.path.ends_with(".css")) {
      EXPECT_EQ(r.content_type, "text/css; charset=utf-8");
    }
  }
  EXPECT_GE(js, 1);
}

TEST_F(ApiUiTest, NeverShadowsApisOrInventsFiles) {
  EXPECT_EQ(Get("/assets/missing.js").status, 404);
  EXPECT_EQ(Get("/nope").status, 404);
  EXPECT_EQ(Get("/api/v1/nope").status, 404);
  EXPECT_EQ(Get("/api/v1/nope").body.find("<html"), std::string::npos);
  EXPECT_EQ(Get("/-/healthy").body, "trainwatch is Healthy.\n");
  EXPECT_EQ(Get("/metrics").content_type.find("text/html"), std::string::npos);
  EXPECT_EQ(Get("/compare", "POST").status, 405);
}

}  // namespace
}  // namespace trainwatch::http
