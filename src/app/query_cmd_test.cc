#include "app/query_cmd.h"

#include <gtest/gtest.h>

#include <vector>

#include "app/flags.h"

namespace trainwatch::app {
namespace {

TEST(QueryCmdTest, ParsesQuerySubcommand) {
  std::vector<const char*> args = {"trainwatch", "query", "sum(up)", "--start", "100", "--end", "200", "--step", "15s",
                                   "--server", "http://127.0.0.1:1"};
  auto c = ParseCommandLine(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kQuery);
  EXPECT_EQ(c->query.expr, "sum(up)");
  EXPECT_EQ(c->query.start, "100");
  EXPECT_EQ(c->query.step, "15s");
  EXPECT_EQ(c->query.server, "http://127.0.0.1:1");
  std::vector<const char*> plain = {"trainwatch", "query", "up"};
  c = ParseCommandLine(static_cast<int>(plain.size()), plain.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->query.server, "http://127.0.0.1:9800");
  EXPECT_TRUE(c->query.time.empty());
}

TEST(QueryCmdTest, ValidatesFlags) {
  QueryOptions o;
  o.expr = "up";
  EXPECT_TRUE(ValidateQueryOptions(o).ok());
  o.time = "yesterday";
  EXPECT_EQ(ValidateQueryOptions(o).message(), "--time: cannot parse \"yesterday\" to a valid timestamp");
  o.time = "100";
  o.start = "50";
  EXPECT_FALSE(ValidateQueryOptions(o).ok());
  o.time.clear();
  o.end = "10";
  EXPECT_EQ(ValidateQueryOptions(o).message(), "--end: before --start");
  o.end = "2026-12-02T10:00:00Z";
  o.step = "0";
  EXPECT_EQ(ValidateQueryOptions(o).message(), "--step: must be positive");
  o.step = "1m";
  EXPECT_TRUE(ValidateQueryOptions(o).ok());
  o.server = "127.0.0.1:9800";
  EXPECT_FALSE(ValidateQueryOptions(o).ok());
  QueryOptions p;
  p.expr = "up";
  p.step = "15s";
  EXPECT_FALSE(ValidateQueryOptions(p).ok());  // --step without --start
}

TEST(QueryCmdTest, FormatsInstantVectorAsTable) {
  std::string w;
  auto t = FormatQueryResponse(
      R"({"status":"success","data":{"resultType":"vector","result":[)"
      R"({"metric":{"__name__":"up","instance":"a:1","job":"x"},"value":[1796207149.698,"1"]},)"
      R"({"metric":{"job":"y\"q"},"value":[1796207149.698,"NaN"]}]}})",
      &w);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*t,
            "SERIES                       VALUE\n"
            "up{instance=\"a:1\", job=\"x\"}  1\n"
            "{job=\"y\\\"q\"}                 NaN\n");
  EXPECT_EQ(w, "");
}

TEST(QueryCmdTest, FormatsScalarMatrixEmptyAndWarnings) {
  std::string w;
  EXPECT_EQ(*FormatQueryResponse(R"({"status":"success","data":{"resultType":"scalar","result":[1,"2"]}})", &w), "2\n");
  EXPECT_EQ(*FormatQueryResponse(R"({"status":"success","data":{"resultType":"string","result":[1,"hi"]}})", &w),
            "hi\n");
  EXPECT_EQ(*FormatQueryResponse(R"({"status":"success","data":{"resultType":"vector","result":[]}})", &w),
            "(no series)\n");
  auto t = FormatQueryResponse(
      R"({"status":"success","data":{"resultType":"matrix","result":[)"
      R"({"metric":{"__name__":"m"},"values":[[1796207100,"1"],[1796207115.5,"2.5"]]},)"
      R"({"metric":{},"values":[[0,"3"]]}]},"warnings":["careful"],"infos":["maybe"]})",
      &w);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*t,
            "m\n  2026-12-02T10:25:00Z  1\n  2026-12-02T10:25:15.500Z  2.5\n\n{}\n  1970-01-01T00:00:00Z  3\n");
  EXPECT_EQ(w, "careful\nmaybe\n");
  EXPECT_FALSE(FormatQueryResponse("not json", &w).ok());
  // Fields of the wrong JSON type are an error, not a crash.
  EXPECT_FALSE(FormatQueryResponse(
                   R"({"status":"success","data":{"resultType":"vector","result":[{"metric":[1],"value":[1,"2"]}]}})", &w)
                   .ok());
  EXPECT_FALSE(FormatQueryResponse(R"({"status":"success","data":{"resultType":7,"result":[]}})", &w).ok());
  EXPECT_FALSE(FormatQueryResponse(R"({"status":"success","data":{"resultType":"weird","result":[]}})", &w).ok());
}

TEST(QueryCmdTest, FormatsNativeHistograms) {
  std::string w;
  const std::string h =
      R"({"count":"5","sum":"10","buckets":[[3,"-0.001","0.001","1"],[0,"0.5","1","2"],[1,"1","2","2"]]})";
  auto t = FormatQueryResponse(R"({"status":"success","data":{"resultType":"vector","result":[)"
                               R"({"metric":{"__name__":"h"},"histogram":[1796207149,)" + h + "]}]}}",
                               &w);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*t, "SERIES  VALUE\nh       {count:5, sum:10, [-0.001,0.001]:1, (0.5,1]:2, [1,2):2}\n");
  // A matrix series with floats and histograms lists both by time.
  t = FormatQueryResponse(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                          R"({"metric":{"__name__":"h"},"values":[[1796207115,"3"]],"histograms":[[1796207100,)" +
                              h + "]]}]}}",
                          &w);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*t,
            "h\n  2026-12-02T10:25:00Z  {count:5, sum:10, [-0.001,0.001]:1, (0.5,1]:2, [1,2):2}\n"
            "  2026-12-02T10:25:15Z  3\n");
}

}  // namespace
}  // namespace trainwatch::app
