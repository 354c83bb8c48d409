// The web UI: the files of web/ (embedded by the build, http/ui_assets.h)
// at their paths, and index.html for every other path the UI's client-side
// router owns (/runs/x, /compare, ...). Only those paths are taken
// (UiServes), so an API path or any other unknown path stays a plain 404.

#include <algorithm>

#include "http/api.h"
#include "http/ui_assets.h"

namespace trainwatch::http {
namespace {

const UiAsset* Find(std::string_view path) {
  std::span<const UiAsset> all = UiAssets();
  auto it = std::lower_bound(all.begin(), all.end(), path,
                             [](const UiAsset& a, std::string_view p) { return a.path < p; });
  return it != all.end() && it->path == path ? &*it : nullptr;
}

Response Serve(const UiAsset& a) {
  Response r;
  r.content_type = std::string(a.content_type);
  r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
  // Hashed names never change; everything else (index.html) is revalidated
  // so a new binary's UI is picked up at once.
  r.headers.emplace_back("Cache-Control", a.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

}  // namespace

bool Api::UiServes(std::string_view path) {
  // The pages of web/src/main.ts's router (keep in sync), and the files.
  static constexpr std::string_view kPages[] = {"/compare", "/explore", "/alerts", "/targets", "/gpus", "/dashboards",
                                                "/cardinality"};
  if (path == "/" || path == "/index.html" || path.starts_with("/assets/") || path.starts_with("/runs/")) return true;
  for (std::string_view p : kPages) {
    if (path == p || (path.starts_with(p) && path[p.size()] == '/')) return true;
  }
  return Find(path) != nullptr;  // another embedded file
}

Response Api::Ui(const Request& req, std::string_view* handler) {
  *handler = "/ui";
  if (req.method != "GET" && req.method != "HEAD") return Text(405, "method not allowed\n");
  if (UiAssets().empty()) {
    return Text(404, "the web UI is not built into this binary (configured with -DTW_BUILD_UI=OFF); the APIs are "
                     "under /api/v1/\n");
  }
  const std::string& p = req.path;
  if (p != "/index.html") {
    if (const UiAsset* a = Find(p)) return Serve(*a);
  }
  // A missing file must not come back as the HTML page.
  if (p.starts_with("/assets/")) return Text(404, "404 page not found\n");
  const UiAsset* index = Find("/index.html");
  if (index == nullptr) return Text(500, "web UI: index.html missing from the embedded files\n");
  return Serve(*index);
}

}  // namespace trainwatch::http
