// The NVIDIA backend: NVML (libnvidia-ml.so.1) loaded at run time.
//
// One loader resolves every symbol we use by name; a symbol the library lacks makes that feature
// "not supported" and the rest goes on (DCGM's NVML loader). Only nvmlInit_v2 is required.
//
// NVLink peers: each active link's remote PCI address is counted per remote. A remote that is
// another GPU NVML enumerates is a direct link (NV<count>). A remote that
// nvmlDeviceGetNvLinkRemoteDeviceType calls a switch (or, without that call, an NVIDIA device that
// is not one of the GPUs) is an NVSwitch: GPUs that reach NVSwitches are taken to be all-to-all,
// and each pair counts the smaller of the two GPUs' switch link totals, as PyTorch's c10d NVLink
// detection does (nvidia-smi topo -m prints NV18 on HGX H100). Fabric Manager partitions are not
// considered. Any other remote (an IBM NPU, a CPU) is not a GPU peer and is ignored.
//
// Reachability: a sample is unreachable when a call answers NVML_ERROR_GPU_IS_LOST, or when a call
// that succeeded before for this device now fails with anything but NOT_SUPPORTED. The next sample
// whose calls succeed is reachable again.
#include <algorithm>
#include <array>
#include <bitset>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "discover/accel/backends.h"
#include "discover/accel/library.h"
#include "discover/accel/nvml_abi.h"

namespace polyaccel {
namespace {

using namespace nvml;  // NOLINT(google-build-using-namespace): the NVML ABI names

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

// Every symbol we use, resolved once; null when the library lacks it.
struct Api {
  fn::nvmlInit_v2* nvmlInit_v2 = nullptr;
  fn::nvmlShutdown* nvmlShutdown = nullptr;
  fn::nvmlErrorString* nvmlErrorString = nullptr;
  fn::nvmlSystemGetDriverVersion* nvmlSystemGetDriverVersion = nullptr;
  fn::nvmlDeviceGetCount_v2* nvmlDeviceGetCount_v2 = nullptr;
  fn::nvmlDeviceGetHandleByIndex_v2* nvmlDeviceGetHandleByIndex_v2 = nullptr;
  fn::nvmlDeviceGetPciInfo_v3* nvmlDeviceGetPciInfo_v3 = nullptr;
  fn::nvmlDeviceGetUUID* nvmlDeviceGetUUID = nullptr;
  fn::nvmlDeviceGetSerial* nvmlDeviceGetSerial = nullptr;
  fn::nvmlDeviceGetMinorNumber* nvmlDeviceGetMinorNumber = nullptr;
  fn::nvmlDeviceGetName* nvmlDeviceGetName = nullptr;
  fn::nvmlDeviceGetMemoryInfo* nvmlDeviceGetMemoryInfo = nullptr;
  fn::nvmlDeviceGetCudaComputeCapability* nvmlDeviceGetCudaComputeCapability = nullptr;
  fn::nvmlDeviceGetMigMode* nvmlDeviceGetMigMode = nullptr;
  fn::nvmlDeviceGetMaxMigDeviceCount* nvmlDeviceGetMaxMigDeviceCount = nullptr;
  fn::nvmlDeviceGetMigDeviceHandleByIndex* nvmlDeviceGetMigDeviceHandleByIndex = nullptr;
  fn::nvmlDeviceGetGpuInstanceId* nvmlDeviceGetGpuInstanceId = nullptr;
  fn::nvmlDeviceGetComputeInstanceId* nvmlDeviceGetComputeInstanceId = nullptr;
  fn::nvmlDeviceGetGpuInstanceById* nvmlDeviceGetGpuInstanceById = nullptr;
  fn::nvmlGpuInstanceGetInfo* nvmlGpuInstanceGetInfo = nullptr;
  fn::nvmlDeviceGetNvLinkState* nvmlDeviceGetNvLinkState = nullptr;
  fn::nvmlDeviceGetNvLinkRemotePciInfo_v2* nvmlDeviceGetNvLinkRemotePciInfo_v2 = nullptr;
  fn::nvmlDeviceGetNvLinkRemoteDeviceType* nvmlDeviceGetNvLinkRemoteDeviceType = nullptr;
  fn::nvmlDeviceGetPowerManagementLimit* nvmlDeviceGetPowerManagementLimit = nullptr;
  fn::nvmlDeviceGetEccMode* nvmlDeviceGetEccMode = nullptr;
  fn::nvmlDeviceGetPersistenceMode* nvmlDeviceGetPersistenceMode = nullptr;
  fn::nvmlDeviceGetUtilizationRates* nvmlDeviceGetUtilizationRates = nullptr;
  fn::nvmlDeviceGetTemperature* nvmlDeviceGetTemperature = nullptr;
  fn::nvmlDeviceGetFieldValues* nvmlDeviceGetFieldValues = nullptr;
  fn::nvmlDeviceGetPowerUsage* nvmlDeviceGetPowerUsage = nullptr;
  fn::nvmlDeviceGetTotalEnergyConsumption* nvmlDeviceGetTotalEnergyConsumption = nullptr;
  fn::nvmlDeviceGetClockInfo* nvmlDeviceGetClockInfo = nullptr;
  fn::nvmlDeviceGetPcieReplayCounter* nvmlDeviceGetPcieReplayCounter = nullptr;
  fn::nvmlDeviceGetTotalEccErrors* nvmlDeviceGetTotalEccErrors = nullptr;
  fn::nvmlDeviceGetRetiredPages* nvmlDeviceGetRetiredPages = nullptr;
  fn::nvmlDeviceGetRemappedRows* nvmlDeviceGetRemappedRows = nullptr;
  fn::nvmlDeviceGetCurrentClocksThrottleReasons* nvmlDeviceGetCurrentClocksThrottleReasons =
      nullptr;
  fn::nvmlEventSetCreate* nvmlEventSetCreate = nullptr;
  fn::nvmlDeviceRegisterEvents* nvmlDeviceRegisterEvents = nullptr;
  fn::nvmlEventSetWait_v2* nvmlEventSetWait_v2 = nullptr;
  fn::nvmlEventSetFree* nvmlEventSetFree = nullptr;
  fn::nvmlGpmSampleAlloc* nvmlGpmSampleAlloc = nullptr;
  fn::nvmlGpmSampleFree* nvmlGpmSampleFree = nullptr;
  fn::nvmlGpmSampleGet* nvmlGpmSampleGet = nullptr;
  fn::nvmlGpmMigSampleGet* nvmlGpmMigSampleGet = nullptr;
  fn::nvmlGpmMetricsGet* nvmlGpmMetricsGet = nullptr;
  fn::nvmlGpmQueryDeviceSupport* nvmlGpmQueryDeviceSupport = nullptr;
  fn::nvmlDeviceGetEncoderUtilization* nvmlDeviceGetEncoderUtilization = nullptr;
  fn::nvmlDeviceGetDecoderUtilization* nvmlDeviceGetDecoderUtilization = nullptr;
  fn::nvmlDeviceGetMemoryInfo_v2* nvmlDeviceGetMemoryInfo_v2 = nullptr;

