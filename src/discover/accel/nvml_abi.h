// Our own declarations of the part of the NVML C ABI that polyaccel uses (no vendor header is
// needed to build). Layouts and values follow NVIDIA's nvml.h (as vendored by NVIDIA/go-nvml);
// the static_asserts at the end pin the layouts that a mistake would silently break.
//
// Internal to discover/accel/: nvml.cc resolves these by name with dlsym, and the test build of
// libnvidia-ml.so.1 (tests/inject/nvml/) defines them, checked against these same types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace polyaccel::nvml {

// Opaque handles: pointers to structs that only the library defines.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;
struct nvmlGpuInstance_st;
using nvmlGpuInstance_t = nvmlGpuInstance_st*;

// nvmlReturn_t is a C enum: passed and returned as a 32-bit int.
using nvmlReturn_t = int;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_ALREADY_INITIALIZED = 5;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

// nvmlEnableState_t
inline constexpr int NVML_FEATURE_DISABLED = 0;
inline constexpr int NVML_FEATURE_ENABLED = 1;
using nvmlEnableState_t = int;

// Other C enums, all 32-bit.
using nvmlTemperatureSensors_t = int;
inline constexpr nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU = 0;
using nvmlClockType_t = int;
inline constexpr nvmlClockType_t NVML_CLOCK_GRAPHICS = 0;
inline constexpr nvmlClockType_t NVML_CLOCK_SM = 1;
inline constexpr nvmlClockType_t NVML_CLOCK_MEM = 2;
using nvmlMemoryErrorType_t = int;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
using nvmlEccCounterType_t = int;
inline constexpr nvmlEccCounterType_t NVML_VOLATILE_ECC = 0;
inline constexpr nvmlEccCounterType_t NVML_AGGREGATE_ECC = 1;
using nvmlPageRetirementCause_t = int;
inline constexpr nvmlPageRetirementCause_t
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0;
inline constexpr nvmlPageRetirementCause_t NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1;
using nvmlValueType_t = int;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_DOUBLE = 0;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_INT = 1;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG = 2;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_SIGNED_INT = 5;
inline constexpr nvmlValueType_t NVML_VALUE_TYPE_UNSIGNED_SHORT = 6;

// nvmlIntNvLinkDeviceType_t: what is at the other end of an NVLink.
using nvmlIntNvLinkDeviceType_t = int;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;

// Field ids for nvmlDeviceGetFieldValues.
inline constexpr unsigned NVML_FI_DEV_MEMORY_TEMP = 82;
// NVLink data (payload, no protocol overhead) sent and received since the driver loaded, in KiB;
// scopeId is the link, or NVML_NVLINK_SCOPE_ALL_LINKS for the sum over all links. Not in
// ../shared/reference/vendor-abi/nvml.json yet: checked against nvml.h of NVML_API_VERSION 12 as
// NVIDIA/DCGM bundles it (sdk/nvidia/nvml/dcgm_nvml.h at 72fa3fe, July 2026): 138, 139, and
// "a scopeId of UINT_MAX returns aggregate value summed up across all links".
inline constexpr unsigned NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138;
inline constexpr unsigned NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139;
inline constexpr unsigned NVML_NVLINK_SCOPE_ALL_LINKS = 0xFFFFFFFFu;

// Event types (bit mask) for nvmlDeviceRegisterEvents.
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;

// Clock throttle ("clock event") reasons, the bits of nvmlDeviceGetCurrentClocksThrottleReasons.
inline constexpr unsigned long long nvmlClocksThrottleReasonGpuIdle = 0x1ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonApplicationsClocksSetting = 0x2ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonSwPowerCap = 0x4ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwSlowdown = 0x8ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonSyncBoost = 0x10ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonSwThermalSlowdown = 0x20ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwThermalSlowdown = 0x40ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonDisplayClockSetting = 0x100ULL;

