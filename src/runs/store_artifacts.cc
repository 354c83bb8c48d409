// RunStore's artifacts (docs/runs-api.md "Artifacts"): versions by content
// (SHA-256) in runs.db's artifacts table, their uses in artifact_uses, and
// uploaded content under the artifacts dir, one file per SHA-256 (two
// artifacts with the same content share it).

#include <openssl/evp.h>

#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

constexpr const char* kArtifactColumns =
    "id, project, name, type, version, sha256, size, uri, metadata, producer, created_ms, stored, deleted";

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; i++) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

Status NoArtifact(int64_t id) { return Status::NotFound("artifact " + std::to_string(id) + " not found"); }

}  // namespace

Json ArtifactJson(const Artifact& a) {
  return Json{{"id", a.id},
              {"project", a.project},
              {"name", a.name},
              {"type", a.type},
              {"version", a.version},
              {"sha256", a.sha256},
              {"size", a.size},
              {"uri", a.uri},
              {"metadata", a.metadata},
              {"stored", a.stored},
              {"deleted", a.deleted},
              {"created_time", static_cast<double>(a.created_ms) / 1000.0},
              {"producer", a.producer},
              {"consumers", a.consumers}};
}

Result<Artifact> RunStore::ArtifactRow(int64_t artifact) const {
  Stmt q(db_, std::string("SELECT ") + kArtifactColumns + " FROM artifacts WHERE id=?1");
  q.Bind(1, artifact);
  if (!q.Step()) {
    RETURN_IF_ERROR(q.status());
    return NoArtifact(artifact);
  }
  Artifact a;
  a.id = q.Int(0);
  a.project = q.Text(1);
  a.name = q.Text(2);
  a.type = q.Text(3);
  a.version = q.Int(4);
  a.sha256 = q.Text(5);
  a.size = q.Int(6);
  a.uri = q.Text(7);
  a.metadata = ParseStored(q.Text(8), Json::object());
  a.producer = q.Text(9);
  a.created_ms = q.Int(10);
  a.stored = q.Int(11) != 0;
  a.deleted = q.Int(12) != 0;
  Stmt u(db_, "SELECT run_id FROM artifact_uses WHERE artifact=?1 ORDER BY time_ms, run_id");
  u.Bind(1, artifact);
  while (u.Step()) a.consumers.push_back(u.Text(0));
  RETURN_IF_ERROR(u.status());
  return a;
}

