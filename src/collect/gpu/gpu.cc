#include "collect/gpu/gpu.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/mutex.h"
#include "collect/gpu/nvml_api.h"

namespace trainwatch::collect::gpu {

const char* XidMessage(uint64_t xid) {
  switch (xid) {
    case 0: return "No Error";
    case 13: return "Graphics Engine Exception";
    case 31: return "GPU memory page fault";
    case 32: return "Invalid or corrupted push buffer stream";
    case 43: return "GPU stopped processing";
    case 45: return "Preemptive cleanup, due to previous errors";
    case 48: return "Double Bit ECC Error";
    case 61: return "Internal micro-controller breakpoint/warning";
    case 62: return "Internal micro-controller halt";
    case 63: return "ECC page retirement or row remapping recording event";
    case 64: return "ECC page retirement or row remapper recording failure";
    case 68: return "NVDEC0 Exception";
    case 69: return "Graphics Engine class error";
    case 74: return "NVLINK Error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "High single-bit ECC error rate";
    case 94: return "Contained ECC error";
    case 95: return "Uncontained ECC error";
    case 119: return "GSP RPC Timeout";
    case 120: return "GSP Error";
    default: return "Unknown Error";
  }
}

namespace {

// NVML entry points, resolved with dlsym; null when the library lacks one.
struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*Init)() = nullptr;
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetEncoderUtilization)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetDecoderUtilization)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetPcieThroughput)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetCurrentClocksThrottleReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetProcessUtilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*,
                                              unsigned long long) = nullptr;
  nvmlReturn_t (*GpmQueryDeviceSupport)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*GpmSampleAlloc)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*GpmSampleFree)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*GpmMetricsGet)(nvmlGpmMetricsGet_t*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t) = nullptr;

  std::string Error(nvmlReturn_t r) const {
    const char* s = ErrorString != nullptr ? ErrorString(r) : nullptr;
    return s != nullptr ? fmt::format("{} (NVML error {})", s, r) : fmt::format("NVML error {}", r);
  }
};

template <typename F>
void Resolve(void* h, F** fn, const char* name) {
  *fn = reinterpret_cast<F*>(::dlsym(h, name));
}

// One batched field: NVML id, scope, the dcgm-exporter family it feeds.
struct FieldSpec {
  unsigned int id;
  unsigned int scope;
  int family;  // index into kFamilies
};

struct FamilySpec {
  const char* name;
  MetricType type;
  const char* help;
};

enum Fam : int {
  kSmClock, kMemClock, kMemoryTemp, kGpuTemp, kPowerUsage, kTotalEnergy, kPcieTx, kPcieRx, kPcieReplay,
  kGpuUtil, kMemCopyUtil, kEncUtil, kDecUtil, kXid, kFbFree, kFbUsed, kFbReserved, kFbTotal, kNvlinkBw,
  kUncRemapped, kCorRemapped, kRemapFailure, kEccSbeVol, kEccDbeVol, kEccSbeAgg, kEccDbeAgg, kRetiredSbe,
  kRetiredDbe, kRetiredPending, kPowerViolation, kThermalViolation, kClockEvents, kProcessFb, kProcessSm, kGrEngineActive, kSmActive, kSmOccupancy, kPipeTensorActive,
  kDramActive, kNvlinkTx, kNvlinkRx, kNumFamilies
};