// Buffer sizes NVML documents for its string getters.
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_SERIAL_BUFFER_SIZE = 30;
// Links per GPU: 18 in every nvml.h from Hopper's up to CUDA 13.2.1's, 36 from CUDA 13.3's.
// We ask for every link up to the larger number; a driver built from an older header answers
// NVML_ERROR_INVALID_ARGUMENT (or NOT_SUPPORTED) for a link it does not know, which is "no link".
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 36;

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2 fill it.
struct nvmlPciInfo_t {
  char busIdLegacy[16];  // "0000:4E:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // device id << 16 | vendor id
  unsigned int pciSubSystemId;  // subsystem device id << 16 | subsystem vendor id
  char busId[32];               // "00000000:4E:00.0"
};

struct nvmlMemory_t {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;     // percent
  unsigned int memory;  // percent
};

union nvmlValue_t {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};

// As nvmlEventSetWait_v2 fills it.
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;    // 0xFFFFFFFF when not attributable to a MIG instance
  unsigned int computeInstanceId;
};

struct nvmlGpuInstancePlacement_t {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
};

struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;  // the parent GPU
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

// The function types, one alias per symbol, named as the symbol.
namespace fn {
using nvmlInit_v2 = nvmlReturn_t();
using nvmlShutdown = nvmlReturn_t();
using nvmlErrorString = const char*(nvmlReturn_t);
using nvmlSystemGetDriverVersion = nvmlReturn_t(char*, unsigned int);
using nvmlDeviceGetCount_v2 = nvmlReturn_t(unsigned int*);
using nvmlDeviceGetHandleByIndex_v2 = nvmlReturn_t(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetPciInfo_v3 = nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetUUID = nvmlReturn_t(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetSerial = nvmlReturn_t(nvmlDevice_t, char*, unsigned int);
// Not in ../shared/reference/vendor-abi/nvml.json's signatures (only its list of exported names):
// nvml.h's `nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)`.
using nvmlDeviceGetMinorNumber = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetName = nvmlReturn_t(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetMemoryInfo = nvmlReturn_t(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceGetCudaComputeCapability = nvmlReturn_t(nvmlDevice_t, int*, int*);
using nvmlDeviceGetMigMode = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetMaxMigDeviceCount = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetMigDeviceHandleByIndex = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlDevice_t*);
using nvmlDeviceGetGpuInstanceId = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetComputeInstanceId = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetGpuInstanceById = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
using nvmlGpuInstanceGetInfo = nvmlReturn_t(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
using nvmlDeviceGetNvLinkState = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
using nvmlDeviceGetNvLinkRemotePciInfo_v2 = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                         nvmlPciInfo_t*);
using nvmlDeviceGetNvLinkRemoteDeviceType = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                         nvmlIntNvLinkDeviceType_t*);
using nvmlDeviceGetPowerManagementLimit = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetEccMode = nvmlReturn_t(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*);
using nvmlDeviceGetPersistenceMode = nvmlReturn_t(nvmlDevice_t, nvmlEnableState_t*);
using nvmlDeviceGetUtilizationRates = nvmlReturn_t(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceGetTemperature = nvmlReturn_t(nvmlDevice_t, nvmlTemperatureSensors_t,
                                              unsigned int*);
using nvmlDeviceGetFieldValues = nvmlReturn_t(nvmlDevice_t, int, nvmlFieldValue_t*);
using nvmlDeviceGetPowerUsage = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetTotalEnergyConsumption = nvmlReturn_t(nvmlDevice_t, unsigned long long*);
using nvmlDeviceGetClockInfo = nvmlReturn_t(nvmlDevice_t, nvmlClockType_t, unsigned int*);
using nvmlDeviceGetPcieReplayCounter = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetTotalEccErrors = nvmlReturn_t(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                 nvmlEccCounterType_t, unsigned long long*);
using nvmlDeviceGetRetiredPages = nvmlReturn_t(nvmlDevice_t, nvmlPageRetirementCause_t,
                                               unsigned int*, unsigned long long*);
using nvmlDeviceGetRemappedRows = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*,
                                               unsigned int*, unsigned int*);
using nvmlDeviceGetCurrentClocksThrottleReasons = nvmlReturn_t(nvmlDevice_t, unsigned long long*);
using nvmlEventSetCreate = nvmlReturn_t(nvmlEventSet_t*);
using nvmlDeviceRegisterEvents = nvmlReturn_t(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
using nvmlEventSetWait_v2 = nvmlReturn_t(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
using nvmlEventSetFree = nvmlReturn_t(nvmlEventSet_t);
}  // namespace fn

// The layouts as nvml.h has them on LP64 (x86_64, aarch64, ppc64le).
static_assert(sizeof(nvmlPciInfo_t) == 16 + 5 * 4 + 32);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(offsetof(nvmlEventData_t, eventData) == 16);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);

// ---- MIG partitioning (used by nvml_mig.cc) ----------------------------------------------------
// Kept in one block of its own: GPU and compute instance control, profiles and placements.

struct nvmlComputeInstance_st;
using nvmlComputeInstance_t = nvmlComputeInstance_st*;

inline constexpr nvmlReturn_t NVML_ERROR_IN_USE = 19;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_RESOURCES = 23;

// nvmlGpuInstanceProfile enums (nvmlDeviceGetGpuInstanceProfileInfo's `profile`): 0..16 up to
// CUDA 13.1's nvml.h (1/2/3/4/7/8/6 slices, REV1 = +me, REV2 = 1 slice with 2 memory slices, then
// Blackwell's GFX/NO_ME/ALL_ME variants), 0..17 from CUDA 13.2.1's, which added 0x11
// (NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX). We ask for every enum below the larger count; a driver
// that does not know one answers NVML_ERROR_INVALID_ARGUMENT or NOT_SUPPORTED: no such profile.
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 7;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12;
// nvmlComputeInstanceProfile enums by compute slices, and the shared engine profile.
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 1;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 2;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 3;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 4;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 5;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 6;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0;
// GPU instances per GPU at most (nvml.h's buffer size for nvmlDeviceGetGpuInstances).
inline constexpr unsigned NVML_MAX_GPU_INSTANCES = 8;

struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;  // the profile id CreateGpuInstance takes (nvidia-smi's ID column)
  unsigned int isP2pSupported;
  unsigned int sliceCount;  // compute slices
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};

struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

struct nvmlComputeInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

struct nvmlComputeInstanceInfo_t {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
};

// nvmlProcessInfo_v2_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

namespace fn {
using nvmlDeviceSetMigMode = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlReturn_t*);
using nvmlDeviceGetGpuInstanceProfileInfo = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                         nvmlGpuInstanceProfileInfo_t*);
using nvmlDeviceGetGpuInstancePossiblePlacements_v2 = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                                   nvmlGpuInstancePlacement_t*,
                                                                   unsigned int*);
