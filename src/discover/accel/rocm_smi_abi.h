// Our own declarations of the part of the ROCm SMI C ABI (rocm_smi.h, librocm_smi64) that the
// rocm-smi backend calls. No vendor header is needed to build: the values and layouts below are
// those of upstream rocm_smi_lib (rocm-5.2.3 as Debian ships it, and the 6.x/7.x libraries of
// ROCm 6), where the two differ both are declared.
//
// C enums are passed as 32-bit unsigned integers, except rsmi_gpu_block_t, whose values reach
// bit 63 and which the compiler therefore passes as a 64-bit integer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "discover/accel/amd_common.h"

namespace polyaccel::rsmi {

// rsmi_status_t
inline constexpr std::uint32_t kSuccess = 0;
inline constexpr std::uint32_t kInvalidArgs = 1;
inline constexpr std::uint32_t kNotSupported = 2;
inline constexpr std::uint32_t kFileError = 3;
inline constexpr std::uint32_t kPermission = 4;
inline constexpr std::uint32_t kOutOfResources = 5;
inline constexpr std::uint32_t kInternalException = 6;
inline constexpr std::uint32_t kInputOutOfBounds = 7;
inline constexpr std::uint32_t kInitError = 8;
inline constexpr std::uint32_t kNotYetImplemented = 9;
inline constexpr std::uint32_t kNotFound = 10;
inline constexpr std::uint32_t kInsufficientSize = 11;
inline constexpr std::uint32_t kInterrupt = 12;
inline constexpr std::uint32_t kUnexpectedSize = 13;
inline constexpr std::uint32_t kNoData = 14;
inline constexpr std::uint32_t kUnexpectedData = 15;
inline constexpr std::uint32_t kBusy = 16;
inline constexpr std::uint32_t kRefcountOverflow = 17;
inline constexpr std::uint32_t kSettingUnavailable = 18;  // 6.x and later
inline constexpr std::uint32_t kAmdgpuRestartError = 19;  // 6.x and later
inline constexpr std::uint32_t kDrmError = 20;            // 6.x and later
inline constexpr std::uint32_t kFailLoadModule = 21;      // 6.x and later
inline constexpr std::uint32_t kFailLoadSymbol = 22;      // 6.x and later
inline constexpr std::uint32_t kUnknownError = 0xFFFFFFFF;

// The RSMI_STATUS_* name of a status, for messages when rsmi_status_string is missing.
inline const char* status_name(std::uint32_t status) {
  static constexpr const char* kNames[] = {
      "RSMI_STATUS_SUCCESS",
      "RSMI_STATUS_INVALID_ARGS",
      "RSMI_STATUS_NOT_SUPPORTED",
      "RSMI_STATUS_FILE_ERROR",
      "RSMI_STATUS_PERMISSION",
      "RSMI_STATUS_OUT_OF_RESOURCES",
      "RSMI_STATUS_INTERNAL_EXCEPTION",
      "RSMI_STATUS_INPUT_OUT_OF_BOUNDS",
      "RSMI_STATUS_INIT_ERROR",
      "RSMI_STATUS_NOT_YET_IMPLEMENTED",
      "RSMI_STATUS_NOT_FOUND",
      "RSMI_STATUS_INSUFFICIENT_SIZE",
      "RSMI_STATUS_INTERRUPT",
      "RSMI_STATUS_UNEXPECTED_SIZE",
      "RSMI_STATUS_NO_DATA",
      "RSMI_STATUS_UNEXPECTED_DATA",
      "RSMI_STATUS_BUSY",
      "RSMI_STATUS_REFCOUNT_OVERFLOW",
      "RSMI_STATUS_SETTING_UNAVAILABLE",
      "RSMI_STATUS_AMDGPU_RESTART_ERR",
      "RSMI_STATUS_DRM_ERROR",
      "RSMI_STATUS_FAIL_LOAD_MODULE",
      "RSMI_STATUS_FAIL_LOAD_SYMBOL",
  };
  if (status < sizeof(kNames) / sizeof(kNames[0])) return kNames[status];
  return "RSMI_STATUS_UNKNOWN_ERROR";
}

// rsmi_sw_component_t
inline constexpr std::uint32_t kSwComponentDriver = 0;

// rsmi_memory_type_t
inline constexpr std::uint32_t kMemoryTypeVram = 0;
inline constexpr std::uint32_t kMemoryTypeVisVram = 1;  // the CPU-visible part of VRAM
inline constexpr std::uint32_t kMemoryTypeGtt = 2;      // system memory mapped for the GPU

// rsmi_temperature_type_t (sensor) and rsmi_temperature_metric_t; values in millidegrees C.
inline constexpr std::uint32_t kTempTypeEdge = 0;
inline constexpr std::uint32_t kTempTypeJunction = 1;
inline constexpr std::uint32_t kTempTypeMemory = 2;
inline constexpr std::uint32_t kTempTypeHbm0 = 3;  // HBM_0..HBM_3 are 3..6
inline constexpr std::uint32_t kTempTypeHbm3 = 6;
inline constexpr std::uint32_t kTempCurrent = 0;

// rsmi_clk_type_t
inline constexpr std::uint32_t kClockSys = 0;
inline constexpr std::uint32_t kClockMem = 4;

// rsmi_gpu_block_t: one bit per RAS block, UMC (0x1, the memory controller) to FUSE (0x2000).
inline constexpr std::uint64_t kGpuBlockUmc = 0x1;
inline constexpr std::uint64_t kGpuBlockLast = 0x2000;

// RSMI_IO_LINK_TYPE (not the KFD sysfs encoding, where XGMI is 11)
inline constexpr std::uint32_t kIoLinkTypePcie = 1;
inline constexpr std::uint32_t kIoLinkTypeXgmi = 2;

// rsmi_evt_notification_type_t (the KFD SMI event numbers) and RSMI_EVENT_MASK_FROM_INDEX.
inline constexpr std::uint32_t kEventVmFault = 1;
inline constexpr std::uint32_t kEventThermalThrottle = 2;
inline constexpr std::uint32_t kEventGpuPreReset = 3;
inline constexpr std::uint32_t kEventGpuPostReset = 4;
inline constexpr std::uint32_t kEventAllProcess = 64;  // the highest number 6.x defines
constexpr std::uint64_t event_mask(std::uint32_t event) {
  return 1ULL << (event - 1);
}

// rsmi_memory_page_status_t
inline constexpr std::uint32_t kPageReserved = 0;
inline constexpr std::uint32_t kPagePending = 1;
inline constexpr std::uint32_t kPageUnreservable = 2;

// rsmi_version_t
struct Version {
  std::uint32_t major;
  std::uint32_t minor;
  std::uint32_t patch;
  const char* build;
};

// rsmi_frequencies_t. The library's major version 6 (ROCm 6.0) put has_deep_sleep first and
// made the list one longer, which moved every field.
struct FrequenciesV5 {
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[32];  // Hz
};
struct FrequenciesV6 {
  bool has_deep_sleep;
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[33];  // Hz
};
static_assert(sizeof(FrequenciesV5) == 264);
static_assert(sizeof(FrequenciesV6) == 280);

// rsmi_error_count_t: 16 bytes in every librocm_smi64 from 5.2.3 to 7.8 (the develop branch of
// August 2025); it has no deferred count (amdsmi_error_count_t has one, not this).
struct ErrorCount {
  std::uint64_t correctable;    // correctable_err
  std::uint64_t uncorrectable;  // uncorrectable_err
};
static_assert(sizeof(ErrorCount) == 16);

// rsmi_evt_notification_data_t. MAX_EVENT_NOTIFICATION_MSG_SIZE is 64 in every tagged
// rocm_smi_lib release (to ROCm 6.2.2, library 7.3) and 96 in rocm-systems' develop branch
// (library 7.8.0); the entries of an array have that stride. The backend takes the stride from
// the library's version (kEventLongMessageVersion) and checks it against the entries.
template <std::size_t MessageSize>
struct EventData {
  std::uint32_t dv_ind;
  std::uint32_t event;
  char message[MessageSize];
};
using EventDataShort = EventData<64>;
using EventDataLong = EventData<96>;
// The first library version known to write 96-byte messages (versions between 7.3 and 7.8 were
// not seen: there the entries decide).
inline constexpr std::uint32_t kEventLongMessageMajor = 7;
inline constexpr std::uint32_t kEventLongMessageMinor = 8;
static_assert(sizeof(EventDataShort) == 72);
static_assert(sizeof(EventDataLong) == 104);

// rsmi_retired_page_record_t
struct RetiredPageRecord {
  std::uint64_t page_address;
  std::uint64_t page_size;
  std::uint32_t status;  // rsmi_memory_page_status_t
};
static_assert(sizeof(RetiredPageRecord) == 24);

// The signatures we resolve, by rocm_smi.h's declaration. `dv` is the device index.
using InitFn = std::uint32_t(std::uint64_t flags);                  // rsmi_init
using ShutDownFn = std::uint32_t();                                 // rsmi_shut_down
using StatusStringFn = std::uint32_t(std::uint32_t, const char**);  // rsmi_status_string
using CountFn = std::uint32_t(std::uint32_t* count);                // rsmi_num_monitor_devices
using VersionGetFn = std::uint32_t(Version* version);               // rsmi_version_get
using VersionStrGetFn = std::uint32_t(std::uint32_t component, char* text, std::uint32_t len);
using DevU64Fn = std::uint32_t(std::uint32_t dv, std::uint64_t* value);
using DevU32Fn = std::uint32_t(std::uint32_t dv, std::uint32_t* value);
using DevNameFn = std::uint32_t(std::uint32_t dv, char* text, std::size_t len);  // size_t len
using DevStringFn = std::uint32_t(std::uint32_t dv, char* text, std::uint32_t len);
using DevMemoryFn = std::uint32_t(std::uint32_t dv, std::uint32_t type, std::uint64_t* bytes);
using DevTempFn = std::uint32_t(std::uint32_t dv, std::uint32_t sensor, std::uint32_t metric,
                                std::int64_t* millidegrees);
using DevSensorU64Fn = std::uint32_t(std::uint32_t dv, std::uint32_t sensor, std::uint64_t* value);
using DevEnergyFn = std::uint32_t(std::uint32_t dv, std::uint64_t* counter, float* resolution_uj,
                                  std::uint64_t* timestamp_ns);
using DevClockFn = std::uint32_t(std::uint32_t dv, std::uint32_t clock, void* frequencies);
using DevEccCountFn = std::uint32_t(std::uint32_t dv, std::uint64_t block, ErrorCount* counts);
using TopoLinkTypeFn = std::uint32_t(std::uint32_t src, std::uint32_t dst, std::uint64_t* hops,
                                     std::uint32_t* type);
using DevFn = std::uint32_t(std::uint32_t dv);  // event_notification_init / _stop
using EventMaskSetFn = std::uint32_t(std::uint32_t dv, std::uint64_t mask);
using EventGetFn = std::uint32_t(int timeout_ms, std::uint32_t* num_elem, void* data);
using ReservedPagesFn = std::uint32_t(std::uint32_t dv, std::uint32_t* num_pages,
                                      RetiredPageRecord* records);
// rsmi_gpu_metrics_t is declared only as far as we read it (amd_common.h); the backend hands the
// library a buffer large enough for any version's table.
using GpuMetricsFn = std::uint32_t(std::uint32_t dv, amd::GpuMetricsPrefix* metrics);

}  // namespace polyaccel::rsmi