// dcgm-exporter's default counter set (etc/default-counters.csv), in its
// order, then the fields it ships commented out that the issue asks for.
constexpr FamilySpec kFamilies[kNumFamilies] = {
    {"DCGM_FI_DEV_SM_CLOCK", MetricType::kGauge, "SM clock frequency (in MHz)."},
    {"DCGM_FI_DEV_MEM_CLOCK", MetricType::kGauge, "Memory clock frequency (in MHz)."},
    {"DCGM_FI_DEV_MEMORY_TEMP", MetricType::kGauge, "Memory temperature (in C)."},
    {"DCGM_FI_DEV_GPU_TEMP", MetricType::kGauge, "GPU temperature (in C)."},
    {"DCGM_FI_DEV_POWER_USAGE", MetricType::kGauge, "Power draw (in W)."},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", MetricType::kCounter, "Total energy consumption since boot (in mJ)."},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", MetricType::kGauge,
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes "
     "per second."},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", MetricType::kGauge,
     "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per "
     "second."},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", MetricType::kCounter, "Total number of PCIe retries."},
    {"DCGM_FI_DEV_GPU_UTIL", MetricType::kGauge, "GPU utilization (in %)."},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::kGauge, "Memory utilization (in %)."},
    {"DCGM_FI_DEV_ENC_UTIL", MetricType::kGauge, "Encoder utilization (in %)."},
    {"DCGM_FI_DEV_DEC_UTIL", MetricType::kGauge, "Decoder utilization (in %)."},
    {"DCGM_FI_DEV_XID_ERRORS", MetricType::kGauge, "Value of the last XID error encountered."},
    {"DCGM_FI_DEV_FB_FREE", MetricType::kGauge, "Framebuffer memory free (in MiB)."},
    {"DCGM_FI_DEV_FB_USED", MetricType::kGauge, "Framebuffer memory used (in MiB)."},
    {"DCGM_FI_DEV_FB_RESERVED", MetricType::kGauge, "Framebuffer memory reserved (in MiB)."},
    {"DCGM_FI_DEV_FB_TOTAL", MetricType::kGauge, "Framebuffer memory total (in MiB)."},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", MetricType::kCounter,
     "Total number of NVLink bandwidth counters for all lanes."},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", MetricType::kCounter, "Number of remapped rows for uncorrectable errors"},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", MetricType::kCounter, "Number of remapped rows for correctable errors"},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", MetricType::kGauge, "Whether remapping of rows has failed"},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", MetricType::kCounter, "Total number of single-bit volatile ECC errors."},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", MetricType::kCounter, "Total number of double-bit volatile ECC errors."},
    {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", MetricType::kCounter, "Total number of single-bit persistent ECC errors."},
    {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", MetricType::kCounter, "Total number of double-bit persistent ECC errors."},
    {"DCGM_FI_DEV_RETIRED_SBE", MetricType::kCounter, "Total number of retired pages due to single-bit errors."},
    {"DCGM_FI_DEV_RETIRED_DBE", MetricType::kCounter, "Total number of retired pages due to double-bit errors."},
    {"DCGM_FI_DEV_RETIRED_PENDING", MetricType::kCounter, "Total number of pages pending retirement."},
    {"DCGM_FI_DEV_POWER_VIOLATION", MetricType::kCounter, "Throttling duration due to power constraints (in ns)."},
    {"DCGM_FI_DEV_THERMAL_VIOLATION", MetricType::kCounter, "Throttling duration due to thermal constraints (in ns)."},
    {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", MetricType::kGauge,
     "Current clock event (throttle) reasons, a bitmask of nvmlClocksEventReason* values."},
    {"trainwatch_gpu_process_memory_used_bytes", MetricType::kGauge,
     "GPU memory used by one compute process (from nvmlDeviceGetComputeRunningProcesses)."},
    {"trainwatch_gpu_process_sm_utilization_percent", MetricType::kGauge,
     "SM utilisation of one process over its last NVML sample (from nvmlDeviceGetProcessUtilization)."},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", MetricType::kGauge, "Ratio of time the graphics engine is active."},
    {"DCGM_FI_PROF_SM_ACTIVE", MetricType::kGauge, "The ratio of cycles an SM has at least 1 warp assigned."},
    {"DCGM_FI_PROF_SM_OCCUPANCY", MetricType::kGauge, "The ratio of number of warps resident on an SM."},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", MetricType::kGauge, "Ratio of cycles the tensor (HMMA) pipe is active."},
    {"DCGM_FI_PROF_DRAM_ACTIVE", MetricType::kGauge,
     "Ratio of cycles the device memory interface is active sending or receiving data."},
    {"DCGM_FI_PROF_NVLINK_TX_BYTES", MetricType::kGauge,
     "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second."},
    {"DCGM_FI_PROF_NVLINK_RX_BYTES", MetricType::kGauge,
     "The rate of data received over NVLink, not including protocol headers, in bytes per second."},
};

// Batched through nvmlDeviceGetFieldValues, one call per GPU per cycle.
constexpr FieldSpec kFields[] = {
    {NVML_FI_DEV_MEMORY_TEMP, 0, kMemoryTemp},
    {NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0, kTotalEnergy},
    {NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0, kPcieReplay},
    {NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, UINT_MAX, kNvlinkBw},
    {NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX, UINT_MAX, kNvlinkBw},
    {NVML_FI_DEV_REMAPPED_UNC, 0, kUncRemapped},
    {NVML_FI_DEV_REMAPPED_COR, 0, kCorRemapped},
    {NVML_FI_DEV_REMAPPED_FAILURE, 0, kRemapFailure},
    {NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0, kEccSbeVol},
    {NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 0, kEccDbeVol},
    {NVML_FI_DEV_ECC_SBE_AGG_TOTAL, 0, kEccSbeAgg},
    {NVML_FI_DEV_ECC_DBE_AGG_TOTAL, 0, kEccDbeAgg},
    {NVML_FI_DEV_RETIRED_SBE, 0, kRetiredSbe},
    {NVML_FI_DEV_RETIRED_DBE, 0, kRetiredDbe},
    {NVML_FI_DEV_RETIRED_PENDING, 0, kRetiredPending},
    {NVML_FI_DEV_PERF_POLICY_POWER, 0, kPowerViolation},
    {NVML_FI_DEV_PERF_POLICY_THERMAL, 0, kThermalViolation},
};
constexpr int kNumFields = sizeof kFields / sizeof kFields[0];

// GPM metric -> family and scale (percent -> ratio, MiB/s -> bytes/s).
struct GpmSpec {
  unsigned int id;
  int family;
  double scale;
};
constexpr GpmSpec kGpm[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, kGrEngineActive, 0.01},
    {NVML_GPM_METRIC_SM_UTIL, kSmActive, 0.01},
    {NVML_GPM_METRIC_SM_OCCUPANCY, kSmOccupancy, 0.01},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, kPipeTensorActive, 0.01},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, kDramActive, 0.01},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, kPcieTx, 1048576.0},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, kPcieRx, 1048576.0},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, kNvlinkTx, 1048576.0},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, kNvlinkRx, 1048576.0},
};
constexpr unsigned int kNumGpm = sizeof kGpm / sizeof kGpm[0];

