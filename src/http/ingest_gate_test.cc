#include "http/ingest_gate.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>
#include <thread>

#include "http/server.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

using Verdict = IngestGate::Verdict;

TEST(IngestGateTest, IngestRoutesArePushesOnly) {
  for (const char* p : {"/api/v1/write", "/api/v1/otlp/v1/metrics", "/api/v1/import/prometheus", "/api/v1/logs", "/loki/api/v1/push", "/_bulk",
                        "/train/_bulk", "/api/v1/runs/r1/batches"}) {
    EXPECT_TRUE(IsIngestRoute("POST", p)) << p;
    EXPECT_FALSE(IsIngestRoute("GET", p)) << p;
  }
  for (const char* p : {"/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/runs",
                        "/api/v1/runs/r1/heartbeat", "/api/v1/runs/r1/finish", "/api/v2/silences", "/-/reload",
                        "/api/v1/admin/tsdb/flush", "/_bulkx", "/a/b/_bulk",
                        // No route serves these: 404 before any body is read.
                        "//_bulk", "/api/v1/runs/a/b/batches"}) {
    EXPECT_FALSE(IsIngestRoute("POST", p)) << p;
  }
}

TEST(IngestGateTest, MemoryBoundIsCheckedBeforeTheBodyAndAgainWithTheSlot) {
  std::atomic<uint64_t> used{100};
  IngestGate g({.memory_limit = 150, .max_concurrent = 0, .max_wait_ms = 0, .read = [&] { return used.load(); }});
  EXPECT_EQ(g.Check(), Verdict::kAdmitted);
  used = 150;
  EXPECT_EQ(g.Check(), Verdict::kAdmitted);  // at the bound is within it
  {
    IngestGate::Slot s;
    EXPECT_EQ(g.Enter(&s), Verdict::kAdmitted);
  }
  used = 151;
  EXPECT_EQ(g.Check(), Verdict::kOverMemory);
  IngestGate::Slot s;
  EXPECT_EQ(g.Enter(&s), Verdict::kOverMemory);
  EXPECT_EQ(g.Message(Verdict::kOverMemory),
            "trainwatch is over its memory bound (0 MiB in use, --ingest.max-memory 0 MiB): retry later\n");
  IngestGate none({.memory_limit = 0, .max_concurrent = 0, .max_wait_ms = 0, .read = [] { return ~uint64_t{0}; }});
  EXPECT_EQ(none.Check(), Verdict::kAdmitted);
}

TEST(IngestGateTest, SlotsBoundConcurrencyAndAWaiterGetsTheFreedOne) {
  IngestGate g({.memory_limit = 0, .max_concurrent = 2, .max_wait_ms = 50, .read = {}});
  auto a = std::make_unique<IngestGate::Slot>();
  IngestGate::Slot b, c;
  ASSERT_EQ(g.Enter(a.get()), Verdict::kAdmitted);
  ASSERT_EQ(g.Enter(&b), Verdict::kAdmitted);
  EXPECT_EQ(g.Enter(&c), Verdict::kBusy);  // after waiting 50 ms
  EXPECT_EQ(g.Message(Verdict::kBusy),
            "trainwatch is busy: 2 pushes in progress (--ingest.max-concurrent-pushes) and none ended within 0 s: "
            "retry later\n");
  std::string m;
  common::metrics::Registry registry;
  common::metrics::Registration reg = registry.MustRegister({g.metrics()});
  registry.Render(&m);
  EXPECT_NE(m.find("\ntrainwatch_ingest_pushes_in_progress 2\n"), std::string::npos) << m;
  IngestGate long_wait({.memory_limit = 0, .max_concurrent = 1, .max_wait_ms = 60000, .read = {}});
  auto held = std::make_unique<IngestGate::Slot>();
  ASSERT_EQ(long_wait.Enter(held.get()), Verdict::kAdmitted);
  auto waiter = std::async(std::launch::async, [&] {
    IngestGate::Slot s;
    return long_wait.Enter(&s);
  });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  held.reset();  // released: the waiter enters
  EXPECT_EQ(waiter.get(), Verdict::kAdmitted);
}

// Over the bound, the server answers a push 503 with Retry-After before
// reading its body, counts it, and serves queries and health as before.
TEST(IngestGateTest, ServerRefusesPushesWhileOverAndServesTheRest) {
  tsdb::testing::TempDB db;
  promql::Engine engine{promql::EngineOptions{}};
  std::atomic<uint64_t> used{3ull << 30};
  ApiDeps deps{db.get(), &engine, {}};
  deps.ingest_gate = std::make_shared<IngestGate>(IngestGate::Options{
      .memory_limit = uint64_t{2} << 30, .max_concurrent = 4, .max_wait_ms = 1000, .read = [&] { return used.load(); }});
  auto s = Server::Start(ServerOptions{.listen = "127.0.0.1:0", .threads = 2}, std::move(deps));
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  httplib::Client c("127.0.0.1", (*s)->port());
  c.set_read_timeout(10);
  auto r = c.Post("/api/v1/import/prometheus", "m 1 1700000000000\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "5");
  EXPECT_EQ(r->body, "trainwatch is over its memory bound (3072 MiB in use, --ingest.max-memory 2048 MiB): retry later\n");
  r = c.Get("/api/v1/query?query=1%2B1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = c.Get("/-/healthy");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("trainwatch_ingest_requests_refused_total{limit=\"memory\"} 1\n"), std::string::npos);
  EXPECT_NE(r->body.find("trainwatch_ingest_requests_refused_total{limit=\"concurrency\"} 0\n"), std::string::npos);
  EXPECT_NE(r->body.find("trainwatch_ingest_memory_limit_bytes 2147483648\n"), std::string::npos);
  EXPECT_NE(r->body.find("trainwatch_ingest_memory_used_bytes 3221225472\n"), std::string::npos);
  // Back under the bound: the same push is stored.
  used = 1ull << 30;
  r = c.Post("/api/v1/import/prometheus", "m 1 1700000000000\n", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(db.NumSamples(), 1u);
}

}  // namespace
}  // namespace trainwatch::http