using nvmlDeviceCreateGpuInstanceWithPlacement = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                              const nvmlGpuInstancePlacement_t*,
                                                              nvmlGpuInstance_t*);
using nvmlDeviceGetGpuInstances = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*,
                                               unsigned int*);
using nvmlGpuInstanceDestroy = nvmlReturn_t(nvmlGpuInstance_t);
using nvmlGpuInstanceGetComputeInstanceProfileInfo =
    nvmlReturn_t(nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_t*);
using nvmlGpuInstanceCreateComputeInstance = nvmlReturn_t(nvmlGpuInstance_t, unsigned int,
                                                          nvmlComputeInstance_t*);
using nvmlGpuInstanceGetComputeInstances = nvmlReturn_t(nvmlGpuInstance_t, unsigned int,
                                                        nvmlComputeInstance_t*, unsigned int*);
using nvmlComputeInstanceDestroy = nvmlReturn_t(nvmlComputeInstance_t);
using nvmlComputeInstanceGetInfo_v2 = nvmlReturn_t(nvmlComputeInstance_t,
                                                   nvmlComputeInstanceInfo_t*);
using nvmlDeviceGetComputeRunningProcesses_v3 = nvmlReturn_t(nvmlDevice_t, unsigned int*,
                                                             nvmlProcessInfo_t*);
}  // namespace fn

static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB) == 40);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36);
static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32);
static_assert(sizeof(nvmlProcessInfo_t) == 24);

