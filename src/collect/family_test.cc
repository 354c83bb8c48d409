#include "collect/family.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace trainwatch::collect {
namespace {

TEST(FamilyTest, RendersHelpTypeAndEscapedLabels) {
  Families f;
  Add(&f, "node_load1", "1m load average.", MetricType::kGauge, {}, 0.25);
  Add(&f, "node_x_total", "Help with \\ and\nnewline.", MetricType::kCounter, model::Labels{{"a", "q\"uo\\te\n"}}, 3);
  Add(&f, "node_x_total", "ignored", MetricType::kCounter, model::Labels{{"a", "b"}}, 1e21);
  Add(&f, "node_vmstat_pgfault", "vm", MetricType::kUntyped, {}, std::numeric_limits<double>::quiet_NaN());
  ASSERT_EQ(f.size(), 3u);
  std::string out;
  RenderText(f, &out);
  EXPECT_EQ(out,
            "# HELP node_load1 1m load average.\n"
            "# TYPE node_load1 gauge\n"
            "node_load1 0.25\n"
            "# HELP node_x_total Help with \\\\ and\\nnewline.\n"
            "# TYPE node_x_total counter\n"
            "node_x_total{a=\"q\\\"uo\\\\te\\n\"} 3\n"
            "node_x_total{a=\"b\"} 1e+21\n"
            "# HELP node_vmstat_pgfault vm\n"
            "# TYPE node_vmstat_pgfault untyped\n"
            "node_vmstat_pgfault NaN\n");
}

TEST(FamilyTest, FormatValue) {
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(1796230253), "1796230253");
}

}  // namespace
}  // namespace trainwatch::collect
