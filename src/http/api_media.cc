// The rich-value and artifact routes (docs/runs-api.md "Rich values" and
// "Artifacts") over runs::RunStore: /api/v1/runs/media..., histograms,
// /api/v1/runs/{id}/media/content, /api/v1/runs/{id}/artifacts... and
// /api/v1/artifacts.... JSON in Prometheus's envelope; content as bytes.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include "base/ascii.h"
#include "http/api.h"
#include "http/params.h"
#include "runs/media.h"
#include "runs/request.h"
#include "runs/store.h"

namespace trainwatch::http {
namespace {

Response JsonSuccess(const runs::Json& data) { return Success(runs::DumpJson(data)); }
Response MethodNotAllowed() { return Text(405, "method not allowed\n"); }
Response Unavailable() { return ApiError(Status::Unavailable("experiment tracking is not enabled")); }

// The query of GET /api/v1/runs/media and /api/v1/runs/histograms.
Result<runs::MediaQuery> ParseMediaQuery(const Request& req, int64_t default_limit, const char* limit_param) {
  runs::MediaQuery q;
  q.ids = SplitList(req.Param("ids"));
  if (q.ids.empty()) return Status::InvalidArgument("missing parameter \"ids\"");
  q.key = std::string(req.Param("key"));
  if (q.key.empty()) return Status::InvalidArgument("missing parameter \"key\"");
  if (req.Has("rank")) {
    ASSIGN_OR_RETURN(int64_t rank, IntParam(req, "rank", -1, -1, INT64_MAX));
    q.rank = rank;
  }
  for (auto [name, field] : {std::pair{"step", &q.step}, {"start", &q.start}, {"end", &q.end}}) {
    if (!req.Has(name)) continue;
    ASSIGN_OR_RETURN(int64_t v, IntParam(req, name, 0, 0, INT64_MAX));
    *field = v;
  }
  ASSIGN_OR_RETURN(q.limit, IntParam(req, limit_param, default_limit, 1, 100000));
  return q;
}

// Adds each image's content URL.
void AddImageUrls(runs::Json* entries, std::string_view key) {
  for (runs::Json& e : *entries) {
    if (e.value("kind", std::string()) != "image") continue;
    std::string url = "/api/v1/runs/" + PercentEncode(e["run"].get<std::string>()) +
                      "/media/content?key=" + PercentEncode(key) + "&step=" + std::to_string(e["step"].get<int64_t>());
    if (!e["rank"].is_null()) url += "&rank=" + std::to_string(e["rank"].get<int64_t>());
    e["url"] = std::move(url);
  }
}

Result<int64_t> ArtifactId(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) {
    return Status::NotFound("artifact \"" + std::string(s) + "\" not found");
  }
  return v;
}

// The file at `path` streamed in 1 MiB chunks.
Response StreamFile(const std::string& path, const runs::Artifact& a) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ApiError(Status::IOError("artifact content " + path + ": " + std::strerror(errno)));
  auto owned = std::shared_ptr<int>(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  Response r;
  r.content_type = "application/octet-stream";
  std::string file = a.name + "-v" + std::to_string(a.version);
  for (char& c : file) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + file + "\"");
  r.headers.emplace_back("X-Content-SHA256", a.sha256);
  r.stream = [owned](std::string* chunk) {
    chunk->resize(1 << 20);
    ssize_t n;
    do {
      n = ::read(*owned, chunk->data(), chunk->size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Response::Chunk::kError;
    chunk->resize(static_cast<size_t>(n));
    return n == 0 ? Response::Chunk::kDone : Response::Chunk::kMore;
  };
  return r;
}

}  // namespace

std::optional<Response> RunsMediaRoute(runs::RunStore* store, const Request& req, std::string_view id,
                                       std::string_view what, std::string_view* handler) {
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  if (id.empty()) {
    if (what == "media/keys") {
      *handler = "/api/v1/runs/media/keys";
      if (!get) return MethodNotAllowed();
      if (store == nullptr) return Unavailable();
      std::vector<std::string> ids = SplitList(req.Param("ids"));
      if (ids.empty()) return BadData("missing parameter \"ids\"");
      auto r = store->MediaKeys(ids);
      return r.ok() ? JsonSuccess(*r) : ApiError(r.error());
    }
    if (what == "media" || what == "histograms") {
      const bool hist = what == "histograms";
      *handler = hist ? "/api/v1/runs/histograms" : "/api/v1/runs/media";
      if (!get) return MethodNotAllowed();
      if (store == nullptr) return Unavailable();
      auto q = hist ? ParseMediaQuery(req, 200, "points") : ParseMediaQuery(req, 1000, "limit");
      if (!q.ok()) return ApiError(q.error());
      auto r = hist ? store->ReadHistograms(*q) : store->ReadMedia(*q);
      if (!r.ok()) return ApiError(r.error());
      if (!hist) AddImageUrls(&*r, q->key);
      return JsonSuccess(*r);
    }
    return std::nullopt;
  }
  if (what == "media/content") {
    *handler = "/api/v1/runs/:id/media/content";
    if (!get) return MethodNotAllowed();
    if (store == nullptr) return Unavailable();
    std::string key(req.Param("key"));
    if (key.empty()) return BadData("missing parameter \"key\"");
    auto step = IntParam(req, "step", -1, 0, INT64_MAX);
    if (!step.ok()) return ApiError(step.error());
    if (*step < 0) return BadData("missing parameter \"step\"");
    std::optional<int64_t> rank;
    if (req.Has("rank")) {
      auto r = IntParam(req, "rank", -1, -1, INT64_MAX);
      if (!r.ok()) return ApiError(r.error());
      rank = *r;
    }
    auto c = store->ReadMediaContent(id, key, *step, rank);
    if (!c.ok()) return ApiError(c.error());
    Response r;
    r.content_type = std::string(runs::ImageContentType(c->format));
    r.body = std::move(c->bytes);
    r.headers.emplace_back("Cache-Control", "private, max-age=3600");
    return r;
  }
  if (what == "artifacts") {
    *handler = "/api/v1/runs/:id/artifacts";
    if (!get && !post) return MethodNotAllowed();
    if (store == nullptr) return Unavailable();
    if (get) {
      auto r = store->RunArtifacts(id);
      return r.ok() ? JsonSuccess(*r) : ApiError(r.error());
    }
    auto a = runs::ParseArtifactRequest(req.body);
    if (!a.ok()) return ApiError(a.error());
    auto r = store->LogArtifact(id, *a);
    return r.ok() ? JsonSuccess(runs::ArtifactJson(*r)) : ApiError(r.error());
  }
  if (what == "artifacts/use") {
    *handler = "/api/v1/runs/:id/artifacts/use";
    if (!post) return MethodNotAllowed();
    if (store == nullptr) return Unavailable();
    auto u = runs::ParseArtifactUse(req.body);
    if (!u.ok()) return ApiError(u.error());
    auto r = store->UseArtifact(id, *u);
    return r.ok() ? JsonSuccess(runs::ArtifactJson(*r)) : ApiError(r.error());
  }
  return std::nullopt;
}

Response Api::Artifacts(const Request& req, std::string_view* handler) {
  constexpr std::string_view kPrefix = "/api/v1/artifacts";
  std::string_view p = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  runs::RunStore* store = deps_.runs;
  if (p == kPrefix) {
    *handler = kPrefix;
    if (!get) return MethodNotAllowed();
    if (store == nullptr) return Unavailable();
    std::string_view project = req.Param("project");
    if (project.empty()) return BadData("missing parameter \"project\"");
    auto r = store->ListArtifacts(project, req.Param("name"));
    if (!r.ok()) return ApiError(r.error());
    runs::Json out = runs::Json::array();
    for (const runs::Artifact& a : *r) out.push_back(runs::ArtifactJson(a));
    return JsonSuccess(out);
  }
  std::string_view rest = p.substr(kPrefix.size() + 1);
  size_t slash = rest.find('/');
  std::string_view what = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (!what.empty() && what != "content") return Text(404, "404 page not found\n");
  *handler = what.empty() ? "/api/v1/artifacts/:id" : "/api/v1/artifacts/:id/content";
  if (store == nullptr) return Unavailable();
  auto aid = ArtifactId(rest.substr(0, slash));
  if (!aid.ok()) return ApiError(aid.error());
  if (what.empty()) {
    if (!get) return MethodNotAllowed();
    auto r = store->GetArtifact(*aid);
    return r.ok() ? JsonSuccess(runs::ArtifactJson(*r)) : ApiError(r.error());
  }
  if (req.method == "PUT") {
    auto r = store->StoreArtifactContent(*aid, req.body);
    return r.ok() ? JsonSuccess(runs::ArtifactJson(*r)) : ApiError(r.error());
  }
  if (req.method == "DELETE") {
    auto r = store->DeleteArtifactContent(*aid);
    return r.ok() ? JsonSuccess(runs::ArtifactJson(*r)) : ApiError(r.error());
  }
  if (!get) return MethodNotAllowed();
  auto a = store->GetArtifact(*aid);
  if (!a.ok()) return ApiError(a.error());
  auto path = store->ArtifactContentPath(*aid);
  if (!path.ok()) return ApiError(path.error());
  return StreamFile(*path, *a);
}

}  // namespace trainwatch::http
