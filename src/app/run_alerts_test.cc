#include "app/run_alerts.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "runs/request.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::app {
namespace {

TEST(RunAlertsTest, LabelsIdentifyTheRunAndTitle) {
  runs::Run run;
  run.id = "a1/b 2";
  run.project = "llm";
  run.name = "lr-sweep-3";
  runs::RunAlert alert{1714557600123, "Loss diverged", "loss=nan at step 1200", "error"};
  rules::OutgoingAlert a = RunAlertToOutgoing(run, alert, "http://tw:9800");
  EXPECT_EQ(a.labels, (model::Labels{{"alertname", "Loss diverged"}, {"project", "llm"}, {"run", "lr-sweep-3"},
                                     {"severity", "error"}}));
  EXPECT_EQ(a.annotations, (model::Labels{{"summary", "Loss diverged"}, {"description", "loss=nan at step 1200"},
                                          {"run_id", "a1/b 2"}}));
  EXPECT_EQ(a.starts_at_ms, 1714557600123);
  EXPECT_EQ(a.ends_at_ms, 0);
  EXPECT_EQ(a.generator_url, "http://tw:9800/runs/a1%2Fb%202");
  alert.text.clear();
  EXPECT_FALSE(RunAlertToOutgoing(run, alert, "http://tw:9800").annotations.Has("description"));
}

// Issue 19: a firing alert of a run whose rule names an action queues it once
// per firing; resolved alerts, alerts without the annotation or without a
// run's labels, and unknown runs queue nothing.
TEST(RunAlertsTest, FiringAlertsWithAnActionQueueItForTheRun) {
  char tmpl[] = "/tmp/tw_run_actions_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  tsdb::testing::TempDB db;
  runs::RunStoreOptions o;
  o.path = dir + "/runs.db";
  int64_t now = 1796218600000;
  o.now_ms = [&now] { return now; };
  auto store = runs::RunStore::Open(o, db.get(), db.get());
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  auto req = runs::ParseCreateRequest(R"({"id":"r1","project":"llm","name":"sweep-3","world_size":2})");
  ASSERT_TRUE((*store)->CreateOrResume(*req).ok());
  auto alert = [](std::string name, std::string run, std::string action, int64_t ends) {
    rules::OutgoingAlert a;
    a.labels = model::Labels{{"alertname", name}, {"project", "llm"}, {"run", run}, {"severity", "critical"}};
    if (!action.empty()) a.annotations = model::Labels{{"action", action}};
    a.starts_at_ms = 1796218500000;
    a.ends_at_ms = ends;
    return a;
  };
  const int64_t valid = now + 240000;
  std::vector<rules::OutgoingAlert> batch = {alert("LossSpike", "sweep-3", "checkpoint, stop", valid),
                                             alert("NoAction", "sweep-3", "", valid),
                                             alert("Resolved", "sweep-3", "stop", now - 1),
                                             alert("OtherRun", "nope", "stop", valid)};
  EXPECT_EQ(QueueRunActions(**store, batch, now), 2);
  EXPECT_EQ(QueueRunActions(**store, batch, now + 60000), 2);  // the resend: already queued
  auto all = (*store)->Actions("r1");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].action, "checkpoint");
  EXPECT_EQ((*all)[1].action, "stop");
  EXPECT_EQ((*all)[0].alert, "LossSpike");
  EXPECT_EQ((*all)[0].labels["severity"], "critical");
  // Each rank gets them until it acknowledges; done once every rank has.
  EXPECT_EQ((*store)->PendingActions("r1", 0).size(), 2u);
  ASSERT_TRUE((*store)->AckAction("r1", (*all)[0].id, 0, "done", "saved step 1200").ok());
  ASSERT_TRUE((*store)->AckAction("r1", (*all)[0].id, 0, "failed", "a retry does not overwrite").ok());
  EXPECT_EQ((*store)->PendingActions("r1", 0).size(), 1u);
  EXPECT_EQ((*store)->PendingActions("r1", 1).size(), 2u);
  EXPECT_EQ((*store)->AckAction("r1", 999, 0, "done", "").code(), StatusCode::kInvalidArgument);
  // Kept across a reopen, acknowledgements included.
  store->reset();
  store = runs::RunStore::Open(o, db.get(), db.get());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->PendingActions("r1", 0).size(), 1u);
  ASSERT_TRUE((*store)->AckAction("r1", (*all)[0].id, 1, "unhandled", "").ok());
  EXPECT_EQ((*store)->PendingActions("r1", 1).size(), 1u);
  all = (*store)->Actions("r1");
  EXPECT_EQ((*all)[0].acks["0"]["result"], "saved step 1200");
  EXPECT_EQ((*all)[0].acks["1"]["status"], "unhandled");
  // A new firing of the same alert is a new action.
  batch[0].starts_at_ms += 600000;
  EXPECT_EQ(QueueRunActions(**store, {batch[0]}, now), 2);
  EXPECT_EQ((*store)->Actions("r1")->size(), 4u);
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainwatch::app
