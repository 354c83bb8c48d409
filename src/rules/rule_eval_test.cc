// Rule evaluation as Prometheus: alert states, keep_firing_for, templates,
// limits, ALERTS / ALERTS_FOR_STATE, stale markers, sending and restore.

#include <gtest/gtest.h>

#include <cmath>

#include "model/sample.h"
#include "rules/group.h"
#include "rules/manager.h"
#include "rules/rules_test_util.h"

namespace trainwatch::rules {
namespace {

using testing::TestDb;

constexpr int64_t kMin = 60'000;

class RuleEvalTest : public ::testing::Test {
 protected:
  RuleEvalTest() : engine_(promql::EngineOptions{}), query_(testing::MakeQueryFunc(&engine_, &db_)) {}

  // `metric{job="a"}` = v at every minute in [from, to].
  void Fill(const model::Labels& l, int64_t from_min, int64_t to_min, double v) {
    for (int64_t m = from_min; m <= to_min; ++m) db_.Add(l, m * kMin, v);
  }
  EvalContext Ctx(int limit = 0) { return EvalContext{&query_, model::Labels{{"cluster", "c1"}}, "http://tw:9800", limit}; }

  static RuleSpec MakeAlert(std::string name, std::string expr, int64_t for_ms = 0) {
    RuleSpec r;
    r.alert = std::move(name);
    r.expr = std::move(expr);
    r.for_ms = for_ms;
    return r;
  }

  TestDb db_;
  promql::Engine engine_;
  QueryFunc query_;
};

TEST_F(RuleEvalTest, PendingThenFiringAfterForThenResolved) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 0, 2, 1);
  Fill(up, 3, 20, 0);
  AlertingRule rule(MakeAlert("Down", "up == 0", 2 * kMin));
  rule.set_restored(true);
  EvalContext ctx = Ctx();

  ASSERT_TRUE(rule.Eval(2 * kMin, ctx).ok());
  EXPECT_TRUE(rule.ActiveAlerts().empty());

  auto v = rule.Eval(3 * kMin, ctx);
  ASSERT_TRUE(v.ok()) << v.error().message();
  ASSERT_EQ(rule.ActiveAlerts().size(), 1u);
  Alert a = rule.ActiveAlerts()[0];
  EXPECT_EQ(a.state, AlertState::kPending);
  EXPECT_EQ(a.active_at, 3 * kMin);
  EXPECT_EQ(a.labels, (model::Labels{{"alertname", "Down"}, {"job", "a"}}));
  ASSERT_EQ(v->size(), 2u);  // ALERTS and ALERTS_FOR_STATE
  EXPECT_EQ((*v)[0].labels, (model::Labels{{"__name__", "ALERTS"}, {"alertname", "Down"}, {"alertstate", "pending"}, {"job", "a"}}));
  EXPECT_EQ((*v)[1].labels, (model::Labels{{"__name__", "ALERTS_FOR_STATE"}, {"alertname", "Down"}, {"job", "a"}}));
  EXPECT_EQ((*v)[1].v, 180.0);  // activeAt in unix seconds

  ASSERT_TRUE(rule.Eval(4 * kMin, ctx).ok());
  EXPECT_EQ(rule.ActiveAlerts()[0].state, AlertState::kPending);
  v = rule.Eval(5 * kMin, ctx);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(rule.ActiveAlerts()[0].state, AlertState::kFiring);
  EXPECT_EQ(rule.State(), AlertState::kFiring);
  EXPECT_EQ((*v)[0].labels.Get("alertstate"), "firing");

  // Recovers: the alert is resolved, kept (inactive) for sending, not active.
  db_.Add(up, 21 * kMin, 1);
  v = rule.Eval(21 * kMin, ctx);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty());
  EXPECT_TRUE(rule.ActiveAlerts().empty());
  auto all = rule.alerts();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all.begin()->second.state, AlertState::kInactive);
  EXPECT_EQ(all.begin()->second.resolved_at, 21 * kMin);
  // Forgotten after the resolved retention (15m).
  db_.Add(up, 37 * kMin, 1);
  ASSERT_TRUE(rule.Eval(37 * kMin, ctx).ok());
  EXPECT_TRUE(rule.alerts().empty());
}