  void resolve(SharedLibrary& lib) {
#define POLYACCEL_NVML_RESOLVE(name) lib.resolve(name, #name)
    POLYACCEL_NVML_RESOLVE(nvmlInit_v2);
    POLYACCEL_NVML_RESOLVE(nvmlShutdown);
    POLYACCEL_NVML_RESOLVE(nvmlErrorString);
    POLYACCEL_NVML_RESOLVE(nvmlSystemGetDriverVersion);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetCount_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetHandleByIndex_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPciInfo_v3);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetUUID);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetSerial);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMinorNumber);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetName);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMemoryInfo);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetCudaComputeCapability);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMigMode);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMaxMigDeviceCount);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMigDeviceHandleByIndex);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstanceId);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetComputeInstanceId);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstanceById);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceGetInfo);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetNvLinkState);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetNvLinkRemotePciInfo_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetNvLinkRemoteDeviceType);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPowerManagementLimit);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetEccMode);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPersistenceMode);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetUtilizationRates);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetTemperature);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetFieldValues);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPowerUsage);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetTotalEnergyConsumption);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetClockInfo);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPcieReplayCounter);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetTotalEccErrors);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetRetiredPages);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetRemappedRows);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetCurrentClocksThrottleReasons);
    POLYACCEL_NVML_RESOLVE(nvmlEventSetCreate);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceRegisterEvents);
    POLYACCEL_NVML_RESOLVE(nvmlEventSetWait_v2);
    POLYACCEL_NVML_RESOLVE(nvmlEventSetFree);
    POLYACCEL_NVML_RESOLVE(nvmlGpmSampleAlloc);
    POLYACCEL_NVML_RESOLVE(nvmlGpmSampleFree);
    POLYACCEL_NVML_RESOLVE(nvmlGpmSampleGet);
    POLYACCEL_NVML_RESOLVE(nvmlGpmMigSampleGet);
    POLYACCEL_NVML_RESOLVE(nvmlGpmMetricsGet);
    POLYACCEL_NVML_RESOLVE(nvmlGpmQueryDeviceSupport);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetEncoderUtilization);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetDecoderUtilization);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMemoryInfo_v2);
#undef POLYACCEL_NVML_RESOLVE
  }
};

// The sample fields whose success we remember per device, to tell "not supported" from "stopped
// answering".
enum Field : unsigned {
  kUtilization,
  kMemory,
  kTemperature,
  kMemoryTemperature,
  kPower,
  kEnergy,
  kSmClock,
  kMemClock,
  kReplay,
  kEccCorrectedVolatile,
  kEccUncorrectedVolatile,
  kEccCorrectedAggregate,
  kEccUncorrectedAggregate,
  kRetiredSingleBit,
  kRetiredDoubleBit,
  kRemappedRows,
  kThrottle,
  kEncoder,
  kDecoder,
  kMemoryReserved,
  kNvlinkThroughput,
  kGpm,
  kFieldCount,
};

struct ThrottleName {
  unsigned long long bit;
  const char* name;
};
constexpr std::array<ThrottleName, 9> kThrottleNames{{
    {nvmlClocksThrottleReasonGpuIdle, "gpu_idle"},
    {nvmlClocksThrottleReasonApplicationsClocksSetting, "applications_clocks_setting"},
    {nvmlClocksThrottleReasonSwPowerCap, "sw_power_cap"},
    {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
    {nvmlClocksThrottleReasonSyncBoost, "sync_boost"},
    {nvmlClocksThrottleReasonSwThermalSlowdown, "sw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {nvmlClocksThrottleReasonDisplayClockSetting, "display_clock_setting"},
}};

std::vector<std::string> throttle_names(unsigned long long mask) {
  std::vector<std::string> names;
  unsigned long long known = 0;
  for (const auto& t : kThrottleNames) {
    known |= t.bit;
    if (mask & t.bit) names.emplace_back(t.name);
  }
  if (mask & ~known) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "unknown_0x%llx", mask & ~known);
    names.emplace_back(buf);
  }
  return names;
}

// "00000000:4E:00.0" → "0000:4e:00.0"; empty when NVML gave something we cannot parse.
std::string normalize_bus_id(const char* text) {
  std::string s(text, ::strnlen(text, 32));
  auto a = PciAddress::parse(s);
  return a ? a->to_string() : std::string();
}

std::string c_string(const char* buf, size_t size) {
  return std::string(buf, ::strnlen(buf, size));
}

