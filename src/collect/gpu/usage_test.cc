#include "collect/gpu/usage.h"

#include <gtest/gtest.h>

namespace trainwatch::collect::gpu {
namespace {

model::Labels Gpu(const std::string& uuid, const std::string& model = "NVIDIA H100 80GB HBM3",
                  std::initializer_list<std::pair<std::string, std::string>> extra = {}) {
  std::vector<model::Label> v{{"gpu", uuid.substr(4)}, {"UUID", uuid}, {"Hostname", "n1"}, {"modelName", model}};
  for (const auto& [n, x] : extra) v.push_back({n, x});
  return model::Labels(std::move(v));
}

struct Fleet {
  Families fams{{"DCGM_FI_DEV_GPU_UTIL", "", MetricType::kGauge, {}},
                {"DCGM_FI_DEV_POWER_USAGE", "", MetricType::kGauge, {}},
                {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "", MetricType::kCounter, {}},
                {"trainwatch_gpu_process_memory_used_bytes", "", MetricType::kGauge, {}}};
  void Add(const std::string& uuid, double util, double power_w, double energy_mj, const std::string& model) {
    fams[0].metrics.push_back({Gpu(uuid, model), util});
    fams[1].metrics.push_back({Gpu(uuid, model), power_w});
    if (energy_mj >= 0) fams[2].metrics.push_back({Gpu(uuid, model), energy_mj});
  }
  void Proc(const std::string& uuid, const std::string& pid, const std::string& run, const std::string& model) {
    if (run.empty()) {
      fams[3].metrics.push_back({Gpu(uuid, model, {{"pid", pid}}), 1 << 20});
    } else {
      fams[3].metrics.push_back({Gpu(uuid, model, {{"pid", pid}, {"project", "p"}, {"run", run}}), 1 << 20});
    }
  }
};

TEST(PriceTableTest, ModelsAndFallback) {
  auto t = PriceTable::Parse(" H100=4.5, a100 = 2.25 ,1.5");
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(t->For("NVIDIA H100 80GB HBM3"), 4.5);
  EXPECT_EQ(t->For("NVIDIA A100-SXM4-80GB"), 2.25);
  EXPECT_EQ(t->For("Tesla V100"), 1.5);
  EXPECT_TRUE(PriceTable::Parse("")->empty());
  EXPECT_EQ(PriceTable::Parse("")->For("H100"), 0);
  EXPECT_EQ(PriceTable::Parse("H100=x").error().message(), "price of \"H100\": expected a number >= 0, got \"x\"");
  EXPECT_EQ(PriceTable::Parse("1,2").error().message(), "more than one price without a model");
  EXPECT_EQ(PriceTable::Parse("=3").error().message(), "\"=3\": expected MODEL=PRICE");
  EXPECT_EQ(PriceTable::Parse("-1").error().message(), "price \"-1\": expected a number >= 0");
}

TEST(UsageMeterTest, TimeEnergyIdleAndCostPerRun) {
  UsageOptions o;
  o.prices = *PriceTable::Parse("H100=3.6,A100=1.8");
  UsageMeter meter(o);
  auto fleet = [](double energy0, double energy1) {
    Fleet f;
    f.Add("GPU-0", 95, 700, energy0, "NVIDIA H100 80GB HBM3");  // run a alone, energy counter
    f.Proc("GPU-0", "10", "a", "NVIDIA H100 80GB HBM3");
    f.Add("GPU-1", 5, 100, -1, "NVIDIA A100-SXM4-80GB");  // runs a and b share it, idle, no counter
    f.Proc("GPU-1", "10", "a", "NVIDIA A100-SXM4-80GB");
    f.Proc("GPU-1", "11", "b", "NVIDIA A100-SXM4-80GB");
    f.Proc("GPU-1", "12", "", "NVIDIA A100-SXM4-80GB");  // not a run's process
    f.Add("GPU-2", 90, 300, energy1, "NVIDIA H100 80GB HBM3");  // nobody's
    return f;
  };
  EXPECT_TRUE(meter.Add(fleet(1000000, 0).fams, 100000).empty());  // the baseline
  auto u = meter.Add(fleet(1000000 + 15 * 650 * 1000, 15 * 300 * 1000).fams, 115000);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].run, "a");
  EXPECT_EQ(u[0].project, "p");
  EXPECT_DOUBLE_EQ(u[0].gpu_seconds, 15 + 7.5);
  EXPECT_DOUBLE_EQ(u[0].energy_joules, 15 * 650 + 15 * 100 / 2.0);  // the counter's 650 W; power's 100 W shared
  EXPECT_DOUBLE_EQ(u[0].idle_seconds, 7.5);
  EXPECT_DOUBLE_EQ(u[0].cost, 15 / 3600.0 * 3.6 + 7.5 / 3600.0 * 1.8);
  EXPECT_EQ(u[1].run, "b");
  EXPECT_DOUBLE_EQ(u[1].gpu_seconds, 7.5);
  EXPECT_DOUBLE_EQ(u[1].energy_joules, 750);
  // A gap longer than max_gap_ms (the server was down) is not counted, only re-based.
  EXPECT_TRUE(meter.Add(fleet(1e9, 0).fams, 115000 + o.max_gap_ms + 1).empty());
  u = meter.Add(fleet(1e9 + 700000, 0).fams, 115000 + o.max_gap_ms + 1001);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_DOUBLE_EQ(u[0].gpu_seconds, 1 + 0.5);
  EXPECT_DOUBLE_EQ(u[0].energy_joules, 700 + 50);
  // A counter that went back (a driver reload) falls back to power x time.
  u = meter.Add(fleet(5, 0).fams, 115000 + o.max_gap_ms + 2001);
  EXPECT_DOUBLE_EQ(u[0].energy_joules, 700 + 50);
  // A GPU that vanished and came back starts from a new baseline.
  Fleet only0;
  only0.Add("GPU-0", 95, 700, 10, "NVIDIA H100 80GB HBM3");
  only0.Proc("GPU-0", "10", "a", "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(meter.Add(only0.fams, 115000 + o.max_gap_ms + 3001).size(), 1u);
  u = meter.Add(fleet(20, 0).fams, 115000 + o.max_gap_ms + 4001);
  ASSERT_EQ(u.size(), 1u);  // GPU-1 (and with it run b) is new again
  EXPECT_DOUBLE_EQ(u[0].gpu_seconds, 1);
}

}  // namespace
}  // namespace trainwatch::collect::gpu