TEST_F(RuleEvalTest, PendingAlertThatClearsIsDropped) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 0, 1, 0);
  Fill(up, 2, 5, 1);
  AlertingRule rule(MakeAlert("Down", "up == 0", 10 * kMin));
  ASSERT_TRUE(rule.Eval(1 * kMin, Ctx()).ok());
  EXPECT_EQ(rule.ActiveAlerts().size(), 1u);
  ASSERT_TRUE(rule.Eval(2 * kMin, Ctx()).ok());
  EXPECT_TRUE(rule.alerts().empty());
}

TEST_F(RuleEvalTest, KeepFiringForHoldsTheAlert) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 0, 1, 0);
  Fill(up, 2, 10, 1);
  RuleSpec spec = MakeAlert("Down", "up == 0");
  spec.keep_firing_for_ms = 3 * kMin;
  AlertingRule rule(spec);
  ASSERT_TRUE(rule.Eval(1 * kMin, Ctx()).ok());
  EXPECT_EQ(rule.ActiveAlerts()[0].state, AlertState::kFiring);  // for: 0
  for (int m = 2; m <= 4; ++m) {
    ASSERT_TRUE(rule.Eval(m * kMin, Ctx()).ok());
    ASSERT_EQ(rule.ActiveAlerts().size(), 1u) << "minute " << m;
    EXPECT_EQ(rule.ActiveAlerts()[0].state, AlertState::kFiring);
    EXPECT_EQ(rule.ActiveAlerts()[0].keep_firing_since, 2 * kMin);
  }
  ASSERT_TRUE(rule.Eval(5 * kMin, Ctx()).ok());
  EXPECT_TRUE(rule.ActiveAlerts().empty());
  EXPECT_EQ(rule.alerts().begin()->second.resolved_at, 5 * kMin);
}

TEST_F(RuleEvalTest, TemplatesInLabelsAndAnnotations) {
  Fill(model::Labels{{"__name__", "gpu_temp"}, {"gpu", "0"}}, 0, 1, 91.5);
  Fill(model::Labels{{"__name__", "gpu_count"}}, 0, 1, 8);
  RuleSpec spec = MakeAlert("Hot", "gpu_temp > 90");
  spec.labels = {{"severity", "{{ if gt $value 90.0 }}critical{{ else }}warning{{ end }}"}};
  spec.annotations = {
      {"summary", "GPU {{ $labels.gpu }} at {{ $value | humanize }}C in {{ $externalLabels.cluster }}"},
      {"count", "{{ with query \"gpu_count\" }}{{ . | first | value }}{{ end }} GPUs"},
      {"broken", "{{ $value | nosuchfunc }}"},
      {"bad_exec", "{{ index $labels 1 }}"},
  };
  AlertingRule rule(spec);
  ASSERT_TRUE(rule.Eval(1 * kMin, Ctx()).ok());
  ASSERT_EQ(rule.ActiveAlerts().size(), 1u);
  Alert a = rule.ActiveAlerts()[0];
  EXPECT_EQ(a.labels.Get("severity"), "critical");
  EXPECT_EQ(a.annotations.Get("summary"), "GPU 0 at 91.5C in c1");
  EXPECT_EQ(a.annotations.Get("count"), "8 GPUs");
  EXPECT_EQ(a.annotations.Get("broken"),
            "<error expanding template: error parsing template __alert_Hot: template: __alert_Hot:1: function "
            "\"nosuchfunc\" not defined>");
  EXPECT_TRUE(std::string(a.annotations.Get("bad_exec")).starts_with("<error expanding template: error executing template __alert_Hot:"))
      << a.annotations.Get("bad_exec");
}

