#pragma once
// serve's storage, scrape and HTTP components (the others are in
// app/serve_components.h): each opens from ServeOptions and, where it has
// configuration, applies each ConfigSnapshot; RunServe registers their stops
// with Shutdown. Thread safety: ScrapeComponent::Apply may run on any
// thread (reloads are serialized by RunServe); the rest on RunServe's thread.

#include <memory>

#include "app/flags.h"
#include "app/snapshot.h"
#include "base/status.h"
#include "http/api.h"
#include "scrape/manager.h"

namespace trainwatch::common::metrics {
class Registry;
}
namespace trainwatch::http {
class Server;
struct ServerOptions;
}  // namespace trainwatch::http
namespace trainwatch::runs {
class RunStore;
}
namespace trainwatch::tsdb {
class DB;
}

namespace trainwatch::app {

// The TSDB in --data-dir.
class TsdbComponent {
 public:
  TsdbComponent();
  ~TsdbComponent();
  // Logs the open time; the error names the directory.
  Status Open(const ServeOptions& o);
  tsdb::DB* get() const { return db_.get(); }
  // Closes the DB; a failure is logged and returned.
  Status Close();

 private:
  std::unique_ptr<tsdb::DB> db_;
};

// Experiment tracking: run metadata in <data-dir>/runs.db, as durable per
// 2xx as the WAL (synchronous=FULL with --wal.sync per-request).
class RunsComponent {
 public:
  RunsComponent();
  ~RunsComponent();
  // Opens the store and starts its heartbeat checker.
  Status Start(const ServeOptions& o, storage::Appendable* store, tsdb::DB* db, common::metrics::Registry* metrics);
  runs::RunStore* get() const { return store_.get(); }
  void Stop();  // no heartbeat checks after this

 private:
  std::unique_ptr<runs::RunStore> store_;
};

// Prometheus-compatible scraping of the snapshot's scrape_configs (with the
// self-scrape).
class ScrapeComponent {
 public:
  explicit ScrapeComponent(storage::Appendable* store) : manager_(store) {}
  scrape::Manager* manager() { return &manager_; }
  // The jobs of `s`: new ones start, changed ones restart, removed ones stop.
  void Apply(const ConfigSnapshot& s) { manager_.ApplyConfig(s.scrape); }
  void Stop() { manager_.Stop(); }  // no scrape appends after this

 private:
  scrape::Manager manager_;
};

// The HTTP server and the API.
class HttpComponent {
 public:
  HttpComponent();
  ~HttpComponent();
  Status Start(const http::ServerOptions& opts, http::ApiDeps deps);
  void Stop();  // in-flight requests finish first

 private:
  std::unique_ptr<http::Server> server_;
};

}  // namespace trainwatch::app
