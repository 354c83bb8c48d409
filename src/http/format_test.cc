#include "http/format.h"

#include <gtest/gtest.h>

#include <cmath>

namespace trainwatch::http {
namespace {

TEST(FormatTest, PromFloatMatchesGoFormatFloatF) {
  auto f = [](double v) {
    std::string s;
    AppendPromFloat(&s, v);
    return s;
  };
  EXPECT_EQ(f(1), "1");
  EXPECT_EQ(f(0.20006001800540163), "0.20006001800540163");
  EXPECT_EQ(f(0.16376), "0.16376");
  EXPECT_EQ(f(1e21), "1000000000000000000000");
  EXPECT_EQ(f(1e-7), "0.0000001");
  EXPECT_EQ(f(-2.5), "-2.5");
  EXPECT_EQ(f(NAN), "NaN");
  EXPECT_EQ(f(HUGE_VAL), "+Inf");
  EXPECT_EQ(f(-HUGE_VAL), "-Inf");
}

TEST(FormatTest, ExpositionFloatMatchesGoFormatFloatG) {
  auto f = [](double v) {
    std::string out;
    AppendExpositionFloat(&out, v);
    return out;
  };
  // strconv.FormatFloat(v, 'g', -1, 64), as Prometheus's text format writes values.
  EXPECT_EQ(f(0), "0");
  EXPECT_EQ(f(1), "1");
  EXPECT_EQ(f(123456.7), "123456.7");
  EXPECT_EQ(f(999999), "999999");
  EXPECT_EQ(f(1e6), "1e+06");
  EXPECT_EQ(f(1234567), "1.234567e+06");
  EXPECT_EQ(f(0.0001), "0.0001");
  EXPECT_EQ(f(0.00001), "1e-05");
  EXPECT_EQ(f(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(f(1e100), "1e+100");
  EXPECT_EQ(f(1.7962071467e9), "1.7962071467e+09");
  EXPECT_EQ(f(NAN), "NaN");
  EXPECT_EQ(f(-INFINITY), "-Inf");
}

TEST(FormatTest, TimestampsLikePrometheus) {
  auto f = [](int64_t ms) {
    std::string s;
    AppendPromTimestamp(&s, ms);
    return s;
  };
  EXPECT_EQ(f(1796207149698), "1796207149.698");
  EXPECT_EQ(f(1796207149000), "1796207149");
  EXPECT_EQ(f(1796207149050), "1796207149.050");
  EXPECT_EQ(f(1796207149005), "1796207149.005");
  EXPECT_EQ(f(-1500), "-1.500");
}

TEST(FormatTest, ExportValuesLikeVictoriaMetrics) {
  auto f = [](double v) {
    std::string s;
    AppendExportValue(&s, v);
    return s;
  };
  EXPECT_EQ(f(2.5), "2.5");
  EXPECT_EQ(f(NAN), "null");
  EXPECT_EQ(f(HUGE_VAL), "\"Infinity\"");
  EXPECT_EQ(f(-HUGE_VAL), "\"-Infinity\"");
}

TEST(FormatTest, JsonEscapes) {
  std::string s;
  AppendJsonString(&s, "a\"b\\c\nd\x01");
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\nd\\u0001\"");
  std::string l;
  AppendLabelsJson(&l, model::Labels{{"__name__", "up"}, {"job", "x"}});
  EXPECT_EQ(l, "{\"__name__\":\"up\",\"job\":\"x\"}");
}

}  // namespace
}  // namespace trainwatch::http