TEST_F(RuleEvalTest, LimitExceededIsARuleError) {
  for (int i = 0; i < 3; ++i) Fill(model::Labels{{"__name__", "x"}, {"i", std::to_string(i)}}, 0, 1, 1);
  AlertingRule alert(MakeAlert("Many", "x > 0"));
  auto r = alert.Eval(1 * kMin, Ctx(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "exceeded limit of 2 with 3 alerts");
  EXPECT_TRUE(alert.alerts().empty());
  EXPECT_TRUE(alert.Eval(1 * kMin, Ctx(3)).ok());

  RuleSpec rec;
  rec.record = "x:sum";
  rec.expr = "x";
  RecordingRule rr(rec);
  r = rr.Eval(1 * kMin, Ctx(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "exceeded limit of 2 with 3 series");
}

TEST_F(RuleEvalTest, RecordingRuleSetsNameAndLabels) {
  Fill(model::Labels{{"__name__", "x"}, {"i", "1"}}, 0, 1, 2);
  RuleSpec rec;
  rec.record = "job:x";
  rec.expr = "x * 2";
  rec.labels = {{"team", "ml"}};
  RecordingRule rr(rec);
  auto r = rr.Eval(1 * kMin, Ctx());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].labels, (model::Labels{{"__name__", "job:x"}, {"i", "1"}, {"team", "ml"}}));
  EXPECT_EQ((*r)[0].v, 4.0);
  EXPECT_EQ((*r)[0].t, 1 * kMin);
  rec.labels = {{"i", "same"}};
  Fill(model::Labels{{"__name__", "x"}, {"i", "2"}}, 0, 1, 2);
  auto dup = RecordingRule(rec).Eval(1 * kMin, Ctx());
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message(), "vector contains metrics with the same labelset after applying rule labels");
}

TEST_F(RuleEvalTest, SendingFollowsPrometheusNotifierRules) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 0, 10, 0);
  AlertingRule rule(MakeAlert("Down", "up == 0"));
  const int64_t resend = 2 * kMin, interval = kMin;
  ASSERT_TRUE(rule.Eval(1 * kMin, Ctx()).ok());
  auto sent = rule.CollectToSend(1 * kMin, resend, interval, "u");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].starts_at_ms, 1 * kMin);
  EXPECT_EQ(sent[0].ends_at_ms, 1 * kMin + 4 * resend);
  EXPECT_EQ(sent[0].generator_url, "u");
  // Not again before the resend delay has passed.
  ASSERT_TRUE(rule.Eval(2 * kMin, Ctx()).ok());
  EXPECT_TRUE(rule.CollectToSend(2 * kMin, resend, interval, "u").empty());
  ASSERT_TRUE(rule.Eval(3 * kMin, Ctx()).ok());
  EXPECT_TRUE(rule.CollectToSend(3 * kMin, resend, interval, "u").empty());
  ASSERT_TRUE(rule.Eval(4 * kMin, Ctx()).ok());
  EXPECT_EQ(rule.CollectToSend(4 * kMin, resend, interval, "u").size(), 1u);
  // Resolved: sent at once with ends_at = resolution time.
  db_.Add(up, 5 * kMin, 1);
  ASSERT_TRUE(rule.Eval(5 * kMin, Ctx()).ok());
  sent = rule.CollectToSend(5 * kMin, resend, interval, "u");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].ends_at_ms, 5 * kMin);
  EXPECT_EQ(sent[0].starts_at_ms, 1 * kMin);
}

TEST(GeneratorUrlTest, QueryEscapesTheExpression) {
  EXPECT_EQ(GeneratorUrl("http://h:9800/", "up == 0"), "http://h:9800/graph?g0.expr=up+%3D%3D+0&g0.tab=1");
}

class GroupTest : public RuleEvalTest {
 protected:
  std::shared_ptr<GroupOptions> Opts() {
    auto o = std::make_shared<GroupOptions>();
    o->appendable = &db_;
    o->queryable = &db_;
    o->query = query_;
    o->external_url = "http://tw:9800";
    o->notify = [this](std::vector<OutgoingAlert> a) { notified_.insert(notified_.end(), a.begin(), a.end()); };
    return o;
  }
  std::vector<OutgoingAlert> notified_;
};

