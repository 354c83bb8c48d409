#pragma once
// The Prometheus-compatible HTTP API (plus VictoriaMetrics-style import and
// export) as plain request -> response handlers. Routing (from routes.h's table) lives here too, so
// the HTTP server only converts requests. Thread-safe: one Api serves all
// connections; it never throws (handler exceptions become 500).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/idle_pool.h"
#include "common/metrics.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/routes.h"
#include "ingest/import.h"
#include "ingest/otlp.h"
#include "ingest/remote_write.h"
#include "ingest/series_cache.h"
#include "promql/engine.h"
#include "tsdb/db.h"

namespace trainwatch::scrape {
class Manager;
}

namespace trainwatch::runs {
class RunStore;
}

namespace trainwatch::collect {
class Snapshot;
}

namespace trainwatch::notify {
class Notifier;
}

namespace trainwatch::rules {
class Manager;
}

namespace trainwatch::logs {
class LogStore;
}

namespace trainwatch::http {

class IngestGate;

// /api/v1/status/buildinfo, in Prometheus's field names.
struct BuildInfo {
  std::string version;
  std::string revision;
  std::string branch;
  std::string build_user;
  std::string build_date;
  std::string go_version;  // the compiler, for clients that expect the field
};

struct ApiDeps {
  // null: agent mode (`trainwatch agent`): only health, /metrics, targets,
  // metadata, buildinfo and reload answer; the rest is 503.
  tsdb::DB* db = nullptr;
  promql::Engine* engine = nullptr;    // null: query endpoints answer 503
  BuildInfo build;
  scrape::Manager* scrape = nullptr;   // null: /api/v1/targets answers 503, metadata is empty
  std::function<Status()> reload;      // POST /-/reload: re-reads and applies the config file
  runs::RunStore* runs = nullptr;      // null: /api/v1/runs answers 503
  logs::LogStore* logs = nullptr;      // null: log queries answer 503, pushes (/api/v1/logs, /_bulk, /loki/...) 404
  rules::Manager* rules = nullptr;     // null: /api/v1/rules and /api/v1/alerts answer 503
  notify::Notifier* notifier = nullptr;  // null: /api/v2/* (Alertmanager) and /api/v1/notifications answer 503
  collect::Snapshot* collected = nullptr;  // host/GPU collectors' latest series for /metrics; null: none
  // What /metrics renders before the collected families: the modules'
  // metrics (common/metrics.h); the Api registers its own there too (HTTP,
  // TSDB, ingest gate). Null: the Api's own registry.
  common::metrics::Registry* metrics = nullptr;
  // What PromQL and /api/v1/series read: the TSDB and the remote_read
  // stores (remote/read.h); null: db. Remote read, federation, export and
  // the label APIs read the TSDB alone.
  storage::Queryable* queryable = nullptr;
  storage::Appendable* appendable = nullptr;  // where pushes (import, remote write) go; null: db
  // --web.enable-admin-api: /api/v1/admin/* (flush, snapshot) answer; off,
  // they answer 503 "admin APIs disabled", as Prometheus's do.
  bool enable_admin_api = false;
  // Non-empty when the server is reachable beyond loopback with no
  // authentication: GET /api/v1/status/security says it, the UI shows it.
  std::string security_warning;
  // Bounds on one remote_write or import request (the counters are set by
  // Api to its metrics).
  ingest::RequestLimits request_limits;
  // The config file's `otlp:` section as it is now (a reload may change
  // it), read once per OTLP request; null: the defaults.
  std::function<ingest::OtlpOptions()> otlp_options;
  // --ingest.max-memory and --ingest.max-concurrent-pushes: the server
  // admits pushes through it (http/ingest_gate.h). Null: no bound.
  std::shared_ptr<IngestGate> ingest_gate;
};

class Api {
 public:
  explicit Api(ApiDeps deps);

  // Routes and serves one request; counts it in metrics().
  Response Handle(const Request& req);
  Metrics& metrics() { return metrics_; }
  IngestGate* ingest_gate() const { return deps_.ingest_gate.get(); }

