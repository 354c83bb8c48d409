#include "app/run_alerts.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trainwatch::app
