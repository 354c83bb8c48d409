#pragma once
// GPU collector: NVML (libnvidia-ml.so.1, loaded with dlopen) read into
// dcgm-exporter's metric names, units and labels (gpu, UUID, pci_bus_id,
// device, modelName, Hostname, DCGM_FI_DRIVER_VERSION; err_code and err_msg on
// XID errors), plus GPU memory per compute process. XID errors arrive as NVML
// events on a thread of the collector's own. Collect() is not reentrant.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "collect/family.h"

namespace trainwatch::collect::gpu {

// The training run a process belongs to (project, run and rank labels).
struct RunRef {
  std::string project;
  std::string run;
  std::string rank;  // empty: unknown
};

struct Options {
  std::string library = "libnvidia-ml.so.1";  // dlopen path; tests point it at the fake
  std::string hostname;                       // Hostname label; empty: none
  // pid -> run, for per-process series; null or nullopt: pid label only.
  std::function<std::optional<RunRef>(uint32_t pid)> run_lookup;
  bool xid_events = true;  // watch XID errors on a thread of our own
};

class GpuCollector {
 public:
  // Loads NVML, initialises it and enumerates the GPUs. Fails (with a message
  // naming the library and NVML's error) when there is no library, no driver
  // or no GPU; the caller logs it once and goes on without GPU metrics.
  static Result<std::unique_ptr<GpuCollector>> Open(Options o);
  ~GpuCollector();  // stops the event thread, shuts NVML down, unloads it

  // Appends the families for every GPU NVML still answers for. A field a GPU
  // does not support is left out for that GPU; a GPU that is lost is left out
  // (and logged once) until it answers again.
  void Collect(Families* out);

  int device_count() const;

  struct Impl;

 private:
  explicit GpuCollector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// dcgm-exporter's message for an XID error code ("Unknown Error" when none).
const char* XidMessage(uint64_t xid);

}  // namespace trainwatch::collect::gpu
