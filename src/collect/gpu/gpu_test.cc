// The GPU collector against tests/fake_nvml, loaded through the real dlopen path.
#include "collect/gpu/gpu.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "base/file.h"

namespace trainwatch::collect::gpu {
namespace {

constexpr int kGpus = 8;
constexpr int kLostGpu = 3;         // NVML_ERROR_GPU_IS_LOST
constexpr int kPartialGpu = 5;      // NOT_SUPPORTED: memory temperature, encoder, ECC fields
constexpr int kXidGpu = 2;          // one XID 79 event
constexpr int kProcGpu = 1;         // two compute processes

std::map<std::string, double> Flatten(const Families& fams, std::map<std::string, MetricType>* types) {
  std::map<std::string, double> out;
  for (const Family& f : fams) {
    if (types != nullptr) {
      EXPECT_TRUE(types->emplace(f.name, f.type).second) << "family twice: " << f.name;
    }
    for (const Metric& m : f.metrics) {
      std::string key = f.name + "{";
      bool first = true;
      for (const model::Label& l : m.labels) {
        if (!first) key += ",";
        first = false;
        key += l.name + "=\"" + l.value + "\"";
      }
      key += "}";
      EXPECT_TRUE(out.emplace(key, m.value).second) << "duplicate series " << key;
    }
  }
  return out;
}

class GpuFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_gpu_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string cfg = "driver 550.54.15\ngpus 8\n";
    for (int i = 0; i < kGpus; ++i) {
      auto set = [&](const std::string& k, double v) { cfg += fmt::format("gpu {} {} {}\n", i, k, v); };
      set("util_gpu", 10 + i);
      set("util_mem", 20 + i);
      set("temp", 40 + i);
      set("power_mw", 250500 + 1000 * i);
      set("sm_clock", 1980 - i);
      set("mem_clock", 2619);
      set("enc", i);
      set("dec", 2 * i);
      set("fb_total", 81559.0 * 1048576);
      set("fb_reserved", 512.0 * 1048576);
      set("fb_used", (1000.0 + i) * 1048576);
      set("fb_free", (80047.0 - i) * 1048576);
      set("pcie_tx_kbs", 100 * i);
      set("pcie_rx_kbs", 200 * i);
      set("clock_reasons", i == 0 ? 1 : 0);
      set("field:82", 50 + i);                 // memory temperature
      set("field:83", 1e9 + i);                // energy, mJ
      set("field:94", i);                      // PCIe replays
      set("field:140", 1000 * i);              // NVLink raw TX
      set("field:141", 500 * i);               // NVLink raw RX
      set("field:142", 0);
      set("field:143", i % 2);
      set("field:145", 0);
      set("field:3", 7 * i);
      set("field:4", 0);
      set("field:5", 70 * i);
      set("field:6", 1);
      set("field:29", 0);
      set("field:30", 0);
      set("field:31", 0);
      set("field:74", 123456789);
      set("field:75", 1000);
      if (i % 2 == 0) {  // even GPUs have GPM (Hopper); odd ones do not
        set("gpm:1", 50 + i);
        set("gpm:2", 40 + i);
        set("gpm:3", 30);
        set("gpm:5", 25);
        set("gpm:10", 12.5);
        set("gpm:20", 64);
        set("gpm:21", 32);
        set("gpm:60", 1024);
        set("gpm:61", 2048);
      }
    }
    cfg += fmt::format("gpu {} lost\n", kLostGpu);
    cfg += fmt::format("gpu {} unsupported field:82\ngpu {} unsupported enc\ngpu {} unsupported field:3\n", kPartialGpu,
                       kPartialGpu, kPartialGpu);
    cfg += fmt::format("gpu {} xid 79\n", kXidGpu);
    cfg += fmt::format("gpu {} xid 79\n", kLostGpu);  // fell off the bus: only its XID series remains
    cfg += fmt::format("gpu {} process 4242 2147483648\ngpu {} process 777 1048576\n", kProcGpu, kProcGpu);
    cfg += fmt::format("gpu {} process_util 4242 87\n", kProcGpu);
    cfg += "gpu 0 name NVIDIA H100 80GB HBM3\n";
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/nvml.txt", cfg).ok());
    ::setenv("FAKE_NVML_CONFIG", (dir_ + "/nvml.txt").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_CONFIG");
    (void)file::RemoveAll(dir_);
  }
  std::string dir_;
};

std::string GpuLabels(int i) {
  return fmt::format(
      "DCGM_FI_DRIVER_VERSION=\"550.54.15\",Hostname=\"node7\",UUID=\"GPU-{:08x}-0000-4000-8000-{:012x}\","
      "device=\"nvidia{}\",gpu=\"{}\",modelName=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:{:02X}:00.0\"",
      i, i * 7919, i, i, 0x18 + i * 0x10);
}

// The XID family's key: err_code and err_msg sort between device and gpu.
std::string XidKey(int i, int code, const std::string& msg) {
  return fmt::format(
      "DCGM_FI_DEV_XID_ERRORS{{DCGM_FI_DRIVER_VERSION=\"550.54.15\",Hostname=\"node7\","
      "UUID=\"GPU-{:08x}-0000-4000-8000-{:012x}\",device=\"nvidia{}\",err_code=\"{}\",err_msg=\"{}\",gpu=\"{}\","
      "modelName=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:{:02X}:00.0\"}}",
      i, i * 7919, i, code, msg, i, 0x18 + i * 0x10);
}

TEST_F(GpuFakeTest, EightGpusSeriesBySeries) {
  Options o;
  o.library = TW_FAKE_NVML;
  o.hostname = "node7";
  o.run_lookup = [](uint32_t pid) -> std::optional<RunRef> {
    if (pid == 4242) return RunRef{"llm", "run-17"};
    return std::nullopt;
  };
  auto c = GpuCollector::Open(o);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ((*c)->device_count(), kGpus);

  // The XID arrives on the event thread; wait for it (and for a second cycle).
  Families fams;
  std::map<std::string, double> got;
  std::map<std::string, MetricType> types;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fams.clear();
    types.clear();
    (*c)->Collect(&fams);
    got = Flatten(fams, &types);
    // GPM needs two cycles (two samples) before it has values.
    if (attempt >= 1 && got.count(XidKey(kXidGpu, 79, "GPU has fallen off the bus")) &&
        got.count(XidKey(kLostGpu, 79, "GPU has fallen off the bus"))) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::map<std::string, double> want;
  for (int i = 0; i < kGpus; ++i) {
    if (i == kLostGpu) continue;
    const std::string l = "{" + GpuLabels(i) + "}";
    auto put = [&](const std::string& name, double v) { want[name + l] = v; };
    put("DCGM_FI_DEV_SM_CLOCK", 1980 - i);
    put("DCGM_FI_DEV_MEM_CLOCK", 2619);
    if (i != kPartialGpu) put("DCGM_FI_DEV_MEMORY_TEMP", 50 + i);
    put("DCGM_FI_DEV_GPU_TEMP", 40 + i);
    put("DCGM_FI_DEV_POWER_USAGE", 250.5 + i);
    put("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e9 + i);
    if (i % 2 == 0) {  // GPM: ratios from percent, bytes/s from MiB/s
      put("DCGM_FI_PROF_GR_ENGINE_ACTIVE", (50 + i) / 100.0);
      put("DCGM_FI_PROF_SM_ACTIVE", (40 + i) / 100.0);
      put("DCGM_FI_PROF_SM_OCCUPANCY", 0.30);
      put("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.25);
      put("DCGM_FI_PROF_DRAM_ACTIVE", 0.125);
      put("DCGM_FI_PROF_PCIE_TX_BYTES", 64.0 * 1048576);
      put("DCGM_FI_PROF_PCIE_RX_BYTES", 32.0 * 1048576);
      put("DCGM_FI_PROF_NVLINK_TX_BYTES", 2048.0 * 1048576);
      put("DCGM_FI_PROF_NVLINK_RX_BYTES", 1024.0 * 1048576);
    } else {  // nvmlDeviceGetPcieThroughput, KB/s
      put("DCGM_FI_PROF_PCIE_TX_BYTES", 100.0 * i * 1024);
      put("DCGM_FI_PROF_PCIE_RX_BYTES", 200.0 * i * 1024);
    }
    put("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", i);
    put("DCGM_FI_DEV_GPU_UTIL", 10 + i);
    put("DCGM_FI_DEV_MEM_COPY_UTIL", 20 + i);
    if (i != kPartialGpu) put("DCGM_FI_DEV_ENC_UTIL", i);
    put("DCGM_FI_DEV_DEC_UTIL", 2 * i);
    put("DCGM_FI_DEV_FB_FREE", 80047 - i);
    put("DCGM_FI_DEV_FB_USED", 1000 + i);
    put("DCGM_FI_DEV_FB_RESERVED", 512);
    put("DCGM_FI_DEV_FB_TOTAL", 81559);
    put("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 1500 * i);
    put("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", i % 2);
    put("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0);
    put("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0);
    if (i != kPartialGpu) put("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 7 * i);
    put("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0);
    put("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 70 * i);
    put("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 1);
    put("DCGM_FI_DEV_RETIRED_SBE", 0);
    put("DCGM_FI_DEV_RETIRED_DBE", 0);
    put("DCGM_FI_DEV_RETIRED_PENDING", 0);
    put("DCGM_FI_DEV_POWER_VIOLATION", 123456789);
    put("DCGM_FI_DEV_THERMAL_VIOLATION", 1000);
    put("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", i == 0 ? 1 : 0);
    if (i == kXidGpu) {
      want[XidKey(i, 79, "GPU has fallen off the bus")] = 79;
    } else {
      want[XidKey(i, 0, "No Error")] = 0;
    }
  }
  want["trainwatch_gpu_process_memory_used_bytes{" + GpuLabels(kProcGpu) +
       ",pid=\"4242\",project=\"llm\",run=\"run-17\"}"] = 2147483648.0;
  want["trainwatch_gpu_process_memory_used_bytes{" + GpuLabels(kProcGpu) + ",pid=\"777\"}"] = 1048576;
  want[XidKey(kLostGpu, 79, "GPU has fallen off the bus")] = 79;
  want["trainwatch_gpu_process_sm_utilization_percent{" + GpuLabels(kProcGpu) +
       ",pid=\"4242\",project=\"llm\",run=\"run-17\"}"] = 87;

  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end()) {
      ADD_FAILURE() << "missing " << k;
    } else {
      EXPECT_DOUBLE_EQ(it->second, v) << k;
    }
  }
  for (const auto& [k, v] : got) EXPECT_TRUE(want.count(k)) << "unexpected " << k << " " << v;
  EXPECT_EQ(got.size(), want.size());

  EXPECT_EQ(types.at("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), MetricType::kCounter);
  EXPECT_EQ(types.at("DCGM_FI_DEV_PCIE_REPLAY_COUNTER"), MetricType::kCounter);
  EXPECT_EQ(types.at("DCGM_FI_DEV_GPU_UTIL"), MetricType::kGauge);
  EXPECT_EQ(types.at("DCGM_FI_DEV_XID_ERRORS"), MetricType::kGauge);

  // Rendered as dcgm-exporter does: HELP and TYPE per family.
  std::string text;
  RenderText(fams, &text);
  EXPECT_NE(text.find("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"),
            std::string::npos);
}

TEST_F(GpuFakeTest, InitFailureIsAClearError) {
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/nvml.txt", "init_error 9\n").ok());
  Options o;
  o.library = TW_FAKE_NVML;
  auto c = GpuCollector::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("nvmlInit_v2"), std::string::npos) << c.error().ToString();
  EXPECT_NE(c.error().message().find("Driver Not Loaded"), std::string::npos) << c.error().ToString();
}

TEST_F(GpuFakeTest, NoGpuIsAClearError) {
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/nvml.txt", "gpus 0\n").ok());
  Options o;
  o.library = TW_FAKE_NVML;
  auto c = GpuCollector::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("no GPU"), std::string::npos) << c.error().ToString();
}

// `trainwatch demo --fake-gpus` rewrites the fake library's file with
// `reload`: the next collection half a second later reads the new values and
// processes through the real NVML path.
TEST_F(GpuFakeTest, ReloadedValuesAndProcesses) {
  auto cfg = [](int util, unsigned pid) {
    return fmt::format(
        "reload\ngpus 2\ngpu 0 util_gpu {}\ngpu 0 util_mem 1\ngpu 1 util_gpu 7\ngpu 1 util_mem 1\n"
        "gpu 1 process {} 1048576\n",
        util, pid);
  };
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/nvml.txt", cfg(40, 100)).ok());
  Options o;
  o.library = TW_FAKE_NVML;
  o.xid_events = false;
  auto c = GpuCollector::Open(o);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  auto collect = [&] {
    Families fams;
    (*c)->Collect(&fams);
    std::map<std::string, double> out;
    for (const Family& f : fams) {
      for (const Metric& m : f.metrics) {
        if (f.name == "DCGM_FI_DEV_GPU_UTIL") out["util" + std::string(m.labels.Get("gpu"))] = m.value;
        if (f.name == "trainwatch_gpu_process_memory_used_bytes") out["pid" + std::string(m.labels.Get("pid"))] = m.value;
      }
    }
    return out;
  };
  EXPECT_EQ(collect(), (std::map<std::string, double>{{"util0", 40}, {"util1", 7}, {"pid100", 1048576}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a newer mtime
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/nvml.txt", cfg(90, 200)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(collect(), (std::map<std::string, double>{{"util0", 90}, {"util1", 7}, {"pid200", 1048576}}));
}

TEST(GpuTest, MissingLibraryIsAClearError) {
  Options o;
  o.library = "/nonexistent/libnvidia-ml.so.1";
  auto c = GpuCollector::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << c.error().ToString();
}

TEST(GpuTest, XidMessages) {
  EXPECT_STREQ(XidMessage(79), "GPU has fallen off the bus");
  EXPECT_STREQ(XidMessage(48), "Double Bit ECC Error");
  EXPECT_STREQ(XidMessage(123456), "Unknown Error");
}

}  // namespace
}  // namespace trainwatch::collect::gpu
