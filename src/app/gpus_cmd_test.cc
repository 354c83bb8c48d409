#include "app/gpus_cmd.h"

#include <gtest/gtest.h>

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
       Sample("0", "1", {{"pid", "99"}}), Sample("10", "1", {{"pid", "7"}, {"project", "cv"}, {"run", "r"}})});
  std::vector<GpuRow> rows = JoinGpuRows(r);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].gpu, "0");  // by index as a number: 0, 2, 10
  EXPECT_EQ(rows[1].gpu, "2");
  EXPECT_EQ(rows[2].gpu, "10");
  EXPECT_EQ(*rows[0].util, 88);
  EXPECT_EQ(*rows[0].mem_used_mib, 61440);
  EXPECT_EQ(*rows[0].mem_total_mib, 81559);  // used + free
  EXPECT_EQ(rows[0].users, (std::vector<std::string>{"llm/sweep-3 rank 1", "pid 99"}));
  EXPECT_EQ(rows[2].users, (std::vector<std::string>{"cv/r"}));
  EXPECT_FALSE(rows[2].mem_total_mib);  // no memory series for it
  std::string table = FormatGpuTable(rows, "http://127.0.0.1:9800", 1796218600000);
  EXPECT_NE(table.find("HOST"), std::string::npos) << table;
  EXPECT_NE(table.find("node7   0  NVIDIA H100 80GB HBM3   88%     61440 / 81559    71C     690W  llm/sweep-3 rank 1, pid 99\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("node7  10  NVIDIA H100 80GB HBM3   97%                 -      -        -  cv/r\n"),
            std::string::npos)
      << table;
  EXPECT_NE(FormatGpuTable({}, "u", 0).find("no GPU series (DCGM_FI_DEV_GPU_UTIL)"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::app
