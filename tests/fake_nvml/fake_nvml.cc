// A fake libnvidia-ml.so.1 for tests: implements the NVML entry points the GPU
// collector uses (collect/gpu/nvml_api.h), driven by the text file named by
// $FAKE_NVML_CONFIG, read at nvmlInit_v2. One directive per line:
//   driver <version>                 gpus <n>
//   gpu <i> name <text...>           gpu <i> uuid <uuid>
//   gpu <i> busid <bus id>           gpu <i> minor <n>
//   gpu <i> <key> <number>           keys: util_gpu util_mem temp power_mw sm_clock mem_clock enc dec
//                                    fb_total fb_reserved fb_used fb_free pcie_tx_kbs pcie_rx_kbs
//                                    clock_reasons, field:<NVML field id>, or gpm:<GPM metric id>
//                                    (a GPU with any gpm: key supports GPM)
//   gpu <i> unsupported <key>        that call / field answers NVML_ERROR_NOT_SUPPORTED
//   gpu <i> lost                     every call about the GPU answers NVML_ERROR_GPU_IS_LOST
//   gpu <i> process <pid> <bytes>    a compute process
//   gpu <i> process_util <pid> <sm%> a process utilisation sample (stamped at each call)
//   gpu <i> xid <code>               one XID event, delivered by the first nvmlEventSetWait_v2
//   init_error <code>                nvmlInit_v2 fails with it
//   reload                           re-read the file when it changes (at most every 0.5 s, on a
//                                    value read): values, processes, names and lost GPUs change in
//                                    place, the GPU count stays; `trainwatch demo --fake-gpus` drives it
// `#` starts a comment. Unknown directives make nvmlInit_v2 fail (and say so on stderr).

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collect/gpu/nvml_api.h"

namespace {

struct FakeGpu {
  std::string name = "NVIDIA H100 80GB HBM3", uuid, busid;
  unsigned minor = 0;
  std::map<std::string, double> values;
  std::set<std::string> unsupported;
  bool lost = false;
  std::vector<std::pair<unsigned, unsigned long long>> processes;
  std::vector<std::pair<unsigned, unsigned>> process_util;  // pid, SM %
  std::vector<unsigned long long> xids;
};

struct State {
  std::string driver = "550.54.15";
  std::vector<FakeGpu> gpus;
  int init_error = 0;
  bool initialised = false;
  bool reload = false;
  std::string path;
  struct timespec mtime = {};
  std::chrono::steady_clock::time_point checked;
  std::atomic<bool> xids_delivered{false};
};

State* g = nullptr;
// Freed when the collector dlclose()s the library: a clang-built .so is really
// unloaded then (gcc's STB_GNU_UNIQUE symbols keep it mapped), and LeakSanitizer
// reports the state as leaked.
__attribute__((destructor)) void FreeState() {
  delete g;
  g = nullptr;
}

FakeGpu* Gpu(nvmlDevice_t d) { return reinterpret_cast<FakeGpu*>(d); }

bool Load(State* s) {
  const char* path = std::getenv("FAKE_NVML_CONFIG");
  if (path == nullptr) {
    std::fprintf(stderr, "fake_nvml: FAKE_NVML_CONFIG is not set\n");
    return false;
  }
  s->path = path;
  struct stat st;
  if (::stat(path, &st) == 0) s->mtime = st.st_mtim;
  s->checked = std::chrono::steady_clock::now();
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fake_nvml: cannot open %s\n", path);
    return false;
  }
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (size_t h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    std::string word;
    if (!(ls >> word)) continue;
    if (word == "driver") {
      ls >> s->driver;
    } else if (word == "gpus") {
      size_t n = 0;
      ls >> n;
      s->gpus.resize(n);
      for (size_t i = 0; i < n; ++i) {
        char uuid[64], bus[32];
        std::snprintf(uuid, sizeof uuid, "GPU-%08zx-0000-4000-8000-%012zx", i, i * 7919);
        std::snprintf(bus, sizeof bus, "00000000:%02zX:00.0", 0x18 + i * 0x10);
        s->gpus[i].uuid = uuid;
        s->gpus[i].busid = bus;
        s->gpus[i].minor = static_cast<unsigned>(i);
      }
    } else if (word == "init_error") {
      ls >> s->init_error;
    } else if (word == "reload") {
      s->reload = true;
    } else if (word == "gpu") {
      size_t i = 0;
      std::string key;
      ls >> i >> key;
      if (i >= s->gpus.size()) {
        std::fprintf(stderr, "fake_nvml: %s line %d: gpu %zu out of range (gpus first)\n", path, line_no, i);
        return false;
      }
      FakeGpu& gpu = s->gpus[i];
      if (key == "name") {
        std::getline(ls >> std::ws, gpu.name);
      } else if (key == "uuid") {
        ls >> gpu.uuid;
      } else if (key == "busid") {
        ls >> gpu.busid;
      } else if (key == "minor") {
        ls >> gpu.minor;
      } else if (key == "unsupported") {
        std::string what;
        ls >> what;
        gpu.unsupported.insert(what);
      } else if (key == "lost") {
        gpu.lost = true;
      } else if (key == "process") {
        unsigned pid = 0;
        unsigned long long bytes = 0;
        ls >> pid >> bytes;
        gpu.processes.emplace_back(pid, bytes);
      } else if (key == "process_util") {
        unsigned pid = 0, sm = 0;
        ls >> pid >> sm;
        gpu.process_util.emplace_back(pid, sm);
      } else if (key == "xid") {
        unsigned long long code = 0;
        ls >> code;
        gpu.xids.push_back(code);
      } else {
        double v = 0;
        if (!(ls >> v)) {
          std::fprintf(stderr, "fake_nvml: %s line %d: want 'gpu <i> <key> <number>'\n", path, line_no);
          return false;
        }
        gpu.values[key] = v;
      }
    } else {
      std::fprintf(stderr, "fake_nvml: %s line %d: unknown directive '%s'\n", path, line_no, word.c_str());
      return false;
    }
  }
  return true;
}

