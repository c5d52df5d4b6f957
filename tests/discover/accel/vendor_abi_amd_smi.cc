// Our AMD SMI declarations (src/discover/accel/amd_smi_abi.h) as the ABI comparison sees them,
// the differences from amd_smi.json that our code handles on purpose, and the names the data
// lacks. Our C++ names differ from the vendor's: each entry names both.
#include "discover/accel/amd_smi_abi.h"

#include "vendor_abi.h"

namespace polyaccel::vendor_abi {

using namespace polyaccel::amdsmi;  // NOLINT(google-build-using-namespace)

#define C(NAME, OURS)        \
  DeclaredConstant {         \
    NAME, value_of(OURS), {} \
  }
#define S(NAME, TYPE, ...)                                     \
  DeclaredStruct {                                             \
#NAME, #TYPE, sizeof(TYPE), alignof(TYPE), __VA_ARGS__, {} \
  }
#define F(NAME, TYPE)             \
  DeclaredFunction {              \
#NAME, signature_of < TYPE>() \
  }

ApiTables amd_smi_tables() {
  DeclaredApi d;
  d.api = "amd_smi";
  d.constants = {
      C("AMDSMI_CLK_TYPE_MEM", kClkTypeMem),
      C("AMDSMI_CLK_TYPE_SYS", kClkTypeGfx),
      C("AMDSMI_EVT_NOTIF_VMFAULT", kEventVmFault),
      C("AMDSMI_EVT_NOTIF_THERMAL_THROTTLE", kEventThermalThrottle),
      C("AMDSMI_EVT_NOTIF_GPU_PRE_RESET", kEventGpuPreReset),
      C("AMDSMI_EVT_NOTIF_GPU_POST_RESET", kEventGpuPostReset),
      C("AMDSMI_EVT_NOTIF_PROCESS_END", kEventLast),
      C("AMDSMI_EVT_NOTIF_LAST", kEventLast),
      C("AMDSMI_GPU_BLOCK_UMC", kGpuBlockUmc),
      C("AMDSMI_INIT_AMD_GPUS", kInitAmdGpus),
      // amdsmi_topo_get_link_type's answer: amdsmi_io_link_type_t before 26, amdsmi_link_type_t
      // from 26, with the same values for PCIe and XGMI.
      C("AMDSMI_IOLINK_TYPE_PCIEXPRESS", kLinkTypePcie),
      C("AMDSMI_IOLINK_TYPE_XGMI", kLinkTypeXgmi),
      C("AMDSMI_LINK_TYPE_PCIE", kLinkTypePcie),
      C("AMDSMI_LINK_TYPE_XGMI", kLinkTypeXgmi),
      C("AMDSMI_LIB_VERSION_MAJOR", kStructLayoutMajor),
      C("AMDSMI_MAX_NUM_XCC", kMaxNumXcc),
      C("AMDSMI_MAX_NUM_XCP", kMaxNumXcp),
      C("AMDSMI_MAX_STRING_LENGTH", kMaxString),
      C("AMDSMI_MEM_PAGE_STATUS_PENDING", kPagePending),
      C("AMDSMI_MEM_PAGE_STATUS_RESERVED", kPageReserved),
      C("AMDSMI_MEM_PAGE_STATUS_UNRESERVABLE", kPageUnreservable),
      C("AMDSMI_MEM_TYPE_VRAM", kMemTypeVram),
      C("AMDSMI_MEM_TYPE_VIS_VRAM", kMemTypeVisVram),
      C("AMDSMI_MEM_TYPE_GTT", kMemTypeGtt),
      C("AMDSMI_PROCESSOR_TYPE_AMD_GPU", kProcessorTypeAmdGpu),
      C("AMDSMI_STATUS_SUCCESS", kSuccess),
      C("AMDSMI_STATUS_INVAL", kInval),
      C("AMDSMI_STATUS_NOT_SUPPORTED", kNotSupported),
      C("AMDSMI_STATUS_NOT_YET_IMPLEMENTED", kNotYetImplemented),
      C("AMDSMI_STATUS_FAIL_LOAD_MODULE", kFailLoadModule),
      C("AMDSMI_STATUS_FAIL_LOAD_SYMBOL", kFailLoadSymbol),
      C("AMDSMI_STATUS_DRM_ERROR", kDrmError),
      C("AMDSMI_STATUS_API_FAILED", kApiFailed),
      C("AMDSMI_STATUS_TIMEOUT", kTimeout),
      C("AMDSMI_STATUS_RETRY", kRetry),
      C("AMDSMI_STATUS_NO_PERM", kNoPerm),
      C("AMDSMI_STATUS_INTERRUPT", kInterrupt),
      C("AMDSMI_STATUS_IO", kIo),
      C("AMDSMI_STATUS_ADDRESS_FAULT", kAddressFault),
      C("AMDSMI_STATUS_FILE_ERROR", kFileError),
      C("AMDSMI_STATUS_OUT_OF_RESOURCES", kOutOfResources),
      C("AMDSMI_STATUS_INTERNAL_EXCEPTION", kInternalException),
      C("AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS", kInputOutOfBounds),
      C("AMDSMI_STATUS_INIT_ERROR", kInitError),
      C("AMDSMI_STATUS_REFCOUNT_OVERFLOW", kRefcountOverflow),
      C("AMDSMI_STATUS_DIRECTORY_NOT_FOUND", kDirectoryNotFound),
      C("AMDSMI_STATUS_IPC_ERROR", kIpcError),
      C("AMDSMI_STATUS_BUSY", kBusy),
      C("AMDSMI_STATUS_NOT_FOUND", kNotFound),
      C("AMDSMI_STATUS_NOT_INIT", kNotInit),
      C("AMDSMI_STATUS_NO_SLOT", kNoSlot),
      C("AMDSMI_STATUS_DRIVER_NOT_LOADED", kDriverNotLoaded),
      C("AMDSMI_STATUS_MORE_DATA", kMoreData),
      C("AMDSMI_STATUS_NO_DATA", kNoData),
      C("AMDSMI_STATUS_INSUFFICIENT_SIZE", kInsufficientSize),
      C("AMDSMI_STATUS_UNEXPECTED_SIZE", kUnexpectedSize),
      C("AMDSMI_STATUS_UNEXPECTED_DATA", kUnexpectedData),
      C("AMDSMI_STATUS_FILE_NOT_FOUND", kFileNotFound),
      C("AMDSMI_STATUS_ARG_PTR_NULL", kArgPtrNull),
      C("AMDSMI_STATUS_AMDGPU_RESTART_ERR", kAmdgpuRestartErr),
      C("AMDSMI_STATUS_SETTING_UNAVAILABLE", kSettingUnavailable),
      C("AMDSMI_STATUS_CORRUPTED_EEPROM", kCorruptedEeprom),
      C("AMDSMI_STATUS_MAP_ERROR", kMapError),
      C("AMDSMI_STATUS_UNKNOWN_ERROR", kUnknownError),
      C("AMDSMI_TEMPERATURE_TYPE_EDGE", kTempTypeEdge),
      C("AMDSMI_TEMPERATURE_TYPE_HOTSPOT", kTempTypeHotspot),
      C("AMDSMI_TEMPERATURE_TYPE_VRAM", kTempTypeVram),
      C("AMDSMI_TEMPERATURE_TYPE_HBM_0", kTempTypeHbm0),
      C("AMDSMI_TEMPERATURE_TYPE_HBM_3", kTempTypeHbm3),
      C("AMDSMI_TEMP_CURRENT", kTempCurrent),
  };
  d.structs = {
      S(amdsmi_version_t, Version,
        {POLYACCEL_ABI_FIELD(Version, major, "major"), POLYACCEL_ABI_FIELD(Version, minor, "minor"),
         POLYACCEL_ABI_FIELD(Version, release, "release"),
         POLYACCEL_ABI_FIELD(Version, build, "build")}),
      S(amdsmi_asic_info_t, AsicInfo,
        {POLYACCEL_ABI_FIELD(AsicInfo, market_name, "market_name"),
         POLYACCEL_ABI_FIELD(AsicInfo, vendor_id, "vendor_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, vendor_name, "vendor_name"),
         POLYACCEL_ABI_FIELD(AsicInfo, subvendor_id, "subvendor_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, device_id, "device_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, rev_id, "rev_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, asic_serial, "asic_serial"),
         POLYACCEL_ABI_FIELD(AsicInfo, oam_id, "oam_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, num_of_compute_units, "num_of_compute_units"),
         POLYACCEL_ABI_FIELD(AsicInfo, target_graphics_version, "target_graphics_version"),
         POLYACCEL_ABI_FIELD(AsicInfo, subsystem_id, "subsystem_id"),
         POLYACCEL_ABI_FIELD(AsicInfo, reserved, "reserved")}),
      S(amdsmi_board_info_t, BoardInfo,
        {POLYACCEL_ABI_FIELD(BoardInfo, model_number, "model_number"),
         POLYACCEL_ABI_FIELD(BoardInfo, product_serial, "product_serial"),
         POLYACCEL_ABI_FIELD(BoardInfo, fru_id, "fru_id"),
         POLYACCEL_ABI_FIELD(BoardInfo, product_name, "product_name"),
         POLYACCEL_ABI_FIELD(BoardInfo, manufacturer_name, "manufacturer_name"),
         POLYACCEL_ABI_FIELD(BoardInfo, reserved, "reserved")}),
      S(amdsmi_driver_info_t, DriverInfo,
        {POLYACCEL_ABI_FIELD(DriverInfo, driver_version, "driver_version"),
         POLYACCEL_ABI_FIELD(DriverInfo, driver_date, "driver_date"),
         POLYACCEL_ABI_FIELD(DriverInfo, driver_name, "driver_name")}),
      S(amdsmi_power_cap_info_t, PowerCapInfo,
        {POLYACCEL_ABI_FIELD(PowerCapInfo, power_cap, "power_cap"),
         POLYACCEL_ABI_FIELD(PowerCapInfo, default_power_cap, "default_power_cap"),
         POLYACCEL_ABI_FIELD(PowerCapInfo, dpm_cap, "dpm_cap"),
         POLYACCEL_ABI_FIELD(PowerCapInfo, min_power_cap, "min_power_cap"),
         POLYACCEL_ABI_FIELD(PowerCapInfo, max_power_cap, "max_power_cap"),
         POLYACCEL_ABI_FIELD(PowerCapInfo, reserved, "reserved")}),
      S(amdsmi_power_info_t, PowerInfo,
        {POLYACCEL_ABI_FIELD(PowerInfo, socket_power, "socket_power"),
         POLYACCEL_ABI_FIELD(PowerInfo, current_socket_power, "current_socket_power"),
         POLYACCEL_ABI_FIELD(PowerInfo, average_socket_power, "average_socket_power"),
         POLYACCEL_ABI_FIELD(PowerInfo, gfx_voltage, "gfx_voltage"),
         POLYACCEL_ABI_FIELD(PowerInfo, soc_voltage, "soc_voltage"),
         POLYACCEL_ABI_FIELD(PowerInfo, mem_voltage, "mem_voltage"),
         POLYACCEL_ABI_FIELD(PowerInfo, power_limit, "power_limit"),
         POLYACCEL_ABI_FIELD(PowerInfo, reserved, "reserved")}),
      S(amdsmi_clk_info_t, ClkInfo,
        {POLYACCEL_ABI_FIELD(ClkInfo, clk, "clk"), POLYACCEL_ABI_FIELD(ClkInfo, min_clk, "min_clk"),
         POLYACCEL_ABI_FIELD(ClkInfo, max_clk, "max_clk"),
         POLYACCEL_ABI_FIELD(ClkInfo, clk_locked, "clk_locked"),
         POLYACCEL_ABI_FIELD(ClkInfo, clk_deep_sleep, "clk_deep_sleep"),
         POLYACCEL_ABI_FIELD(ClkInfo, reserved, "reserved")}),
      S(amdsmi_engine_usage_t, EngineUsage,
        {POLYACCEL_ABI_FIELD(EngineUsage, gfx_activity, "gfx_activity"),
         POLYACCEL_ABI_FIELD(EngineUsage, umc_activity, "umc_activity"),
         POLYACCEL_ABI_FIELD(EngineUsage, mm_activity, "mm_activity"),
         POLYACCEL_ABI_FIELD(EngineUsage, reserved, "reserved")}),
      S(amdsmi_error_count_t, ErrorCount,
        {POLYACCEL_ABI_FIELD(ErrorCount, correctable_count, "correctable_count"),
         POLYACCEL_ABI_FIELD(ErrorCount, uncorrectable_count, "uncorrectable_count"),
         POLYACCEL_ABI_FIELD(ErrorCount, deferred_count, "deferred_count"),
         POLYACCEL_ABI_FIELD(ErrorCount, reserved, "reserved")}),
      S(amdsmi_retired_page_record_t, RetiredPageRecord,
        {POLYACCEL_ABI_FIELD(RetiredPageRecord, page_address, "page_address"),
         POLYACCEL_ABI_FIELD(RetiredPageRecord, page_size, "page_size"),
         POLYACCEL_ABI_FIELD(RetiredPageRecord, status, "status")}),
      S(amdsmi_evt_notification_data_t, EventData,
        {POLYACCEL_ABI_FIELD(EventData, processor_handle, "processor_handle"),
         POLYACCEL_ABI_FIELD(EventData, event, "event"),
         POLYACCEL_ABI_FIELD(EventData, message, "message")}),
      S(amdsmi_violation_status_t, ViolationStatus,
        {POLYACCEL_ABI_FIELD(ViolationStatus, reference_timestamp, "reference_timestamp"),
         POLYACCEL_ABI_FIELD(ViolationStatus, violation_timestamp, "violation_timestamp"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_counter, "acc_counter"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_prochot_thrm, "acc_prochot_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_ppt_pwr, "acc_ppt_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_socket_thrm, "acc_socket_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_vr_thrm, "acc_vr_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_hbm_thrm, "acc_hbm_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_gfx_clk_below_host_limit,
                             "acc_gfx_clk_below_host_limit"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_prochot_thrm, "per_prochot_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_ppt_pwr, "per_ppt_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_socket_thrm, "per_socket_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_vr_thrm, "per_vr_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_hbm_thrm, "per_hbm_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_gfx_clk_below_host_limit,
                             "per_gfx_clk_below_host_limit"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_prochot_thrm, "active_prochot_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_ppt_pwr, "active_ppt_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_socket_thrm, "active_socket_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_vr_thrm, "active_vr_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_hbm_thrm, "active_hbm_thrm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_gfx_clk_below_host_limit,
                             "active_gfx_clk_below_host_limit"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_gfx_clk_below_host_limit_pwr,
                             "acc_gfx_clk_below_host_limit_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_gfx_clk_below_host_limit_thm,
                             "acc_gfx_clk_below_host_limit_thm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_low_utilization, "acc_low_utilization"),
         POLYACCEL_ABI_FIELD(ViolationStatus, acc_gfx_clk_below_host_limit_total,
                             "acc_gfx_clk_below_host_limit_total"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_gfx_clk_below_host_limit_pwr,
                             "per_gfx_clk_below_host_limit_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_gfx_clk_below_host_limit_thm,
                             "per_gfx_clk_below_host_limit_thm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_low_utilization, "per_low_utilization"),
         POLYACCEL_ABI_FIELD(ViolationStatus, per_gfx_clk_below_host_limit_total,
                             "per_gfx_clk_below_host_limit_total"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_gfx_clk_below_host_limit_pwr,
                             "active_gfx_clk_below_host_limit_pwr"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_gfx_clk_below_host_limit_thm,
                             "active_gfx_clk_below_host_limit_thm"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_low_utilization, "active_low_utilization"),
         POLYACCEL_ABI_FIELD(ViolationStatus, active_gfx_clk_below_host_limit_total,
                             "active_gfx_clk_below_host_limit_total"),
         POLYACCEL_ABI_FIELD(ViolationStatus, reserved, "reserved"),
         POLYACCEL_ABI_FIELD(ViolationStatus, reserved2, "reserved2"),
         POLYACCEL_ABI_FIELD(ViolationStatus, reserved3, "reserved3")}),
      // amdsmi_bdf_t is a union of bitfields and as_uint; we pass and read the 64-bit integer.
      DeclaredStruct{"amdsmi_bdf_t",
                     "Bdf",
                     sizeof(Bdf),
                     alignof(Bdf),
                     {DeclaredField{"as_uint", 0, sizeof(Bdf), kind_of<Bdf>()}},
                     {}},
      // 24.x (424 bytes): the v1 prefix that the throttle mask reads; the later fields are read
      // only from a table whose structure_size covers them (amd::read_metrics_table). 26: the
      // whole table (amd_common.h). The backend passes a buffer of kGpuMetricsBufferSize.
      DeclaredStruct{"amdsmi_gpu_metrics_t",
                     "amd::GpuMetricsPrefix",
                     sizeof(amd::GpuMetricsPrefix),
                     alignof(amd::GpuMetricsPrefix),
                     gpu_metrics_prefix_fields(),
                     {"rocm-6.2.2"}},
      DeclaredStruct{"amdsmi_gpu_metrics_t",
                     "amd::GpuMetrics",
                     sizeof(amd::GpuMetrics),
                     alignof(amd::GpuMetrics),
                     gpu_metrics_fields(),
                     {"amdsmi-26.1.0-therock", "amdsmi-26.1.0-alumet"}},
  };
  d.types = {
      DeclaredType{"amdsmi_processor_handle", sizeof(ProcessorHandle)},
      DeclaredType{"amdsmi_socket_handle", sizeof(SocketHandle)},
      DeclaredType{"amdsmi_status_t", sizeof(amdsmi::Status)},
  };
  // The symbols amd_smi.cc resolves, with the type it calls each by (its Api struct).
  d.functions = {
      F(amdsmi_init, InitFn),
      F(amdsmi_shut_down, ShutDownFn),
      F(amdsmi_status_code_to_string, StatusCodeToStringFn),
      F(amdsmi_get_lib_version, LibVersionFn),
      F(amdsmi_get_socket_handles, SocketHandlesFn),
      F(amdsmi_get_processor_handles, ProcessorHandlesFn),
      F(amdsmi_get_processor_type, ProcessorTypeFn),
      F(amdsmi_get_gpu_device_bdf, DeviceBdfFn),
      F(amdsmi_get_gpu_device_uuid, DeviceUuidFn),
      F(amdsmi_get_gpu_asic_info, AsicInfoFn),
      F(amdsmi_get_gpu_board_info, BoardInfoFn),
      F(amdsmi_get_gpu_driver_info, DriverInfoFn),
      F(amdsmi_get_gpu_memory_total, MemoryFn),
      F(amdsmi_get_gpu_memory_usage, MemoryFn),
      F(amdsmi_get_gpu_compute_partition, PartitionFn),
      F(amdsmi_get_gpu_memory_partition, PartitionFn),
      F(amdsmi_topo_get_link_type, LinkTypeFn),
      F(amdsmi_get_power_cap_info, PowerCapInfoFn),
      F(amdsmi_get_gpu_ecc_enabled, U64Fn),
      F(amdsmi_get_gpu_activity, ActivityFn),
      F(amdsmi_get_temp_metric, TempMetricFn),
      F(amdsmi_get_power_info, PowerInfoFn),
      F(amdsmi_get_energy_count, EnergyCountFn),
      F(amdsmi_get_clock_info, ClockInfoFn),
      F(amdsmi_get_gpu_pci_replay_counter, U64Fn),
      F(amdsmi_get_gpu_total_ecc_count, ErrorCountFn),
      F(amdsmi_get_gpu_ecc_count, BlockErrorCountFn),
      F(amdsmi_get_gpu_bad_page_info, BadPageInfoFn),
      F(amdsmi_get_gpu_metrics_info, GpuMetricsFn),
      F(amdsmi_get_pcie_info, PcieInfoFn),
      F(amdsmi_get_violation_status, ViolationStatusFn),
      F(amdsmi_init_gpu_event_notification, HandleFn),
      F(amdsmi_set_gpu_event_notification_mask, EventMaskFn),
      F(amdsmi_get_gpu_event_notification, EventGetFn),
      F(amdsmi_stop_gpu_event_notification, HandleFn),
  };
  d.macros = {
      DeclaredMacro{"AMDSMI_EVENT_MASK_FROM_INDEX",
                    {{"1", value_of(event_mask(1))},
                     {"2", value_of(event_mask(2))},
                     {"3", value_of(event_mask(3))},
                     {"4", value_of(event_mask(4))}}},
  };

  const std::string metrics_reason =
      "amd::GpuMetricsPrefix declares only the v1.x prefix both backends read; the library is "
      "handed a buffer of kGpuMetricsBufferSize (64 KiB), and a field past v1.0 is read only "
      "when the table's format and content revision have it (indep_throttle_status: v1.3)";
  const std::string before_26 =
      "a library before 26 (ROCm 6.x: 64-byte strings) has its own layout of this struct: "
      "amd_smi.cc reads it only when structs_readable() (library major 26 or later; a 24.x "
      "library's version struct begins with the year, 24, read as the major), and hands every "
      "getter a buffer of the 26 layout plus 4 KiB (Out<T>)";
  const std::string optional_status =
      "named in messages only; a library that lacks a status never returns it";
  std::vector<Handled> handled = {
      {"amd_smi/rocm-6.2.2/struct/amdsmi_version_t",
       "24.x's amdsmi_version_t begins with `year`: our `major` reads the year (24), which is "
       "below kStructLayoutMajor (26), so no struct of the 26 layout is read from it; the "
       "library's real major is not needed"},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_asic_info_t", before_26},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_board_info_t", before_26},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_driver_info_t", before_26},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_power_info_t", before_26},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_evt_notification_data_t",
       "80-byte records before 26: amd_smi.cc takes the stride from the version "
       "(kEventStrideBefore26) and checks it against the entries; the message is at offset 12 "
       "in both"},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_violation_status_t",
       "24.x has no violation status: the call is absent there and read only from 26"},
      {"amd_smi/rocm-6.2.2/function/amdsmi_get_violation_status",
       "resolved by name and optional; absent in 24.x, so throttling comes from the metrics"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_MAX_STRING_LENGTH", before_26},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_LIB_VERSION_MAJOR",
       "ours is kStructLayoutMajor, the first major of the 26 layouts (the 26.1.0 headers' "
       "value), compared with the library's version at run time"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_MAX_NUM_XCC",
       "only the violation status uses it, read only from 26"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_MAX_NUM_XCP",
       "only the violation status uses it, read only from 26"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_EVT_NOTIF_PROCESS_END",
       "ours (13) is the highest event number (26.1.0's LAST); it only bounds the plausibility "
       "check of an event record, and no library writes a number it lacks"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_EVT_NOTIF_LAST", "as for AMDSMI_EVT_NOTIF_PROCESS_END"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_LINK_TYPE_PCIE",
       "24.x's amdsmi_topo_get_link_type answers an amdsmi_io_link_type_t (IOLINK_TYPE_PCIEXPRESS "
       "1, XGMI 2), the same values as 26's amdsmi_link_type_t; 24.x's AMDSMI_LINK_TYPE_* belong "
       "to another enum"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_LINK_TYPE_XGMI", "as for AMDSMI_LINK_TYPE_PCIE"},
      {"amd_smi/amdsmi-26.1.0-therock/constant/AMDSMI_IOLINK_TYPE_PCIEXPRESS",
       "the 24.x name of the value 26 calls AMDSMI_LINK_TYPE_PCIE (1)"},
      {"amd_smi/amdsmi-26.1.0-therock/constant/AMDSMI_IOLINK_TYPE_XGMI",
       "the 24.x name of the value 26 calls AMDSMI_LINK_TYPE_XGMI (2)"},
      {"amd_smi/amdsmi-26.1.0-alumet/constant/AMDSMI_IOLINK_TYPE_PCIEXPRESS",
       "the 24.x name of the value 26 calls AMDSMI_LINK_TYPE_PCIE (1)"},
      {"amd_smi/amdsmi-26.1.0-alumet/constant/AMDSMI_IOLINK_TYPE_XGMI",
       "the 24.x name of the value 26 calls AMDSMI_LINK_TYPE_XGMI (2)"},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_STATUS_DIRECTORY_NOT_FOUND", optional_status},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_STATUS_MORE_DATA", optional_status},
      {"amd_smi/rocm-6.2.2/constant/AMDSMI_STATUS_CORRUPTED_EEPROM", optional_status},
      {"amd_smi/rocm-6.2.2/struct/amdsmi_gpu_metrics_t/sizeof", metrics_reason},
      {"amd_smi/rocm-6.2.2/function/amdsmi_get_gpu_metrics_info/param2", metrics_reason},
      {"amd_smi/amdsmi-26.1.0-therock/function/amdsmi_get_gpu_metrics_info/param2", metrics_reason},
      {"amd_smi/amdsmi-26.1.0-alumet/function/amdsmi_get_gpu_metrics_info/param2", metrics_reason},
  };
  std::vector<Undocumented> undocumented = {
      {"amdsmi_get_gpu_ecc_count",
       "declared by every header version in the data (declared_functions) but without a "
       "prototype there; ours is amdsmi.h's (processor handle, amdsmi_gpu_block_t, "
       "amdsmi_error_count_t*): amdsmi_gpu_block_t is a 64-bit enum and amdsmi_error_count_t "
       "64 bytes in every version (both in the data), and the backend hands it a buffer of "
       "that size plus 4 KiB (Out<T>)"},
      {"amdsmi_get_pcie_info",
       "declared by every header version in the data (declared_functions), with neither a "
       "prototype nor amdsmi_pcie_info_t there; ours reads only pcie_static's first three "
       "fields (uint16 max_pcie_width, uint32 max_pcie_speed at offset 4 in MT/s, uint32 "
       "pcie_interface_version), which amdsmi.h has kept since ROCm 6.0, and the backend hands "
       "it a zeroed 4 KiB buffer, larger than the whole struct in every version"},
      {"AMDSMI_STATUS_IPC_ERROR",
       "newer than the headers in the data (amd-smi's changelog: \"Added new error status code "
       "AMDSMI_STATUS_IPC_ERROR (21)\"); named in messages only"},
  };
  std::vector<Undocumented> not_declared = {
      {"AMDSMI_LIB_VERSION_MINOR",
       "the header's own version macros: we ask the library's version at run time "
       "(amdsmi_get_lib_version) and compare only its major"},
      {"AMDSMI_LIB_VERSION_RELEASE", "as for AMDSMI_LIB_VERSION_MINOR"},
      {"AMDSMI_LIB_VERSION_YEAR", "as for AMDSMI_LIB_VERSION_MINOR"},
  };
  return ApiTables{std::move(d), std::move(handled), std::move(undocumented),
                   std::move(not_declared)};
}

#undef C
#undef S
#undef F

}  // namespace polyaccel::vendor_abi
