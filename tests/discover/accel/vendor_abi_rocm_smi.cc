// Our ROCm SMI declarations (src/discover/accel/rocm_smi_abi.h) as the ABI comparison sees them,
// the differences from rocm_smi.json that our code handles on purpose, and the names the data
// lacks. Our C++ names differ from the vendor's: each entry names both.
#include "discover/accel/rocm_smi_abi.h"

#include "vendor_abi.h"

namespace polyaccel::vendor_abi {

using namespace polyaccel::rsmi;  // NOLINT(google-build-using-namespace)

#define C(NAME, OURS)        \
  DeclaredConstant {         \
    NAME, value_of(OURS), {} \
  }
#define F(NAME, TYPE)             \
  DeclaredFunction {              \
#NAME, signature_of < TYPE>() \
  }

ApiTables rocm_smi_tables() {
  const std::vector<std::string> k5 = {"rocm-5.2.3"};
  const std::vector<std::string> k6on = {"rocm-6.0.0", "rocm-6.2.2",
                                         "rocm-systems-develop-1b1610f"};
  const std::vector<std::string> kShortMessages = {"rocm-5.2.3", "rocm-6.0.0", "rocm-6.2.2"};
  const std::vector<std::string> kLongMessages = {"rocm-systems-develop-1b1610f"};

  DeclaredApi d;
  d.api = "rocm_smi";
  d.constants = {
      {"MAX_EVENT_NOTIFICATION_MSG_SIZE", value_of(sizeof(EventDataShort::message)),
       kShortMessages},
      {"MAX_EVENT_NOTIFICATION_MSG_SIZE", value_of(sizeof(EventDataLong::message)), kLongMessages},
      C("RSMI_CLK_TYPE_MEM", kClockMem),
      C("RSMI_CLK_TYPE_SYS", kClockSys),
      C("RSMI_EVT_NOTIF_VMFAULT", kEventVmFault),
      C("RSMI_EVT_NOTIF_THERMAL_THROTTLE", kEventThermalThrottle),
      C("RSMI_EVT_NOTIF_GPU_PRE_RESET", kEventGpuPreReset),
      C("RSMI_EVT_NOTIF_GPU_POST_RESET", kEventGpuPostReset),
      C("RSMI_EVT_NOTIF_LAST", kEventAllProcess),
      C("RSMI_GPU_BLOCK_UMC", kGpuBlockUmc),
      C("RSMI_GPU_BLOCK_LAST", kGpuBlockLast),
      C("RSMI_IOLINK_TYPE_PCIEXPRESS", kIoLinkTypePcie),
      C("RSMI_IOLINK_TYPE_XGMI", kIoLinkTypeXgmi),
      C("RSMI_MEM_PAGE_STATUS_RESERVED", kPageReserved),
      C("RSMI_MEM_PAGE_STATUS_PENDING", kPagePending),
      C("RSMI_MEM_PAGE_STATUS_UNRESERVABLE", kPageUnreservable),
      C("RSMI_MEM_TYPE_VRAM", kMemoryTypeVram),
      C("RSMI_MEM_TYPE_VIS_VRAM", kMemoryTypeVisVram),
      C("RSMI_MEM_TYPE_GTT", kMemoryTypeGtt),
      C("RSMI_STATUS_SUCCESS", kSuccess),
      C("RSMI_STATUS_INVALID_ARGS", kInvalidArgs),
      C("RSMI_STATUS_NOT_SUPPORTED", kNotSupported),
      C("RSMI_STATUS_FILE_ERROR", kFileError),
      C("RSMI_STATUS_PERMISSION", kPermission),
      C("RSMI_STATUS_OUT_OF_RESOURCES", kOutOfResources),
      C("RSMI_STATUS_INTERNAL_EXCEPTION", kInternalException),
      C("RSMI_STATUS_INPUT_OUT_OF_BOUNDS", kInputOutOfBounds),
      C("RSMI_STATUS_INIT_ERROR", kInitError),
      C("RSMI_STATUS_NOT_YET_IMPLEMENTED", kNotYetImplemented),
      C("RSMI_STATUS_NOT_FOUND", kNotFound),
      C("RSMI_STATUS_INSUFFICIENT_SIZE", kInsufficientSize),
      C("RSMI_STATUS_INTERRUPT", kInterrupt),
      C("RSMI_STATUS_UNEXPECTED_SIZE", kUnexpectedSize),
      C("RSMI_STATUS_NO_DATA", kNoData),
      C("RSMI_STATUS_UNEXPECTED_DATA", kUnexpectedData),
      C("RSMI_STATUS_BUSY", kBusy),
      C("RSMI_STATUS_REFCOUNT_OVERFLOW", kRefcountOverflow),
      C("RSMI_STATUS_SETTING_UNAVAILABLE", kSettingUnavailable),
      C("RSMI_STATUS_AMDGPU_RESTART_ERR", kAmdgpuRestartError),
      C("RSMI_STATUS_DRM_ERROR", kDrmError),
      C("RSMI_STATUS_FAIL_LOAD_MODULE", kFailLoadModule),
      C("RSMI_STATUS_FAIL_LOAD_SYMBOL", kFailLoadSymbol),
      C("RSMI_STATUS_UNKNOWN_ERROR", kUnknownError),
      C("RSMI_SW_COMP_DRIVER", kSwComponentDriver),
      C("RSMI_TEMP_CURRENT", kTempCurrent),
      C("RSMI_TEMP_TYPE_EDGE", kTempTypeEdge),
      C("RSMI_TEMP_TYPE_JUNCTION", kTempTypeJunction),
      C("RSMI_TEMP_TYPE_MEMORY", kTempTypeMemory),
      C("RSMI_TEMP_TYPE_HBM_0", kTempTypeHbm0),
      C("RSMI_TEMP_TYPE_HBM_3", kTempTypeHbm3),
  };
  d.structs = {
      {"rsmi_version_t",
       "Version",
       sizeof(Version),
       alignof(Version),
       {POLYACCEL_ABI_FIELD(Version, major, "major"), POLYACCEL_ABI_FIELD(Version, minor, "minor"),
        POLYACCEL_ABI_FIELD(Version, patch, "patch"), POLYACCEL_ABI_FIELD(Version, build, "build")},
       {}},
      // One copy per layout: rocm.cc reads FrequenciesV6 from a library of major version 6 or
      // later, FrequenciesV5 before (and the other when the first makes no sense).
      {"rsmi_frequencies_t",
       "FrequenciesV5",
       sizeof(FrequenciesV5),
       alignof(FrequenciesV5),
       {POLYACCEL_ABI_FIELD(FrequenciesV5, num_supported, "num_supported"),
        POLYACCEL_ABI_FIELD(FrequenciesV5, current, "current"),
        POLYACCEL_ABI_FIELD(FrequenciesV5, frequency, "frequency")},
       k5},
      {"rsmi_frequencies_t",
       "FrequenciesV6",
       sizeof(FrequenciesV6),
       alignof(FrequenciesV6),
       {POLYACCEL_ABI_FIELD(FrequenciesV6, has_deep_sleep, "has_deep_sleep"),
        POLYACCEL_ABI_FIELD(FrequenciesV6, num_supported, "num_supported"),
        POLYACCEL_ABI_FIELD(FrequenciesV6, current, "current"),
        POLYACCEL_ABI_FIELD(FrequenciesV6, frequency, "frequency")},
       k6on},
      {"rsmi_error_count_t",
       "ErrorCount",
       sizeof(ErrorCount),
       alignof(ErrorCount),
       {POLYACCEL_ABI_FIELD(ErrorCount, correctable, "correctable_err"),
        POLYACCEL_ABI_FIELD(ErrorCount, uncorrectable, "uncorrectable_err")},
       {}},
      // One copy per message size; rocm.cc takes the stride from the library's version.
      {"rsmi_evt_notification_data_t",
       "EventDataShort",
       sizeof(EventDataShort),
       alignof(EventDataShort),
       {POLYACCEL_ABI_FIELD(EventDataShort, dv_ind, "dv_ind"),
        POLYACCEL_ABI_FIELD(EventDataShort, event, "event"),
        POLYACCEL_ABI_FIELD(EventDataShort, message, "message")},
       kShortMessages},
      {"rsmi_evt_notification_data_t",
       "EventDataLong",
       sizeof(EventDataLong),
       alignof(EventDataLong),
       {POLYACCEL_ABI_FIELD(EventDataLong, dv_ind, "dv_ind"),
        POLYACCEL_ABI_FIELD(EventDataLong, event, "event"),
        POLYACCEL_ABI_FIELD(EventDataLong, message, "message")},
       kLongMessages},
      {"rsmi_retired_page_record_t",
       "RetiredPageRecord",
       sizeof(RetiredPageRecord),
       alignof(RetiredPageRecord),
       {POLYACCEL_ABI_FIELD(RetiredPageRecord, page_address, "page_address"),
        POLYACCEL_ABI_FIELD(RetiredPageRecord, page_size, "page_size"),
        POLYACCEL_ABI_FIELD(RetiredPageRecord, status, "status")},
       {}},
      // Before 7 (96 to 424 bytes): the v1 prefix the throttle mask reads; later fields are
      // read only from a table whose structure_size covers them. rocm-smi-lib 7: the whole
      // table (amd::GpuMetrics).
      {"rsmi_gpu_metrics_t",
       "amd::GpuMetricsPrefix",
       sizeof(amd::GpuMetricsPrefix),
       alignof(amd::GpuMetricsPrefix),
       gpu_metrics_prefix_fields(),
       {"rocm-5.2.3", "rocm-6.0.0", "rocm-6.2.2"}},
      {"rsmi_gpu_metrics_t",
       "amd::GpuMetrics",
       sizeof(amd::GpuMetrics),
       alignof(amd::GpuMetrics),
       gpu_metrics_fields(),
       {"rocm-systems-develop-1b1610f"}},
  };
  // The symbols rocm.cc resolves (its resolve()), with the type it calls each by (its Api).
  d.functions = {
      F(rsmi_init, InitFn),
      F(rsmi_shut_down, ShutDownFn),
      F(rsmi_status_string, StatusStringFn),
      F(rsmi_num_monitor_devices, CountFn),
      F(rsmi_version_get, VersionGetFn),
      F(rsmi_version_str_get, VersionStrGetFn),
      F(rsmi_dev_pci_id_get, DevU64Fn),
      F(rsmi_dev_unique_id_get, DevU64Fn),
      F(rsmi_dev_serial_number_get, DevStringFn),
      F(rsmi_dev_name_get, DevNameFn),
      F(rsmi_dev_memory_total_get, DevMemoryFn),
      F(rsmi_dev_memory_usage_get, DevMemoryFn),
      F(rsmi_dev_target_graphics_version_get, DevU64Fn),
      F(rsmi_dev_compute_partition_get, DevStringFn),
      F(rsmi_dev_memory_partition_get, DevStringFn),
      F(rsmi_topo_get_link_type, TopoLinkTypeFn),
      F(rsmi_dev_power_cap_get, DevSensorU64Fn),
      F(rsmi_dev_ecc_enabled_get, DevU64Fn),
      F(rsmi_dev_busy_percent_get, DevU32Fn),
      F(rsmi_dev_memory_busy_percent_get, DevU32Fn),
      F(rsmi_dev_temp_metric_get, DevTempFn),
      F(rsmi_dev_power_ave_get, DevSensorU64Fn),
      F(rsmi_dev_current_socket_power_get, DevU64Fn),
      F(rsmi_dev_energy_count_get, DevEnergyFn),
      F(rsmi_dev_gpu_clk_freq_get, DevClockFn),
      F(rsmi_dev_pci_replay_counter_get, DevU64Fn),
      F(rsmi_dev_ecc_count_get, DevEccCountFn),
      F(rsmi_event_notification_init, DevFn),
      F(rsmi_event_notification_mask_set, EventMaskSetFn),
      F(rsmi_event_notification_get, EventGetFn),
      F(rsmi_event_notification_stop, DevFn),
      F(rsmi_dev_memory_reserved_pages_get, ReservedPagesFn),
      F(rsmi_dev_gpu_metrics_info_get, GpuMetricsFn),
  };
  d.macros = {
      DeclaredMacro{"RSMI_EVENT_MASK_FROM_INDEX",
                    {{"1", value_of(event_mask(1))},
                     {"2", value_of(event_mask(2))},
                     {"3", value_of(event_mask(3))},
                     {"4", value_of(event_mask(4))}}},
  };

  const std::string metrics_reason =
      "amd::GpuMetricsPrefix declares only the v1.x prefix both backends read; the library is "
      "handed a buffer of kGpuMetricsBufferSize (64 KiB), and a field past v1.0 is read only "
      "when the table's format and content revision have it (indep_throttle_status: v1.3)";
  const std::string optional_status =
      "named in messages only; a library that lacks a status never returns it";
  const std::string optional_function =
      "resolved by name and optional: where the library lacks it, that field is not supported";
  std::vector<Handled> handled = {
      {"rocm_smi/rocm-5.2.3/constant/RSMI_EVT_NOTIF_LAST",
       "ours is the highest event number any version defines (64, develop's LAST); it only bounds "
       "the plausibility check of an event entry, and no library writes a number it lacks"},
      {"rocm_smi/rocm-6.0.0/constant/RSMI_EVT_NOTIF_LAST", "as for rocm-5.2.3"},
      {"rocm_smi/rocm-6.2.2/constant/RSMI_EVT_NOTIF_LAST", "as for rocm-5.2.3"},
      {"rocm_smi/rocm-5.2.3/constant/RSMI_STATUS_SETTING_UNAVAILABLE", optional_status},
      {"rocm_smi/rocm-5.2.3/constant/RSMI_STATUS_AMDGPU_RESTART_ERR", optional_status},
      {"rocm_smi/rocm-5.2.3/constant/RSMI_STATUS_DRM_ERROR", optional_status},
      {"rocm_smi/rocm-5.2.3/constant/RSMI_STATUS_FAIL_LOAD_MODULE", optional_status},
      {"rocm_smi/rocm-5.2.3/constant/RSMI_STATUS_FAIL_LOAD_SYMBOL", optional_status},
      {"rocm_smi/rocm-6.0.0/constant/RSMI_STATUS_DRM_ERROR", optional_status},
      {"rocm_smi/rocm-6.0.0/constant/RSMI_STATUS_FAIL_LOAD_MODULE", optional_status},
      {"rocm_smi/rocm-6.0.0/constant/RSMI_STATUS_FAIL_LOAD_SYMBOL", optional_status},
      {"rocm_smi/rocm-6.2.2/constant/RSMI_STATUS_DRM_ERROR", optional_status},
      {"rocm_smi/rocm-6.2.2/constant/RSMI_STATUS_FAIL_LOAD_MODULE", optional_status},
      {"rocm_smi/rocm-6.2.2/constant/RSMI_STATUS_FAIL_LOAD_SYMBOL", optional_status},
      {"rocm_smi/rocm-5.2.3/function/rsmi_dev_target_graphics_version_get", optional_function},
      {"rocm_smi/rocm-6.0.0/function/rsmi_dev_target_graphics_version_get", optional_function},
      {"rocm_smi/rocm-5.2.3/function/rsmi_dev_compute_partition_get", optional_function},
      {"rocm_smi/rocm-5.2.3/function/rsmi_dev_memory_partition_get", optional_function},
      {"rocm_smi/rocm-5.2.3/function/rsmi_dev_current_socket_power_get", optional_function},
      {"rocm_smi/rocm-5.2.3/struct/rsmi_gpu_metrics_t",
       metrics_reason + "; 5.2.3's table is v1.0 (96 bytes, mem_actvity_acc misspelt, no "
                        "firmware_timestamp, voltages or indep_throttle_status), which reads as "
                        "revision 1.0 and so gives no throttle bits"},
      {"rocm_smi/rocm-6.0.0/struct/rsmi_gpu_metrics_t/sizeof", metrics_reason},
      {"rocm_smi/rocm-6.2.2/struct/rsmi_gpu_metrics_t/sizeof", metrics_reason},
      {"rocm_smi/rocm-5.2.3/function/rsmi_dev_gpu_metrics_info_get/param2", metrics_reason},
      {"rocm_smi/rocm-6.0.0/function/rsmi_dev_gpu_metrics_info_get/param2", metrics_reason},
      {"rocm_smi/rocm-6.2.2/function/rsmi_dev_gpu_metrics_info_get/param2", metrics_reason},
      {"rocm_smi/rocm-systems-develop-1b1610f/function/rsmi_dev_gpu_metrics_info_get/param2",
       metrics_reason},
  };
  return ApiTables{std::move(d), std::move(handled), {}, {}};
}

#undef C
#undef F

}  // namespace polyaccel::vendor_abi