// With `reload`: the file's new values, processes, names and lost flags, in
// place (device handles point into g->gpus, so the GPUs themselves stay).
void MaybeReload() {
  if (!g->reload) return;
  auto now = std::chrono::steady_clock::now();
  if (now - g->checked < std::chrono::milliseconds(500)) return;
  g->checked = now;
  struct stat st;
  if (::stat(g->path.c_str(), &st) != 0) return;
  if (st.st_mtim.tv_sec == g->mtime.tv_sec && st.st_mtim.tv_nsec == g->mtime.tv_nsec) return;
  State fresh;
  if (!Load(&fresh)) return;  // a half-written file: the next check tries again
  g->mtime = fresh.mtime;
  for (size_t i = 0; i < g->gpus.size() && i < fresh.gpus.size(); ++i) {
    FakeGpu& to = g->gpus[i];
    FakeGpu& from = fresh.gpus[i];
    to.name = from.name;
    to.values = std::move(from.values);
    to.processes = std::move(from.processes);
    to.process_util = std::move(from.process_util);
    to.lost = from.lost;
  }
}

// The answer for `key` of `gpu`: lost, unsupported, missing (NOT_SUPPORTED) or the value.
nvmlReturn_t Get(nvmlDevice_t d, const std::string& key, double* v) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  MaybeReload();
  FakeGpu* gpu = Gpu(d);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  if (gpu->unsupported.count(key) != 0) return NVML_ERROR_NOT_SUPPORTED;
  auto it = gpu->values.find(key);
  if (it == gpu->values.end()) return NVML_ERROR_NOT_SUPPORTED;
  *v = it->second;
  return NVML_SUCCESS;
}

