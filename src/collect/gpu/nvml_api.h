#pragma once
// The part of NVIDIA's nvml.h (NVML API version 12) the GPU collector uses,
// declared here because nvml.h is not installed where trainwatch is built.
// Layouts and values are NVML's; the collector resolves each entry point with
// dlsym, so a driver lacking a newer one only loses the metrics it serves.
// tests/fake_nvml implements the same entry points.

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;  // enum nvmlReturn_enum
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

enum : int { NVML_TEMPERATURE_GPU = 0 };
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum : int { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

// nvmlValueType_t
enum : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
};

// Field identifiers (NVML_FI_DEV_*) the collector batches.
enum : unsigned int {
  NVML_FI_DEV_ECC_SBE_VOL_TOTAL = 3,
  NVML_FI_DEV_ECC_DBE_VOL_TOTAL = 4,
  NVML_FI_DEV_ECC_SBE_AGG_TOTAL = 5,
  NVML_FI_DEV_ECC_DBE_AGG_TOTAL = 6,
  NVML_FI_DEV_RETIRED_SBE = 29,
  NVML_FI_DEV_RETIRED_DBE = 30,
  NVML_FI_DEV_RETIRED_PENDING = 31,
  NVML_FI_DEV_PERF_POLICY_POWER = 74,
  NVML_FI_DEV_PERF_POLICY_THERMAL = 75,
  NVML_FI_DEV_MEMORY_TEMP = 82,
  NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83,
  NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94,
  NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX = 140,
  NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX = 141,
  NVML_FI_DEV_REMAPPED_COR = 142,
  NVML_FI_DEV_REMAPPED_UNC = 143,
  NVML_FI_DEV_REMAPPED_FAILURE = 145,
};

constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ULL;

typedef struct {
  unsigned int gpu;     // percent of time a kernel ran over the sample period
  unsigned int memory;  // percent of time device memory was read or written
} nvmlUtilization_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;  // nvmlMemory_v2 below
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
constexpr unsigned int nvmlMemory_v2 = static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "domain:bus:device.function", e.g. 00000000:18:00.0
} nvmlPciInfo_t;

typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;  // NVLink fields: link id, UINT_MAX for all links
  long long timestamp;
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

// nvmlProcessInfo_v2_t == nvmlProcessInfo_t of the _v3 entry point.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE (ULLONG_MAX) under some hypervisors
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp in microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

// GPM (GPU performance monitoring, Hopper and newer): profiling metrics
// computed by NVML from two samples.
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

enum : unsigned int {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,  // MiB/s
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
};
constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;
// NVML_GPM_METRIC_MAX grew across releases (98 in CUDA 12.0's header, 333 in
// 13's); NVML touches only metrics[0, numMetrics), so the largest is safe.
constexpr unsigned int kGpmMetricCapacity = 333;

typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kGpmMetricCapacity];
} nvmlGpmMetricsGet_t;

typedef struct {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

}  // extern "C"