double FieldValue(const nvmlFieldValue_t& f) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return f.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return f.value.siVal;
    default: return static_cast<double>(f.value.ullVal);
  }
}

}  // namespace

struct Device {
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  model::Labels labels;  // gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION
  bool lost_logged = false;
  unsigned long long last_util_us = 0;  // newest process utilisation sample seen
  // GPM: the previous and the current sample; both null when the GPU has no GPM.
  nvmlGpmSample_t gpm_prev = nullptr;
  nvmlGpmSample_t gpm_cur = nullptr;
  bool gpm_have_prev = false;
};

struct GpuCollector::Impl {
  Options o;
  Nvml nvml;
  bool initialised = false;
  std::vector<Device> devices;

  base::Mutex xid_mu;
  std::map<unsigned, uint64_t> last_xid TW_GUARDED_BY(xid_mu);  // device index -> last XID seen
  nvmlEventSet_t events = nullptr;
  std::atomic<bool> stop{false};
  std::thread event_thread;

  ~Impl() {
    stop = true;
    if (event_thread.joinable()) event_thread.join();
    for (Device& d : devices) {
      if (d.gpm_prev != nullptr) nvml.GpmSampleFree(d.gpm_prev);
      if (d.gpm_cur != nullptr) nvml.GpmSampleFree(d.gpm_cur);
    }
    if (events != nullptr && nvml.EventSetFree != nullptr) nvml.EventSetFree(events);
    if (initialised) nvml.Shutdown();
    if (nvml.handle != nullptr) ::dlclose(nvml.handle);
  }