std::optional<double> field_as_double(const nvmlFieldValue_t& v) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return static_cast<double>(v.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(v.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(v.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(v.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return static_cast<double>(v.value.siVal);
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return static_cast<double>(v.value.usVal);
    default:
      return std::nullopt;
  }
}

class NvmlBackend final : public AcceleratorBackend {
 public:
  ~NvmlBackend() override {
    if (events_ && api_.nvmlEventSetFree) api_.nvmlEventSetFree(events_);
    for (auto& h : handles_) {
      free_gpm(h.gpm);
      for (auto& [id, pair] : h.mig_gpm)
        free_gpm(pair);
    }
    if (initialized_ && api_.nvmlShutdown) api_.nvmlShutdown();
  }

  std::string name() const override { return "nvml"; }
  Vendor vendor() const override { return Vendor::nvidia; }
  const LibraryReport& library() const override { return report_; }

  Status open() override {
    std::lock_guard lock(mu_);
    if (initialized_) return Ok{};
    std::string path = library_path("POLYACCEL_NVML_LIB", kLibraryName);
    report_ = LibraryReport{path, {}, {}};
    auto lib = SharedLibrary::open(path, "NVML");
    if (!lib) return lib.error();
    lib_ = std::move(*lib);
    api_ = Api{};
    api_.resolve(lib_);
    report_.missing_symbols = lib_.missing();
    if (!api_.nvmlInit_v2) {
      return Error{ErrorCode::unsupported, path, "has no nvmlInit_v2: not a usable NVML library",
                   "install the NVIDIA driver's libnvidia-ml.so.1 or unset POLYACCEL_NVML_LIB"};
    }
    nvmlReturn_t r = api_.nvmlInit_v2();
    if (r != NVML_SUCCESS) return init_error(path, r);
    initialized_ = true;
    if (api_.nvmlSystemGetDriverVersion) {
      char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
      if (api_.nvmlSystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS) {
        driver_version_ = c_string(buf, sizeof buf);
      }
    }
    return Ok{};
  }

  Result<std::vector<Device>> devices() override {
    std::lock_guard lock(mu_);
    if (!initialized_) {
      return Error{ErrorCode::internal, report_.path, "NVML is not initialised", "call open()"};
    }
    if (auto st = enumerate(); !st) return st.error();
    note_gpm_support();
    std::vector<Device> out;
    std::map<std::string, unsigned> switch_links;  // GPU bus id → links to NVSwitches
    for (const auto& h : handles_) {
      // A device that stopped answering (fell off the bus) is left out until it is back.
      nvmlPciInfo_t pci{};
      if (api_.nvmlDeviceGetPciInfo_v3(h.device, &pci) != NVML_SUCCESS) continue;
      Device d;
      d.pci_bus_id = h.bus_id;
      d.inventory = inventory(h);
      switch_links[h.bus_id] = nvlink_peers(h, d.peer_links);
      out.push_back(std::move(d));
    }
    // NVSwitch fabric: every GPU that reaches a switch reaches every other such GPU.
    for (auto& d : out) {
      unsigned mine = switch_links[d.pci_bus_id];
      if (mine == 0) continue;
      for (const auto& other : out) {
        unsigned theirs = switch_links[other.pci_bus_id];
        if (other.pci_bus_id == d.pci_bus_id || theirs == 0) continue;
        auto addr = PciAddress::parse(other.pci_bus_id);
        if (!addr) continue;
        unsigned count = std::min(mine, theirs);
        auto same = std::find_if(d.peer_links.begin(), d.peer_links.end(),
                                 [&](const PeerLink& p) { return p.peer == *addr; });
        if (same != d.peer_links.end()) {
          same->link.count += count;
        } else {
          d.peer_links.push_back(PeerLink{*addr, Link{LinkLevel::nvlink, count}});
        }
      }
    }
    return out;
  }

  AcceleratorSample sample(const std::string& pci_bus_id) override {
    AcceleratorSample s;
    s.time = std::chrono::system_clock::now();
    auto want = PciAddress::parse(pci_bus_id);
    s.pci_bus_id = want ? want->to_string() : pci_bus_id;
    std::lock_guard lock(mu_);
    Handle* h = initialized_ && want ? find(s.pci_bus_id) : nullptr;
    if (!h && initialized_ && want && !complete_) {
      (void)enumerate();  // a device that was lost at enumeration may be back
      h = find(s.pci_bus_id);
    }
    if (!h) {
      s.reachable = false;
      return s;
    }
    read_sample(*h, s);
    return s;
  }

  std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) override {
    std::vector<AcceleratorEvent> out;
    auto start = std::chrono::steady_clock::now();
    std::lock_guard event_lock(event_mu_);
    nvmlEventSet_t set = event_set();
    if (!set) {
      // Events not supported: still honour the wait so that a polling loop does not spin.
      std::this_thread::sleep_for(timeout);
      return out;
    }
    unsigned wait_ms = static_cast<unsigned>(std::max<long long>(0, timeout.count()));
    for (int i = 0; i < 1024; ++i) {
      nvmlEventData_t data{};
      nvmlReturn_t r = api_.nvmlEventSetWait_v2(set, &data, i == 0 ? wait_ms : 0);
      if (r != NVML_SUCCESS) {
        // NVML_ERROR_TIMEOUT is the normal "nothing more". Another error (a lost GPU) would come
        // back at once: wait out the timeout so that a polling loop does not spin; the samples
        // tell which device is gone.
        if (r != NVML_ERROR_TIMEOUT && i == 0) {
          std::this_thread::sleep_until(start + timeout);
        }
        break;
      }
      out.push_back(translate(data));
    }
    return out;
  }

 private:
  // GPM measures between two samples: the one of the last interval and this one.
  struct GpmPair {
    nvmlGpmSample_t previous = nullptr;
    nvmlGpmSample_t current = nullptr;
    bool have_previous = false;
  };

  struct Handle {
    nvmlDevice_t device = nullptr;
    unsigned index = 0;
    std::string bus_id;
    std::bitset<kFieldCount> worked;  // fields that answered at least once
    bool events_registered = false;
    std::optional<bool> gpm_supported;  // asked once (nvmlGpmQueryDeviceSupport)
    GpmPair gpm;
    std::map<unsigned, GpmPair> mig_gpm;  // by GPU instance id
    // The last NVLink data counter reading (KiB, sent + received, all links) and its time in
    // microseconds, for DCGM's bandwidth over the interval.
    std::optional<std::pair<std::uint64_t, std::int64_t>> nvlink_previous;
  };

  void free_gpm(GpmPair& p) const {
    if (!api_.nvmlGpmSampleFree) return;
    if (p.previous) api_.nvmlGpmSampleFree(p.previous);
    if (p.current) api_.nvmlGpmSampleFree(p.current);
    p = GpmPair{};
  }

  // Asks each GPU once whether it has GPM; the ones without (before Hopper) are named once in
  // the library report: their DCGM_FI_PROF_* fields are absent.
  void note_gpm_support() {
    std::vector<std::string> without;
    for (auto& h : handles_) {
      if (h.gpm_supported) continue;
      nvmlGpmSupport_t support{};
      support.version = NVML_GPM_SUPPORT_VERSION;
      h.gpm_supported = api_.nvmlGpmQueryDeviceSupport && api_.nvmlGpmSampleAlloc &&
                        api_.nvmlGpmSampleGet && api_.nvmlGpmMetricsGet &&
                        api_.nvmlGpmQueryDeviceSupport(h.device, &support) == NVML_SUCCESS &&
                        support.isSupportedDevice != 0;
      if (!*h.gpm_supported) without.push_back(h.bus_id);
    }
    if (without.empty()) return;
    if (!report_.note.empty()) report_.note += "; ";
    report_.note += "no GPM (profiling metrics, Hopper and later) on " +
                    std::to_string(without.size()) + " GPU(s): " + without.front() +
                    (without.size() > 1 ? " and others" : "");
  }

  // Takes this interval's GPM sample (`mig`: of that GPU instance) and measures against the
  // last one. Nothing the first time, or after a failed sample.
  std::optional<ProfilingSample> gpm_measure(GpmPair& p, nvmlDevice_t dev,
                                             std::optional<unsigned> mig) const {
    if (!p.current && api_.nvmlGpmSampleAlloc(&p.current) != NVML_SUCCESS) p.current = nullptr;
    if (!p.previous && api_.nvmlGpmSampleAlloc(&p.previous) != NVML_SUCCESS) p.previous = nullptr;
    if (!p.current || !p.previous) return std::nullopt;
    nvmlReturn_t r =
        mig ? (api_.nvmlGpmMigSampleGet ? api_.nvmlGpmMigSampleGet(dev, *mig, p.current)
                                        : NVML_ERROR_NOT_SUPPORTED)
            : api_.nvmlGpmSampleGet(dev, p.current);
    if (r != NVML_SUCCESS) {
      p.have_previous = false;
      return std::nullopt;
    }
    std::optional<ProfilingSample> out;
    if (p.have_previous) out = gpm_metrics(p.previous, p.current);
    std::swap(p.previous, p.current);
    p.have_previous = true;
    return out;
  }

  std::optional<ProfilingSample> gpm_metrics(nvmlGpmSample_t first, nvmlGpmSample_t second) const {
    constexpr double kMiB = 1024.0 * 1024.0;
    using Into = std::optional<double> ProfilingSample::*;
    struct Metric {
      unsigned id;
      Into into;
      double scale;  // 0: a percentage
    };
    static constexpr Metric kMetrics[] = {
        {NVML_GPM_METRIC_GRAPHICS_UTIL, &ProfilingSample::graphics_active_percent, 0},
        {NVML_GPM_METRIC_SM_UTIL, &ProfilingSample::sm_active_percent, 0},
        {NVML_GPM_METRIC_SM_OCCUPANCY, &ProfilingSample::sm_occupancy_percent, 0},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, &ProfilingSample::tensor_active_percent, 0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, &ProfilingSample::dram_active_percent, 0},
        {NVML_GPM_METRIC_FP64_UTIL, &ProfilingSample::fp64_active_percent, 0},
        {NVML_GPM_METRIC_FP32_UTIL, &ProfilingSample::fp32_active_percent, 0},
        {NVML_GPM_METRIC_FP16_UTIL, &ProfilingSample::fp16_active_percent, 0},
        {NVML_GPM_METRIC_PCIE_TX_PER_SEC, &ProfilingSample::pcie_tx_bytes_per_second, kMiB},
        {NVML_GPM_METRIC_PCIE_RX_PER_SEC, &ProfilingSample::pcie_rx_bytes_per_second, kMiB},
        {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, &ProfilingSample::nvlink_tx_bytes_per_second,
         kMiB},
        {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, &ProfilingSample::nvlink_rx_bytes_per_second,
         kMiB},
    };
    constexpr unsigned kCount = sizeof kMetrics / sizeof kMetrics[0];
    static_assert(kCount <= NVML_GPM_METRIC_MAX);
    auto get = std::make_unique<nvmlGpmMetricsGet_t>();  // 3.9 KB: not on a sampler's stack
    *get = nvmlGpmMetricsGet_t{};
    get->version = NVML_GPM_METRICS_GET_VERSION;
    get->numMetrics = kCount;
    get->sample1 = first;
    get->sample2 = second;
    for (unsigned i = 0; i < kCount; ++i)
      get->metrics[i].metricId = kMetrics[i].id;
    if (api_.nvmlGpmMetricsGet(get.get()) != NVML_SUCCESS) return std::nullopt;
    ProfilingSample out;
    for (unsigned i = 0; i < kCount; ++i) {
      const nvmlGpmMetric_t& m = get->metrics[i];
      if (m.metricId != kMetrics[i].id || m.nvmlReturn != NVML_SUCCESS) continue;
      double v = m.value;
      // Range-checked: a percentage in [0, 100] (rounding may overshoot a hair), a rate >= 0.
      if (!std::isfinite(v) || v < 0) continue;
      if (kMetrics[i].scale == 0) {
        if (v > 100.5) continue;
        out.*(kMetrics[i].into) = std::min(v, 100.0);
      } else {
        out.*(kMetrics[i].into) = v * kMetrics[i].scale;
      }
    }
    return out;
  }

  // MIG mode: each instance's own memory and, with GPM, its engines' activity.
  void read_mig_samples(Handle& h, AcceleratorSample& s) const {
    if (!api_.nvmlDeviceGetMigMode || !api_.nvmlDeviceGetMaxMigDeviceCount ||
        !api_.nvmlDeviceGetMigDeviceHandleByIndex || !api_.nvmlDeviceGetGpuInstanceId) {
      return;
    }
    unsigned current = 0, pending = 0, max = 0;
    if (api_.nvmlDeviceGetMigMode(h.device, &current, &pending) != NVML_SUCCESS ||
        current != NVML_FEATURE_ENABLED ||
        api_.nvmlDeviceGetMaxMigDeviceCount(h.device, &max) != NVML_SUCCESS) {
      return;
    }
    std::set<unsigned> seen;
    for (unsigned i = 0; i < std::min(max, 64u); ++i) {
      nvmlDevice_t mig = nullptr;
      if (api_.nvmlDeviceGetMigDeviceHandleByIndex(h.device, i, &mig) != NVML_SUCCESS) continue;
      MigInstanceSample m;
      if (api_.nvmlDeviceGetGpuInstanceId(mig, &m.gpu_instance_id) != NVML_SUCCESS) continue;
      // A GPU instance with several compute instances is one memory: count it once.
      if (!seen.insert(m.gpu_instance_id).second) continue;
      if (api_.nvmlDeviceGetMemoryInfo) {
        nvmlMemory_t mem{};
        if (api_.nvmlDeviceGetMemoryInfo(mig, &mem) == NVML_SUCCESS && mem.used <= mem.total) {
          m.memory_used_bytes = mem.used;
          m.memory_free_bytes = mem.free;
        }
      }
      if (h.gpm_supported.value_or(false)) {
        if (auto p = gpm_measure(h.mig_gpm[m.gpu_instance_id], h.device, m.gpu_instance_id))
          m.profiling = *p;
      }
      s.mig_instances.push_back(std::move(m));
    }
    // Instances destroyed since: their GPM samples go.
    for (auto it = h.mig_gpm.begin(); it != h.mig_gpm.end();) {
      if (seen.count(it->first)) {
        ++it;
      } else {
        free_gpm(it->second);
        it = h.mig_gpm.erase(it);
      }
    }
  }

  Error init_error(const std::string& path, nvmlReturn_t r) const {
    std::string text = error_text(r);
    ErrorCode code = ErrorCode::internal;
    std::string remedy;
    switch (r) {
      case NVML_ERROR_DRIVER_NOT_LOADED:
        code = ErrorCode::unsupported;
        remedy = "load the NVIDIA kernel driver (nvidia-smi must work)";
        break;
      case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        code = ErrorCode::unsupported;
        remedy =
            "the NVML library and the kernel driver differ in version: reboot or reinstall "
            "the driver";
        break;
      case NVML_ERROR_NO_PERMISSION:
        code = ErrorCode::unsupported;
        remedy = "run with access to /dev/nvidiactl and /dev/nvidia*";
        break;
      case NVML_ERROR_NOT_SUPPORTED:
        code = ErrorCode::unsupported;
        break;
      default:
        remedy = "check the NVIDIA driver with nvidia-smi";
        break;
    }
    return Error{code, path, "nvmlInit_v2 failed: " + text, remedy};
  }

  std::string error_text(nvmlReturn_t r) const {
    const char* s = api_.nvmlErrorString ? api_.nvmlErrorString(r) : nullptr;
    std::string text = s ? std::string(s) : std::string("NVML error");
    return text + " (" + std::to_string(r) + ")";
  }

  Handle* find(const std::string& bus_id) {
    for (auto& h : handles_) {
      if (h.bus_id == bus_id) return &h;
    }
    return nullptr;
  }

  // Fills handles_ with every device NVML answers for; a device that fails (lost) is left out
  // and complete_ stays false so that a later call tries again. Caller holds mu_.
  Status enumerate() {
    if (complete_) return Ok{};
    if (!api_.nvmlDeviceGetCount_v2 || !api_.nvmlDeviceGetHandleByIndex_v2 ||
        !api_.nvmlDeviceGetPciInfo_v3) {
      return Error{ErrorCode::unsupported, report_.path,
                   "lacks nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or "
                   "nvmlDeviceGetPciInfo_v3: cannot list devices",
                   "install a newer NVIDIA driver"};
    }
    unsigned count = 0;
    nvmlReturn_t r = api_.nvmlDeviceGetCount_v2(&count);
    if (r != NVML_SUCCESS) {
      return Error{
          ErrorCode::internal, report_.path, "nvmlDeviceGetCount_v2 failed: " + error_text(r), {}};
    }
    bool complete = true;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t dev = nullptr;
      nvmlPciInfo_t pci{};
      if (api_.nvmlDeviceGetHandleByIndex_v2(i, &dev) != NVML_SUCCESS ||
          api_.nvmlDeviceGetPciInfo_v3(dev, &pci) != NVML_SUCCESS) {
        complete = false;
        continue;
      }
      std::string bus_id = normalize_bus_id(pci.busId);
      if (bus_id.empty()) bus_id = normalize_bus_id(pci.busIdLegacy);
      if (bus_id.empty()) continue;
      if (Handle* known = find(bus_id)) {
        known->device = dev;
        known->index = i;
        continue;
      }
      Handle h;
      h.device = dev;
      h.index = i;
      h.bus_id = bus_id;
      handles_.push_back(std::move(h));
    }
    complete_ = complete;
    return Ok{};
  }

  std::string get_string(fn::nvmlDeviceGetUUID* f, nvmlDevice_t dev, unsigned size) const {
    if (!f) return {};
    std::vector<char> buf(size, '\0');
    if (f(dev, buf.data(), size) != NVML_SUCCESS) return {};
    return c_string(buf.data(), size);
  }

  AcceleratorInventory inventory(const Handle& h) const {
    AcceleratorInventory inv;
    inv.backend = "nvml";
    inv.index = h.index;
    inv.driver_version = driver_version_;
    nvmlDevice_t dev = h.device;
    inv.uuid = get_string(api_.nvmlDeviceGetUUID, dev, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    inv.serial = get_string(api_.nvmlDeviceGetSerial, dev, NVML_DEVICE_SERIAL_BUFFER_SIZE);
    if (api_.nvmlDeviceGetMinorNumber) {
      unsigned minor = 0;
      // /dev/nvidia<minor>: 255 is nvidiactl's, never a GPU's.
      if (api_.nvmlDeviceGetMinorNumber(dev, &minor) == NVML_SUCCESS && minor < 255)
        inv.device_minor = minor;
    }
    inv.product_name = get_string(api_.nvmlDeviceGetName, dev, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    if (api_.nvmlDeviceGetMemoryInfo) {
      nvmlMemory_t mem{};
      if (api_.nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS)
        inv.memory_total_bytes = mem.total;
    }
    if (api_.nvmlDeviceGetCudaComputeCapability) {
      int major = 0, minor = 0;
      if (api_.nvmlDeviceGetCudaComputeCapability(dev, &major, &minor) == NVML_SUCCESS) {
        inv.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      }
    }
    if (api_.nvmlDeviceGetPowerManagementLimit) {
      unsigned mw = 0;
      if (api_.nvmlDeviceGetPowerManagementLimit(dev, &mw) == NVML_SUCCESS) {
        inv.power_limit_watts = mw / 1000.0;
      }
    }
    if (api_.nvmlDeviceGetEccMode) {
      nvmlEnableState_t current = 0, pending = 0;
      if (api_.nvmlDeviceGetEccMode(dev, &current, &pending) == NVML_SUCCESS) {
        inv.ecc_enabled = current == NVML_FEATURE_ENABLED;
        inv.ecc_pending = pending == NVML_FEATURE_ENABLED;
      }
    }
    if (api_.nvmlDeviceGetPersistenceMode) {
      nvmlEnableState_t mode = 0;
      if (api_.nvmlDeviceGetPersistenceMode(dev, &mode) == NVML_SUCCESS) {
        inv.persistence_mode = mode == NVML_FEATURE_ENABLED;
      }
    }
    if (api_.nvmlDeviceGetMigMode) {
      unsigned current = 0, pending = 0;
      if (api_.nvmlDeviceGetMigMode(dev, &current, &pending) == NVML_SUCCESS) {
        inv.mig_enabled = current == NVML_FEATURE_ENABLED;
        inv.mig_pending = pending == NVML_FEATURE_ENABLED;
        if (*inv.mig_enabled) inv.mig_instances = mig_instances(dev);
      }
    }
    return inv;
  }

  std::vector<MigInstance> mig_instances(nvmlDevice_t dev) const {
    std::vector<MigInstance> out;
    if (!api_.nvmlDeviceGetMaxMigDeviceCount || !api_.nvmlDeviceGetMigDeviceHandleByIndex) {
      return out;
    }
    unsigned max = 0;
    if (api_.nvmlDeviceGetMaxMigDeviceCount(dev, &max) != NVML_SUCCESS) return out;
    for (unsigned i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      if (api_.nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS) continue;
      MigInstance m;
      if (api_.nvmlDeviceGetGpuInstanceId)
        (void)api_.nvmlDeviceGetGpuInstanceId(mig, &m.gpu_instance_id);
      if (api_.nvmlDeviceGetComputeInstanceId) {
        (void)api_.nvmlDeviceGetComputeInstanceId(mig, &m.compute_instance_id);
      }
      m.uuid = get_string(api_.nvmlDeviceGetUUID, mig, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
      if (api_.nvmlDeviceGetMemoryInfo) {
        nvmlMemory_t mem{};
        if (api_.nvmlDeviceGetMemoryInfo(mig, &mem) == NVML_SUCCESS) m.memory_bytes = mem.total;
      }
      // A MIG device's name is the GPU's with the profile: "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
      std::string name = get_string(api_.nvmlDeviceGetName, mig, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
      if (auto at = name.rfind("MIG "); at != std::string::npos)
        m.profile_name = name.substr(at + 4);
      if (api_.nvmlDeviceGetGpuInstanceById && api_.nvmlGpuInstanceGetInfo) {
        nvmlGpuInstance_t gi = nullptr;
        nvmlGpuInstanceInfo_t info{};
        if (api_.nvmlDeviceGetGpuInstanceById(dev, m.gpu_instance_id, &gi) == NVML_SUCCESS &&
            api_.nvmlGpuInstanceGetInfo(gi, &info) == NVML_SUCCESS) {
          m.profile_id = info.profileId;
          m.placement_start = info.placement.start;
          m.placement_size = info.placement.size;
        }
      }
      out.push_back(std::move(m));
    }
    return out;
  }

  // Adds direct GPU peers to `peers`; returns the number of active links to NVSwitches.
  unsigned nvlink_peers(const Handle& h, std::vector<PeerLink>& peers) const {
    if (!api_.nvmlDeviceGetNvLinkState || !api_.nvmlDeviceGetNvLinkRemotePciInfo_v2) return 0;
    std::map<std::string, unsigned> per_remote;
    unsigned to_switch = 0;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      if (api_.nvmlDeviceGetNvLinkState(h.device, link, &active) != NVML_SUCCESS ||
          active != NVML_FEATURE_ENABLED) {
        continue;
      }
      nvmlPciInfo_t remote{};
      if (api_.nvmlDeviceGetNvLinkRemotePciInfo_v2(h.device, link, &remote) != NVML_SUCCESS) {
        continue;
      }
      std::string bus = normalize_bus_id(remote.busId);
      if (bus.empty()) bus = normalize_bus_id(remote.busIdLegacy);
      bool is_gpu = std::any_of(handles_.begin(), handles_.end(),
                                [&](const Handle& o) { return o.bus_id == bus; });
      // The library says what the remote is where it can (r460 and later); else an NVIDIA device
      // that is not one of our GPUs is taken for an NVSwitch.
      bool is_switch = !is_gpu && (remote.pciDeviceId & 0xffffu) == 0x10deu;
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      if (api_.nvmlDeviceGetNvLinkRemoteDeviceType &&
          api_.nvmlDeviceGetNvLinkRemoteDeviceType(h.device, link, &type) == NVML_SUCCESS &&
          type != NVML_NVLINK_DEVICE_TYPE_UNKNOWN) {
        is_gpu = is_gpu && type == NVML_NVLINK_DEVICE_TYPE_GPU;
        is_switch = type == NVML_NVLINK_DEVICE_TYPE_SWITCH;
      }
      if (is_gpu && bus != h.bus_id) {
        ++per_remote[bus];
      } else if (is_switch) {
        ++to_switch;
      }
    }
    for (const auto& [bus, count] : per_remote) {
      peers.push_back(PeerLink{*PciAddress::parse(bus), Link{LinkLevel::nvlink, count}});
    }
    return to_switch;
  }

  // Records the outcome of one call for field `f`: true when it succeeded.
  static bool ok(Handle& h, Field f, nvmlReturn_t r, AcceleratorSample& s) {
    if (r == NVML_SUCCESS) {
      h.worked.set(f);
      return true;
    }
    if (r == NVML_ERROR_GPU_IS_LOST || (r != NVML_ERROR_NOT_SUPPORTED && h.worked.test(f))) {
      s.reachable = false;
    }
    return false;
  }

  void read_sample(Handle& h, AcceleratorSample& s) const {
    nvmlDevice_t dev = h.device;
    if (api_.nvmlDeviceGetUtilizationRates) {
      nvmlUtilization_t u{};
      if (ok(h, kUtilization, api_.nvmlDeviceGetUtilizationRates(dev, &u), s)) {
        s.gpu_utilization_percent = u.gpu;
        s.memory_utilization_percent = u.memory;
      }
    }
    if (api_.nvmlDeviceGetMemoryInfo) {
      nvmlMemory_t m{};
      if (ok(h, kMemory, api_.nvmlDeviceGetMemoryInfo(dev, &m), s)) {
        s.memory_used_bytes = m.used;
        s.memory_free_bytes = m.free;
      }
    }
    if (api_.nvmlDeviceGetTemperature) {
      unsigned t = 0;
      if (ok(h, kTemperature, api_.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &t), s)) {
        s.gpu_temperature_c = t;
      }
    }
    if (api_.nvmlDeviceGetFieldValues) {
      nvmlFieldValue_t v{};
      v.fieldId = NVML_FI_DEV_MEMORY_TEMP;
      nvmlReturn_t r = api_.nvmlDeviceGetFieldValues(dev, 1, &v);
      if (r == NVML_SUCCESS) r = v.nvmlReturn;
      if (ok(h, kMemoryTemperature, r, s)) s.memory_temperature_c = field_as_double(v);
    }
    if (api_.nvmlDeviceGetPowerUsage) {
      unsigned mw = 0;
      if (ok(h, kPower, api_.nvmlDeviceGetPowerUsage(dev, &mw), s)) s.power_watts = mw / 1000.0;
    }
    if (api_.nvmlDeviceGetTotalEnergyConsumption) {
      unsigned long long mj = 0;
      if (ok(h, kEnergy, api_.nvmlDeviceGetTotalEnergyConsumption(dev, &mj), s)) {
        s.energy_millijoules = mj;
      }
    }
    if (api_.nvmlDeviceGetClockInfo) {
      unsigned mhz = 0;
      if (ok(h, kSmClock, api_.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &mhz), s)) {
        s.sm_clock_mhz = mhz;
      }
      if (ok(h, kMemClock, api_.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_MEM, &mhz), s)) {
        s.memory_clock_mhz = mhz;
      }
    }
    if (api_.nvmlDeviceGetPcieReplayCounter) {
      unsigned n = 0;
      if (ok(h, kReplay, api_.nvmlDeviceGetPcieReplayCounter(dev, &n), s)) s.pcie_replay_count = n;
    }
    if (api_.nvmlDeviceGetTotalEccErrors) {
      struct {
        Field field;
        nvmlMemoryErrorType_t type;
        nvmlEccCounterType_t counter;
        std::optional<std::uint64_t> AcceleratorSample::*into;
      } const ecc[] = {
          {kEccCorrectedVolatile, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
           &AcceleratorSample::ecc_corrected_volatile},
          {kEccUncorrectedVolatile, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
           &AcceleratorSample::ecc_uncorrected_volatile},
          {kEccCorrectedAggregate, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC,
           &AcceleratorSample::ecc_corrected_aggregate},
          {kEccUncorrectedAggregate, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC,
           &AcceleratorSample::ecc_uncorrected_aggregate},
      };
      for (const auto& e : ecc) {
        unsigned long long n = 0;
        if (ok(h, e.field, api_.nvmlDeviceGetTotalEccErrors(dev, e.type, e.counter, &n), s)) {
          s.*(e.into) = n;
        }
      }
    }
    if (api_.nvmlDeviceGetRetiredPages) {
      // With a zero-size buffer NVML answers the count (SUCCESS, or INSUFFICIENT_SIZE).
      auto retired = [&](Field f, nvmlPageRetirementCause_t cause,
                         std::optional<std::uint64_t>& into) {
        unsigned n = 0;
        nvmlReturn_t r = api_.nvmlDeviceGetRetiredPages(dev, cause, &n, nullptr);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) r = NVML_SUCCESS;
        if (ok(h, f, r, s)) into = n;
      };
      retired(kRetiredSingleBit, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
              s.retired_pages_single_bit);
      retired(kRetiredDoubleBit, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
              s.retired_pages_double_bit);
    }
    if (api_.nvmlDeviceGetRemappedRows) {
      unsigned corr = 0, unc = 0, pending = 0, failure = 0;
      if (ok(h, kRemappedRows, api_.nvmlDeviceGetRemappedRows(dev, &corr, &unc, &pending, &failure),
             s)) {
        s.remapped_rows_correctable = corr;
        s.remapped_rows_uncorrectable = unc;
        s.remapped_rows_pending = pending != 0;
        s.remapped_rows_failure = failure != 0;
      }
    }
    if (api_.nvmlDeviceGetCurrentClocksThrottleReasons) {
      unsigned long long mask = 0;
      if (ok(h, kThrottle, api_.nvmlDeviceGetCurrentClocksThrottleReasons(dev, &mask), s)) {
        s.throttle_reasons = mask;
        s.throttle_reason_names = throttle_names(mask);
      }
    }
    unsigned percent = 0, period_us = 0;
    if (api_.nvmlDeviceGetEncoderUtilization &&
        ok(h, kEncoder, api_.nvmlDeviceGetEncoderUtilization(dev, &percent, &period_us), s) &&
        percent <= 100) {
      s.encoder_utilization_percent = percent;
    }
    if (api_.nvmlDeviceGetDecoderUtilization &&
        ok(h, kDecoder, api_.nvmlDeviceGetDecoderUtilization(dev, &percent, &period_us), s) &&
        percent <= 100) {
      s.decoder_utilization_percent = percent;
    }
    if (api_.nvmlDeviceGetMemoryInfo_v2) {
      nvmlMemory_v2_t m{};
      m.version = nvmlMemory_v2;
      if (ok(h, kMemoryReserved, api_.nvmlDeviceGetMemoryInfo_v2(dev, &m), s) &&
          m.reserved <= m.total) {
        s.memory_reserved_bytes = m.reserved;
      }
    }
    if (api_.nvmlDeviceGetFieldValues) read_nvlink_bandwidth(h, s);
    if (h.gpm_supported.value_or(false)) {
      if (auto p = gpm_measure(h.gpm, dev, std::nullopt)) s.profiling = *p;
    }
    read_mig_samples(h, s);
  }

  // DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL as DCGM computes it (DcgmCacheManager's
  // ReadAndCacheNvLinkBandwidth): the NVLink data counters sent and received over all links,
  // summed, their increase since the last reading divided by the seconds between the readings'
  // timestamps and by 1000 (KiB/s to DCGM's "MB/s"), truncated to an integer. The first reading,
  // a counter that went back (driver reload) or no time between readings gives 0, as DCGM does.
  void read_nvlink_bandwidth(Handle& h, AcceleratorSample& s) const {
    nvmlFieldValue_t v[2]{};
    v[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    v[0].scopeId = NVML_NVLINK_SCOPE_ALL_LINKS;
    v[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    v[1].scopeId = NVML_NVLINK_SCOPE_ALL_LINKS;
    nvmlReturn_t r = api_.nvmlDeviceGetFieldValues(h.device, 2, v);
    if (r == NVML_SUCCESS) r = v[0].nvmlReturn != NVML_SUCCESS ? v[0].nvmlReturn : v[1].nvmlReturn;
    if (!ok(h, kNvlinkThroughput, r, s)) return;
    auto counter = [](const nvmlFieldValue_t& f) -> std::optional<std::uint64_t> {
      if (f.valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG) return f.value.ullVal;
      if (f.valueType == NVML_VALUE_TYPE_UNSIGNED_INT) return f.value.uiVal;
      return std::nullopt;
    };
    auto rx = counter(v[0]), tx = counter(v[1]);
    s.nvlink_rx_kib = rx;
    s.nvlink_tx_kib = tx;
    // Each counter is below 2^63 KiB in any real lifetime; a sum that would wrap is garbage.
    if (!rx || !tx || *rx > std::numeric_limits<std::uint64_t>::max() - *tx) return;
    std::uint64_t sum = *rx + *tx;
    std::int64_t at = std::max(v[0].timestamp, v[1].timestamp);
    double mb_per_second = 0;
    if (h.nvlink_previous && sum >= h.nvlink_previous->first && at > h.nvlink_previous->second) {
      double seconds = static_cast<double>(at - h.nvlink_previous->second) / 1e6;
      mb_per_second =
          std::trunc(static_cast<double>(sum - h.nvlink_previous->first) / seconds / 1000.0);
    }
    h.nvlink_previous = std::pair(sum, at);
    s.nvlink_bandwidth_mb_per_second = mb_per_second;
  }

  // The event set, created and registered on first use; null when the library has no events.
  // Caller holds event_mu_.
  nvmlEventSet_t event_set() {
    if (!api_.nvmlEventSetCreate || !api_.nvmlDeviceRegisterEvents || !api_.nvmlEventSetWait_v2) {
      return nullptr;
    }
    std::lock_guard lock(mu_);
    if (!initialized_) return nullptr;
    (void)enumerate();
    if (!events_ && api_.nvmlEventSetCreate(&events_) != NVML_SUCCESS) {
      events_ = nullptr;
      return nullptr;
    }
    for (auto& h : handles_) {
      if (h.events_registered) continue;
      // Not every GPU supports every type: fall back to XIDs alone.
      nvmlReturn_t r = api_.nvmlDeviceRegisterEvents(
          h.device, nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError, events_);
      if (r == NVML_ERROR_NOT_SUPPORTED) {
        r = api_.nvmlDeviceRegisterEvents(h.device, nvmlEventTypeXidCriticalError, events_);
      }
      h.events_registered = r == NVML_SUCCESS;
    }
    return events_;
  }

  AcceleratorEvent translate(const nvmlEventData_t& data) {
    AcceleratorEvent e;
    e.time = std::chrono::system_clock::now();
    {
      std::lock_guard lock(mu_);
      for (const auto& h : handles_) {
        if (h.device == data.device) e.pci_bus_id = h.bus_id;
      }
    }
    if (data.eventType & nvmlEventTypeXidCriticalError) {
      e.kind = AcceleratorEventKind::xid;
      e.code = data.eventData;
      e.text = "XID " + std::to_string(data.eventData);
    } else if (data.eventType & nvmlEventTypeDoubleBitEccError) {
      e.kind = AcceleratorEventKind::ecc_uncorrectable;
      e.code = data.eventType;
      e.text = "double-bit ECC error";
    } else {
      e.kind = AcceleratorEventKind::other;
      e.code = data.eventType;
      e.text = "NVML event type " + std::to_string(data.eventType);
    }
    // On a MIG GPU the driver names the instance the event belongs to; all ones when none.
    if (data.gpuInstanceId != 0xFFFFFFFFu) {
      e.gpu_instance_id = data.gpuInstanceId;
      if (data.computeInstanceId != 0xFFFFFFFFu) e.compute_instance_id = data.computeInstanceId;
      e.text += " on GPU instance " + std::to_string(data.gpuInstanceId);
      if (e.compute_instance_id) {
        e.text += ", compute instance " + std::to_string(*e.compute_instance_id);
      }
    }
    return e;
  }

  std::mutex mu_;        // guards everything below except events_
  std::mutex event_mu_;  // guards events_ and serialises poll_events; taken before mu_
  SharedLibrary lib_;
  Api api_;
  LibraryReport report_;
  bool initialized_ = false;
  std::string driver_version_;
  std::vector<Handle> handles_;
  bool complete_ = false;
  nvmlEventSet_t events_ = nullptr;
};

}  // namespace

std::unique_ptr<AcceleratorBackend> make_nvml_backend() {
  return std::make_unique<NvmlBackend>();
}

}  // namespace polyaccel