 private:
  friend std::span<const http::Route> Routes();  // routes.cc: the table names the handlers below
  Response Route(const Request& req, std::string_view* handler);
  storage::Appendable& appendable() { return deps_.appendable != nullptr ? *deps_.appendable : *deps_.db; }
  storage::Queryable& queryable() { return deps_.queryable != nullptr ? *deps_.queryable : *deps_.db; }
  Response Runs(const Request& req, std::string_view* handler);  // api_runs.cc: /api/v1/runs...
  Response Artifacts(const Request& req, std::string_view* handler);  // api_media.cc: /api/v1/artifacts...
  // api_logs.cc: /api/v1/logs..., /_bulk, /<index>/_bulk, /loki/api/v1/push, and / for non-browsers (ES banner).
  Response Logs(const Request& req, std::string_view* handler);
  Response RulesApi(const Request& req, std::string_view* handler);  // api_rules.cc: /api/v1/rules, /api/v1/alerts
  Response Alertmanager(const Request& req, std::string_view* handler);  // api_alertmanager.cc: /api/v2/*, /api/v1/notifications
  // api_ui.cc: the embedded web UI. UiServes: true only for the UI's files
  // and client routes (/, /runs/..., /compare, ...), never for an API path.
  static bool UiServes(std::string_view path);
  Response Ui(const Request& req, std::string_view* handler);

  Response Healthy(const Request& req);
  Response Ready(const Request& req);
  Response Import(const Request& req);
  Response Write(const Request& req);  // remote_write (api_write.cc)
  Response WriteV2(const Request& req);  // remote write 2.0 (api_write2.cc)
  Response RemoteRead(const Request& req);  // remote read (api_read.cc)
  Response Otlp(const Request& req);        // OTLP metrics (api_otlp.cc)
  Response Export(const Request& req);
  Response Federate(const Request& req);  // api_series.cc
  Response Flush(const Request& req);
  Response Snapshot(const Request& req);
  Response SecurityStatus(const Request& req);
  Response Query(const Request& req);
  Response QueryRange(const Request& req);
  Response QueryExemplars(const Request& req);  // api_query.cc: validates, answers []
  Response FormatQuery(const Request& req);     // api_query.cc
  Response Labels(const Request& req);
  Response LabelValues(const Request& req, std::string_view name);
  Response LabelValuesRoute(const Request& req);  // the name from the path
  Response Series(const Request& req);
  Response BuildInfoHandler(const Request& req);
  Response TsdbStatus(const Request& req);
  Response MetricsHandler(const Request& req);
  // api_scrape.cc
  Response Targets(const Request& req);
  Response TargetsMetadata(const Request& req);
  Response Metadata(const Request& req);
  Response Reload(const Request& req);

  ApiDeps deps_;
  std::unique_ptr<common::metrics::Registry> own_registry_;  // when deps_.metrics is null
  common::metrics::Registry* const registry_;
  Metrics metrics_;
  std::unique_ptr<common::metrics::Collector> tsdb_metrics_;  // null without a TSDB
  common::metrics::Registration registration_;  // TSDB and ingest gate; before the sources go
  ingest::SeriesCache series_cache_;  // import and remote write: series as sent -> ref
  // Decode batches of the ingest endpoints, reused by worker threads and
  // freed when idle (base/idle_pool.h).
  IdlePool<ingest::ImportBatch> import_batches_;
  IdlePool<ingest::RemoteWriteBatch> write_batches_;
  ingest::OtlpDeltas otlp_deltas_;  // running totals of OTLP delta series
};

// A text/plain response; a final newline is added when missing.
Response Text(int status, std::string body);
// The answer to a push (import, remote write) that failed: 400 with the
// reason (after `reason_prefix`) for invalid input; 507 with Retry-After
// when the disk is full; 503 when the store is unavailable or over a bound;
// 500 otherwise. Non-400 errors are logged under `handler`.
Response IngestError(std::string_view handler, const Status& s, std::string_view reason_prefix = "");
// 204 with no body: a push whose samples are durable.
Response NoContent();
// Seconds a client is told to wait (Retry-After) after a 507: the disk is full.
inline constexpr std::string_view kNoSpaceRetryAfter = "10";
// 400/422/503 JSON error for a failed query or a bad parameter, as Prometheus;
// 507 with Retry-After when the disk is full.
Response ApiError(const Status& s);
Response BadData(std::string msg);
// {"status":"success","data":<data_json>}
Response Success(std::string_view data_json);

// api_media.cc: the rich-value and artifact routes of run `id` and of the
// runs (`id` empty): `what` is the path after "/api/v1/runs/{id}/" or
// "/api/v1/runs/"; nullopt when it names none of them.
std::optional<Response> RunsMediaRoute(runs::RunStore* store, const Request& req, std::string_view id,
                                       std::string_view what, std::string_view* handler);

}  // namespace trainwatch::http
