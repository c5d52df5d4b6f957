// A test build of libnvidia-ml.so.1: the NVML C symbols polyaccel uses, answering from a JSON
// scenario (NVML_INJECT_SCENARIO, read by nvmlInit_v2) instead of a GPU. See README.md here for
// the scenario format. Production code loads it exactly as it loads NVIDIA's library and never
// knows; the test picks the scenario step through polyaccel_inject_set_step(), resolved with
// dlopen + dlsym.
//
// Built twice: inject_nvml (every symbol) and inject_nvml_partial (POLYACCEL_INJECT_PARTIAL:
// without the sample functions other than utilization and memory, the NVLink functions and the
// event functions), to show a backend working with what a library has.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/accel/nvml_abi.h"

using namespace polyaccel::nvml;  // NOLINT(google-build-using-namespace)
using json = nlohmann::json;

#define INJECT_EXPORT extern "C" __attribute__((visibility("default")))

// The opaque handles, defined here as the real library defines its own.
struct polyaccel::nvml::nvmlDevice_st {
  int gpu = 0;   // index into State::gpus
  int mig = -1;  // index into Gpu::migs for a MIG device handle
};
struct polyaccel::nvml::nvmlGpuInstance_st {
  int gpu = 0;
  int mig = 0;
};
// A GPM sample: what the device (or one GPU instance) measured at one time. The scenario gives
// the rates directly ("gpm" values of a step, "gpm_mig" per GPU instance id), as GPM's counters
// would give them over any interval within that step.
struct polyaccel::nvml::nvmlGpmSample_st {
  int gpu = -1;
  long gpu_instance = -1;  // -1: the whole GPU
  std::chrono::steady_clock::time_point time{};
  nlohmann::json values;  // null until taken
};
struct polyaccel::nvml::nvmlEventSet_st {
  struct Registration {
    int gpu;
    unsigned long long mask;
  };
  std::vector<Registration> registered;
  std::deque<nvmlEventData_t> queue;
};