  void WatchEvents() {
    bool logged = false;
    while (!stop) {
      nvmlEventData_t data{};
      nvmlReturn_t r = nvml.EventSetWait(events, &data, 500);
      if (r == NVML_ERROR_TIMEOUT) continue;
      if (r != NVML_SUCCESS) {
        if (!logged) TW_LOG(Warn, "gpu collector: waiting for NVML events: {}", nvml.Error(r));
        logged = true;
        for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      for (const Device& d : devices) {
        if (d.handle != data.device) continue;
        TW_LOG(Warn, "gpu {}: XID {} ({})", d.index, data.eventData, XidMessage(data.eventData));
        base::MutexLock l(&xid_mu);
        last_xid[d.index] = data.eventData;
      }
    }
  }

  // Device handles, identity labels; an unreadable GPU is kept (lost GPUs come back after a reset).
  Status Enumerate() {
    unsigned count = 0;
    nvmlReturn_t r = nvml.DeviceGetCount(&count);
    if (r != NVML_SUCCESS) return Status::Unavailable("nvmlDeviceGetCount: " + nvml.Error(r));
    if (count == 0) return Status::NotFound("NVML reports no GPU");
    char driver[96] = {};
    if (nvml.SystemGetDriverVersion == nullptr || nvml.SystemGetDriverVersion(driver, sizeof driver) != NVML_SUCCESS) {
      driver[0] = 0;
    }
    for (unsigned i = 0; i < count; ++i) {
      Device d;
      d.index = i;
      r = nvml.DeviceGetHandleByIndex(i, &d.handle);
      if (r != NVML_SUCCESS) {
        TW_LOG(Warn, "gpu {}: nvmlDeviceGetHandleByIndex: {}; not collected", i, nvml.Error(r));
        continue;
      }
      char uuid[96] = {}, name[96] = {};
      nvmlPciInfo_t pci{};
      unsigned minor = i;
      if (nvml.DeviceGetUUID != nullptr) (void)nvml.DeviceGetUUID(d.handle, uuid, sizeof uuid);
      if (nvml.DeviceGetName != nullptr) (void)nvml.DeviceGetName(d.handle, name, sizeof name);
      if (nvml.DeviceGetPciInfo != nullptr) (void)nvml.DeviceGetPciInfo(d.handle, &pci);
      if (nvml.DeviceGetMinorNumber == nullptr || nvml.DeviceGetMinorNumber(d.handle, &minor) != NVML_SUCCESS) minor = i;
      std::vector<model::Label> l = {{"gpu", std::to_string(i)},
                                     {"UUID", uuid},
                                     {"pci_bus_id", pci.busId},
                                     {"device", fmt::format("nvidia{}", minor)},
                                     {"modelName", name},
                                     {"Hostname", o.hostname},
                                     {"DCGM_FI_DRIVER_VERSION", driver}};
      std::erase_if(l, [](const model::Label& x) { return x.value.empty(); });
      d.labels = model::Labels(std::move(l));
      devices.push_back(std::move(d));
    }
    if (devices.empty()) return Status::Unavailable("no GPU answered nvmlDeviceGetHandleByIndex");
    return Status::OK();
  }

  // GPM where the GPU and the library have it (Hopper and newer).
  void StartGpm() {
    if (nvml.GpmQueryDeviceSupport == nullptr || nvml.GpmSampleAlloc == nullptr || nvml.GpmSampleFree == nullptr ||
        nvml.GpmSampleGet == nullptr || nvml.GpmMetricsGet == nullptr) {
      return;
    }
    for (Device& d : devices) {
      nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 0};
      if (nvml.GpmQueryDeviceSupport(d.handle, &support) != NVML_SUCCESS || !support.isSupportedDevice) continue;
      if (nvml.GpmSampleAlloc(&d.gpm_prev) != NVML_SUCCESS || nvml.GpmSampleAlloc(&d.gpm_cur) != NVML_SUCCESS) {
        TW_LOG(Warn, "gpu {}: GPM sample allocation failed; no profiling metrics", d.index);
        if (d.gpm_prev != nullptr) nvml.GpmSampleFree(d.gpm_prev);
        d.gpm_prev = d.gpm_cur = nullptr;
      }
    }
  }