Result<Artifact> RunStore::LogArtifact(std::string_view id_view, const ArtifactRequest& req) {
  return RetryOnDamage([&]() -> Result<Artifact> {
    std::string id(id_view);
    base::MutexLock l(&mu_);
    auto run = runs_.find(id);
    if (run == runs_.end()) return Status::NotFound("run \"" + id + "\" not found");
    const std::string& project = run->second.project;
    {
      Stmt q(db_, "SELECT id FROM artifacts WHERE project=?1 AND name=?2 AND sha256=?3");
      q.Bind(1, project).Bind(2, req.name).Bind(3, req.sha256);
      if (q.Step()) return ArtifactRow(q.Int(0));
      RETURN_IF_ERROR(q.status());
    }
    // Content another artifact already stored is shared.
    bool stored = false;
    {
      Stmt q(db_, "SELECT size FROM artifacts WHERE sha256=?1 AND stored=1 LIMIT 1");
      q.Bind(1, req.sha256);
      stored = q.Step() && q.Int(0) == req.size;
      RETURN_IF_ERROR(q.status());
    }
    Stmt ins(db_,
             "INSERT INTO artifacts(project, name, type, version, sha256, size, uri, metadata, producer, created_ms, "
             "stored) VALUES(?1, ?2, ?3, (SELECT COALESCE(MAX(version) + 1, 0) FROM artifacts WHERE project=?1 AND "
             "name=?2), ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    ins.Bind(1, project).Bind(2, req.name).Bind(3, req.type).Bind(4, req.sha256).Bind(5, req.size).Bind(6, req.uri);
    ins.Bind(7, DumpJson(req.metadata)).Bind(8, id).Bind(9, Now()).Bind(10, int64_t{stored ? 1 : 0});
    RETURN_IF_ERROR(ins.Run());
    int64_t aid = sqlite3_last_insert_rowid(db_);
    RETURN_IF_ERROR(ApplyArtifactPolicy(project, req.name));
    return ArtifactRow(aid);
  });
}

Result<Artifact> RunStore::StoreArtifactContent(int64_t artifact, std::string_view bytes) {
  const std::string sha = Sha256Hex(bytes);
  return RetryOnDamage([&]() -> Result<Artifact> {
    base::MutexLock l(&mu_);
    ASSIGN_OR_RETURN(Artifact a, ArtifactRow(artifact));
    if (static_cast<int64_t>(bytes.size()) != a.size) {
      return Status::InvalidArgument("content of " + std::to_string(bytes.size()) + " bytes; artifact " + a.name +
                                     " v" + std::to_string(a.version) + " has " + std::to_string(a.size));
    }
    if (sha != a.sha256) {
      return Status::InvalidArgument("content's SHA-256 is " + sha + "; artifact " + a.name + " v" +
                                     std::to_string(a.version) + " has " + a.sha256);
    }
    RETURN_IF_ERROR(file::MkdirAll(opts_.artifacts_dir));
    RETURN_IF_ERROR(file::WriteFileAtomic(opts_.artifacts_dir + "/" + sha, bytes));
    Stmt up(db_, "UPDATE artifacts SET stored=1, deleted=0 WHERE id=?1");
    up.Bind(1, artifact);
    RETURN_IF_ERROR(up.Run());
    RETURN_IF_ERROR(ApplyArtifactPolicy(a.project, a.name));
    return ArtifactRow(artifact);
  });
}

Result<Artifact> RunStore::UseArtifact(std::string_view id_view, const ArtifactUse& use) {
  return RetryOnDamage([&]() -> Result<Artifact> {
    std::string id(id_view);
    base::MutexLock l(&mu_);
    auto run = runs_.find(id);
    if (run == runs_.end()) return Status::NotFound("run \"" + id + "\" not found");
    std::string sql = "SELECT id FROM artifacts WHERE project=?1 AND name=?2";
    if (use.version) sql += " AND version=?3";
    if (use.sha256) sql += " AND sha256=?4";
    sql += " ORDER BY version DESC LIMIT 1";
    Stmt q(db_, sql);
    q.Bind(1, run->second.project).Bind(2, use.name);
    if (use.version) q.Bind(3, *use.version);
    if (use.sha256) q.Bind(4, *use.sha256);
    if (!q.Step()) {
      RETURN_IF_ERROR(q.status());
      std::string which = use.version ? " v" + std::to_string(*use.version) : use.sha256 ? " " + *use.sha256 : "";
      return Status::NotFound("artifact \"" + use.name + "\"" + which + " not found in project \"" +
                              run->second.project + "\"");
    }
    int64_t aid = q.Int(0);
    Stmt ins(db_, "INSERT OR IGNORE INTO artifact_uses(artifact, run_id, time_ms) VALUES(?1, ?2, ?3)");
    ins.Bind(1, aid).Bind(2, id).Bind(3, Now());
    RETURN_IF_ERROR(ins.Run());
    return ArtifactRow(aid);
  });
}

Result<Artifact> RunStore::GetArtifact(int64_t artifact) const {
  return RetryOnDamage([&]() -> Result<Artifact> {
    base::MutexLock l(&mu_);
    return ArtifactRow(artifact);
  });
}

Result<Json> RunStore::RunArtifacts(std::string_view id_view) const {
  return RetryOnDamage([&]() -> Result<Json> {
    std::string id(id_view);
    base::MutexLock l(&mu_);
    if (!runs_.contains(id)) return Status::NotFound("run \"" + id + "\" not found");
    Json out = {{"logged", Json::array()}, {"used", Json::array()}};
    auto add = [&](const char* sql, const char* field) -> Status {
      mu_.AssertHeld();  // run in place, under the lock
      std::vector<int64_t> ids;
      Stmt q(db_, sql);
      q.Bind(1, id);
      while (q.Step()) ids.push_back(q.Int(0));
      RETURN_IF_ERROR(q.status());
      for (int64_t aid : ids) {
        ASSIGN_OR_RETURN(Artifact a, ArtifactRow(aid));
        out[field].push_back(ArtifactJson(a));
      }
      return Status::OK();
    };
    RETURN_IF_ERROR(add("SELECT id FROM artifacts WHERE producer=?1 ORDER BY id", "logged"));
    RETURN_IF_ERROR(add("SELECT artifact FROM artifact_uses WHERE run_id=?1 ORDER BY time_ms, artifact", "used"));
    return out;
  });
}

Result<std::vector<Artifact>> RunStore::ListArtifacts(std::string_view project, std::string_view name) const {
  return RetryOnDamage([&]() -> Result<std::vector<Artifact>> {
    base::MutexLock l(&mu_);
    std::vector<int64_t> ids;
    Stmt q(db_, name.empty() ? "SELECT id FROM artifacts WHERE project=?1 ORDER BY created_ms DESC, id DESC"
                             : "SELECT id FROM artifacts WHERE project=?1 AND name=?2 ORDER BY version DESC");
    q.Bind(1, project);
    if (!name.empty()) q.Bind(2, name);
    while (q.Step()) ids.push_back(q.Int(0));
    RETURN_IF_ERROR(q.status());
    std::vector<Artifact> out;
    for (int64_t aid : ids) {
      ASSIGN_OR_RETURN(Artifact a, ArtifactRow(aid));
      out.push_back(std::move(a));
    }
    return out;
  });
}

Result<std::string> RunStore::ArtifactContentPath(int64_t artifact) const {
  ASSIGN_OR_RETURN(Artifact a, GetArtifact(artifact));
  if (!a.stored) {
    return Status::NotFound("artifact " + a.name + " v" + std::to_string(a.version) +
                            (a.deleted ? " had its content deleted" : " is referenced, not stored: " + a.uri));
  }
  return opts_.artifacts_dir + "/" + a.sha256;
}

Result<Artifact> RunStore::DeleteArtifactContent(int64_t artifact) {
  return RetryOnDamage([&]() -> Result<Artifact> {
    base::MutexLock l(&mu_);
    ASSIGN_OR_RETURN(Artifact a, ArtifactRow(artifact));
    if (!a.stored) {
      return Status::NotFound("artifact " + a.name + " v" + std::to_string(a.version) + " has no stored content");
    }
    Stmt up(db_, "UPDATE artifacts SET stored=0, deleted=1 WHERE id=?1");
    up.Bind(1, artifact);
    RETURN_IF_ERROR(up.Run());
    RETURN_IF_ERROR(RemoveContentIfUnused(a.sha256));
    return ArtifactRow(artifact);
  });
}

Status RunStore::ApplyArtifactPolicy(const std::string& project, const std::string& name) {
  if (opts_.artifact_keep_versions <= 0) return Status::OK();
  std::vector<std::pair<int64_t, std::string>> old;
  Stmt q(db_,
         "SELECT a.id, a.sha256 FROM artifacts a WHERE a.project=?1 AND a.name=?2 AND a.stored=1 AND a.version <= "
         "(SELECT MAX(version) FROM artifacts WHERE project=?1 AND name=?2) - ?3 AND NOT EXISTS (SELECT 1 FROM "
         "artifact_uses u JOIN runs r ON r.id=u.run_id WHERE u.artifact=a.id AND r.status='running')");
  q.Bind(1, project).Bind(2, name).Bind(3, opts_.artifact_keep_versions);
  while (q.Step()) old.emplace_back(q.Int(0), q.Text(1));
  RETURN_IF_ERROR(q.status());
  for (const auto& [aid, sha] : old) {
    Stmt up(db_, "UPDATE artifacts SET stored=0, deleted=1 WHERE id=?1");
    up.Bind(1, aid);
    RETURN_IF_ERROR(up.Run());
    RETURN_IF_ERROR(RemoveContentIfUnused(sha));
    TW_LOG(Info, "runs: removed the content of artifact {}/{} (id {}): --runs.artifact-keep-versions={}", project,
           name, aid, opts_.artifact_keep_versions);
  }
  return Status::OK();
}

Status RunStore::RemoveContentIfUnused(const std::string& sha256) {
  Stmt q(db_, "SELECT 1 FROM artifacts WHERE sha256=?1 AND stored=1 LIMIT 1");
  q.Bind(1, sha256);
  bool used = q.Step();
  RETURN_IF_ERROR(q.status());
  if (used) return Status::OK();
  return file::RemoveAll(opts_.artifacts_dir + "/" + sha256);
}

}  // namespace trainwatch::runs