namespace {

struct Mig {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned profile_id = 0;
  std::string profile;
  unsigned placement_start = 0;
  unsigned placement_size = 0;
  std::string uuid;
  unsigned long long memory_bytes = 0;
};

struct Gpu {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  unsigned pci_device_id = 0x233010de;
  unsigned pci_subsystem_id = 0x16c010de;
  std::string uuid, serial, name;
  unsigned minor = 0;
  unsigned long long memory_total = 0;
  int cc_major = 0, cc_minor = 0;
  bool has_mig = false;
  unsigned mig_current = 0, mig_pending = 0, mig_max = 0;
  std::vector<Mig> migs;
  std::vector<std::string> nvlinks;            // remote bus id per link; "" for an inactive link
  json power_limit_mw, ecc, persistence_mode;  // null when unsupported
  std::set<std::string> unsupported;
  std::unique_ptr<nvmlDevice_st> handle;
  std::vector<std::unique_ptr<nvmlDevice_st>> mig_handles;
  std::vector<std::unique_ptr<nvmlGpuInstance_st>> gi_handles;
  // The NVLink data counters (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX/TX, all links, KiB) and when
  // they were last brought up to date; they start at 0 when first read.
  double nvlink_rx_kib = 0, nvlink_tx_kib = 0;
  std::chrono::system_clock::time_point nvlink_counted{};
};

struct State {
  std::mutex mu;
  std::condition_variable events_cv;
  unsigned init_count = 0;
  nvmlReturn_t init_error = NVML_SUCCESS;  // what nvmlInit_v2 answers, from the scenario
  std::string driver_version;
  // The NVLink count and the number of GPU instance profile enums of the nvml.h the driver was
  // built from: 36 and 18 (CUDA 13.3), or 18 and 17 for an older driver, which answers
  // NVML_ERROR_INVALID_ARGUMENT for a link or profile enum at or past them.
  unsigned nvlink_max_links = NVML_NVLINK_MAX_LINKS;
  unsigned gpu_instance_profile_count = NVML_GPU_INSTANCE_PROFILE_COUNT;
  std::set<std::string> nvswitches;
  std::vector<Gpu> gpus;
  std::vector<std::vector<json>> values;  // [step][gpu], carried forward from earlier steps
  unsigned step = 0;
  std::vector<std::unique_ptr<nvmlEventSet_st>> event_sets;
  std::vector<std::unique_ptr<nvmlGpmSample_st>> gpm_samples;
};

State& state() {
  // Never destroyed, and not on the heap: a thread still inside the library (the hang shim's)
  // must not race a destructor at exit or dlclose. What the scenario allocates is freed by the
  // last nvmlShutdown (release_scenario), so LeakSanitizer finds nothing once we are dlclosed.
  alignas(State) static unsigned char storage[sizeof(State)];
  static State* s = new (storage) State();
  return *s;
}

void release_mig();  // inject_nvml_mig.inc

// Frees everything load() and the calls since allocated. Caller holds mu.
void release_scenario(State& s) {
  release_mig();
  std::string().swap(s.driver_version);
  std::set<std::string>().swap(s.nvswitches);
  std::vector<Gpu>().swap(s.gpus);
  std::vector<std::vector<json>>().swap(s.values);
  std::vector<std::unique_ptr<nvmlEventSet_st>>().swap(s.event_sets);
  // Samples the caller did not free are freed with the rest (and the vector's own buffer).
  std::vector<std::unique_ptr<nvmlGpmSample_st>>().swap(s.gpm_samples);
  s.step = 0;
}

unsigned parse_hex(const json& v, unsigned fallback) {
  if (v.is_number_unsigned()) return v.get<unsigned>();
  if (v.is_string()) return static_cast<unsigned>(std::stoul(v.get<std::string>(), nullptr, 16));
  return fallback;
}

bool parse_bus_id(const std::string& text, Gpu& g) {
  return std::sscanf(text.c_str(), "%x:%x:%x.%x", &g.domain, &g.bus, &g.device, &g.function) == 4;
}

std::string nvml_bus_id(unsigned domain, unsigned bus, unsigned device, unsigned function,
                        bool legacy) {
  char buf[32];
  std::snprintf(buf, sizeof buf, legacy ? "%04X:%02X:%02X.%X" : "%08X:%02X:%02X.%X", domain, bus,
                device, function);
  return buf;
}

// Loads the scenario into `s`; an error text when it cannot.
std::string load(State& s) {
  const char* path = std::getenv("NVML_INJECT_SCENARIO");
  if (!path || !*path) return "NVML_INJECT_SCENARIO is not set";
  std::ifstream in(path);
  if (!in) return std::string(path) + ": cannot open";
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::string(path) + ": not a JSON object";
  try {
    s.init_error = doc.value("init_error", NVML_SUCCESS);
    s.driver_version = doc.value("driver_version", "550.90.07");
    s.nvlink_max_links = doc.value("nvlink_max_links", NVML_NVLINK_MAX_LINKS);
    s.gpu_instance_profile_count =
        doc.value("gpu_instance_profile_count", NVML_GPU_INSTANCE_PROFILE_COUNT);
    if (s.nvlink_max_links > NVML_NVLINK_MAX_LINKS ||
        s.gpu_instance_profile_count > NVML_GPU_INSTANCE_PROFILE_COUNT) {
      return std::string(path) + ": nvlink_max_links or gpu_instance_profile_count above nvml.h's";
    }
    s.nvswitches.clear();
    for (const auto& sw : doc.value("nvswitches", json::array())) {
      s.nvswitches.insert(sw.get<std::string>());
    }
    std::set<std::string> all_unsupported;
    for (const auto& u : doc.value("unsupported", json::array())) {
      all_unsupported.insert(u.get<std::string>());
    }
    s.gpus.clear();
    for (const auto& d : doc.at("devices")) {
      Gpu g;
      if (!parse_bus_id(d.at("pci_bus_id").get<std::string>(), g)) {
        return std::string(path) + ": bad pci_bus_id " + d.at("pci_bus_id").dump();
      }
      g.pci_device_id = parse_hex(d.value("pci_device_id", json()), g.pci_device_id);
      g.pci_subsystem_id = parse_hex(d.value("pci_subsystem_id", json()), g.pci_subsystem_id);
      g.uuid = d.value("uuid", "");
      g.minor = d.value("minor", static_cast<unsigned>(s.gpus.size()));
      g.serial = d.value("serial", "");
      g.name = d.value("name", "");
      g.memory_total = d.value("memory_mib", 0ULL) << 20;
      std::string cc = d.value("compute_capability", "0.0");
      std::sscanf(cc.c_str(), "%d.%d", &g.cc_major, &g.cc_minor);
      if (d.contains("mig")) {
        const auto& m = d.at("mig");
        g.has_mig = true;
        g.mig_current = m.value("current", false) ? 1 : 0;
        g.mig_pending = m.value("pending", false) ? 1 : 0;
        g.mig_max = m.value("max_devices", 7u);
        for (const auto& i : m.value("instances", json::array())) {
          Mig mi;
          mi.gpu_instance_id = i.at("gpu_instance_id").get<unsigned>();
          mi.compute_instance_id = i.value("compute_instance_id", 0u);
          mi.profile_id = i.at("profile_id").get<unsigned>();
          mi.profile = i.at("profile").get<std::string>();
          mi.placement_start = i.at("placement_start").get<unsigned>();
          mi.placement_size = i.at("placement_size").get<unsigned>();
          mi.uuid = i.at("uuid").get<std::string>();
          mi.memory_bytes = i.at("memory_mib").get<unsigned long long>() << 20;
          g.migs.push_back(std::move(mi));
        }
      }
      for (const auto& l : d.value("nvlinks", json::array())) {
        if (l.is_null()) {
          g.nvlinks.emplace_back();
        } else if (l.is_string()) {
          g.nvlinks.push_back(l.get<std::string>());
        } else {
          unsigned n = l.value("count", 1u);
          for (unsigned k = 0; k < n; ++k)
            g.nvlinks.push_back(l.at("remote").get<std::string>());
        }
      }
      g.power_limit_mw = d.value("power_limit_mw", json());
      g.ecc = d.value("ecc", json());
      g.persistence_mode = d.value("persistence_mode", json());
      g.unsupported = all_unsupported;
      for (const auto& u : d.value("unsupported", json::array())) {
        g.unsupported.insert(u.get<std::string>());
      }
      s.gpus.push_back(std::move(g));
    }
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      Gpu& g = s.gpus[i];
      g.handle = std::make_unique<nvmlDevice_st>(nvmlDevice_st{static_cast<int>(i), -1});
      for (size_t m = 0; m < g.migs.size(); ++m) {
        g.mig_handles.push_back(std::make_unique<nvmlDevice_st>(
            nvmlDevice_st{static_cast<int>(i), static_cast<int>(m)}));
        g.gi_handles.push_back(std::make_unique<nvmlGpuInstance_st>(
            nvmlGpuInstance_st{static_cast<int>(i), static_cast<int>(m)}));
      }
    }
    // Values carry forward from step to step; "lost" and "events" hold for their step only.
    s.values.clear();
    std::vector<json> current(s.gpus.size(), json::object());
    for (const auto& step : doc.value("steps", json::array())) {
      for (size_t i = 0; i < s.gpus.size(); ++i) {
        current[i].erase("lost");
        current[i].erase("events");
        if (step.contains("all")) current[i].merge_patch(step.at("all"));
        const Gpu& g = s.gpus[i];
        std::string id = nvml_bus_id(g.domain, g.bus, g.device, g.function, true);
        for (auto& c : id)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (step.contains("devices") && step.at("devices").contains(id)) {
          current[i].merge_patch(step.at("devices").at(id));
        }
      }
      s.values.push_back(current);
    }
    if (s.values.empty()) s.values.push_back(current);
  } catch (const std::exception& e) {
    return std::string(path) + ": " + e.what();
  }
  return {};
}