  // Profiling ratios and rates over the interval since the previous cycle.
  void CollectGpm(Device& d, const std::function<void(int, double)>& put, const std::function<bool(nvmlReturn_t)>& ok) {
    if (d.gpm_cur == nullptr) return;
    if (!ok(nvml.GpmSampleGet(d.handle, d.gpm_cur))) {
      d.gpm_have_prev = false;
      return;
    }
    if (d.gpm_have_prev) {
      auto req = std::make_unique<nvmlGpmMetricsGet_t>();
      std::memset(req.get(), 0, sizeof *req);
      req->version = NVML_GPM_METRICS_GET_VERSION;
      req->numMetrics = kNumGpm;
      req->sample1 = d.gpm_prev;
      req->sample2 = d.gpm_cur;
      for (unsigned i = 0; i < kNumGpm; ++i) req->metrics[i].metricId = kGpm[i].id;
      if (ok(nvml.GpmMetricsGet(req.get()))) {
        for (unsigned i = 0; i < kNumGpm; ++i) {
          if (req->metrics[i].nvmlReturn == NVML_SUCCESS) put(kGpm[i].family, req->metrics[i].value * kGpm[i].scale);
        }
      }
    }
    std::swap(d.gpm_prev, d.gpm_cur);
    d.gpm_have_prev = true;
  }

  void StartEvents() {
    if (!o.xid_events || nvml.EventSetCreate == nullptr || nvml.DeviceRegisterEvents == nullptr ||
        nvml.EventSetWait == nullptr) {
      return;
    }
    nvmlReturn_t r = nvml.EventSetCreate(&events);
    if (r != NVML_SUCCESS) {
      TW_LOG(Warn, "gpu collector: no XID events: nvmlEventSetCreate: {}", nvml.Error(r));
      events = nullptr;
      return;
    }
    int registered = 0;
    for (const Device& d : devices) {
      r = nvml.DeviceRegisterEvents(d.handle, nvmlEventTypeXidCriticalError, events);
      if (r == NVML_SUCCESS) {
        ++registered;
      } else {
        TW_LOG(Warn, "gpu {}: no XID events: nvmlDeviceRegisterEvents: {}", d.index, nvml.Error(r));
      }
    }
    if (registered > 0) event_thread = std::thread([this] { WatchEvents(); });
  }