TEST_F(GroupTest, WritesRecordedSeriesAlertsAndStaleMarkers) {
  const model::Labels x1{{"__name__", "x"}, {"i", "1"}}, x2{{"__name__", "x"}, {"i", "2"}};
  Fill(x1, 0, 10, 5);
  Fill(x2, 0, 1, 5);
  RuleGroup g;
  g.name = "g";
  RuleSpec rec;
  rec.record = "x:rec";
  rec.expr = "x";
  g.rules.push_back(rec);
  g.rules.push_back(MakeAlert("Big", "x:rec > 1"));
  Group group("f.yml", g, kMin, Opts(), false);
  group.Eval(1 * kMin);
  const model::Labels r2{{"__name__", "x:rec"}, {"i", "2"}};
  ASSERT_EQ(db_.Samples(r2).size(), 1u);
  const model::Labels alerts2{{"__name__", "ALERTS"}, {"alertname", "Big"}, {"alertstate", "firing"}, {"i", "2"}};
  ASSERT_EQ(db_.Samples(alerts2).size(), 1u);
  EXPECT_EQ(notified_.size(), 2u);
  EXPECT_EQ(group.rules()[0]->status().health, RuleHealth::kGood);

  // x{i="2"} goes away after the lookback: its recorded series and its alert get stale markers.
  group.Eval(7 * kMin);
  auto s = db_.Samples(r2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(model::IsStaleNaN(s[1].v));
  EXPECT_EQ(s[1].t, 7 * kMin);
  s = db_.Samples(alerts2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(model::IsStaleNaN(s[1].v));
}

TEST_F(GroupTest, RuleErrorsAreKeptAsHealth) {
  RuleGroup g;
  g.name = "g";
  RuleSpec rec;
  rec.record = "bad";
  Fill(model::Labels{{"__name__", "a"}}, 0, 1, 1);
  Fill(model::Labels{{"__name__", "b"}}, 0, 1, 1);
  rec.expr = "{__name__=~\"a|b\"} / 1";  // two series with the same labels once __name__ is dropped
  g.rules.push_back(rec);
  Group group("f.yml", g, kMin, Opts(), false);
  group.Eval(1 * kMin);
  RuleStatus st = group.rules()[0]->status();
  EXPECT_EQ(st.health, RuleHealth::kBad);
  EXPECT_FALSE(st.last_error.empty());
  EXPECT_GT(st.last_evaluation_ms, 0);
}

TEST_F(GroupTest, EvalTimestampIsAlignedWithAStableOffset) {
  RuleGroup g;
  g.name = "g";
  Group group("f.yml", g, kMin, Opts(), false);
  int64_t t1 = group.EvalTimestamp(1'000'000'000'000);
  EXPECT_LE(t1, 1'000'000'000'000);
  EXPECT_GT(t1, 1'000'000'000'000 - kMin);
  EXPECT_EQ(group.EvalTimestamp(1'000'000'000'000 + kMin), t1 + kMin);
  EXPECT_EQ(group.EvalTimestamp(t1), t1);
}

TEST_F(GroupTest, ForStateIsRestoredAfterARestart) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  const int64_t t0 = 100 * kMin;
  Fill(up, 90, 140, 0);
  RuleGroup g;
  g.name = "g";
  g.rules.push_back(MakeAlert("Down", "up == 0", 20 * kMin));
  // The previous process: alert active since minute 100, firing since 120, down at 125.
  const model::Labels fs{{"__name__", "ALERTS_FOR_STATE"}, {"alertname", "Down"}, {"job", "a"}};
  for (int64_t m = 100; m <= 125; ++m) db_.Add(fs, m * kMin, static_cast<double>(t0 / 1000));
  // A pending alert of another rule with more labels must not be taken.
  db_.Add(model::Labels{{"__name__", "ALERTS_FOR_STATE"}, {"alertname", "Down"}, {"job", "a"}, {"x", "y"}}, 125 * kMin,
          static_cast<double>(t0 / 1000 + 600));

  auto opts = Opts();
  opts->for_grace_period_ms = 10 * kMin;
  Group group("f.yml", g, kMin, opts, /*should_restore=*/true);
  group.Eval(130 * kMin);
  group.Eval(131 * kMin);
  EXPECT_EQ(db_.Samples(model::Labels{{"__name__", "ALERTS"}, {"alertname", "Down"}, {"alertstate", "pending"}, {"job", "a"}}).size(), 0u)
      << "no ALERTS before the restore";
  group.RestoreForState(131 * kMin);
  auto& rule = static_cast<AlertingRule&>(*group.rules()[0]);
  ASSERT_EQ(rule.ActiveAlerts().size(), 1u);
  EXPECT_EQ(rule.ActiveAlerts()[0].active_at, t0);
  group.Eval(132 * kMin);
  EXPECT_EQ(rule.ActiveAlerts()[0].state, AlertState::kFiring);
  auto fs_now = db_.Samples(fs);
  EXPECT_EQ(fs_now.back().t, 132 * kMin);
  EXPECT_EQ(fs_now.back().v, static_cast<double>(t0 / 1000));
}

TEST_F(GroupTest, RestoreShiftsPendingAlertsByTheDowntime) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 90, 200, 0);
  RuleGroup g;
  g.name = "g";
  g.rules.push_back(MakeAlert("Down", "up == 0", 60 * kMin));
  const model::Labels fs{{"__name__", "ALERTS_FOR_STATE"}, {"alertname", "Down"}, {"job", "a"}};
  // Pending since minute 100, down at minute 110 (50m of `for` left), back at 130.
  for (int64_t m = 100; m <= 110; ++m) db_.Add(fs, m * kMin, static_cast<double>(100 * kMin / 1000));
  auto opts = Opts();
  Group group("f.yml", g, kMin, opts, true);
  group.Eval(129 * kMin);
  group.Eval(130 * kMin);
  group.RestoreForState(130 * kMin);
  auto& rule = static_cast<AlertingRule&>(*group.rules()[0]);
  ASSERT_EQ(rule.ActiveAlerts().size(), 1u);
  EXPECT_EQ(rule.ActiveAlerts()[0].active_at, 120 * kMin);  // 100 + 20 minutes down
}