const json& values(const State& s, int gpu) {
  return s.values[std::min<size_t>(s.step, s.values.size() - 1)][static_cast<size_t>(gpu)];
}

// Resolves a device handle for a call: its GPU and the return code the call gives before its
// own checks (uninitialised, bad handle, lost, unsupported field).
nvmlReturn_t check(const State& s, nvmlDevice_t dev, const char* feature, const Gpu** gpu) {
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!dev || dev->gpu < 0 || static_cast<size_t>(dev->gpu) >= s.gpus.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const Gpu& g = s.gpus[static_cast<size_t>(dev->gpu)];
  if (values(s, dev->gpu).value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
  if (feature && g.unsupported.count(feature)) return NVML_ERROR_NOT_SUPPORTED;
  *gpu = &g;
  return NVML_SUCCESS;
}

// A number from the current step's values; NOT_SUPPORTED when the scenario leaves it out.
template <class T>
nvmlReturn_t number(const State& s, nvmlDevice_t dev, const char* feature, const char* key,
                    T* out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, dev, feature, &g); r != NVML_SUCCESS) return r;
  const json& v = values(s, dev->gpu);
  if (!v.contains(key) || !v.at(key).is_number()) return NVML_ERROR_NOT_SUPPORTED;
  *out = v.at(key).get<T>();
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& value, char* buf, unsigned size) {
  if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > size) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

void fill_pci(const Gpu& g, unsigned device_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  pci->domain = g.domain;
  pci->bus = g.bus;
  pci->device = g.device;
  pci->pciDeviceId = device_id;
  pci->pciSubSystemId = g.pci_subsystem_id;
  std::string legacy = nvml_bus_id(g.domain, g.bus, g.device, g.function, true);
  std::string full = nvml_bus_id(g.domain, g.bus, g.device, g.function, false);
  std::memcpy(pci->busIdLegacy, legacy.c_str(),
              std::min(legacy.size() + 1, sizeof pci->busIdLegacy));
  std::memcpy(pci->busId, full.c_str(), std::min(full.size() + 1, sizeof pci->busId));
}

// Queues the current step's events of `gpu` on `set` for the types it registered. Caller holds mu.
void queue_events(State& s, nvmlEventSet_st& set, int gpu, unsigned long long mask) {
  const json& v = values(s, gpu);
  if (!v.contains("events")) return;
  for (const auto& e : v.at("events")) {
    nvmlEventData_t d{};
    d.device = s.gpus[static_cast<size_t>(gpu)].handle.get();
    d.gpuInstanceId = e.value("gpu_instance_id", 0xFFFFFFFFu);
    d.computeInstanceId = e.value("compute_instance_id", 0xFFFFFFFFu);
    if (e.contains("xid")) {
      d.eventType = nvmlEventTypeXidCriticalError;
      d.eventData = e.at("xid").get<unsigned long long>();
    } else if (e.value("type", "") == "double_bit_ecc") {
      d.eventType = nvmlEventTypeDoubleBitEccError;
    } else if (e.value("type", "") == "single_bit_ecc") {
      d.eventType = nvmlEventTypeSingleBitEccError;
    } else {
      continue;
    }
    if (mask & d.eventType) set.queue.push_back(d);
  }
}