// ---- GPM (GPU Performance Monitoring, Hopper and later), encoder/decoder, memory v2 ----------
// From nvml.h of CUDA 12.x (go-nvml gen/nvml/nvml.h). ../shared/reference/vendor-abi/nvml.json
// has no entry for these yet (only the function names): the layouts below are nvml.h's, pinned by
// the static_asserts, and were checked against nvml.h of NVML_API_VERSION 12 as NVIDIA/DCGM
// bundles it (sdk/nvidia/nvml/dcgm_nvml.h at 72fa3fe): the facts are listed in
// tests/discover/accel/vendor_abi_nvml.cc. NVML_GPM_METRIC_MAX alone differs (166, then 333 there,
// with the same NVML_GPM_METRICS_GET_VERSION 1): it sizes only our own request, whose numMetrics
// says how many entries the library reads and fills.
struct nvmlGpmSample_st;
using nvmlGpmSample_t = nvmlGpmSample_st*;

inline constexpr unsigned NVML_GPM_METRIC_GRAPHICS_UTIL = 1;
inline constexpr unsigned NVML_GPM_METRIC_SM_UTIL = 2;
inline constexpr unsigned NVML_GPM_METRIC_SM_OCCUPANCY = 3;
inline constexpr unsigned NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
inline constexpr unsigned NVML_GPM_METRIC_DRAM_BW_UTIL = 10;
inline constexpr unsigned NVML_GPM_METRIC_FP64_UTIL = 11;
inline constexpr unsigned NVML_GPM_METRIC_FP32_UTIL = 12;
inline constexpr unsigned NVML_GPM_METRIC_FP16_UTIL = 13;
inline constexpr unsigned NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20;          // MiB/s
inline constexpr unsigned NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21;          // MiB/s
inline constexpr unsigned NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60;  // MiB/s
inline constexpr unsigned NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61;  // MiB/s
inline constexpr unsigned NVML_GPM_METRIC_MAX = 98;  // the metrics array of nvmlGpmMetricsGet_t
inline constexpr unsigned NVML_GPM_METRICS_GET_VERSION = 1;
inline constexpr unsigned NVML_GPM_SUPPORT_VERSION = 1;

struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};

struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
};

struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};

// nvmlMemory_v2_t: with the memory the driver reserves (DCGM_FI_DEV_FB_RESERVED).
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): sizeof | 2 << 24.
inline constexpr unsigned int nvmlMemory_v2 =
    static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

namespace fn {
using nvmlGpmSampleAlloc = nvmlReturn_t(nvmlGpmSample_t*);
using nvmlGpmSampleFree = nvmlReturn_t(nvmlGpmSample_t);
using nvmlGpmSampleGet = nvmlReturn_t(nvmlDevice_t, nvmlGpmSample_t);
using nvmlGpmMigSampleGet = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
using nvmlGpmMetricsGet = nvmlReturn_t(nvmlGpmMetricsGet_t*);
using nvmlGpmQueryDeviceSupport = nvmlReturn_t(nvmlDevice_t, nvmlGpmSupport_t*);
using nvmlDeviceGetEncoderUtilization = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetDecoderUtilization = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetMemoryInfo_v2 = nvmlReturn_t(nvmlDevice_t, nvmlMemory_v2_t*);
}  // namespace fn

static_assert(sizeof(nvmlGpmMetric_t) == 40 && alignof(nvmlGpmMetric_t) == 8);
static_assert(offsetof(nvmlGpmMetric_t, nvmlReturn) == 4);
static_assert(offsetof(nvmlGpmMetric_t, value) == 8);
static_assert(offsetof(nvmlGpmMetric_t, metricInfo) == 16);
static_assert(offsetof(nvmlGpmMetricsGet_t, numMetrics) == 4);
static_assert(offsetof(nvmlGpmMetricsGet_t, sample1) == 8);
static_assert(offsetof(nvmlGpmMetricsGet_t, sample2) == 16);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * NVML_GPM_METRIC_MAX);
static_assert(sizeof(nvmlGpmSupport_t) == 8 && offsetof(nvmlGpmSupport_t, isSupportedDevice) == 4);
static_assert(sizeof(nvmlMemory_v2_t) == 40 && offsetof(nvmlMemory_v2_t, reserved) == 16);
static_assert(nvmlMemory_v2 == 0x2000028);

}  // namespace polyaccel::nvml