template <typename T>
nvmlReturn_t GetAs(nvmlDevice_t d, const std::string& key, T* out) {
  double v = 0;
  nvmlReturn_t r = Get(d, key, &v);
  if (r == NVML_SUCCESS) *out = static_cast<T>(v);
  return r;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  if (g != nullptr && g->initialised) return NVML_SUCCESS;
  delete g;
  g = new State();
  if (!Load(g)) return NVML_ERROR_UNKNOWN;
  if (g->init_error != 0) return g->init_error;
  g->initialised = true;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  g->initialised = false;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned len) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  if (g->driver.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, g->driver.c_str(), g->driver.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  *n = static_cast<unsigned>(g->gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  if (i >= g->gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(&g->gpus[i]);
  return NVML_SUCCESS;
}

static nvmlReturn_t CopyString(const std::string& s, char* out, unsigned len) {
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned len) { return CopyString(Gpu(d)->uuid, out, len); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned len) { return CopyString(Gpu(d)->name, out, len); }

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  return CopyString(Gpu(d)->busid, pci->busId, sizeof pci->busId);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned* minor) {
  *minor = Gpu(d)->minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  nvmlReturn_t r = GetAs(d, "util_gpu", &u->gpu);
  if (r != NVML_SUCCESS) return r;
  return GetAs(d, "util_mem", &u->memory);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  if (m->version != nvmlMemory_v2) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  nvmlReturn_t r = GetAs(d, "fb_total", &m->total);
  if (r == NVML_SUCCESS) r = GetAs(d, "fb_reserved", &m->reserved);
  if (r == NVML_SUCCESS) r = GetAs(d, "fb_free", &m->free);
  if (r == NVML_SUCCESS) r = GetAs(d, "fb_used", &m->used);
  return r;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* t) {
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return GetAs(d, "temp", t);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) { return GetAs(d, "power_mw", mw); }

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  if (type == NVML_CLOCK_SM) return GetAs(d, "sm_clock", mhz);
  if (type == NVML_CLOCK_MEM) return GetAs(d, "mem_clock", mhz);
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned* u, unsigned* period_us) {
  *period_us = 167000;
  return GetAs(d, "enc", u);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned* u, unsigned* period_us) {
  *period_us = 167000;
  return GetAs(d, "dec", u);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned* kbs) {
  return GetAs(d, counter == NVML_PCIE_UTIL_TX_BYTES ? "pcie_tx_kbs" : "pcie_rx_kbs", kbs);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* r) {
  return GetAs(d, "clock_reasons", r);
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  if (count < 0 || values == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& f = values[i];
    double v = 0;
    f.nvmlReturn = Get(d, "field:" + std::to_string(f.fieldId), &v);
    f.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    f.value.ullVal = static_cast<unsigned long long>(v);
    f.timestamp = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    f.latencyUsec = 0;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* count, nvmlProcessInfo_t* infos) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  FakeGpu* gpu = Gpu(d);
  if (gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  if (gpu->unsupported.count("processes") != 0) return NVML_ERROR_NOT_SUPPORTED;
  unsigned have = *count;
  *count = static_cast<unsigned>(gpu->processes.size());
  if (have < gpu->processes.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (size_t i = 0; i < gpu->processes.size(); ++i) {
    infos[i] = nvmlProcessInfo_t{gpu->processes[i].first, gpu->processes[i].second, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t* out, unsigned* count,
                                             unsigned long long last_seen_us) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  FakeGpu* gpu = Gpu(d);
  if (gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  if (gpu->unsupported.count("process_util") != 0) return NVML_ERROR_NOT_SUPPORTED;
  unsigned long long now = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  if (now <= last_seen_us) now = last_seen_us + 1;
  if (gpu->process_util.empty()) return NVML_ERROR_NOT_FOUND;
  unsigned have = *count;
  *count = static_cast<unsigned>(gpu->process_util.size());
  if (out == nullptr || have < gpu->process_util.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (size_t i = 0; i < gpu->process_util.size(); ++i) {
    out[i] = nvmlProcessUtilizationSample_t{gpu->process_util[i].first, now, gpu->process_util[i].second, 0, 0, 0};
  }
  return NVML_SUCCESS;
}

struct nvmlGpmSample_st {
  FakeGpu* gpu = nullptr;
};

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t* support) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  if (support->version != NVML_GPM_SUPPORT_VERSION) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  FakeGpu* gpu = Gpu(d);
  if (gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  support->isSupportedDevice = 0;
  for (const auto& [k, v] : gpu->values) {
    if (k.rfind("gpm:", 0) == 0) support->isSupportedDevice = 1;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* s) {
  *s = new nvmlGpmSample_st();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
  delete s;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s) {
  if (Gpu(d)->lost) return NVML_ERROR_GPU_IS_LOST;
  s->gpu = Gpu(d);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* m) {
  if (m->version != NVML_GPM_METRICS_GET_VERSION) return 25;
  if (m->sample1 == nullptr || m->sample2 == nullptr || m->sample1->gpu == nullptr ||
      m->sample1->gpu != m->sample2->gpu || m->numMetrics > kGpmMetricCapacity) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (unsigned i = 0; i < m->numMetrics; ++i) {
    double v = 0;
    m->metrics[i].nvmlReturn =
        Get(reinterpret_cast<nvmlDevice_t>(m->sample2->gpu), "gpm:" + std::to_string(m->metrics[i].metricId), &v);
    m->metrics[i].value = v;
  }
  return NVML_SUCCESS;
}

struct nvmlEventSet_st {
  std::vector<nvmlDevice_t> devices;
  std::vector<nvmlEventData_t> pending;
  bool filled = false;
};

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
  // Registration works on a `lost` GPU: it models a GPU lost after start, whose XID still arrives.
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
  set->devices.push_back(d);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) {
  if (g == nullptr || !g->initialised) return NVML_ERROR_UNINITIALIZED;
  if (!set->filled) {
    set->filled = true;
    for (nvmlDevice_t d : set->devices) {
      for (unsigned long long x : Gpu(d)->xids) {
        set->pending.push_back(nvmlEventData_t{d, nvmlEventTypeXidCriticalError, x, 0xFFFFFFFFu, 0xFFFFFFFFu});
      }
    }
  }
  if (!set->pending.empty()) {
    *data = set->pending.front();
    set->pending.erase(set->pending.begin());
    return NVML_SUCCESS;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"