// Reads the scenario's MIG keys (inject_nvml_mig.inc). Caller holds mu.
void load_mig(State& s);

}  // namespace

// Checks each exported function against the ABI's declaration of it.
#define INJECT_CHECK(name) static_assert(std::is_same_v<decltype(name), fn::name>, #name)

// ---- always present: init, inventory, utilization and memory ---------------------------------

INJECT_EXPORT nvmlReturn_t nvmlInit_v2() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) {
    // A refused init keeps nothing of what load() read (nvmlShutdown will not be called).
    if (std::string err = load(s); !err.empty()) {
      std::fprintf(stderr, "inject nvml: %s\n", err.c_str());
      release_scenario(s);
      return NVML_ERROR_UNKNOWN;
    }
    if (s.init_error != NVML_SUCCESS) {
      release_scenario(s);
      return s.init_error;
    }
    // NVML_INJECT_STEP: a test that runs a whole agent starts it at that step.
    const char* step = std::getenv("NVML_INJECT_STEP");
    s.step = step ? static_cast<unsigned>(std::strtoul(step, nullptr, 10)) : 0;
    load_mig(s);
  }
  ++s.init_count;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlInit_v2);

INJECT_EXPORT nvmlReturn_t nvmlShutdown() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (--s.init_count == 0) release_scenario(s);
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlShutdown);

INJECT_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "Unknown Error";
  }
}
INJECT_CHECK(nvmlErrorString);

INJECT_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return copy_string(s.driver_version, version, length);
}
INJECT_CHECK(nvmlSystemGetDriverVersion);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(s.gpus.size());
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetCount_v2);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= s.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (values(s, static_cast<int>(index)).value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
  *device = s.gpus[index].handle.get();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetHandleByIndex_v2);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(*g, g->pci_device_id, pci);
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetPciInfo_v3);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  const std::string& value =
      device->mig >= 0 ? g->migs[static_cast<size_t>(device->mig)].uuid : g->uuid;
  return copy_string(value, uuid, length);
}
INJECT_CHECK(nvmlDeviceGetUUID);

// The scenario's "minor", else the device's index (the driver numbers GPUs in PCI order).
INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  if (!minor || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = g->minor;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMinorNumber);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial,
                                               unsigned int length) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "serial", &g); r != NVML_SUCCESS) return r;
  if (device->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  return copy_string(g->serial, serial, length);
}
INJECT_CHECK(nvmlDeviceGetSerial);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  std::string value = g->name;
  if (device->mig >= 0) value += " MIG " + g->migs[static_cast<size_t>(device->mig)].profile;
  return copy_string(value, name, length);
}
INJECT_CHECK(nvmlDeviceGetName);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "memory", &g); r != NVML_SUCCESS) return r;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used_mib = values(s, device->gpu).value("memory_used_mib", 0ULL);
  if (device->mig >= 0) {
    // The GPU's used memory, split over its instances by their size (the last one takes what
    // rounding leaves), so that the instances add up to the GPU.
    unsigned long long gpu_used = std::min(used_mib << 20, g->memory_total), sizes = 0, given = 0;
    for (const auto& m : g->migs)
      sizes += m.memory_bytes;
    const size_t me = static_cast<size_t>(device->mig);
    memory->used = 0;
    for (size_t i = 0; i < g->migs.size() && sizes > 0; ++i) {
      unsigned long long share =
          i + 1 == g->migs.size()
              ? gpu_used - given
              : static_cast<unsigned long long>(static_cast<double>(gpu_used) *
                                                static_cast<double>(g->migs[i].memory_bytes) /
                                                static_cast<double>(sizes));
      share = std::min(share, g->migs[i].memory_bytes);
      if (i == me) memory->used = share;
      given += share;
    }
    memory->total = g->migs[me].memory_bytes;
    memory->used = std::min<unsigned long long>(memory->used, memory->total);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  }
  memory->total = g->memory_total;
  memory->used = std::min(used_mib << 20, g->memory_total);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMemoryInfo);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                              int* minor) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  *major = g->cc_major;
  *minor = g->cc_minor;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetCudaComputeCapability);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                             unsigned int* limit) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "power_limit", &g); r != NVML_SUCCESS) return r;
  if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->power_limit_mw.is_number()) return NVML_ERROR_NOT_SUPPORTED;
  *limit = g->power_limit_mw.get<unsigned>();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetPowerManagementLimit);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                                nvmlEnableState_t* pending) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "ecc_mode", &g); r != NVML_SUCCESS) return r;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->ecc.is_object()) return NVML_ERROR_NOT_SUPPORTED;
  *current = g->ecc.value("current", false) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  *pending = g->ecc.value("pending", false) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetEccMode);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                        nvmlEnableState_t* mode) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "persistence_mode", &g); r != NVML_SUCCESS) return r;
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->persistence_mode.is_boolean()) return NVML_ERROR_NOT_SUPPORTED;
  *mode = g->persistence_mode.get<bool>() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetPersistenceMode);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                unsigned int* pending) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  *current = g->mig_current;
  *pending = g->mig_pending;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMigMode);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                          unsigned int* count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  *count = g->mig_max;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMaxMigDeviceCount);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                               unsigned int index,
                                                               nvmlDevice_t* mig) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!mig || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (!g->has_mig || g->mig_current == 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= g->mig_max) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= g->migs.size()) return NVML_ERROR_NOT_FOUND;
  *mig = g->mig_handles[index].get();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMigDeviceHandleByIndex);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!id) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
  *id = g->migs[static_cast<size_t>(device->mig)].gpu_instance_id;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetGpuInstanceId);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!id) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
  *id = g->migs[static_cast<size_t>(device->mig)].compute_instance_id;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetComputeInstanceId);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                        nvmlGpuInstance_t* gpu_instance) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "mig", &g); r != NVML_SUCCESS) return r;
  if (!gpu_instance || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t m = 0; m < g->migs.size(); ++m) {
    if (g->migs[m].gpu_instance_id == id) {
      *gpu_instance = g->gi_handles[m].get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
INJECT_CHECK(nvmlDeviceGetGpuInstanceById);

INJECT_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance,
                                                  nvmlGpuInstanceInfo_t* info) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!gpu_instance || !info || static_cast<size_t>(gpu_instance->gpu) >= s.gpus.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const Gpu& g = s.gpus[static_cast<size_t>(gpu_instance->gpu)];
  const Mig& m = g.migs[static_cast<size_t>(gpu_instance->mig)];
  info->device = g.handle.get();
  info->id = m.gpu_instance_id;
  info->profileId = m.profile_id;
  info->placement = {m.placement_start, m.placement_size};
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlGpuInstanceGetInfo);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                         nvmlUtilization_t* utilization) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned gpu = 0, memory = 0;
  if (nvmlReturn_t r = number(s, device, "utilization", "gpu_util", &gpu); r != NVML_SUCCESS) {
    return r;
  }
  if (nvmlReturn_t r = number(s, device, "utilization", "mem_util", &memory); r != NVML_SUCCESS) {
    return r;
  }
  *utilization = {gpu, memory};
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetUtilizationRates);

