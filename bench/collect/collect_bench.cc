// CPU time and RSS of the built-in collectors: the host collector plus the GPU
// collector on 8 simulated GPUs (tests/fake_nvml, GPM and one process each), one cycle per interval,
// each cycle also rendering /metrics text. Prints one JSON object.
//
//   collect_bench --nvml build/.../libnvidia-ml-fake.so [--cycles 60] [--interval-ms 1000]
//   collect_bench --nvml libnvidia-ml.so.1 --print 1   (real GPUs: two cycles 1 s apart, then
//                                                        the GPU families as /metrics shows them)
//   collect_bench --write-nvml-config PATH  (writes the fake NVML's 8-GPU description and exits,
//                                            for runs of the real binary on the same GPUs)
//
// CPU is getrusage(RUSAGE_SELF) over the whole run (idle waits and the XID
// event thread included) divided by the cycles; "core_percent" is that CPU
// as a share of one core at the given interval.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "collect/family.h"
#include "collect/gpu/gpu.h"
#include "collect/host/host.h"

using namespace trainwatch;

namespace {

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// The 8 simulated GPUs: every value the collector reads, GPM, one compute process each.
void WriteFakeConfig(const std::string& path) {
  std::ofstream cfg(path);
  cfg << "gpus 8\n";
  const char* keys[] = {"util_gpu", "util_mem", "temp", "power_mw", "sm_clock", "mem_clock", "enc", "dec",
                        "fb_total", "fb_reserved", "fb_used", "fb_free", "pcie_tx_kbs", "pcie_rx_kbs",
                        "clock_reasons", "field:82", "field:83", "field:94", "field:140", "field:141",
                        "field:142", "field:143", "field:145", "field:3", "field:4", "field:5", "field:6",
                        "field:29", "field:30", "field:31", "field:74", "field:75", "gpm:1", "gpm:2", "gpm:3",
                        "gpm:5", "gpm:10", "gpm:20", "gpm:21", "gpm:60", "gpm:61"};
  for (int g = 0; g < 8; ++g) {
    for (const char* k : keys) cfg << "gpu " << g << " " << k << " " << (g + 1) * 1000 << "\n";
    cfg << "gpu " << g << " process " << 1000 + g << " 1073741824\n";
    cfg << "gpu " << g << " process_util " << 1000 + g << " 50\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string nvml;
  int cycles = 60;
  int interval_ms = 1000;
  bool print = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nvml") == 0) nvml = argv[i + 1];
    if (std::strcmp(argv[i], "--cycles") == 0) cycles = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--interval-ms") == 0) interval_ms = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--print") == 0) print = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--write-nvml-config") == 0) {
      WriteFakeConfig(argv[i + 1]);
      return 0;
    }
  }
  if (nvml.empty() || cycles <= 0 || interval_ms < 0) {
    std::fprintf(stderr, "usage: %s --nvml LIB [--cycles N] [--interval-ms MS]\n", argv[0]);
    return 2;
  }
  std::string cfg_path;
  if (std::getenv("FAKE_NVML_CONFIG") == nullptr && nvml.find("fake") != std::string::npos) {
    cfg_path = "/tmp/tw_collect_bench_" + std::to_string(::getpid()) + ".txt";
    WriteFakeConfig(cfg_path);
    ::setenv("FAKE_NVML_CONFIG", cfg_path.c_str(), 1);
  }
  collect::gpu::Options go;
  go.library = nvml;
  go.hostname = "bench";
  auto gpu = collect::gpu::GpuCollector::Open(go);
  if (!gpu.ok()) {
    std::fprintf(stderr, "%s\n", gpu.error().ToString().c_str());
    return 1;
  }
  if (print) {
    collect::Families fams;
    (*gpu)->Collect(&fams);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    fams.clear();
    (*gpu)->Collect(&fams);
    std::string text;
    collect::RenderText(fams, &text);
    std::fwrite(text.data(), 1, text.size(), stdout);
    gpu->reset();
    if (!cfg_path.empty()) ::unlink(cfg_path.c_str());
    return 0;
  }
  collect::host::HostCollector host{collect::host::Options{}};
  size_t series = 0, bytes = 0;
  double cpu0 = CpuSeconds();
  auto start = std::chrono::steady_clock::now();
  double busy = 0;
  for (int c = 0; c < cycles; ++c) {
    auto t0 = std::chrono::steady_clock::now();
    collect::Families fams;
    host.Collect(&fams);
    (*gpu)->Collect(&fams);
    std::string text;
    collect::RenderText(fams, &text);
    series = 0;
    for (const auto& f : fams) series += f.metrics.size();
    bytes = text.size();
    busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::this_thread::sleep_until(start + std::chrono::milliseconds(static_cast<int64_t>(interval_ms) * (c + 1)));
  }
  double cpu = CpuSeconds() - cpu0;
  double per_cycle_ms = cpu / cycles * 1000;
  std::printf("{\"cycles\": %d, \"interval_ms\": %d, \"gpus\": %d, \"series\": %zu, \"metrics_bytes\": %zu, "
              "\"cpu_ms_per_cycle\": %.3f, \"wall_ms_per_cycle\": %.3f, \"core_percent\": %.4f, \"rss_kib\": %ld}\n",
              cycles, interval_ms, (*gpu)->device_count(), series, bytes, per_cycle_ms, busy / cycles * 1000,
              interval_ms > 0 ? per_cycle_ms / interval_ms * 100 : 0.0, RssKiB());
  gpu->reset();
  if (!cfg_path.empty()) ::unlink(cfg_path.c_str());
  return 0;
}