  // One GPU's series into fams (indexed by Fam). Returns false when the GPU is lost.
  bool CollectDevice(Device& d, std::vector<Family>& fams) {
    bool lost = false;
    auto ok = [&](nvmlReturn_t r) {
      if (r == NVML_ERROR_GPU_IS_LOST) lost = true;
      return r == NVML_SUCCESS;
    };
    std::vector<Metric> staged[kNumFamilies];
    auto put = [&](int fam, double v) { staged[fam].push_back({d.labels, v}); };

    unsigned v = 0, period = 0;
    if (nvml.DeviceGetClockInfo != nullptr) {
      if (ok(nvml.DeviceGetClockInfo(d.handle, NVML_CLOCK_SM, &v))) put(kSmClock, v);
      if (ok(nvml.DeviceGetClockInfo(d.handle, NVML_CLOCK_MEM, &v))) put(kMemClock, v);
    }
    if (lost) return Lost(d, nvml.Error(NVML_ERROR_GPU_IS_LOST));
    if (nvml.DeviceGetTemperature != nullptr && ok(nvml.DeviceGetTemperature(d.handle, NVML_TEMPERATURE_GPU, &v))) {
      put(kGpuTemp, v);
    }
    if (nvml.DeviceGetPowerUsage != nullptr && ok(nvml.DeviceGetPowerUsage(d.handle, &v))) put(kPowerUsage, v / 1000.0);
    CollectGpm(d, put, ok);
    if (nvml.DeviceGetPcieThroughput != nullptr && d.gpm_cur == nullptr) {  // KB/s over a 20 ms window; GPM's is better
      if (ok(nvml.DeviceGetPcieThroughput(d.handle, NVML_PCIE_UTIL_TX_BYTES, &v))) put(kPcieTx, v * 1024.0);
      if (ok(nvml.DeviceGetPcieThroughput(d.handle, NVML_PCIE_UTIL_RX_BYTES, &v))) put(kPcieRx, v * 1024.0);
    }
    nvmlUtilization_t util{};
    if (nvml.DeviceGetUtilizationRates != nullptr && ok(nvml.DeviceGetUtilizationRates(d.handle, &util))) {
      put(kGpuUtil, util.gpu);
      put(kMemCopyUtil, util.memory);
    }
    if (nvml.DeviceGetEncoderUtilization != nullptr && ok(nvml.DeviceGetEncoderUtilization(d.handle, &v, &period))) {
      put(kEncUtil, v);
    }
    if (nvml.DeviceGetDecoderUtilization != nullptr && ok(nvml.DeviceGetDecoderUtilization(d.handle, &v, &period))) {
      put(kDecUtil, v);
    }
    nvmlMemory_v2_t mem2{};
    mem2.version = nvmlMemory_v2;
    nvmlMemory_t mem1{};
    if (nvml.DeviceGetMemoryInfo_v2 != nullptr && ok(nvml.DeviceGetMemoryInfo_v2(d.handle, &mem2))) {
      put(kFbFree, static_cast<double>(mem2.free / (1024 * 1024)));
      put(kFbUsed, static_cast<double>(mem2.used / (1024 * 1024)));
      put(kFbReserved, static_cast<double>(mem2.reserved / (1024 * 1024)));
      put(kFbTotal, static_cast<double>(mem2.total / (1024 * 1024)));
    } else if (nvml.DeviceGetMemoryInfo != nullptr && ok(nvml.DeviceGetMemoryInfo(d.handle, &mem1))) {
      put(kFbFree, static_cast<double>(mem1.free / (1024 * 1024)));
      put(kFbUsed, static_cast<double>(mem1.used / (1024 * 1024)));
      put(kFbTotal, static_cast<double>(mem1.total / (1024 * 1024)));
    }
    unsigned long long reasons = 0;
    if (nvml.DeviceGetCurrentClocksThrottleReasons != nullptr &&
        ok(nvml.DeviceGetCurrentClocksThrottleReasons(d.handle, &reasons))) {
      put(kClockEvents, static_cast<double>(reasons));
    }
    if (nvml.DeviceGetFieldValues != nullptr) {
      nvmlFieldValue_t fv[kNumFields] = {};
      for (int i = 0; i < kNumFields; ++i) {
        fv[i].fieldId = kFields[i].id;
        fv[i].scopeId = kFields[i].scope;
      }
      if (ok(nvml.DeviceGetFieldValues(d.handle, kNumFields, fv))) {
        double nvlink = 0;
        int nvlink_parts = 0;
        for (int i = 0; i < kNumFields; ++i) {
          if (fv[i].nvmlReturn == NVML_ERROR_GPU_IS_LOST) lost = true;
          if (fv[i].nvmlReturn != NVML_SUCCESS) continue;  // NOT_SUPPORTED and kin: no series for this GPU
          double x = FieldValue(fv[i]);
          if (kFields[i].family == kNvlinkBw) {
            nvlink += x;
            ++nvlink_parts;
          } else {
            put(kFields[i].family, x);
          }
        }
        if (nvlink_parts == 2) put(kNvlinkBw, nvlink);
      }
    }
    {
      base::MutexLock l(&xid_mu);
      auto it = last_xid.find(d.index);
      uint64_t xid = it == last_xid.end() ? 0 : it->second;
      model::LabelsBuilder b(d.labels);
      b.Set("err_code", std::to_string(xid));
      b.Set("err_msg", XidMessage(xid));
      staged[kXid].push_back({b.Build(), static_cast<double>(xid)});
    }
    if (nvml.DeviceGetComputeRunningProcesses != nullptr) {
      std::vector<nvmlProcessInfo_t> procs(16);
      unsigned n = static_cast<unsigned>(procs.size());
      nvmlReturn_t r = nvml.DeviceGetComputeRunningProcesses(d.handle, &n, procs.data());
      if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        procs.resize(n + 8);
        n = static_cast<unsigned>(procs.size());
        r = nvml.DeviceGetComputeRunningProcesses(d.handle, &n, procs.data());
      }
      if (ok(r)) {
        for (unsigned i = 0; i < n && i < procs.size(); ++i) {
          if (procs[i].usedGpuMemory == ULLONG_MAX) continue;  // NVML_VALUE_NOT_AVAILABLE
          model::LabelsBuilder b(d.labels);
          b.Set("pid", std::to_string(procs[i].pid));
          if (o.run_lookup) {
            if (std::optional<RunRef> run = o.run_lookup(procs[i].pid)) {
              b.Set("project", run->project);
              b.Set("run", run->run);
              if (!run->rank.empty()) b.Set("rank", run->rank);
            }
          }
          staged[kProcessFb].push_back({b.Build(), static_cast<double>(procs[i].usedGpuMemory)});
        }
      }
    }
    if (nvml.DeviceGetProcessUtilization != nullptr) {
      // Samples newer than the last seen; NOT_FOUND: none since then.
      std::vector<nvmlProcessUtilizationSample_t> samples(32);
      unsigned n = static_cast<unsigned>(samples.size());
      nvmlReturn_t r = nvml.DeviceGetProcessUtilization(d.handle, samples.data(), &n, d.last_util_us);
      if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        samples.resize(n + 8);
        n = static_cast<unsigned>(samples.size());
        r = nvml.DeviceGetProcessUtilization(d.handle, samples.data(), &n, d.last_util_us);
      }
      if (ok(r)) {
        std::map<unsigned, nvmlProcessUtilizationSample_t> newest;  // pid -> its newest sample
        for (unsigned i = 0; i < n && i < samples.size(); ++i) {
          auto [it, inserted] = newest.try_emplace(samples[i].pid, samples[i]);
          if (!inserted && samples[i].timeStamp > it->second.timeStamp) it->second = samples[i];
          d.last_util_us = std::max(d.last_util_us, samples[i].timeStamp);
        }
        for (const auto& [pid, smp] : newest) {
          model::LabelsBuilder b(d.labels);
          b.Set("pid", std::to_string(pid));
          if (std::optional<RunRef> run = o.run_lookup ? o.run_lookup(pid) : std::nullopt) {
            b.Set("project", run->project);
            b.Set("run", run->run);
            if (!run->rank.empty()) b.Set("rank", run->rank);
          }
          staged[kProcessSm].push_back({b.Build(), static_cast<double>(smp.smUtil)});
        }
      }
    }
    if (lost) return Lost(d, nvml.Error(NVML_ERROR_GPU_IS_LOST));
    if (d.lost_logged) {
      TW_LOG(Info, "gpu {}: answering again", d.index);
      d.lost_logged = false;
    }
    for (int f = 0; f < kNumFamilies; ++f) {
      for (Metric& m : staged[f]) fams[f].metrics.push_back(std::move(m));
    }
    return true;
  }

  bool Lost(Device& d, const std::string& why) {
    if (!d.lost_logged) TW_LOG(Warn, "gpu {}: {}; its metrics are left out until it answers", d.index, why);
    d.lost_logged = true;
    return false;
  }
};