#ifndef POLYACCEL_INJECT_PARTIAL

// ---- NVLink --------------------------------------------------------------------------------

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                    nvmlEnableState_t* is_active) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "nvlink", &g); r != NVML_SUCCESS) return r;
  if (!is_active || link >= s.nvlink_max_links) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;
  *is_active = link < g->nvlinks.size() && !g->nvlinks[link].empty() ? NVML_FEATURE_ENABLED
                                                                     : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetNvLinkState);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlPciInfo_t* pci) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "nvlink", &g); r != NVML_SUCCESS) return r;
  if (!pci || link >= s.nvlink_max_links) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= g->nvlinks.size() || g->nvlinks[link].empty()) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string& remote = g->nvlinks[link];
  Gpu where;
  if (!parse_bus_id(remote, where)) return NVML_ERROR_UNKNOWN;
  unsigned device_id = 0x0000ffff;  // not an NVIDIA device
  for (const auto& other : s.gpus) {
    if (other.domain == where.domain && other.bus == where.bus && other.device == where.device &&
        other.function == where.function) {
      device_id = other.pci_device_id;
    }
  }
  if (s.nvswitches.count(remote)) device_id = 0x22a310de;  // GH100 [H100 NVSwitch]
  fill_pci(where, device_id, pci);
  pci->pciSubSystemId = 0;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlIntNvLinkDeviceType_t* type) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "nvlink", &g); r != NVML_SUCCESS) return r;
  if (!type || link >= s.nvlink_max_links) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= g->nvlinks.size() || g->nvlinks[link].empty()) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string& remote = g->nvlinks[link];
  *type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
  if (s.nvswitches.count(remote)) *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;
  Gpu where;
  if (parse_bus_id(remote, where)) {
    for (const auto& other : s.gpus) {
      if (other.domain == where.domain && other.bus == where.bus && other.device == where.device &&
          other.function == where.function) {
        *type = NVML_NVLINK_DEVICE_TYPE_GPU;
      }
    }
  }
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetNvLinkRemoteDeviceType);

// ---- samples beyond utilization and memory ---------------------------------------------------

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                    nvmlTemperatureSensors_t sensor,
                                                    unsigned int* temp) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return number(s, device, "temperature", "gpu_temp", temp);
}
INJECT_CHECK(nvmlDeviceGetTemperature);

