#include "common/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

namespace trainwatch::common::metrics {
namespace {

std::string Render(const Registry& r) {
  std::string out;
  r.Render(&out);
  return out;
}

TEST(MetricsTest, RendersFamiliesByNameWithHelpAndType) {
  Registry r;
  CounterFamily requests("b_requests_total", "Requests served.", {"code", "handler"});
  GaugeFamily temp("a_temperature", "Temperature.");
  SummaryFamily dur("c_duration_seconds", "Time spent.", {"handler"});
  Registration reg = r.MustRegister({&requests, &temp, &dur});
  requests.With({"200", "/q"}).Inc(3);
  requests.With({"200", "/a"}).Inc();
  temp.Get().Set(21.5);
  dur.With({"/q"}).Observe(0.25);
  dur.With({"/q"}).Observe(0.5);
  EXPECT_EQ(Render(r),
            "# HELP a_temperature Temperature.\n"
            "# TYPE a_temperature gauge\n"
            "a_temperature 21.5\n"
            "# HELP b_requests_total Requests served.\n"
            "# TYPE b_requests_total counter\n"
            "b_requests_total{code=\"200\",handler=\"/a\"} 1\n"
            "b_requests_total{code=\"200\",handler=\"/q\"} 3\n"
            "# HELP c_duration_seconds Time spent.\n"
            "# TYPE c_duration_seconds summary\n"
            "c_duration_seconds_sum{handler=\"/q\"} 0.75\n"
            "c_duration_seconds_count{handler=\"/q\"} 2\n");
}

TEST(MetricsTest, FamilyWithoutSamplesIsLeftOutAndOneWithoutLabelsIsAlwaysThere) {
  Registry r;
  CounterFamily labelled("x_total", "X.", {"l"});
  CounterFamily bare("y_total", "Y.");
  Registration reg = r.MustRegister({&labelled, &bare});
  EXPECT_EQ(Render(r), "# HELP y_total Y.\n# TYPE y_total counter\ny_total 0\n");
  labelled.With({"v"});
  labelled.Remove({"v"});
  EXPECT_EQ(Render(r).find("x_total"), std::string::npos);
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry r;
  GaugeFamily g("g", "Help with \\ and\nnewline \"quoted\".", {"path"});
  Registration reg = r.MustRegister({&g});
  g.With({"C:\\dir \"x\"\nnext"}).Set(1);
  EXPECT_EQ(Render(r),
            "# HELP g Help with \\\\ and\\nnewline \"quoted\".\n"
            "# TYPE g gauge\n"
            "g{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(MetricsTest, ValuesAsPrometheusPrintsThem) {
  auto f = [](double v, std::string_view want) {
    std::string s;
    AppendValue(&s, v);
    EXPECT_EQ(s, want) << v;
  };
  f(0, "0");
  f(42, "42");
  f(0.1, "0.1");
  f(1796207149698, "1796207149698");
  f(1e6, "1000000");
  f(-2.5, "-2.5");
  f(std::numeric_limits<double>::quiet_NaN(), "NaN");
  f(std::numeric_limits<double>::infinity(), "+Inf");
  f(-std::numeric_limits<double>::infinity(), "-Inf");
}

TEST(MetricsTest, DuplicateNamesAreRefused) {
  Registry r;
  CounterFamily a("dup_total", "A.");
  CounterFamily b("dup_total", "B.");
  Registration reg = r.MustRegister({&a});
  Result<Registration> again = r.Register({&b});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), "metric family dup_total is registered already");
  Collector c({{"one", "One.", Type::kGauge, {}}, {"one", "Again.", Type::kGauge, {}}}, [](Emitter*) {});
  EXPECT_FALSE(r.Register({&c}).ok());  // within one registration too
  reg.Reset();  // the name is free again
  Result<Registration> now = r.Register({&b});
  EXPECT_TRUE(now.ok());
}

TEST(MetricsTest, CollectorComputesAtScrapeTime) {
  Registry r;
  int calls = 0;
  Collector c({{"q_length", "Queue length.", Type::kGauge, {}},
               {"q_items", "Items by state.", Type::kGauge, {"state"}}},
              [&](Emitter* e) {
                calls++;
                e->Add("q_items", {"waiting"}, 2);
                e->Add("q_items", {"active"}, calls);
                e->Add("q_length", {}, 7);
              });
  Registration reg = r.MustRegister({&c});
  EXPECT_EQ(Render(r),
            "# HELP q_items Items by state.\n"
            "# TYPE q_items gauge\n"
            "q_items{state=\"active\"} 1\n"
            "q_items{state=\"waiting\"} 2\n"
            "# HELP q_length Queue length.\n"
            "# TYPE q_length gauge\n"
            "q_length 7\n");
  EXPECT_NE(Render(r).find("q_items{state=\"active\"} 2\n"), std::string::npos);
  EXPECT_EQ(calls, 2);
  reg.Reset();
  EXPECT_EQ(Render(r), "");
  EXPECT_EQ(calls, 2);
}

TEST(MetricsTest, RegistrationMovesAndUnregistersOnce) {
  Registry r;
  CounterFamily a("a_total", "A.");
  Registration outer;
  {
    Registration inner = r.MustRegister({&a});
    outer = std::move(inner);
  }
  EXPECT_NE(Render(r).find("a_total 0"), std::string::npos);
  outer = Registration();
  EXPECT_EQ(Render(r), "");
}

TEST(MetricsTest, ConcurrentIncrementsAndRendersAreExact) {
  Registry r;
  CounterFamily c("c_total", "C.", {"worker"});
  CounterFamily total("t_total", "T.");
  GaugeFamily g("g", "G.");
  SummaryFamily s("s", "S.");
  Registration reg = r.MustRegister({&c, &total, &g, &s});
  constexpr int kThreads = 4, kIncs = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      Counter& mine = c.With({std::to_string(t % 2)});
      for (int i = 0; i < kIncs; i++) {
        mine.Inc();
        total.Get().Inc();
        g.Get().Add(1);
        s.Get().Observe(0.5);
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 50; i++) Render(r);
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(total.Get().Value(), uint64_t{kThreads * kIncs});
  EXPECT_EQ(c.With({"0"}).Value(), uint64_t{kThreads / 2 * kIncs});
  EXPECT_EQ(g.Get().Value(), kThreads * kIncs);
  EXPECT_EQ(s.Get().Count(), uint64_t{kThreads * kIncs});
  EXPECT_EQ(s.Get().Sum(), kThreads * kIncs * 0.5);
  EXPECT_NE(Render(r).find("t_total 80000\n"), std::string::npos);
}

// A registration going away while a render collects it waits for that
// render: the collector never runs on a destroyed object.
TEST(MetricsTest, UnregisterWaitsForARenderInProgress) {
  Registry r;
  std::atomic<bool> in_collect{false}, release{false};
  auto c = std::make_unique<Collector>(std::vector<Desc>{{"slow", "Slow.", Type::kGauge, {}}}, [&](Emitter* e) {
    in_collect = true;
    while (!release) std::this_thread::yield();
    e->Add("slow", {}, 1);
  });
  auto reg = std::make_unique<Registration>(r.MustRegister({c.get()}));
  std::string out;
  std::thread render([&] { r.Render(&out); });
  while (!in_collect) std::this_thread::yield();
  std::atomic<bool> gone{false};
  std::thread unregister([&] {
    reg.reset();
    gone = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(gone);
  release = true;
  render.join();
  unregister.join();
  c.reset();
  EXPECT_EQ(out, "# HELP slow Slow.\n# TYPE slow gauge\nslow 1\n");
  EXPECT_EQ(Render(r), "");
}

}  // namespace
}  // namespace trainwatch::common::metrics
