#include "app/serve_core.h"

#include "base/clock.h"
#include "base/log.h"
#include "http/server.h"
#include "runs/store.h"
#include "tsdb/db.h"

namespace trainwatch::app {

TsdbComponent::TsdbComponent() = default;
TsdbComponent::~TsdbComponent() = default;

Status TsdbComponent::Open(const ServeOptions& o) {
  tsdb::Options db_opts;
  db_opts.dir = o.data_dir;
  db_opts.retention_ms = o.retention_ms;
  db_opts.series_limits = o.series_limits;
  db_opts.max_future_ms = o.max_future_ms;
  db_opts.retention_bytes = o.retention_bytes;
  db_opts.downsample = o.downsample;
  db_opts.tier_retention_ms = {o.retention_5m_ms, o.retention_1h_ms, o.retention_1h_ms};  // 6 h kept as 1 h
  db_opts.wal_sync = o.wal_sync;
  int64_t t0 = MonoNanos();
  auto db = tsdb::DB::Open(db_opts);
  if (!db.ok()) return db.error();
  db_ = std::move(*db);
  TW_LOG(Info, "tsdb opened in {} ms", (MonoNanos() - t0) / 1000000);
  return Status::OK();
}

Status TsdbComponent::Close() {
  Status s = db_->Close();
  if (!s.ok()) TW_LOG(Error, "close tsdb: {}", s.ToString());
  return s;
}

RunsComponent::RunsComponent() = default;
RunsComponent::~RunsComponent() = default;

Status RunsComponent::Start(const ServeOptions& o, storage::Appendable* store, tsdb::DB* db,
                            common::metrics::Registry* metrics) {
  runs::RunStoreOptions opts;
  opts.path = o.data_dir + "/runs.db";
  opts.sync_full = o.wal_sync == tsdb::WalSync::kPerRequest;
  opts.heartbeat_timeout_ms = o.runs_heartbeat_timeout_ms;
  opts.artifact_keep_versions = o.runs_artifact_keep_versions;
  opts.metrics = metrics;
  ASSIGN_OR_RETURN(store_, runs::RunStore::Open(opts, store, db));
  store_->StartHeartbeatChecker();
  return Status::OK();
}

void RunsComponent::Stop() { store_->Stop(); }

HttpComponent::HttpComponent() = default;
HttpComponent::~HttpComponent() = default;

Status HttpComponent::Start(const http::ServerOptions& opts, http::ApiDeps deps) {
  ASSIGN_OR_RETURN(server_, http::Server::Start(opts, std::move(deps)));
  return Status::OK();
}

void HttpComponent::Stop() { server_->Stop(); }

}  // namespace trainwatch::app