// Brings GPU `gpu`'s NVLink data counters up to `now`: they grow at the current step's GPM NVLink
// rates (gpm.nvlink_rx_mibps / nvlink_tx_mibps, MiB/s: the traffic GPM measures), so that a
// reader computing a rate from two readings gets the scenario's. Caller holds mu.
void advance_nvlink(State& s, size_t gpu, std::chrono::system_clock::time_point now) {
  Gpu& g = s.gpus[gpu];
  if (g.nvlink_counted != std::chrono::system_clock::time_point{} && now > g.nvlink_counted) {
    double seconds = std::chrono::duration<double>(now - g.nvlink_counted).count();
    const json& v = values(s, static_cast<int>(gpu));
    const json gpm = v.contains("gpm") && v.at("gpm").is_object() ? v.at("gpm") : json::object();
    g.nvlink_rx_kib += gpm.value("nvlink_rx_mibps", 0.0) * 1024.0 * seconds;
    g.nvlink_tx_kib += gpm.value("nvlink_tx_mibps", 0.0) * 1024.0 * seconds;
  }
  g.nvlink_counted = now;
}

// One NVLink data counter field: scopeId NVML_NVLINK_SCOPE_ALL_LINKS for all links, or one active
// link (an equal share); NOT_SUPPORTED on a GPU without active links or with "nvlink" unsupported.
nvmlReturn_t nvlink_counter(State& s, int gpu, nvmlFieldValue_t& f,
                            std::chrono::system_clock::time_point now) {
  const Gpu& g = s.gpus[static_cast<size_t>(gpu)];
  unsigned active = static_cast<unsigned>(
      std::count_if(g.nvlinks.begin(), g.nvlinks.end(), [](const auto& r) { return !r.empty(); }));
  if (g.unsupported.count("nvlink") || active == 0) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  double share = 1.0;
  if (f.scopeId != NVML_NVLINK_SCOPE_ALL_LINKS) {
    if (f.scopeId >= s.nvlink_max_links) return NVML_ERROR_INVALID_ARGUMENT;
    if (f.scopeId >= g.nvlinks.size() || g.nvlinks[f.scopeId].empty()) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    share = 1.0 / active;
  }
  advance_nvlink(s, static_cast<size_t>(gpu), now);
  const Gpu& counted = s.gpus[static_cast<size_t>(gpu)];
  double kib = f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX ? counted.nvlink_rx_kib
                                                                  : counted.nvlink_tx_kib;
  f.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
  f.value.ullVal = static_cast<unsigned long long>(kib * share);
  return NVML_SUCCESS;
}

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                                    nvmlFieldValue_t* values_out) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  if (count < 0 || (count > 0 && !values_out)) return NVML_ERROR_INVALID_ARGUMENT;
  // The NVLink counters are brought up to the very microsecond the values are stamped with, so
  // that a rate from two readings is the scenario's and not the stamps' rounding.
  std::chrono::system_clock::time_point clock =
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  auto now =
      std::chrono::duration_cast<std::chrono::microseconds>(clock.time_since_epoch()).count();
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& f = values_out[i];
    f.timestamp = now;
    f.latencyUsec = 0;
    if (f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX ||
        f.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX) {
      f.nvmlReturn = nvlink_counter(s, device->gpu, f, clock);
      continue;
    }
    if (f.fieldId != NVML_FI_DEV_MEMORY_TEMP) {
      f.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      continue;
    }
    unsigned temp = 0;
    f.nvmlReturn = number(s, device, "memory_temperature", "memory_temp", &temp);
    f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    f.value.uiVal = temp;
  }
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetFieldValues);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return number(s, device, "power", "power_mw", power);
}
INJECT_CHECK(nvmlDeviceGetPowerUsage);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                               unsigned long long* energy) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return number(s, device, "energy", "energy_mj", energy);
}
INJECT_CHECK(nvmlDeviceGetTotalEnergyConsumption);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                  unsigned int* clock) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (type == NVML_CLOCK_SM) return number(s, device, "clocks", "sm_clock", clock);
  if (type == NVML_CLOCK_MEM) return number(s, device, "clocks", "mem_clock", clock);
  return NVML_ERROR_NOT_SUPPORTED;
}
INJECT_CHECK(nvmlDeviceGetClockInfo);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device,
                                                          unsigned int* value) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return number(s, device, "pcie_replay", "pcie_replay", value);
}
INJECT_CHECK(nvmlDeviceGetPcieReplayCounter);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                       nvmlMemoryErrorType_t type,
                                                       nvmlEccCounterType_t counter,
                                                       unsigned long long* count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const char* key = nullptr;
  if (type == NVML_MEMORY_ERROR_TYPE_CORRECTED) {
    key = counter == NVML_VOLATILE_ECC ? "ecc_corrected_volatile" : "ecc_corrected_aggregate";
  } else {
    key = counter == NVML_VOLATILE_ECC ? "ecc_uncorrected_volatile" : "ecc_uncorrected_aggregate";
  }
  return number(s, device, "ecc_errors", key, count);
}
INJECT_CHECK(nvmlDeviceGetTotalEccErrors);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                     nvmlPageRetirementCause_t cause,
                                                     unsigned int* page_count,
                                                     unsigned long long* addresses) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!page_count) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  const char* key = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? "retired_pages_dbe"
                                                                             : "retired_pages_sbe";
  if (nvmlReturn_t r = number(s, device, "retired_pages", key, &n); r != NVML_SUCCESS) return r;
  if (*page_count < n) {
    *page_count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n && addresses; ++i)
    addresses[i] = 0x1000ULL * (i + 1);
  *page_count = n;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetRetiredPages);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrected,
                                                     unsigned int* uncorrected,
                                                     unsigned int* pending, unsigned int* failure) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "remapped_rows", &g); r != NVML_SUCCESS) return r;
  if (!corrected || !uncorrected || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
  const json& v = values(s, device->gpu);
  if (!v.contains("remapped_rows")) return NVML_ERROR_NOT_SUPPORTED;
  const json& rows = v.at("remapped_rows");
  *corrected = rows.value("correctable", 0u);
  *uncorrected = rows.value("uncorrectable", 0u);
  *pending = rows.value("pending", false) ? 1 : 0;
  *failure = rows.value("failure", false) ? 1 : 0;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetRemappedRows);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                     unsigned long long* reasons) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return number(s, device, "throttle_reasons", "throttle_reasons", reasons);
}
INJECT_CHECK(nvmlDeviceGetCurrentClocksThrottleReasons);