GpuCollector::GpuCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuCollector::~GpuCollector() = default;

Result<std::unique_ptr<GpuCollector>> GpuCollector::Open(Options o) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(o);
  Nvml& n = impl->nvml;
  n.handle = ::dlopen(impl->o.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (n.handle == nullptr) {
    const char* err = ::dlerror();
    return Status::NotFound(fmt::format("load {}: {}", impl->o.library, err != nullptr ? err : "dlopen failed"));
  }
  void* h = n.handle;
  Resolve(h, &n.Init, "nvmlInit_v2");
  Resolve(h, &n.Shutdown, "nvmlShutdown");
  Resolve(h, &n.ErrorString, "nvmlErrorString");
  Resolve(h, &n.SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
  Resolve(h, &n.DeviceGetCount, "nvmlDeviceGetCount_v2");
  Resolve(h, &n.DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  Resolve(h, &n.DeviceGetUUID, "nvmlDeviceGetUUID");
  Resolve(h, &n.DeviceGetName, "nvmlDeviceGetName");
  Resolve(h, &n.DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3");
  Resolve(h, &n.DeviceGetMinorNumber, "nvmlDeviceGetMinorNumber");
  Resolve(h, &n.DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
  Resolve(h, &n.DeviceGetMemoryInfo_v2, "nvmlDeviceGetMemoryInfo_v2");
  Resolve(h, &n.DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  Resolve(h, &n.DeviceGetTemperature, "nvmlDeviceGetTemperature");
  Resolve(h, &n.DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
  Resolve(h, &n.DeviceGetClockInfo, "nvmlDeviceGetClockInfo");
  Resolve(h, &n.DeviceGetEncoderUtilization, "nvmlDeviceGetEncoderUtilization");
  Resolve(h, &n.DeviceGetDecoderUtilization, "nvmlDeviceGetDecoderUtilization");
  Resolve(h, &n.DeviceGetPcieThroughput, "nvmlDeviceGetPcieThroughput");
  Resolve(h, &n.DeviceGetCurrentClocksThrottleReasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  Resolve(h, &n.DeviceGetFieldValues, "nvmlDeviceGetFieldValues");
  Resolve(h, &n.DeviceGetComputeRunningProcesses, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (n.DeviceGetComputeRunningProcesses == nullptr) {  // drivers before 510: same layout as _v2
    Resolve(h, &n.DeviceGetComputeRunningProcesses, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  Resolve(h, &n.DeviceGetProcessUtilization, "nvmlDeviceGetProcessUtilization");
  Resolve(h, &n.GpmQueryDeviceSupport, "nvmlGpmQueryDeviceSupport");
  Resolve(h, &n.GpmSampleAlloc, "nvmlGpmSampleAlloc");
  Resolve(h, &n.GpmSampleFree, "nvmlGpmSampleFree");
  Resolve(h, &n.GpmSampleGet, "nvmlGpmSampleGet");
  Resolve(h, &n.GpmMetricsGet, "nvmlGpmMetricsGet");
  Resolve(h, &n.EventSetCreate, "nvmlEventSetCreate");
  Resolve(h, &n.DeviceRegisterEvents, "nvmlDeviceRegisterEvents");
  Resolve(h, &n.EventSetWait, "nvmlEventSetWait_v2");
  Resolve(h, &n.EventSetFree, "nvmlEventSetFree");
  if (n.Init == nullptr || n.Shutdown == nullptr || n.DeviceGetCount == nullptr || n.DeviceGetHandleByIndex == nullptr) {
    return Status::NotSupported(fmt::format("{}: lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or "
                                            "nvmlDeviceGetHandleByIndex_v2 (driver too old?)",
                                            impl->o.library));
  }
  nvmlReturn_t r = n.Init();
  if (r != NVML_SUCCESS) return Status::Unavailable(fmt::format("nvmlInit_v2 ({}): {}", impl->o.library, n.Error(r)));
  impl->initialised = true;
  Status s = impl->Enumerate();
  if (!s.ok()) return s.Annotate(impl->o.library);
  impl->StartGpm();
  impl->StartEvents();
  return std::unique_ptr<GpuCollector>(new GpuCollector(std::move(impl)));
}

int GpuCollector::device_count() const { return static_cast<int>(impl_->devices.size()); }

void GpuCollector::Collect(Families* out) {
  std::vector<Family> fams(kNumFamilies);
  for (int f = 0; f < kNumFamilies; ++f) fams[f] = Family{kFamilies[f].name, kFamilies[f].help, kFamilies[f].type, {}};
  for (Device& d : impl_->devices) {
    if (impl_->CollectDevice(d, fams)) continue;
    // A lost GPU keeps its XID series when it raised one: XID 79 (fallen off the bus) is why it is lost.
    base::MutexLock l(&impl_->xid_mu);
    auto it = impl_->last_xid.find(d.index);
    if (it == impl_->last_xid.end()) continue;
    model::LabelsBuilder b(d.labels);
    b.Set("err_code", std::to_string(it->second));
    b.Set("err_msg", XidMessage(it->second));
    fams[kXid].metrics.push_back({b.Build(), static_cast<double>(it->second)});
  }
  for (Family& f : fams) {
    if (!f.metrics.empty()) out->push_back(std::move(f));
  }
}

}  // namespace trainwatch::collect::gpu
