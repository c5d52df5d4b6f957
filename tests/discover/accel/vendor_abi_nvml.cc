// Our NVML declarations (src/discover/accel/nvml_abi.h) as the ABI comparison sees them, the
// differences from nvml.json that our code handles on purpose, and the names the data lacks.
// To check a new declaration: add it to the list here (C, S, T or F); a name the data has no
// facts for goes to `undocumented` with the reason, until the data is regenerated.
#include "discover/accel/nvml_abi.h"

#include "vendor_abi.h"

namespace polyaccel::vendor_abi {

using namespace polyaccel::nvml;  // NOLINT(google-build-using-namespace): the vendor's names

#define C(NAME)               \
  DeclaredConstant {          \
#NAME, value_of(NAME), {} \
  }
#define S(TYPE, ...)                                           \
  DeclaredStruct {                                             \
#TYPE, #TYPE, sizeof(TYPE), alignof(TYPE), __VA_ARGS__, {} \
  }
#define T(NAME)         \
  DeclaredType {        \
#NAME, sizeof(NAME) \
  }
#define F(NAME)                       \
  DeclaredFunction {                  \
#NAME, signature_of < fn::NAME>() \
  }

ApiTables nvml_tables() {
  DeclaredApi d;
  d.api = "nvml";
  d.constants = {
      C(NVML_AGGREGATE_ECC),
      C(NVML_CLOCK_GRAPHICS),
      C(NVML_CLOCK_MEM),
      C(NVML_CLOCK_SM),
      C(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED),
      C(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE),
      C(NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE),
      C(NVML_DEVICE_NAME_V2_BUFFER_SIZE),
      C(NVML_DEVICE_SERIAL_BUFFER_SIZE),
      C(NVML_DEVICE_UUID_V2_BUFFER_SIZE),
      C(NVML_ERROR_ALREADY_INITIALIZED),
      C(NVML_ERROR_DRIVER_NOT_LOADED),
      C(NVML_ERROR_GPU_IS_LOST),
      C(NVML_ERROR_INSUFFICIENT_RESOURCES),
      C(NVML_ERROR_INSUFFICIENT_SIZE),
      C(NVML_ERROR_INVALID_ARGUMENT),
      C(NVML_ERROR_IN_USE),
      C(NVML_ERROR_LIB_RM_VERSION_MISMATCH),
      C(NVML_ERROR_NOT_FOUND),
      C(NVML_ERROR_NOT_SUPPORTED),
      C(NVML_ERROR_NO_PERMISSION),
      C(NVML_ERROR_RESET_REQUIRED),
      C(NVML_ERROR_TIMEOUT),
      C(NVML_ERROR_UNINITIALIZED),
      C(NVML_ERROR_UNKNOWN),
      C(NVML_FEATURE_DISABLED),
      C(NVML_FEATURE_ENABLED),
      C(NVML_FI_DEV_MEMORY_TEMP),
      C(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1),
      C(NVML_GPU_INSTANCE_PROFILE_COUNT),
      C(NVML_MAX_GPU_INSTANCES),
      C(NVML_MEMORY_ERROR_TYPE_CORRECTED),
      C(NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
      C(NVML_NVLINK_DEVICE_TYPE_GPU),
      C(NVML_NVLINK_DEVICE_TYPE_IBMNPU),
      C(NVML_NVLINK_DEVICE_TYPE_SWITCH),
      C(NVML_NVLINK_DEVICE_TYPE_UNKNOWN),
      C(NVML_NVLINK_MAX_LINKS),
      C(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
      C(NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
      C(NVML_SUCCESS),
      C(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE),
      C(NVML_TEMPERATURE_GPU),
      C(NVML_VALUE_TYPE_DOUBLE),
      C(NVML_VALUE_TYPE_SIGNED_INT),
      C(NVML_VALUE_TYPE_SIGNED_LONG_LONG),
      C(NVML_VALUE_TYPE_UNSIGNED_INT),
      C(NVML_VALUE_TYPE_UNSIGNED_LONG),
      C(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG),
      C(NVML_VALUE_TYPE_UNSIGNED_SHORT),
      C(NVML_VOLATILE_ECC),
      C(nvmlClocksThrottleReasonApplicationsClocksSetting),
      C(nvmlClocksThrottleReasonDisplayClockSetting),
      C(nvmlClocksThrottleReasonGpuIdle),
      C(nvmlClocksThrottleReasonHwPowerBrakeSlowdown),
      C(nvmlClocksThrottleReasonHwSlowdown),
      C(nvmlClocksThrottleReasonHwThermalSlowdown),
      C(nvmlClocksThrottleReasonSwPowerCap),
      C(nvmlClocksThrottleReasonSwThermalSlowdown),
      C(nvmlClocksThrottleReasonSyncBoost),
      C(nvmlEventTypeDoubleBitEccError),
      C(nvmlEventTypeSingleBitEccError),
      C(nvmlEventTypeXidCriticalError),
  };
  d.structs = {
      S(nvmlPciInfo_t, {POLYACCEL_ABI_FIELD(nvmlPciInfo_t, busIdLegacy, "busIdLegacy"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, domain, "domain"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, bus, "bus"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, device, "device"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, pciDeviceId, "pciDeviceId"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, pciSubSystemId, "pciSubSystemId"),
                        POLYACCEL_ABI_FIELD(nvmlPciInfo_t, busId, "busId")}),
      S(nvmlMemory_t, {POLYACCEL_ABI_FIELD(nvmlMemory_t, total, "total"),
                       POLYACCEL_ABI_FIELD(nvmlMemory_t, free, "free"),
                       POLYACCEL_ABI_FIELD(nvmlMemory_t, used, "used")}),
      S(nvmlUtilization_t, {POLYACCEL_ABI_FIELD(nvmlUtilization_t, gpu, "gpu"),
                            POLYACCEL_ABI_FIELD(nvmlUtilization_t, memory, "memory")}),
      S(nvmlValue_t, {POLYACCEL_ABI_FIELD(nvmlValue_t, dVal, "dVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, siVal, "siVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, uiVal, "uiVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, ulVal, "ulVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, ullVal, "ullVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, sllVal, "sllVal"),
                      POLYACCEL_ABI_FIELD(nvmlValue_t, usVal, "usVal")}),
      S(nvmlFieldValue_t, {POLYACCEL_ABI_FIELD(nvmlFieldValue_t, fieldId, "fieldId"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, scopeId, "scopeId"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, timestamp, "timestamp"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, latencyUsec, "latencyUsec"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, valueType, "valueType"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, nvmlReturn, "nvmlReturn"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value, "value"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.dVal, "value.dVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.siVal, "value.siVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.uiVal, "value.uiVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.ulVal, "value.ulVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.ullVal, "value.ullVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.sllVal, "value.sllVal"),
                           POLYACCEL_ABI_FIELD(nvmlFieldValue_t, value.usVal, "value.usVal")}),
      S(nvmlEventData_t,
        {POLYACCEL_ABI_FIELD(nvmlEventData_t, device, "device"),
         POLYACCEL_ABI_FIELD(nvmlEventData_t, eventType, "eventType"),
         POLYACCEL_ABI_FIELD(nvmlEventData_t, eventData, "eventData"),
         POLYACCEL_ABI_FIELD(nvmlEventData_t, gpuInstanceId, "gpuInstanceId"),
         POLYACCEL_ABI_FIELD(nvmlEventData_t, computeInstanceId, "computeInstanceId")}),
      S(nvmlGpuInstancePlacement_t,
        {POLYACCEL_ABI_FIELD(nvmlGpuInstancePlacement_t, start, "start"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstancePlacement_t, size, "size")}),
      S(nvmlGpuInstanceInfo_t,
        {POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, device, "device"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, id, "id"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, profileId, "profileId"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, placement, "placement"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, placement.start, "placement.start"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceInfo_t, placement.size, "placement.size")}),
      S(nvmlGpuInstanceProfileInfo_t,
        {POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, id, "id"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, isP2pSupported, "isP2pSupported"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, sliceCount, "sliceCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, instanceCount, "instanceCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, multiprocessorCount,
                             "multiprocessorCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, copyEngineCount, "copyEngineCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, decoderCount, "decoderCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, encoderCount, "encoderCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, jpegCount, "jpegCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, ofaCount, "ofaCount"),
         POLYACCEL_ABI_FIELD(nvmlGpuInstanceProfileInfo_t, memorySizeMB, "memorySizeMB")}),
      S(nvmlComputeInstanceProfileInfo_t,
        {POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, id, "id"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sliceCount, "sliceCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, instanceCount, "instanceCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, multiprocessorCount,
                             "multiprocessorCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount,
                             "sharedCopyEngineCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sharedDecoderCount,
                             "sharedDecoderCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sharedEncoderCount,
                             "sharedEncoderCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sharedJpegCount, "sharedJpegCount"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceProfileInfo_t, sharedOfaCount, "sharedOfaCount")}),
      S(nvmlComputeInstancePlacement_t,
        {POLYACCEL_ABI_FIELD(nvmlComputeInstancePlacement_t, start, "start"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstancePlacement_t, size, "size")}),
      S(nvmlComputeInstanceInfo_t,
        {POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, device, "device"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, gpuInstance, "gpuInstance"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, id, "id"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, profileId, "profileId"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, placement, "placement"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, placement.start, "placement.start"),
         POLYACCEL_ABI_FIELD(nvmlComputeInstanceInfo_t, placement.size, "placement.size")}),
      S(nvmlProcessInfo_t,
        {POLYACCEL_ABI_FIELD(nvmlProcessInfo_t, pid, "pid"),
         POLYACCEL_ABI_FIELD(nvmlProcessInfo_t, usedGpuMemory, "usedGpuMemory"),
         POLYACCEL_ABI_FIELD(nvmlProcessInfo_t, gpuInstanceId, "gpuInstanceId"),
         POLYACCEL_ABI_FIELD(nvmlProcessInfo_t, computeInstanceId, "computeInstanceId")}),
  };
  d.types = {
      T(nvmlReturn_t),
      T(nvmlEnableState_t),
      T(nvmlTemperatureSensors_t),
      T(nvmlClockType_t),
      T(nvmlMemoryErrorType_t),
      T(nvmlEccCounterType_t),
      T(nvmlPageRetirementCause_t),
      T(nvmlValueType_t),
      T(nvmlIntNvLinkDeviceType_t),
      T(nvmlDevice_t),
      T(nvmlEventSet_t),
      T(nvmlGpuInstance_t),
      T(nvmlComputeInstance_t),
  };
  // Every symbol nvml.cc and nvml_mig.cc resolve: each by the alias of its own name in fn::.
  d.functions = {
      F(nvmlComputeInstanceDestroy),
      F(nvmlComputeInstanceGetInfo_v2),
      F(nvmlDeviceCreateGpuInstanceWithPlacement),
      F(nvmlDeviceGetClockInfo),
      F(nvmlDeviceGetComputeInstanceId),
      F(nvmlDeviceGetComputeRunningProcesses_v3),
      F(nvmlDeviceGetCount_v2),
      F(nvmlDeviceGetCudaComputeCapability),
      F(nvmlDeviceGetCurrentClocksThrottleReasons),
      F(nvmlDeviceGetEccMode),
      F(nvmlDeviceGetFieldValues),
      F(nvmlDeviceGetGpuInstanceById),
      F(nvmlDeviceGetGpuInstanceId),
      F(nvmlDeviceGetGpuInstancePossiblePlacements_v2),
      F(nvmlDeviceGetGpuInstanceProfileInfo),
      F(nvmlDeviceGetGpuInstances),
      F(nvmlDeviceGetHandleByIndex_v2),
      F(nvmlDeviceGetMaxMigDeviceCount),
      F(nvmlDeviceGetMemoryInfo),
      F(nvmlDeviceGetMigDeviceHandleByIndex),
      F(nvmlDeviceGetMigMode),
      F(nvmlDeviceGetName),
      F(nvmlDeviceGetNvLinkRemoteDeviceType),
      F(nvmlDeviceGetNvLinkRemotePciInfo_v2),
      F(nvmlDeviceGetNvLinkState),
      F(nvmlDeviceGetPciInfo_v3),
      F(nvmlDeviceGetPcieReplayCounter),
      F(nvmlDeviceGetPersistenceMode),
      F(nvmlDeviceGetPowerManagementLimit),
      F(nvmlDeviceGetPowerUsage),
      F(nvmlDeviceGetRemappedRows),
      F(nvmlDeviceGetRetiredPages),
      F(nvmlDeviceGetSerial),
      F(nvmlDeviceGetTemperature),
      F(nvmlDeviceGetTotalEccErrors),
      F(nvmlDeviceGetTotalEnergyConsumption),
      F(nvmlDeviceGetUUID),
      F(nvmlDeviceGetUtilizationRates),
      F(nvmlDeviceRegisterEvents),
      F(nvmlDeviceSetMigMode),
      F(nvmlErrorString),
      F(nvmlEventSetCreate),
      F(nvmlEventSetFree),
      F(nvmlEventSetWait_v2),
      F(nvmlGpuInstanceCreateComputeInstance),
      F(nvmlGpuInstanceDestroy),
      F(nvmlGpuInstanceGetComputeInstanceProfileInfo),
      F(nvmlGpuInstanceGetComputeInstances),
      F(nvmlGpuInstanceGetInfo),
      F(nvmlInit_v2),
      F(nvmlShutdown),
      F(nvmlSystemGetDriverVersion),
  };

  std::vector<Handled> handled = {
      {"nvml/cuda-12.9/constant/NVML_NVLINK_MAX_LINKS",
       "18 up to CUDA 13.2.1's nvml.h, 36 from 13.3's: nvml.cc asks for every link below 36, and "
       "a driver that knows 18 answers NVML_ERROR_INVALID_ARGUMENT past them, taken as no link "
       "(nvml_backend_test AnOlderDriversUnknownLinksAreNoLinks)"},
      {"nvml/cuda-12.9/constant/NVML_GPU_INSTANCE_PROFILE_COUNT",
       "17 before CUDA 13.2.1's nvml.h, 18 since (0x11, 3_SLICE_GFX): nvml_mig.cc asks for every "
       "enum below 18; an older driver refuses 0x11, which leaves it out (nvml_mig_test "
       "TheThreeSliceGfxProfileOfNewerDriversIsListedAndCreated)"},
      {"nvml/cuda-12.9/constant/NVML_MAX_GPU_INSTANCES",
       "nvml.h defines no such macro: ours is our own buffer size for nvmlDeviceGetGpuInstances "
       "and placements (8; a MIG GPU has at most 7 GPU instances), passed with its count"},
      {"nvml/cuda-13.3/constant/NVML_MAX_GPU_INSTANCES", "as for cuda-12.9"},
  };
  std::vector<Undocumented> undocumented = {};
  return ApiTables{std::move(d), std::move(handled), std::move(undocumented), {}};
}

#undef C
#undef S
#undef T
#undef F

}  // namespace polyaccel::vendor_abi