// ---- events ------------------------------------------------------------------------------------

INJECT_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  s.event_sets.push_back(std::make_unique<nvmlEventSet_st>());
  *set = s.event_sets.back().get();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlEventSetCreate);

INJECT_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                    unsigned long long event_types,
                                                    nvmlEventSet_t set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "events", &g); r != NVML_SUCCESS) return r;
  if (!set || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned long long supported = nvmlEventTypeSingleBitEccError |
                                           nvmlEventTypeDoubleBitEccError |
                                           nvmlEventTypeXidCriticalError;
  if (event_types & ~supported) return NVML_ERROR_NOT_SUPPORTED;
  set->registered.push_back({device->gpu, event_types});
  queue_events(s, *set, device->gpu, event_types);
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceRegisterEvents);

INJECT_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                               unsigned int timeout_ms) {
  State& s = state();
  std::unique_lock lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  s.events_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return !set->queue.empty() || s.init_count == 0; });
  if (set->queue.empty()) return NVML_ERROR_TIMEOUT;
  *data = set->queue.front();
  set->queue.pop_front();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlEventSetWait_v2);

INJECT_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  for (auto it = s.event_sets.begin(); it != s.event_sets.end(); ++it) {
    if (it->get() == set) {
      s.event_sets.erase(it);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}
INJECT_CHECK(nvmlEventSetFree);

// ---- GPM, encoder/decoder, memory v2 --------------------------------------------------------

INJECT_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device,
                                                     nvmlGpmSupport_t* support) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, nullptr, &g); r != NVML_SUCCESS) return r;
  if (!support || support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_INVALID_ARGUMENT;
  // Hopper (9.0) and later, as NVIDIA's GPM.
  support->isSupportedDevice = g->cc_major >= 9 && !g->unsupported.count("gpm") ? 1 : 0;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlGpmQueryDeviceSupport);

INJECT_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
  s.gpm_samples.push_back(std::make_unique<nvmlGpmSample_st>());
  *sample = s.gpm_samples.back().get();
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlGpmSampleAlloc);

INJECT_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  State& s = state();
  std::lock_guard lock(s.mu);
  for (auto it = s.gpm_samples.begin(); it != s.gpm_samples.end(); ++it) {
    if (it->get() == sample) {
      s.gpm_samples.erase(it);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}
INJECT_CHECK(nvmlGpmSampleFree);

namespace {
nvmlReturn_t take_gpm_sample(State& s, nvmlDevice_t device, long gpu_instance,
                             nvmlGpmSample_t sample) {
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "gpm", &g); r != NVML_SUCCESS) return r;
  if (g->cc_major < 9) return NVML_ERROR_NOT_SUPPORTED;
  bool known = std::any_of(s.gpm_samples.begin(), s.gpm_samples.end(),
                           [&](const auto& p) { return p.get() == sample; });
  if (!known || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  const json& v = values(s, device->gpu);
  json taken = v.value("gpm", json::object());
  if (gpu_instance >= 0) {
    bool exists = std::any_of(g->migs.begin(), g->migs.end(), [&](const Mig& m) {
      return static_cast<long>(m.gpu_instance_id) == gpu_instance;
    });
    if (g->mig_current == 0 || !exists) return NVML_ERROR_NOT_FOUND;
    std::string id = std::to_string(gpu_instance);
    if (v.contains("gpm_mig") && v.at("gpm_mig").contains(id)) taken = v.at("gpm_mig").at(id);
  }
  sample->gpu = device->gpu;
  sample->gpu_instance = gpu_instance;
  sample->time = std::chrono::steady_clock::now();
  sample->values = taken;
  return NVML_SUCCESS;
}
}  // namespace

INJECT_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return take_gpm_sample(s, device, -1, sample);
}
INJECT_CHECK(nvmlGpmSampleGet);

INJECT_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpu_instance_id,
                                               nvmlGpmSample_t sample) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return take_gpm_sample(s, device, static_cast<long>(gpu_instance_id), sample);
}
INJECT_CHECK(nvmlGpmMigSampleGet);