TEST_F(GroupTest, ReloadKeepsAlertState) {
  const model::Labels up{{"__name__", "up"}, {"job", "a"}};
  Fill(up, 0, 10, 0);
  RuleGroup g;
  g.name = "g";
  g.rules.push_back(MakeAlert("Down", "up == 0", 5 * kMin));
  Group old("f.yml", g, kMin, Opts(), false);
  old.Eval(1 * kMin);
  Group fresh("f.yml", g, kMin, Opts(), false);
  fresh.CopyState(old);
  auto& rule = static_cast<AlertingRule&>(*fresh.rules()[0]);
  ASSERT_EQ(rule.ActiveAlerts().size(), 1u);
  EXPECT_EQ(rule.ActiveAlerts()[0].active_at, 1 * kMin);
}

TEST_F(RuleEvalTest, ManagerRejectsABadFileAndKeepsTheRunningRules) {
  ManagerOptions mo;
  mo.appendable = &db_;
  mo.queryable = &db_;
  mo.engine = &engine_;
  Manager m(mo);
  ManagerConfig cfg;
  cfg.evaluation_interval_ms = 3600 * 1000;  // no evaluation during the test
  cfg.sources.push_back({"good.yml", "groups: [{name: g, rules: [{record: a, expr: vector(1)}]}]", true});
  ASSERT_TRUE(m.Update(cfg).ok());
  ASSERT_EQ(m.Groups().size(), 1u);
  cfg.sources.push_back({"bad.yml", "groups:\n  - name: h\n    rules:\n      - record: b\n        expr: sum(\n", true});
  Status s = m.Update(cfg);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.yml: 5:15: group \"h\", rule 1, \"b\": could not parse expression"), std::string::npos)
      << s.message();
  ASSERT_EQ(m.Groups().size(), 1u);
  EXPECT_EQ(m.Groups()[0]->name(), "g");
  // The default pack parses and loads.
  cfg.sources = {{std::string(kDefaultRulePackName), std::string(DefaultRulePack()), true}};
  ASSERT_TRUE(m.Update(cfg).ok()) << m.Update(cfg).message();
  EXPECT_GE(m.Groups().size(), 1u);
  m.Stop();
}

}  // namespace
}  // namespace trainwatch::rules
