// Our own declarations of the part of the AMD SMI C ABI (amdsmi.h, libamd_smi.so) that the
// amd-smi backend calls; no vendor header is needed to build. Written from ROCm/amdsmi's
// include/amd_smi/amdsmi.h as of library version 26.2.1 (AMDSMI_LIB_VERSION_MAJOR 26: ROCm 7.x,
// now in ROCm/rocm-systems projects/amdsmi), where AMDSMI_MAX_STRING_LENGTH is 256.
//
// The library's major version changes whenever a struct changes. Libraries before 26 (ROCm 6.x)
// used 64- and 32-byte strings in the info structs and (up to 24) the event record, and 25.x
// took a sensor index in amdsmi_get_power_info; the backend reads those structs and calls that
// function only from a major-26-or-later library (kStructLayoutMajor). Their amdsmi_version_t
// began with a `year` (23 to 25), which our layout reads as the major: below 26 as well. The
// static_asserts below pin the offsets that a mistake here would silently break.
//
// Internal to discover/accel/: amd_smi.cc resolves these by name with dlsym, and the test build
// of libamd_smi.so (tests/inject/amd_smi/) defines them, checked against these same types.
// C enums are passed as 32-bit integers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "discover/accel/amd_common.h"

namespace polyaccel::amdsmi {

inline constexpr std::uint32_t kStructLayoutMajor = 26;
inline constexpr std::size_t kMaxString = 256;  // AMDSMI_MAX_STRING_LENGTH
inline constexpr std::size_t kMaxNumXcp = 8;    // AMDSMI_MAX_NUM_XCP
inline constexpr std::size_t kMaxNumXcc = 8;    // AMDSMI_MAX_NUM_XCC

using ProcessorHandle = void*;  // amdsmi_processor_handle
using SocketHandle = void*;     // amdsmi_socket_handle

// amdsmi_status_t
using Status = std::uint32_t;
inline constexpr Status kSuccess = 0;
inline constexpr Status kInval = 1;
inline constexpr Status kNotSupported = 2;
inline constexpr Status kNotYetImplemented = 3;
inline constexpr Status kFailLoadModule = 4;
inline constexpr Status kFailLoadSymbol = 5;
inline constexpr Status kDrmError = 6;
inline constexpr Status kApiFailed = 7;
inline constexpr Status kTimeout = 8;
inline constexpr Status kRetry = 9;
inline constexpr Status kNoPerm = 10;
inline constexpr Status kInterrupt = 11;
inline constexpr Status kIo = 12;
inline constexpr Status kAddressFault = 13;
inline constexpr Status kFileError = 14;
inline constexpr Status kOutOfResources = 15;
inline constexpr Status kInternalException = 16;
inline constexpr Status kInputOutOfBounds = 17;
inline constexpr Status kInitError = 18;
inline constexpr Status kRefcountOverflow = 19;
inline constexpr Status kDirectoryNotFound = 20;
inline constexpr Status kIpcError = 21;  // newer than the 26.1.0 headers compared: amd-smi's IPC
inline constexpr Status kBusy = 30;
inline constexpr Status kNotFound = 31;
inline constexpr Status kNotInit = 32;
inline constexpr Status kNoSlot = 33;
inline constexpr Status kDriverNotLoaded = 34;
inline constexpr Status kMoreData = 39;
inline constexpr Status kNoData = 40;
inline constexpr Status kInsufficientSize = 41;
inline constexpr Status kUnexpectedSize = 42;
inline constexpr Status kUnexpectedData = 43;
inline constexpr Status kFileNotFound = 52;
inline constexpr Status kArgPtrNull = 53;
inline constexpr Status kAmdgpuRestartErr = 54;
inline constexpr Status kSettingUnavailable = 55;
inline constexpr Status kCorruptedEeprom = 56;
inline constexpr Status kMapError = 0xFFFFFFFE;
inline constexpr Status kUnknownError = 0xFFFFFFFF;

// The AMDSMI_STATUS_* name of a status, for messages when amdsmi_status_code_to_string is
// missing.
inline const char* status_name(Status status) {
  struct Name {
    Status status;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {kSuccess, "AMDSMI_STATUS_SUCCESS"},
      {kInval, "AMDSMI_STATUS_INVAL"},
      {kNotSupported, "AMDSMI_STATUS_NOT_SUPPORTED"},
      {kNotYetImplemented, "AMDSMI_STATUS_NOT_YET_IMPLEMENTED"},
      {kFailLoadModule, "AMDSMI_STATUS_FAIL_LOAD_MODULE"},
      {kFailLoadSymbol, "AMDSMI_STATUS_FAIL_LOAD_SYMBOL"},
      {kDrmError, "AMDSMI_STATUS_DRM_ERROR"},
      {kApiFailed, "AMDSMI_STATUS_API_FAILED"},
      {kTimeout, "AMDSMI_STATUS_TIMEOUT"},
      {kRetry, "AMDSMI_STATUS_RETRY"},
      {kNoPerm, "AMDSMI_STATUS_NO_PERM"},
      {kInterrupt, "AMDSMI_STATUS_INTERRUPT"},
      {kIo, "AMDSMI_STATUS_IO"},
      {kAddressFault, "AMDSMI_STATUS_ADDRESS_FAULT"},
      {kFileError, "AMDSMI_STATUS_FILE_ERROR"},
      {kOutOfResources, "AMDSMI_STATUS_OUT_OF_RESOURCES"},
      {kInternalException, "AMDSMI_STATUS_INTERNAL_EXCEPTION"},
      {kInputOutOfBounds, "AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS"},
      {kInitError, "AMDSMI_STATUS_INIT_ERROR"},
      {kRefcountOverflow, "AMDSMI_STATUS_REFCOUNT_OVERFLOW"},
      {kDirectoryNotFound, "AMDSMI_STATUS_DIRECTORY_NOT_FOUND"},
      {kIpcError, "AMDSMI_STATUS_IPC_ERROR"},
      {kBusy, "AMDSMI_STATUS_BUSY"},
      {kNotFound, "AMDSMI_STATUS_NOT_FOUND"},
      {kNotInit, "AMDSMI_STATUS_NOT_INIT"},
      {kNoSlot, "AMDSMI_STATUS_NO_SLOT"},
      {kDriverNotLoaded, "AMDSMI_STATUS_DRIVER_NOT_LOADED"},
      {kMoreData, "AMDSMI_STATUS_MORE_DATA"},
      {kNoData, "AMDSMI_STATUS_NO_DATA"},
      {kInsufficientSize, "AMDSMI_STATUS_INSUFFICIENT_SIZE"},
      {kUnexpectedSize, "AMDSMI_STATUS_UNEXPECTED_SIZE"},
      {kUnexpectedData, "AMDSMI_STATUS_UNEXPECTED_DATA"},
      {kFileNotFound, "AMDSMI_STATUS_FILE_NOT_FOUND"},
      {kArgPtrNull, "AMDSMI_STATUS_ARG_PTR_NULL"},
      {kAmdgpuRestartErr, "AMDSMI_STATUS_AMDGPU_RESTART_ERR"},
      {kSettingUnavailable, "AMDSMI_STATUS_SETTING_UNAVAILABLE"},
      {kCorruptedEeprom, "AMDSMI_STATUS_CORRUPTED_EEPROM"},
      {kMapError, "AMDSMI_STATUS_MAP_ERROR"},
  };
  for (const Name& n : kNames) {
    if (n.status == status) return n.name;
  }
  return "AMDSMI_STATUS_UNKNOWN_ERROR";
}

// amdsmi_init_flags_t
inline constexpr std::uint64_t kInitAmdGpus = 1ULL << 1;

// processor_type_t
inline constexpr std::uint32_t kProcessorTypeAmdGpu = 1;

// amdsmi_clk_type_t
inline constexpr std::uint32_t kClkTypeGfx = 0;  // AMDSMI_CLK_TYPE_SYS
inline constexpr std::uint32_t kClkTypeMem = 4;

// amdsmi_temperature_type_t and amdsmi_temperature_metric_t; amd-smi answers in degrees C.
inline constexpr std::uint32_t kTempTypeEdge = 0;
inline constexpr std::uint32_t kTempTypeHotspot = 1;  // = JUNCTION
inline constexpr std::uint32_t kTempTypeVram = 2;
inline constexpr std::uint32_t kTempTypeHbm0 = 3;  // HBM_0..HBM_3 are 3..6
inline constexpr std::uint32_t kTempTypeHbm3 = 6;
inline constexpr std::uint32_t kTempCurrent = 0;

// amdsmi_memory_type_t
inline constexpr std::uint32_t kMemTypeVram = 0;
inline constexpr std::uint32_t kMemTypeVisVram = 1;  // the CPU-visible part of VRAM
inline constexpr std::uint32_t kMemTypeGtt = 2;      // system memory mapped for the GPU

// amdsmi_link_type_t (amdsmi_io_link_type_t before 26, same values)
inline constexpr std::uint32_t kLinkTypePcie = 1;
inline constexpr std::uint32_t kLinkTypeXgmi = 2;

// amdsmi_gpu_block_t: UMC is the memory controller.
inline constexpr std::uint64_t kGpuBlockUmc = 1ULL << 0;

// amdsmi_memory_page_status_t
inline constexpr std::uint32_t kPageReserved = 0;
inline constexpr std::uint32_t kPagePending = 1;
inline constexpr std::uint32_t kPageUnreservable = 2;

// amdsmi_evt_notification_type_t and AMDSMI_EVENT_MASK_FROM_INDEX.
inline constexpr std::uint32_t kEventVmFault = 1;
inline constexpr std::uint32_t kEventThermalThrottle = 2;
inline constexpr std::uint32_t kEventGpuPreReset = 3;
inline constexpr std::uint32_t kEventGpuPostReset = 4;
inline constexpr std::uint32_t kEventLast = 13;  // AMDSMI_EVT_NOTIF_PROCESS_END
constexpr std::uint64_t event_mask(std::uint32_t event) {
  return 1ULL << (event - 1);
}

// amdsmi_bdf_t: function bits 2..0, device 7..3, bus 15..8, domain 63..16.
using Bdf = std::uint64_t;

// amdsmi_version_t
struct Version {
  std::uint32_t major;
  std::uint32_t minor;
  std::uint32_t release;
  const char* build;
};
static_assert(sizeof(Version) == 24);

// amdsmi_asic_info_t: 896 bytes in 26.1.0 (448, with 64-byte strings, before 26).
struct AsicInfo {
  char market_name[kMaxString];
  std::uint32_t vendor_id;
  char vendor_name[kMaxString];
  std::uint32_t subvendor_id;
  std::uint64_t device_id;
  std::uint32_t rev_id;
  char asic_serial[kMaxString];
  std::uint32_t oam_id;
  std::uint32_t num_of_compute_units;
  std::uint64_t target_graphics_version;  // all ones when not supported
  std::uint32_t subsystem_id;
  std::uint32_t reserved[21];
};
static_assert(offsetof(AsicInfo, asic_serial) == 532);
static_assert(offsetof(AsicInfo, target_graphics_version) == 800);
static_assert(sizeof(AsicInfo) == 896);

// amdsmi_board_info_t
struct BoardInfo {
  char model_number[kMaxString];
  char product_serial[kMaxString];
  char fru_id[kMaxString];
  char product_name[kMaxString];
  char manufacturer_name[kMaxString];
  std::uint64_t reserved[64];
};
static_assert(offsetof(BoardInfo, product_name) == 768);
static_assert(sizeof(BoardInfo) == 1792);

// amdsmi_driver_info_t
struct DriverInfo {
  char driver_version[kMaxString];
  char driver_date[kMaxString];
  char driver_name[kMaxString];
};
static_assert(sizeof(DriverInfo) == 768);

// amdsmi_power_cap_info_t; powers in microwatts on bare metal.
struct PowerCapInfo {
  std::uint64_t power_cap;
  std::uint64_t default_power_cap;
  std::uint64_t dpm_cap;
  std::uint64_t min_power_cap;
  std::uint64_t max_power_cap;
  std::uint64_t reserved[3];
};
static_assert(sizeof(PowerCapInfo) == 64);

// amdsmi_power_info_t; watts on bare metal, UINT32_MAX (all ones) when not supported.
struct PowerInfo {
  std::uint64_t socket_power;
  std::uint32_t current_socket_power;  // MI300 and later
  std::uint32_t average_socket_power;  // MI200 and earlier
  std::uint64_t gfx_voltage;
  std::uint64_t soc_voltage;
  std::uint64_t mem_voltage;
  std::uint32_t power_limit;
  std::uint64_t reserved[18];
};
static_assert(offsetof(PowerInfo, current_socket_power) == 8);
static_assert(offsetof(PowerInfo, power_limit) == 40);
static_assert(sizeof(PowerInfo) == 192);

// amdsmi_clk_info_t; MHz.
struct ClkInfo {
  std::uint32_t clk;
  std::uint32_t min_clk;
  std::uint32_t max_clk;
  std::uint8_t clk_locked;
  std::uint8_t clk_deep_sleep;
  std::uint32_t reserved[4];
};
static_assert(sizeof(ClkInfo) == 32);

// amdsmi_engine_usage_t; percent.
struct EngineUsage {
  std::uint32_t gfx_activity;
  std::uint32_t umc_activity;
  std::uint32_t mm_activity;
  std::uint32_t reserved[13];
};
static_assert(sizeof(EngineUsage) == 64);

// amdsmi_error_count_t; accumulated since the driver loaded.
struct ErrorCount {
  std::uint64_t correctable_count;
  std::uint64_t uncorrectable_count;
  std::uint64_t deferred_count;
  std::uint64_t reserved[5];
};
static_assert(sizeof(ErrorCount) == 64);

// amdsmi_retired_page_record_t
struct RetiredPageRecord {
  std::uint64_t page_address;
  std::uint64_t page_size;
  std::uint32_t status;  // amdsmi_memory_page_status_t
};
static_assert(sizeof(RetiredPageRecord) == 24);

// amdsmi_evt_notification_data_t
struct EventData {
  ProcessorHandle processor_handle;
  std::uint32_t event;
  char message[kMaxString];
};
static_assert(offsetof(EventData, message) == 12);
static_assert(sizeof(EventData) == 272);

// amdsmi_violation_status_t (MI300 and later): throttling as residency counters and "active"
// flags, UINT8_MAX / UINT64_MAX when not supported.
struct ViolationStatus {
  std::uint64_t reference_timestamp;
  std::uint64_t violation_timestamp;
  std::uint64_t acc_counter;
  std::uint64_t acc_prochot_thrm;
  std::uint64_t acc_ppt_pwr;
  std::uint64_t acc_socket_thrm;
  std::uint64_t acc_vr_thrm;
  std::uint64_t acc_hbm_thrm;
  std::uint64_t acc_gfx_clk_below_host_limit;
  std::uint64_t per_prochot_thrm;
  std::uint64_t per_ppt_pwr;
  std::uint64_t per_socket_thrm;
  std::uint64_t per_vr_thrm;
  std::uint64_t per_hbm_thrm;
  std::uint64_t per_gfx_clk_below_host_limit;
  std::uint8_t active_prochot_thrm;
  std::uint8_t active_ppt_pwr;
  std::uint8_t active_socket_thrm;
  std::uint8_t active_vr_thrm;
  std::uint8_t active_hbm_thrm;
  std::uint8_t active_gfx_clk_below_host_limit;
  std::uint64_t acc_gfx_clk_below_host_limit_pwr[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t acc_gfx_clk_below_host_limit_thm[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t acc_low_utilization[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t acc_gfx_clk_below_host_limit_total[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t per_gfx_clk_below_host_limit_pwr[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t per_gfx_clk_below_host_limit_thm[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t per_low_utilization[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t per_gfx_clk_below_host_limit_total[kMaxNumXcp][kMaxNumXcc];
  std::uint8_t active_gfx_clk_below_host_limit_pwr[kMaxNumXcp][kMaxNumXcc];
  std::uint8_t active_gfx_clk_below_host_limit_thm[kMaxNumXcp][kMaxNumXcc];
  std::uint8_t active_low_utilization[kMaxNumXcp][kMaxNumXcc];
  std::uint8_t active_gfx_clk_below_host_limit_total[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t reserved[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t reserved2[kMaxNumXcp][kMaxNumXcc];
  std::uint64_t reserved3[kMaxNumXcp][kMaxNumXcc];
};
static_assert(offsetof(ViolationStatus, active_prochot_thrm) == 120);
static_assert(offsetof(ViolationStatus, active_hbm_thrm) == 124);
static_assert(offsetof(ViolationStatus, acc_gfx_clk_below_host_limit_pwr) == 128);
static_assert(sizeof(ViolationStatus) == 6016);

// The signatures we resolve, by amdsmi.h's declaration. The backend hands each struct getter a
// buffer with room to spare (see amd_smi.cc): a newer library may have made the struct longer.
using InitFn = Status(std::uint64_t init_flags);  // amdsmi_init
using ShutDownFn = Status();                      // amdsmi_shut_down
using StatusCodeToStringFn = Status(Status status, const char** text);
using LibVersionFn = Status(Version* version);  // amdsmi_get_lib_version
using SocketHandlesFn = Status(std::uint32_t* count, SocketHandle* sockets);
using ProcessorHandlesFn = Status(SocketHandle socket, std::uint32_t* count,
                                  ProcessorHandle* processors);
using ProcessorTypeFn = Status(ProcessorHandle p, std::uint32_t* type);
using DeviceBdfFn = Status(ProcessorHandle p, Bdf* bdf);
using DeviceUuidFn = Status(ProcessorHandle p, unsigned int* length, char* uuid);
using AsicInfoFn = Status(ProcessorHandle p, AsicInfo* info);
using BoardInfoFn = Status(ProcessorHandle p, BoardInfo* info);
using DriverInfoFn = Status(ProcessorHandle p, DriverInfo* info);
using MemoryFn = Status(ProcessorHandle p, std::uint32_t type, std::uint64_t* bytes);
using PartitionFn = Status(ProcessorHandle p, char* text, std::uint32_t len);
using LinkTypeFn = Status(ProcessorHandle src, ProcessorHandle dst, std::uint64_t* hops,
                          std::uint32_t* type);
using PowerCapInfoFn = Status(ProcessorHandle p, std::uint32_t sensor, PowerCapInfo* info);
using U64Fn = Status(ProcessorHandle p, std::uint64_t* value);
using ActivityFn = Status(ProcessorHandle p, EngineUsage* usage);
using TempMetricFn = Status(ProcessorHandle p, std::uint32_t sensor, std::uint32_t metric,
                            std::int64_t* celsius);
using PowerInfoFn = Status(ProcessorHandle p, PowerInfo* info);
using EnergyCountFn = Status(ProcessorHandle p, std::uint64_t* energy_accumulator,
                             float* counter_resolution_uj, std::uint64_t* timestamp_ns);
using ClockInfoFn = Status(ProcessorHandle p, std::uint32_t clock, ClkInfo* info);
using ErrorCountFn = Status(ProcessorHandle p, ErrorCount* counts);
// amdsmi_get_gpu_ecc_count: one RAS block's counts (amdsmi_gpu_block_t is a 64-bit enum).
using BlockErrorCountFn = Status(ProcessorHandle p, std::uint64_t block, ErrorCount* counts);
using BadPageInfoFn = Status(ProcessorHandle p, std::uint32_t* num_pages,
                             RetiredPageRecord* records);
// amdsmi_gpu_metrics_t is declared only as far as we read it (amd_gpu_metrics.h).
using GpuMetricsFn = Status(ProcessorHandle p, amd::GpuMetricsPrefix* metrics);
using ViolationStatusFn = Status(ProcessorHandle p, ViolationStatus* status);
// amdsmi_pcie_info_t is declared only as far as we read it: the first fields of its pcie_static,
// the same in every amdsmi.h since ROCm 6.0 (the data has no entry for the struct:
// vendor_abi_amd_smi.cc says why this is enough). The backend hands it a zeroed 4 KiB buffer.
struct PcieStaticPrefix {
  std::uint16_t max_pcie_width;
  std::uint32_t max_pcie_speed;  // MT/s: 32000 for PCIe 5.0
  std::uint32_t pcie_interface_version;
};
static_assert(offsetof(PcieStaticPrefix, max_pcie_speed) == 4);
using PcieInfoFn = Status(ProcessorHandle p, PcieStaticPrefix* info);
using HandleFn = Status(ProcessorHandle p);  // amdsmi_init_/stop_gpu_event_notification
using EventMaskFn = Status(ProcessorHandle p, std::uint64_t mask);
using EventGetFn = Status(int timeout_ms, std::uint32_t* num_elem, EventData* data);

}  // namespace polyaccel::amdsmi