INJECT_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!get || get->version != NVML_GPM_METRICS_GET_VERSION || get->numMetrics > NVML_GPM_METRIC_MAX)
    return NVML_ERROR_INVALID_ARGUMENT;
  const nvmlGpmSample_st* a = get->sample1;
  const nvmlGpmSample_st* b = get->sample2;
  auto known = [&](const nvmlGpmSample_st* p) {
    return std::any_of(s.gpm_samples.begin(), s.gpm_samples.end(),
                       [&](const auto& q) { return q.get() == p; });
  };
  // Two samples of the same device, taken in that order.
  if (!known(a) || !known(b) || a->values.is_null() || b->values.is_null() || a->gpu != b->gpu ||
      a->gpu_instance != b->gpu_instance || !(a->time < b->time)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  static const struct {
    unsigned id;
    const char* key;
    const char* unit;
  } kKeys[] = {
      {NVML_GPM_METRIC_GRAPHICS_UTIL, "graphics_util", "%"},
      {NVML_GPM_METRIC_SM_UTIL, "sm_util", "%"},
      {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy", "%"},
      {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "any_tensor_util", "%"},
      {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram_bw_util", "%"},
      {NVML_GPM_METRIC_FP64_UTIL, "fp64_util", "%"},
      {NVML_GPM_METRIC_FP32_UTIL, "fp32_util", "%"},
      {NVML_GPM_METRIC_FP16_UTIL, "fp16_util", "%"},
      {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcie_tx_mibps", "MiB/sec"},
      {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcie_rx_mibps", "MiB/sec"},
      {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, "nvlink_rx_mibps", "MiB/sec"},
      {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, "nvlink_tx_mibps", "MiB/sec"},
  };
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    m.value = 0;
    for (const auto& k : kKeys) {
      if (k.id != m.metricId) continue;
      m.metricInfo.shortName = const_cast<char*>(k.key);
      m.metricInfo.longName = const_cast<char*>(k.key);
      m.metricInfo.unit = const_cast<char*>(k.unit);
      if (b->values.contains(k.key) && b->values.at(k.key).is_number()) {
        m.value = b->values.at(k.key).get<double>();
        m.nvmlReturn = NVML_SUCCESS;
      }
    }
  }
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlGpmMetricsGet);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
                                                           unsigned int* utilization,
                                                           unsigned int* sampling_period_us) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!sampling_period_us) return NVML_ERROR_INVALID_ARGUMENT;
  *sampling_period_us = 167000;
  return number(s, device, "encoder", "enc_util", utilization);
}
INJECT_CHECK(nvmlDeviceGetEncoderUtilization);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
                                                           unsigned int* utilization,
                                                           unsigned int* sampling_period_us) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!sampling_period_us) return NVML_ERROR_INVALID_ARGUMENT;
  *sampling_period_us = 167000;
  return number(s, device, "decoder", "dec_util", utilization);
}
INJECT_CHECK(nvmlDeviceGetDecoderUtilization);

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                      nvmlMemory_v2_t* memory) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const Gpu* g = nullptr;
  if (nvmlReturn_t r = check(s, device, "memory", &g); r != NVML_SUCCESS) return r;
  if (!memory || memory->version != nvmlMemory_v2) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  const json& v = values(s, device->gpu);
  unsigned long long used = std::min(v.value("memory_used_mib", 0ULL) << 20, g->memory_total);
  unsigned long long reserved =
      std::min(v.value("memory_reserved_mib", 0ULL) << 20, g->memory_total - used);
  memory->total = g->memory_total;
  memory->reserved = reserved;
  memory->used = used;
  memory->free = g->memory_total - used - reserved;
  return NVML_SUCCESS;
}
INJECT_CHECK(nvmlDeviceGetMemoryInfo_v2);

#endif  // POLYACCEL_INJECT_PARTIAL

// ---- the test's control, not part of NVML ------------------------------------------------------

// Makes `step` of the scenario current (past the last step, the last one holds) and delivers the
// events it lists to every event set on which their device is registered.
INJECT_EXPORT void polyaccel_inject_set_step(unsigned step) {
  State& s = state();
  std::lock_guard lock(s.mu);
#ifndef POLYACCEL_INJECT_PARTIAL
  // The NVLink counters count the time until now at the old step's rates.
  if (s.init_count > 0) {
    auto now = std::chrono::system_clock::now();
    for (size_t gpu = 0; gpu < s.gpus.size(); ++gpu) {
      if (s.gpus[gpu].nvlink_counted != std::chrono::system_clock::time_point{})
        advance_nvlink(s, gpu, now);
    }
  }
#endif
  s.step = step;
  if (s.init_count == 0) return;
  for (auto& set : s.event_sets) {
    for (const auto& r : set->registered)
      queue_events(s, *set, r.gpu, r.mask);
  }
  s.events_cv.notify_all();
}

// ---- MIG partitioning: profiles, placements, instance control (its own file) -------------------
#include "inject_nvml_mig.inc"  // NOLINT(build/include): shares this file's scenario state
