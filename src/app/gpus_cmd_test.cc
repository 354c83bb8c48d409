#include "app/gpus_cmd.h"

#include <gtest/gtest.h>

#include "app/flags.h"

namespace trainwatch::app {
namespace {

using json = nlohmann::json;

json Sample(const std::string& gpu, const std::string& value, json extra = json::object()) {
  json m = {{"gpu", gpu}, {"Hostname", "node7"}, {"modelName", "NVIDIA H100 80GB HBM3"}};
  m.update(extra);
  return {{"metric", m}, {"value", json::array({1796218600.0, value})}};
}

// Issue 19: one row per GPU from the instant queries, joined by host and
// index, with the runs and ranks whose processes use it.
TEST(GpusCmdTest, JoinsColumnsAndUsersPerGpu) {
  std::map<std::string, json> r;
  r["DCGM_FI_DEV_GPU_UTIL"] = json::array({Sample("10", "97"), Sample("2", "5"), Sample("0", "88")});
  r["DCGM_FI_DEV_FB_USED"] = json::array({Sample("0", "61440"), Sample("2", "512")});
  r["DCGM_FI_DEV_FB_FREE"] = json::array({Sample("0", "20119"), Sample("2", "81047")});
  r["DCGM_FI_DEV_GPU_TEMP"] = json::array({Sample("0", "71")});
  r["DCGM_FI_DEV_POWER_USAGE"] = json::array({Sample("0", "689.6")});
  r["trainwatch_gpu_process_memory_used_bytes"] = json::array(
      {Sample("0", "1", {{"pid", "4242"}, {"project", "llm"}, {"run", "sweep-3"}, {"rank", "1"}}),
       Sample("0", "1", {{"pid", "99"}}), Sample("0", "1", {{"pid", "100"}}),
       Sample("10", "1", {{"pid", "7"}, {"project", "cv"}, {"run", "r"}})});
  std::vector<GpuRow> rows = JoinGpuRows(r);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].gpu, "0");  // by index as a number: 0, 2, 10
  EXPECT_EQ(rows[1].gpu, "2");
  EXPECT_EQ(rows[2].gpu, "10");
  EXPECT_EQ(*rows[0].util, 88);
  EXPECT_EQ(*rows[0].mem_used_mib, 61440);
  EXPECT_EQ(*rows[0].mem_total_mib, 81559);  // used + free
  // Runs and ranks first, then the pids of no run by number.
  EXPECT_EQ(rows[0].users, (std::vector<std::string>{"llm/sweep-3 rank 1", "pid 99", "pid 100"}));
  EXPECT_EQ(rows[2].users, (std::vector<std::string>{"cv/r"}));
  EXPECT_FALSE(rows[2].mem_total_mib);  // no memory series for it
  std::string table = FormatGpuTable(rows, "http://127.0.0.1:9800", 1796218600000);
  EXPECT_NE(table.find("HOST"), std::string::npos) << table;
  EXPECT_NE(table.find("node7   0  NVIDIA H100 80GB HBM3   88%     61440 / 81559    71C     690W  "
                       "llm/sweep-3 rank 1, pid 99, pid 100\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("node7  10  NVIDIA H100 80GB HBM3   97%                 -      -        -  cv/r\n"),
            std::string::npos)
      << table;
}

// FB_TOTAL (nvidia-smi's total) wins over used + free; a series without
// Hostname (a dcgm-exporter scraped without it) is keyed by its instance;
// hosts sort by name; NaN and missing columns print "-".
TEST(GpusCmdTest, TotalMemoryInstanceFallbackAndGaps) {
  json a = {{"gpu", "1"}, {"instance", "b:9400"}, {"modelName", "NVIDIA A100-SXM4-40GB"}};
  json b = {{"gpu", "0"}, {"Hostname", "a"}, {"instance", "a:9800"}, {"modelName", "NVIDIA H100 80GB HBM3"}};
  auto s = [](const json& m, const std::string& v) { return json{{"metric", m}, {"value", {1.0, v}}}; };
  std::map<std::string, json> r;
  r["DCGM_FI_DEV_GPU_UTIL"] = json::array({s(a, "NaN"), s(b, "3")});
  r["DCGM_FI_DEV_FB_USED"] = json::array({s(a, "100"), s(b, "1000")});
  r["DCGM_FI_DEV_FB_FREE"] = json::array({s(a, "40000"), s(b, "80047")});
  r["DCGM_FI_DEV_FB_TOTAL"] = json::array({s(b, "81559")});
  r["DCGM_FI_DEV_POWER_USAGE"] = json::array({s(b, "not a number")});
  std::vector<GpuRow> rows = JoinGpuRows(r);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].host, "a");
  EXPECT_EQ(*rows[0].mem_total_mib, 81559);  // FB_TOTAL, not 1000 + 80047
  EXPECT_FALSE(rows[0].power_w);
  EXPECT_EQ(rows[1].host, "b:9400");
  EXPECT_EQ(rows[1].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_FALSE(rows[1].util);
  EXPECT_EQ(*rows[1].mem_total_mib, 40100);  // used + free without FB_TOTAL
  std::string table = FormatGpuTable(rows, "u", 0);
  EXPECT_NE(table.find("a        0  NVIDIA H100 80GB HBM3    3%      1000 / 81559      -        -  -\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("b:9400   1  NVIDIA A100-SXM4-40GB     -       100 / 40100      -        -  -\n"),
            std::string::npos)
      << table;
  // No GPU at all: the table says which metric it looked for.
  EXPECT_NE(FormatGpuTable({}, "u", 0).find("no GPU series found (looked for DCGM_FI_DEV_GPU_UTIL"),
            std::string::npos);
}

TEST(GpusCmdTest, Flags) {
  std::vector<const char*> args = {"trainwatch", "gpus", "--once", "--url", "https://u:p@gpu-box:9800/tw",
                                   "--interval", "0.5"};
  auto c = ParseCommandLine(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kGpus);
  EXPECT_TRUE(c->gpus.once);
  EXPECT_EQ(c->gpus.url, "https://u:p@gpu-box:9800/tw");
  EXPECT_EQ(c->gpus.interval_s, 0.5);
  args = {"trainwatch", "gpus"};
  c = ParseCommandLine(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->gpus.once);
  EXPECT_EQ(c->gpus.interval_s, 2);
  EXPECT_EQ(c->gpus.url, "http://127.0.0.1:9800");
  args = {"trainwatch", "gpus", "--interval", "0"};  // a usage error, already printed
  c = ParseCommandLine(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExit);
  EXPECT_NE(c->exit_code, 0);
}

}  // namespace
}  // namespace trainwatch::app
