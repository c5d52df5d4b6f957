// Our test build of libamd_smi.so: the amdsmi_* C functions the amd-smi backend calls, with
// amdsmi.h's names and ABI (our declarations in src/discover/accel/amd_smi_abi.h; each exported
// function is checked against them at compile time), answering from a JSON scenario (README.md in
// this folder) read at amdsmi_init from the file named by AMD_SMI_INJECT_SCENARIO. A test moves
// the scenario to another step through polyaccel_inject_set_step, which it finds with dlsym; the
// backend never calls it.
//
// Built twice: inject_amd_smi exports every function; inject_amd_smi_partial
// (POLYACCEL_INJECT_PARTIAL) leaves about half of them out, as an old or trimmed library would.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../amd_scenario.h"
#include "discover/accel/amd_smi_abi.h"

using namespace polyaccel::amdsmi;  // NOLINT(google-build-using-namespace)
using json = nlohmann::json;
namespace inject = polyaccel::inject;

#define AMDSMI_API extern "C" __attribute__((visibility("default")))
// Checks an exported function against the ABI's declaration of its type.
#define INJECT_CHECK(function, type) \
  static_assert(std::is_same_v<decltype(function), type>, #function)

namespace {

// ---- the scenario --------------------------------------------------------------------------

// One device at one step. Values carry over from the step before; an absent one was never given
// and its getter answers "not supported".
struct Values {
  std::optional<std::uint32_t> busy_percent;
  std::optional<std::uint32_t> memory_busy_percent;
  std::optional<std::uint64_t> vram_used;
  std::optional<std::int64_t> temperature_edge;
  std::optional<std::int64_t> temperature_hotspot;
  std::optional<std::int64_t> temperature_vram;
  std::vector<std::int64_t> temperature_hbm;
  std::optional<std::uint32_t> socket_power_watts;
  std::optional<std::uint32_t> average_power_watts;
  std::optional<std::uint64_t> energy_counter;
  std::optional<std::uint32_t> sclk_mhz;
  std::optional<std::uint32_t> mclk_mhz;
  std::optional<std::uint64_t> pcie_replay;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> ecc;  // block → (ce, ue)
  std::vector<RetiredPageRecord> bad_pages;
  std::optional<std::uint64_t> indep_throttle_status;
  std::optional<json> pcie;       // the metrics table's PCIe counters (v1.5 table when given)
  std::optional<json> metrics;    // its v1.6/v1.7 fields (a v1.7 table when given with pcie)
  std::optional<json> violation;  // the violation status's counters and percentages
  std::optional<std::uint64_t> gtt_used;
  std::optional<std::uint64_t> visible_vram_used;
  std::optional<std::set<std::string>> violation_active;  // the flags set; unset: unsupported
  Status lost = kSuccess;  // what every call on the device returns, if not success
};

struct Device {
  std::string bus_id;
  Bdf bdf = 0;
  std::string uuid;
  std::string name;
  std::string board_name;
  std::string model_number;  // the board's part number
  std::string asic_serial;
  std::string serial;
  std::uint64_t vram_bytes = 0;
  std::uint64_t gtt_bytes = 0;
  std::uint64_t visible_vram_bytes = 0;
  std::uint64_t target_graphics_version = ~0ULL;
  std::string compute_partition;
  std::string memory_partition;
  std::vector<std::string> xgmi_peers;
  std::optional<double> power_cap_watts;
  std::uint32_t max_pcie_speed_mts = 32000;  // amdsmi_get_pcie_info's pcie_static
  std::uint64_t ecc_enabled_blocks = 0;
  float energy_resolution_uj = 15.259f;
  std::set<std::string> unsupported;
  std::vector<Values> steps;  // one per scenario step
};

// A socket holds the processors of one GPU (several in a compute partition mode).
struct Socket {
  std::vector<std::size_t> devices;
};

struct Event {
  std::size_t device = 0;
  std::uint32_t type = 0;
  std::string message;
};

struct Scenario {
  Version version{26, 2, 1, "polyaccel-inject"};
  std::string driver_version;
  Status init_error = kSuccess;
  std::size_t event_record_size = 0;  // 80 or 272; 0: as the version has it
  std::vector<Device> devices;
  std::vector<Socket> sockets;
  std::vector<std::vector<Event>> events;  // per step
};

struct State {
  std::mutex mutex;
  std::condition_variable events_ready;
  Scenario scenario;
  int refcount = 0;
  std::size_t step = 0;
  std::deque<Event> pending;
  std::map<std::size_t, std::uint64_t> subscribed;  // device → event mask
};

State& state() {
  static State s;
  return s;
}

Status status_named(const std::string& name) {
  static const std::map<std::string, Status> names = {
      {"INVAL", kInval},
      {"NOT_SUPPORTED", kNotSupported},
      {"FILE_ERROR", kFileError},
      {"NO_PERM", kNoPerm},
      {"INIT_ERROR", kInitError},
      {"NOT_FOUND", kNotFound},
      {"NOT_INIT", kNotInit},
      {"DRM_ERROR", kDrmError},
      {"API_FAILED", kApiFailed},
      {"IO", kIo},
      {"BUSY", kBusy},
      {"DRIVER_NOT_LOADED", kDriverNotLoaded},
      {"UNEXPECTED_DATA", kUnexpectedData},
  };
  auto it = names.find(name);
  if (it == names.end()) throw std::runtime_error("unknown status name " + name);
  return it->second;
}

std::uint32_t event_type_named(const std::string& name) {
  static const std::map<std::string, std::uint32_t> types = {
      {"vm_fault", kEventVmFault},
      {"thermal_throttle", kEventThermalThrottle},
      {"gpu_pre_reset", kEventGpuPreReset},
      {"gpu_post_reset", kEventGpuPostReset},
  };
  auto it = types.find(name);
  if (it == types.end()) throw std::runtime_error("unknown event type " + name);
  return it->second;
}

const std::set<std::string>& field_names() {
  static const std::set<std::string> names = {
      "uuid",
      "asic_info",
      "board_info",
      "driver_info",
      "vram_total",
      "vram_used",
      "gtt",
      "visible_vram",
      "compute_partition",
      "memory_partition",
      "xgmi",
      "power_cap",
      "ecc_enabled",
      "activity",
      "temperature_edge",
      "temperature_hotspot",
      "temperature_vram",
      "temperature_hbm",
      "power",
      "energy",
      "gfx_clock",
      "mem_clock",
      "pcie_replay",
      "ecc",
      "ecc_block",
      "bad_pages",
      "gpu_metrics",
      "violation_status",
      "events",
  };
  return names;
}

// The per-XCC violation kinds, as amdsmi_violation_status_t names its arrays.
const std::set<std::string>& xcc_violation_kinds() {
  static const std::set<std::string> kinds = {"gfx_clk_below_host_limit_pwr",
                                              "gfx_clk_below_host_limit_thm", "low_utilization",
                                              "gfx_clk_below_host_limit_total"};
  return kinds;
}

const std::set<std::string>& violation_flags() {
  static const std::set<std::string> flags = {"prochot_thrm", "ppt_pwr", "socket_thrm", "vr_thrm",
                                              "hbm_thrm"};
  return flags;
}

Bdf bdf_of(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) {
    throw std::runtime_error("bad PCI bus id " + bus_id);
  }
  return (Bdf{domain} << 16) | (bus << 8) | (dev << 3) | fn;
}

// "gfx942" → KFD's gfx_target_version 90402 (major, minor, stepping as decimal pairs), which is
// what amd-smi puts in target_graphics_version.
std::uint64_t target_version(const std::string& gfx) {
  if (gfx.size() < 6 || gfx.rfind("gfx", 0) != 0) throw std::runtime_error("bad gfx name " + gfx);
  std::string digits = gfx.substr(3);
  std::uint64_t major = std::stoull(digits.substr(0, digits.size() - 2));
  std::uint64_t minor = std::stoull(digits.substr(digits.size() - 2, 1), nullptr, 16);
  std::uint64_t stepping = std::stoull(digits.substr(digits.size() - 1), nullptr, 16);
  return major * 10000 + minor * 100 + stepping;
}

void apply_values(const json& j, Values& v) {
  inject::check_keys(j,
                     {"busy_percent",
                      "memory_busy_percent",
                      "vram_used_bytes",
                      "temperature_edge_c",
                      "temperature_junction_c",
                      "temperature_memory_c",
                      "temperature_hbm_c",
                      "power_average_watts",
                      "socket_power_watts",
                      "energy_counter",
                      "sclk_mhz",
                      "mclk_mhz",
                      "pcie_replay_count",
                      "ecc",
                      "bad_pages",
                      "indep_throttle_status",
                      "pcie",
                      "violation_active",
                      "lost",
                      "metrics",
                      "violation",
                      "gtt_used_bytes",
                      "visible_vram_used_bytes"},
                     "step values");
  auto take = [&](const char* key, auto& field) {
    if (j.contains(key))
      field = j.at(key).get<typename std::decay_t<decltype(field)>::value_type>();
  };
  take("busy_percent", v.busy_percent);
  take("memory_busy_percent", v.memory_busy_percent);
  take("vram_used_bytes", v.vram_used);
  take("temperature_edge_c", v.temperature_edge);
  take("temperature_junction_c", v.temperature_hotspot);
  take("temperature_memory_c", v.temperature_vram);
  take("power_average_watts", v.average_power_watts);
  take("socket_power_watts", v.socket_power_watts);
  take("energy_counter", v.energy_counter);
  take("sclk_mhz", v.sclk_mhz);
  take("mclk_mhz", v.mclk_mhz);
  take("pcie_replay_count", v.pcie_replay);
  take("indep_throttle_status", v.indep_throttle_status);
  if (j.contains("pcie")) v.pcie = j.at("pcie");
  if (j.contains("metrics")) v.metrics = inject::checked_metrics(j.at("metrics"));
  if (j.contains("violation")) {
    inject::check_keys(j.at("violation"), {"acc_counter", "acc", "per", "xcc_acc", "xcc_per"},
                       "violation");
    for (const char* key : {"acc", "per"}) {
      if (j.at("violation").value(key, json::array()).size() > 5) {
        throw std::runtime_error(std::string("violation: five ") + key + " at most");
      }
    }
    // "xcc_acc"/"xcc_per": {"<kind>": [one value per XCC of the first partition]}.
    for (const char* key : {"xcc_acc", "xcc_per"}) {
      const json lists = j.at("violation").value(key, json::object());
      for (const auto& [kind, list] : lists.items()) {
        if (!xcc_violation_kinds().count(kind)) {
          throw std::runtime_error(std::string("violation: unknown ") + key + " kind " + kind);
        }
        if (list.size() > 8) throw std::runtime_error("violation: eight XCCs at most");
      }
    }
    v.violation = j.at("violation");
  }
  take("gtt_used_bytes", v.gtt_used);
  take("visible_vram_used_bytes", v.visible_vram_used);
  if (j.contains("temperature_hbm_c")) {
    v.temperature_hbm = j.at("temperature_hbm_c").get<std::vector<std::int64_t>>();
  }
  if (j.contains("ecc")) {
    for (const auto& [block, counts] : j.at("ecc").items()) {
      inject::gpu_block_named(block);
      v.ecc[block] = {counts.at("correctable").get<std::uint64_t>(),
                      counts.at("uncorrectable").get<std::uint64_t>()};
    }
  }
  if (j.contains("bad_pages")) {
    v.bad_pages.clear();
    for (const auto& [address, status] : inject::bad_pages(j.at("bad_pages"))) {
      v.bad_pages.push_back(RetiredPageRecord{address, 4096, status});
    }
  }
  if (j.contains("violation_active")) {
    std::set<std::string> active;
    for (const auto& f : j.at("violation_active")) {
      if (!violation_flags().count(f.get<std::string>())) {
        throw std::runtime_error("unknown violation flag " + f.get<std::string>());
      }
      active.insert(f.get<std::string>());
    }
    v.violation_active = active;
  }
  if (j.contains("lost")) {
    const auto& lost = j.at("lost");
    if (lost.is_boolean()) {
      v.lost = lost.get<bool>() ? kNotFound : kSuccess;
    } else {
      v.lost = status_named(lost.get<std::string>());
    }
  }
}

Device parse_device(const json& j, const std::set<std::string>& unsupported_everywhere) {
  inject::check_keys(
      j,
      {"pci_bus_id", "uuid", "name", "board_name", "model_number", "asic_serial", "serial",
       "vram_bytes", "gtt_bytes", "visible_vram_bytes", "gfx_version", "compute_partition",
       "memory_partition", "xgmi_peers", "power_cap_watts", "ecc_enabled_blocks",
       "energy_resolution_uj", "max_pcie_speed_mts", "unsupported"},
      "device");
  Device d;
  d.bus_id = j.at("pci_bus_id").get<std::string>();
  d.bdf = bdf_of(d.bus_id);
  d.uuid = j.value("uuid", "");
  d.name = j.value("name", "");
  d.board_name = j.value("board_name", "");
  d.model_number = j.value("model_number", "");
  d.asic_serial = j.value("asic_serial", "");
  d.serial = j.value("serial", "");
  d.vram_bytes = j.value("vram_bytes", std::uint64_t{0});
  d.gtt_bytes = j.value("gtt_bytes", std::uint64_t{0});
  d.visible_vram_bytes = j.value("visible_vram_bytes", std::uint64_t{0});
  if (j.contains("gfx_version")) d.target_graphics_version = target_version(j.at("gfx_version"));
  d.compute_partition = j.value("compute_partition", "");
  d.memory_partition = j.value("memory_partition", "");
  d.xgmi_peers = j.value("xgmi_peers", std::vector<std::string>{});
  if (j.contains("power_cap_watts")) d.power_cap_watts = j.at("power_cap_watts").get<double>();
  d.max_pcie_speed_mts = j.value("max_pcie_speed_mts", d.max_pcie_speed_mts);
  for (const auto& b : j.value("ecc_enabled_blocks", std::vector<std::string>{})) {
    d.ecc_enabled_blocks |= inject::gpu_block_named(b);
  }
  d.energy_resolution_uj = j.value("energy_resolution_uj", 15.259f);
  d.unsupported = unsupported_everywhere;
  if (j.contains("unsupported")) {
    auto own = inject::unsupported_list(j.at("unsupported"), field_names());
    d.unsupported.insert(own.begin(), own.end());
  }
  return d;
}

std::size_t device_named(const Scenario& sc, const std::string& bus_id) {
  for (std::size_t i = 0; i < sc.devices.size(); ++i) {
    if (sc.devices[i].bus_id == bus_id) return i;
  }
  throw std::runtime_error("no device " + bus_id);
}

Scenario parse_scenario(const json& j) {
  inject::check_keys(j,
                     {"comment", "library_version", "driver_version", "init_error",
                      "event_record_size", "unsupported", "devices", "steps"},
                     "scenario");
  Scenario sc;
  if (j.contains("library_version")) {
    unsigned major = 0, minor = 0, release = 0;
    if (std::sscanf(j.at("library_version").get<std::string>().c_str(), "%u.%u.%u", &major, &minor,
                    &release) != 3) {
      throw std::runtime_error("bad library_version");
    }
    sc.version = Version{major, minor, release, "polyaccel-inject"};
  }
  sc.driver_version = j.value("driver_version", "");
  if (j.contains("init_error")) sc.init_error = status_named(j.at("init_error"));
  sc.event_record_size = j.value("event_record_size", std::size_t{0});
  if (sc.event_record_size != 0 && sc.event_record_size != 80 &&
      sc.event_record_size != sizeof(EventData)) {
    throw std::runtime_error("event_record_size must be 80 or 272");
  }
  std::set<std::string> everywhere;
  if (j.contains("unsupported"))
    everywhere = inject::unsupported_list(j.at("unsupported"), field_names());
  for (const auto& dj : j.value("devices", json::array())) {
    sc.devices.push_back(parse_device(dj, everywhere));
    // The partitions of one GPU (one PCI device, the partition number in the function, as
    // amd-smi reports them) share a socket.
    auto same = std::find_if(sc.sockets.begin(), sc.sockets.end(), [&](const Socket& s) {
      return (sc.devices[s.devices.front()].bdf >> 3) == (sc.devices.back().bdf >> 3);
    });
    if (same == sc.sockets.end()) {
      sc.sockets.push_back(Socket{{sc.devices.size() - 1}});
    } else {
      same->devices.push_back(sc.devices.size() - 1);
    }
  }
  std::vector<std::vector<Values>> values;
  inject::read_steps<Values, Event>(
      j.value("steps", json::array()), sc.devices.size(),
      [&](const std::string& bus_id) { return device_named(sc, bus_id); }, apply_values,
      [&](const json& ej) {
        return Event{device_named(sc, ej.at("device").get<std::string>()),
                     event_type_named(ej.at("type").get<std::string>()), ej.value("message", "")};
      },
      values, sc.events);
  for (std::size_t i = 0; i < sc.devices.size(); ++i)
    sc.devices[i].steps = std::move(values[i]);
  return sc;
}

// Caller holds the lock.
void enqueue_events(State& s) {
  for (const Event& e : s.scenario.events[s.step])
    s.pending.push_back(e);
  s.events_ready.notify_all();
}

// ---- the calls ------------------------------------------------------------------------------

// The device a call is about, once the library is initialised, the handle is one of ours, the
// device is not lost and `field` is supported; else the status the call returns.
struct Call {
  Status status = kSuccess;
  Device* dev = nullptr;
  const Values* now = nullptr;
};

Call begin(ProcessorHandle handle, const char* field) {
  State& s = state();
  Call c;
  if (s.refcount == 0) {
    c.status = kNotInit;
    return c;
  }
  for (Device& d : s.scenario.devices) {
    if (&d == handle) c.dev = &d;
  }
  if (!c.dev) {
    c.status = kInval;
    return c;
  }
  c.now = &c.dev->steps[s.step];
  if (c.now->lost != kSuccess) {
    c.status = c.now->lost;
  } else if (c.dev->unsupported.count(field)) {
    c.status = kNotSupported;
  }
  return c;
}

template <class T, class U>
Status put(const std::optional<T>& value, U* out) {
  if (!value) return kNotSupported;
  *out = static_cast<U>(*value);
  return kSuccess;
}

[[maybe_unused]] Status put_string(const std::string& value, char* out, std::size_t len) {
  if (value.empty()) return kNotSupported;
  if (len == 0) return kInval;
  std::size_t n = std::min(value.size(), len - 1);
  std::memcpy(out, value.data(), n);
  out[n] = '\0';
  return n < value.size() ? kInsufficientSize : kSuccess;
}

void copy_field(char* out, std::size_t size, const std::string& value) {
  std::snprintf(out, size, "%s", value.c_str());
}

// A getter of one device value: locks, checks, then runs `read` on the device and its values.
template <class Read>
Status device_call(ProcessorHandle handle, const char* field, const void* out, Read read) {
  if (!out) return kInval;
  std::lock_guard lock(state().mutex);
  Call c = begin(handle, field);
  if (c.status != kSuccess) return c.status;
  return read(*c.dev, *c.now);
}

}  // namespace

// ---- exported: every build ------------------------------------------------------------------

AMDSMI_API Status amdsmi_init(std::uint64_t init_flags) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.refcount > 0) {
    ++s.refcount;
    return kSuccess;
  }
  if (!(init_flags & kInitAmdGpus)) return kInval;  // only GPUs are simulated
  const char* path = std::getenv("AMD_SMI_INJECT_SCENARIO");
  try {
    if (!path || !*path) throw std::runtime_error("AMD_SMI_INJECT_SCENARIO is not set");
    std::ifstream in(path);
    if (!in) throw std::runtime_error(std::string("cannot read ") + path);
    s.scenario = parse_scenario(json::parse(in));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "amd_smi inject: %s\n", e.what());
    return kInitError;
  }
  if (s.scenario.init_error != kSuccess) return s.scenario.init_error;
  s.refcount = 1;
  s.step = 0;
  s.pending.clear();
  s.subscribed.clear();
  enqueue_events(s);
  return kSuccess;
}
INJECT_CHECK(amdsmi_init, InitFn);

AMDSMI_API Status amdsmi_shut_down() {
  std::lock_guard lock(state().mutex);
  if (state().refcount > 0) --state().refcount;
  return kSuccess;
}
INJECT_CHECK(amdsmi_shut_down, ShutDownFn);

AMDSMI_API Status amdsmi_status_code_to_string(Status status, const char** text) {
  if (!text) return kInval;
  switch (status) {
    case kSuccess:
      *text = "AMDSMI_STATUS_SUCCESS - Call succeeded";
      break;
    case kNotSupported:
      *text = "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported";
      break;
    case kInitError:
      *text =
          "AMDSMI_STATUS_INIT_ERROR - An error occurred when initializing internal data "
          "structures";
      break;
    case kDriverNotLoaded:
      *text = "AMDSMI_STATUS_DRIVER_NOT_LOADED - Processor driver not loaded";
      break;
    case kNotFound:
      *text = "AMDSMI_STATUS_NOT_FOUND - Device Not found";
      break;
    default:
      *text = status_name(status);  // the name alone, without amd-smi's explanation
  }
  return kSuccess;
}
INJECT_CHECK(amdsmi_status_code_to_string, StatusCodeToStringFn);

AMDSMI_API Status amdsmi_get_socket_handles(std::uint32_t* count, SocketHandle* sockets) {
  if (!count) return kInval;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.refcount == 0) return kNotInit;
  const auto n = static_cast<std::uint32_t>(s.scenario.sockets.size());
  if (!sockets) {
    *count = n;
    return kSuccess;
  }
  std::uint32_t k = 0;
  for (; k < std::min(*count, n); ++k)
    sockets[k] = &s.scenario.sockets[k];
  *count = k;
  return k < n ? kInsufficientSize : kSuccess;
}
INJECT_CHECK(amdsmi_get_socket_handles, SocketHandlesFn);

AMDSMI_API Status amdsmi_get_processor_handles(SocketHandle socket, std::uint32_t* count,
                                               ProcessorHandle* processors) {
  if (!count) return kInval;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.refcount == 0) return kNotInit;
  const Socket* found = nullptr;
  for (const Socket& so : s.scenario.sockets) {
    if (&so == socket) found = &so;
  }
  if (!found) return kInval;
  const auto n = static_cast<std::uint32_t>(found->devices.size());
  if (!processors) {
    *count = n;
    return kSuccess;
  }
  std::uint32_t k = 0;
  for (; k < std::min(*count, n); ++k)
    processors[k] = &s.scenario.devices[found->devices[k]];
  *count = k;
  return k < n ? kInsufficientSize : kSuccess;
}
INJECT_CHECK(amdsmi_get_processor_handles, ProcessorHandlesFn);

AMDSMI_API Status amdsmi_get_processor_type(ProcessorHandle p, std::uint32_t* type) {
  if (!type) return kInval;
  std::lock_guard lock(state().mutex);
  Call c = begin(p, "");
  if (c.status == kInval || c.status == kNotInit) return c.status;
  *type = kProcessorTypeAmdGpu;  // known from enumeration, even for a lost device
  return kSuccess;
}
INJECT_CHECK(amdsmi_get_processor_type, ProcessorTypeFn);

AMDSMI_API Status amdsmi_get_gpu_device_bdf(ProcessorHandle p, Bdf* bdf) {
  return device_call(p, "bdf", bdf, [&](const Device& d, const Values&) {
    *bdf = d.bdf;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_device_bdf, DeviceBdfFn);

AMDSMI_API Status amdsmi_get_gpu_driver_info(ProcessorHandle p, DriverInfo* info) {
  return device_call(p, "driver_info", info, [&](const Device&, const Values&) {
    *info = DriverInfo{};
    if (state().scenario.driver_version.empty()) return kNotSupported;
    copy_field(info->driver_version, sizeof info->driver_version, state().scenario.driver_version);
    copy_field(info->driver_name, sizeof info->driver_name, "amdgpu");
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_driver_info, DriverInfoFn);

AMDSMI_API Status amdsmi_get_gpu_memory_total(ProcessorHandle p, std::uint32_t type,
                                              std::uint64_t* total) {
  const char* field = type == kMemTypeGtt       ? "gtt"
                      : type == kMemTypeVisVram ? "visible_vram"
                                                : "vram_total";
  return device_call(p, field, total, [&](const Device& d, const Values&) {
    const std::uint64_t bytes = type == kMemTypeVram      ? d.vram_bytes
                                : type == kMemTypeGtt     ? d.gtt_bytes
                                : type == kMemTypeVisVram ? d.visible_vram_bytes
                                                          : 0;
    if (bytes == 0) return kNotSupported;
    *total = bytes;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_memory_total, MemoryFn);

AMDSMI_API Status amdsmi_get_gpu_memory_usage(ProcessorHandle p, std::uint32_t type,
                                              std::uint64_t* used) {
  const char* field = type == kMemTypeGtt       ? "gtt"
                      : type == kMemTypeVisVram ? "visible_vram"
                                                : "vram_used";
  return device_call(p, field, used, [&](const Device&, const Values& v) {
    return type == kMemTypeVram      ? put(v.vram_used, used)
           : type == kMemTypeGtt     ? put(v.gtt_used, used)
           : type == kMemTypeVisVram ? put(v.visible_vram_used, used)
                                     : kNotSupported;
  });
}
INJECT_CHECK(amdsmi_get_gpu_memory_usage, MemoryFn);

// The field the library has no value for is UINT16_MAX, as amd-smi fills it.
AMDSMI_API Status amdsmi_get_gpu_activity(ProcessorHandle p, EngineUsage* usage) {
  return device_call(p, "activity", usage, [&](const Device&, const Values& v) {
    if (!v.busy_percent) return kNotSupported;
    *usage = EngineUsage{};
    usage->gfx_activity = *v.busy_percent;
    usage->umc_activity = v.memory_busy_percent.value_or(UINT16_MAX);
    usage->mm_activity = UINT16_MAX;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_activity, ActivityFn);

// Degrees C, only the current value.
AMDSMI_API Status amdsmi_get_temp_metric(ProcessorHandle p, std::uint32_t sensor,
                                         std::uint32_t metric, std::int64_t* celsius) {
  static const char* const kFields[] = {"temperature_edge", "temperature_hotspot",
                                        "temperature_vram"};
  const char* field = sensor <= kTempTypeVram ? kFields[sensor] : "temperature_hbm";
  return device_call(p, field, celsius, [&](const Device&, const Values& v) {
    if (metric != kTempCurrent || sensor > kTempTypeHbm3) return kNotSupported;
    std::optional<std::int64_t> c;
    if (sensor == kTempTypeEdge) c = v.temperature_edge;
    if (sensor == kTempTypeHotspot) c = v.temperature_hotspot;
    if (sensor == kTempTypeVram) c = v.temperature_vram;
    if (sensor >= kTempTypeHbm0 && sensor - kTempTypeHbm0 < v.temperature_hbm.size()) {
      c = v.temperature_hbm[sensor - kTempTypeHbm0];
    }
    return put(c, celsius);
  });
}
INJECT_CHECK(amdsmi_get_temp_metric, TempMetricFn);

// Watts; UINT32_MAX for what the device does not report, as amd-smi fills it.
AMDSMI_API Status amdsmi_get_power_info(ProcessorHandle p, PowerInfo* info) {
  return device_call(p, "power", info, [&](const Device& d, const Values& v) {
    if (!v.socket_power_watts && !v.average_power_watts) return kNotSupported;
    *info = PowerInfo{};
    info->current_socket_power = v.socket_power_watts.value_or(UINT32_MAX);
    info->average_socket_power = v.average_power_watts.value_or(UINT32_MAX);
    info->socket_power = v.socket_power_watts.value_or(info->average_socket_power);
    info->gfx_voltage = info->soc_voltage = info->mem_voltage = UINT32_MAX;
    info->power_limit =
        d.power_cap_watts ? static_cast<std::uint32_t>(*d.power_cap_watts) : UINT32_MAX;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_power_info, PowerInfoFn);

AMDSMI_API Status amdsmi_get_clock_info(ProcessorHandle p, std::uint32_t clock, ClkInfo* info) {
  const char* field = clock == kClkTypeGfx ? "gfx_clock" : clock == kClkTypeMem ? "mem_clock" : "";
  return device_call(p, field, info, [&](const Device&, const Values& v) {
    const std::optional<std::uint32_t> mhz = clock == kClkTypeGfx   ? v.sclk_mhz
                                             : clock == kClkTypeMem ? v.mclk_mhz
                                                                    : std::nullopt;
    if (!mhz) return kNotSupported;
    *info = ClkInfo{};
    info->clk = *mhz;
    info->min_clk = clock == kClkTypeGfx ? 500 : 900;
    info->max_clk = clock == kClkTypeGfx ? 2100 : 1300;
    info->clk_deep_sleep = *mhz < info->min_clk;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_clock_info, ClockInfoFn);

// ---- exported: the full build only ----------------------------------------------------------
#ifndef POLYACCEL_INJECT_PARTIAL

AMDSMI_API Status amdsmi_get_lib_version(Version* version) {
  if (!version) return kInval;
  std::lock_guard lock(state().mutex);
  *version = state().scenario.version;
  return kSuccess;
}
INJECT_CHECK(amdsmi_get_lib_version, LibVersionFn);

AMDSMI_API Status amdsmi_get_gpu_device_uuid(ProcessorHandle p, unsigned int* length, char* uuid) {
  if (!length) return kInval;
  return device_call(p, "uuid", uuid, [&](const Device& d, const Values&) {
    Status st = put_string(d.uuid, uuid, *length);
    *length = static_cast<unsigned int>(d.uuid.size() + 1);
    return st;
  });
}
INJECT_CHECK(amdsmi_get_gpu_device_uuid, DeviceUuidFn);

AMDSMI_API Status amdsmi_get_gpu_asic_info(ProcessorHandle p, AsicInfo* info) {
  return device_call(p, "asic_info", info, [&](const Device& d, const Values&) {
    *info = AsicInfo{};
    copy_field(info->market_name, sizeof info->market_name, d.name);
    copy_field(info->vendor_name, sizeof info->vendor_name,
               "Advanced Micro Devices Inc. [AMD/ATI]");
    info->vendor_id = 0x1002;
    info->device_id = 0x74a1;  // MI300X
    copy_field(info->asic_serial, sizeof info->asic_serial, d.asic_serial);
    info->oam_id = UINT32_MAX;
    info->num_of_compute_units = 304;
    info->target_graphics_version = d.target_graphics_version;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_asic_info, AsicInfoFn);

// Fills only the fields before pcie_static.slot_type: the caller's buffer is the real struct's.
AMDSMI_API Status amdsmi_get_pcie_info(ProcessorHandle p, PcieStaticPrefix* info) {
  return device_call(p, "pcie_info", info, [&](const Device& d, const Values&) {
    info->max_pcie_width = 16;
    info->max_pcie_speed = d.max_pcie_speed_mts;
    info->pcie_interface_version = 5;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_pcie_info, PcieInfoFn);

AMDSMI_API Status amdsmi_get_gpu_board_info(ProcessorHandle p, BoardInfo* info) {
  return device_call(p, "board_info", info, [&](const Device& d, const Values&) {
    *info = BoardInfo{};
    copy_field(info->product_serial, sizeof info->product_serial, d.serial);
    copy_field(info->product_name, sizeof info->product_name, d.board_name);
    copy_field(info->model_number, sizeof info->model_number, d.model_number);
    copy_field(info->manufacturer_name, sizeof info->manufacturer_name, "AMD");
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_board_info, BoardInfoFn);

AMDSMI_API Status amdsmi_get_gpu_compute_partition(ProcessorHandle p, char* text,
                                                   std::uint32_t len) {
  return device_call(p, "compute_partition", text, [&](const Device& d, const Values&) {
    return put_string(d.compute_partition, text, len);
  });
}
INJECT_CHECK(amdsmi_get_gpu_compute_partition, PartitionFn);

AMDSMI_API Status amdsmi_get_gpu_memory_partition(ProcessorHandle p, char* text,
                                                  std::uint32_t len) {
  return device_call(p, "memory_partition", text, [&](const Device& d, const Values&) {
    return put_string(d.memory_partition, text, len);
  });
}
INJECT_CHECK(amdsmi_get_gpu_memory_partition, PartitionFn);

// XGMI, one hop, to the scenario's peers; PCIe through the host, two hops, to the others.
AMDSMI_API Status amdsmi_topo_get_link_type(ProcessorHandle src, ProcessorHandle dst,
                                            std::uint64_t* hops, std::uint32_t* type) {
  if (!type) return kInval;
  return device_call(src, "xgmi", hops, [&](const Device& d, const Values&) {
    Call to = begin(dst, "xgmi");
    if (to.status != kSuccess) return to.status;
    if (to.dev == &d) return kInval;
    bool xgmi = std::count(d.xgmi_peers.begin(), d.xgmi_peers.end(), to.dev->bus_id) > 0;
    *hops = xgmi ? 1 : 2;
    *type = xgmi ? kLinkTypeXgmi : kLinkTypePcie;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_topo_get_link_type, LinkTypeFn);

AMDSMI_API Status amdsmi_get_power_cap_info(ProcessorHandle p, std::uint32_t /*sensor*/,
                                            PowerCapInfo* info) {
  return device_call(p, "power_cap", info, [&](const Device& d, const Values&) {
    if (!d.power_cap_watts) return kNotSupported;
    *info = PowerCapInfo{};
    info->power_cap = info->default_power_cap =
        static_cast<std::uint64_t>(*d.power_cap_watts * 1e6);
    info->max_power_cap = info->power_cap;
    info->min_power_cap = 0;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_power_cap_info, PowerCapInfoFn);

AMDSMI_API Status amdsmi_get_gpu_ecc_enabled(ProcessorHandle p, std::uint64_t* blocks) {
  return device_call(p, "ecc_enabled", blocks, [&](const Device& d, const Values&) {
    *blocks = d.ecc_enabled_blocks;
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_ecc_enabled, U64Fn);

AMDSMI_API Status amdsmi_get_energy_count(ProcessorHandle p, std::uint64_t* counter,
                                          float* resolution_uj, std::uint64_t* timestamp) {
  if (!resolution_uj || !timestamp) return kInval;
  return device_call(p, "energy", counter, [&](const Device& d, const Values& v) {
    if (!v.energy_counter) return kNotSupported;
    *counter = *v.energy_counter;
    *resolution_uj = d.energy_resolution_uj;
    *timestamp = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now().time_since_epoch())
                                                .count());
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_energy_count, EnergyCountFn);

AMDSMI_API Status amdsmi_get_gpu_pci_replay_counter(ProcessorHandle p, std::uint64_t* count) {
  return device_call(p, "pcie_replay", count,
                     [&](const Device&, const Values& v) { return put(v.pcie_replay, count); });
}
INJECT_CHECK(amdsmi_get_gpu_pci_replay_counter, U64Fn);

// The counts of the blocks with ECC on, summed, as amd-smi sums them.
AMDSMI_API Status amdsmi_get_gpu_total_ecc_count(ProcessorHandle p, ErrorCount* counts) {
  return device_call(p, "ecc", counts, [&](const Device& d, const Values& v) {
    if (d.ecc_enabled_blocks == 0) return kNotSupported;
    *counts = ErrorCount{};
    for (const auto& [block, ce_ue] : v.ecc) {
      if (!(d.ecc_enabled_blocks & inject::gpu_block_named(block))) continue;
      counts->correctable_count += ce_ue.first;
      counts->uncorrectable_count += ce_ue.second;
    }
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_total_ecc_count, ErrorCountFn);

// One RAS block's counts; a block without ECC on has no RAS counters ("not supported").
AMDSMI_API Status amdsmi_get_gpu_ecc_count(ProcessorHandle p, std::uint64_t block,
                                           ErrorCount* counts) {
  return device_call(p, "ecc_block", counts, [&](const Device& d, const Values& v) {
    if (!(d.ecc_enabled_blocks & block)) return kNotSupported;
    *counts = ErrorCount{};
    for (const auto& [name, ce_ue] : v.ecc) {
      if (inject::gpu_block_named(name) != block) continue;
      counts->correctable_count = ce_ue.first;
      counts->uncorrectable_count = ce_ue.second;
    }
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_ecc_count, BlockErrorCountFn);

// With no records buffer: how many pages; else up to *num_pages records.
AMDSMI_API Status amdsmi_get_gpu_bad_page_info(ProcessorHandle p, std::uint32_t* num_pages,
                                               RetiredPageRecord* records) {
  return device_call(p, "bad_pages", num_pages, [&](const Device&, const Values& v) {
    const auto n = static_cast<std::uint32_t>(v.bad_pages.size());
    if (!records) {
      *num_pages = n;
      return kSuccess;
    }
    const std::uint32_t k = std::min(*num_pages, n);
    std::copy_n(v.bad_pages.begin(), k, records);
    *num_pages = k;
    return k < n ? kInsufficientSize : kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_bad_page_info, BadPageInfoFn);

// A v1.3 table (as MI200 reports); the throttle fields are all ones ("not available") when the
// step gives none, as on MI300.
AMDSMI_API Status amdsmi_get_gpu_metrics_info(ProcessorHandle p,
                                              polyaccel::amd::GpuMetricsPrefix* metrics) {
  return device_call(p, "gpu_metrics", metrics, [&](const Device& d, const Values& v) {
    polyaccel::amd::GpuMetricsPrefix m{};
    m.structure_size = sizeof m;
    m.format_revision = 1;
    m.content_revision = 3;
    m.temperature_edge = static_cast<std::uint16_t>(v.temperature_edge.value_or(UINT16_MAX));
    m.temperature_hotspot = static_cast<std::uint16_t>(v.temperature_hotspot.value_or(UINT16_MAX));
    m.throttle_status = UINT32_MAX;
    m.indep_throttle_status = v.indep_throttle_status.value_or(~0ULL);
    if (!v.pcie) {
      *metrics = m;
      return kSuccess;
    }
    // A v1.5 table (MI300) with the PCIe counters, at amdsmi_gpu_metrics_t's offsets; the
    // caller's buffer holds the whole struct (4544 bytes).
    constexpr std::size_t kSize = 4544;
    m.structure_size = kSize;
    m.content_revision = 5;
    auto* raw = reinterpret_cast<unsigned char*>(metrics);
    std::memset(raw, 0xff, kSize);
    std::memcpy(raw, &m, sizeof m);
    const json& pc = *v.pcie;
    auto put = [&](std::size_t offset, auto value) {
      std::memcpy(raw + offset, &value, sizeof value);
    };
    put(74, static_cast<std::uint16_t>(pc.value("width", 16)));
    put(76, static_cast<std::uint16_t>(pc.value("speed_gts", 32.0) * 10));
    put(152, static_cast<std::uint64_t>(pc.value("bandwidth_gbs", 0)));
    put(160, static_cast<std::uint64_t>(pc.value("recovery", 0)));
    put(168, static_cast<std::uint64_t>(v.pcie_replay.value_or(0)));
    put(176, static_cast<std::uint64_t>(pc.value("replay_rollover", 0)));
    put(416, static_cast<std::uint32_t>(pc.value("nak_sent", 0)));
    put(420, static_cast<std::uint32_t>(pc.value("nak_received", 0)));
    if (!v.metrics) return kSuccess;
    // A v1.7 table (MI300 with a 6.14 driver): residencies, XGMI data, bandwidths, each
    // partition's XCCs (the GPU's table: the same through every partition's handle) and the
    // first partition's VCN and JPEG busy; what is not given stays all ones.
    using polyaccel::amd::GpuMetrics;
    using polyaccel::amd::GpuXcpMetrics;
    raw[3] = 7;
    constexpr std::size_t kXcp0 = offsetof(GpuMetrics, xcp_stats);
    const State& st = state();
    std::vector<std::optional<std::uint32_t>> partition_busy;
    for (const Socket& socket : st.scenario.sockets) {
      const bool ours = std::any_of(socket.devices.begin(), socket.devices.end(),
                                    [&](std::size_t i) { return &st.scenario.devices[i] == &d; });
      if (!ours) continue;
      for (std::size_t i : socket.devices)
        partition_busy.push_back(st.scenario.devices[i].steps[st.step].busy_percent);
    }
    inject::put_metrics_v17(raw, *v.metrics, partition_busy,
                            {.pcie_bandwidth_acc = offsetof(GpuMetrics, pcie_bandwidth_acc),
                             .xgmi_read = offsetof(GpuMetrics, xgmi_read_data_acc),
                             .xgmi_write = offsetof(GpuMetrics, xgmi_write_data_acc),
                             .accumulation_counter = offsetof(GpuMetrics, accumulation_counter),
                             .residencies = offsetof(GpuMetrics, prochot_residency_acc),
                             .num_partition = offsetof(GpuMetrics, num_partition),
                             .xcp0_gfx_busy = kXcp0 + offsetof(GpuXcpMetrics, gfx_busy_inst),
                             .xcp0_vcn_busy = kXcp0 + offsetof(GpuXcpMetrics, vcn_busy),
                             .xcp0_jpeg_busy = kXcp0 + offsetof(GpuXcpMetrics, jpeg_busy),
                             .vram_max_bandwidth = offsetof(GpuMetrics, vram_max_bandwidth),
                             .xcp_size = sizeof(GpuXcpMetrics)});
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_gpu_metrics_info, GpuMetricsFn);

AMDSMI_API Status amdsmi_get_violation_status(ProcessorHandle p, ViolationStatus* status) {
  return device_call(p, "violation_status", status, [&](const Device&, const Values& v) {
    if (!v.violation_active) return kNotSupported;
    std::memset(status, 0xff, sizeof *status);  // all ones: "not supported" in every field
    auto flag = [&](const char* name) -> std::uint8_t { return v.violation_active->count(name); };
    status->active_prochot_thrm = flag("prochot_thrm");
    status->active_ppt_pwr = flag("ppt_pwr");
    status->active_socket_thrm = flag("socket_thrm");
    status->active_vr_thrm = flag("vr_thrm");
    status->active_hbm_thrm = flag("hbm_thrm");
    if (!v.violation) return kSuccess;
    const json& vj = *v.violation;
    if (vj.contains("acc_counter")) status->acc_counter = vj.at("acc_counter").get<std::uint64_t>();
    // In the order prochot, ppt, socket, vr, hbm, as amdsmi_violation_status_t has them.
    std::uint64_t* acc[] = {&status->acc_prochot_thrm, &status->acc_ppt_pwr,
                            &status->acc_socket_thrm, &status->acc_vr_thrm, &status->acc_hbm_thrm};
    std::uint64_t* per[] = {&status->per_prochot_thrm, &status->per_ppt_pwr,
                            &status->per_socket_thrm, &status->per_vr_thrm, &status->per_hbm_thrm};
    std::size_t k = 0;
    for (const auto& x : vj.value("acc", json::array())) {
      if (k == 5) break;  // checked when the scenario was read
      *acc[k++] = x.get<std::uint64_t>();
    }
    k = 0;
    for (const auto& x : vj.value("per", json::array())) {
      if (k == 5) break;
      *per[k++] = x.get<std::uint64_t>();
    }
    // Partition 0's XCCs (row 0 of each [XCP][XCC] array).
    const std::map<std::string, std::pair<std::uint64_t*, std::uint64_t*>> xcc_rows = {
        {"gfx_clk_below_host_limit_pwr",
         {status->acc_gfx_clk_below_host_limit_pwr[0],
          status->per_gfx_clk_below_host_limit_pwr[0]}},
        {"gfx_clk_below_host_limit_thm",
         {status->acc_gfx_clk_below_host_limit_thm[0],
          status->per_gfx_clk_below_host_limit_thm[0]}},
        {"low_utilization", {status->acc_low_utilization[0], status->per_low_utilization[0]}},
        {"gfx_clk_below_host_limit_total",
         {status->acc_gfx_clk_below_host_limit_total[0],
          status->per_gfx_clk_below_host_limit_total[0]}},
    };
    for (const auto& [kind, row] : xcc_rows) {
      for (int which = 0; which < 2; ++which) {
        const json lists = vj.value(which == 0 ? "xcc_acc" : "xcc_per", json::object());
        std::uint64_t* out = which == 0 ? row.first : row.second;
        std::size_t xcc = 0;
        for (const auto& x : lists.value(kind, json::array())) {
          if (xcc == 8) break;  // checked when the scenario was read
          out[xcc++] = x.get<std::uint64_t>();
        }
      }
    }
    return kSuccess;
  });
}
INJECT_CHECK(amdsmi_get_violation_status, ViolationStatusFn);

AMDSMI_API Status amdsmi_init_gpu_event_notification(ProcessorHandle p) {
  std::lock_guard lock(state().mutex);
  Call c = begin(p, "events");
  if (c.status == kSuccess) {
    state().subscribed[static_cast<std::size_t>(c.dev - state().scenario.devices.data())] = 0;
  }
  return c.status;
}
INJECT_CHECK(amdsmi_init_gpu_event_notification, HandleFn);

AMDSMI_API Status amdsmi_set_gpu_event_notification_mask(ProcessorHandle p, std::uint64_t mask) {
  std::lock_guard lock(state().mutex);
  Call c = begin(p, "events");
  if (c.status != kSuccess) return c.status;
  auto it =
      state().subscribed.find(static_cast<std::size_t>(c.dev - state().scenario.devices.data()));
  if (it == state().subscribed.end()) return kNotInit;
  it->second = mask;
  return kSuccess;
}
INJECT_CHECK(amdsmi_set_gpu_event_notification_mask, EventMaskFn);

AMDSMI_API Status amdsmi_stop_gpu_event_notification(ProcessorHandle p) {
  std::lock_guard lock(state().mutex);
  for (std::size_t i = 0; i < state().scenario.devices.size(); ++i) {
    if (&state().scenario.devices[i] == p) return state().subscribed.erase(i) ? kSuccess : kInval;
  }
  return kInval;
}
INJECT_CHECK(amdsmi_stop_gpu_event_notification, HandleFn);

// Hands out the pending events of subscribed devices whose type is in the device's mask (the
// others are dropped, as KFD never queues them), waiting up to timeout_ms for the first. A
// library before 26 writes 80-byte records (a 64-byte message).
AMDSMI_API Status amdsmi_get_gpu_event_notification(int timeout_ms, std::uint32_t* num_elem,
                                                    EventData* data) {
  if (!num_elem || !data) return kInval;
  State& s = state();
  const std::uint32_t capacity = *num_elem;
  *num_elem = 0;
  std::unique_lock lock(s.mutex);
  auto wanted = [&](const Event& e) {
    auto it = s.subscribed.find(e.device);
    return it != s.subscribed.end() && (it->second & event_mask(e.type)) != 0;
  };
  auto ready = [&]() {
    while (!s.pending.empty() && !wanted(s.pending.front()))
      s.pending.pop_front();
    return !s.pending.empty();
  };
  if (!s.events_ready.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, 0)), ready)) {
    return kNoData;
  }
  const bool old_layout = s.scenario.version.major < kStructLayoutMajor;
  const std::size_t stride = s.scenario.event_record_size ? s.scenario.event_record_size
                             : old_layout                 ? 80
                                                          : sizeof(EventData);
  const std::size_t message_size = stride - offsetof(EventData, message);
  auto* out = reinterpret_cast<unsigned char*>(data);
  while (*num_elem < capacity && ready()) {
    const Event& e = s.pending.front();
    unsigned char* entry = out + *num_elem * stride;
    std::memset(entry, 0, stride);
    ProcessorHandle handle = &s.scenario.devices[e.device];
    std::memcpy(entry + offsetof(EventData, processor_handle), &handle, sizeof handle);
    std::memcpy(entry + offsetof(EventData, event), &e.type, sizeof e.type);
    std::snprintf(reinterpret_cast<char*>(entry + offsetof(EventData, message)), message_size, "%s",
                  e.message.c_str());
    s.pending.pop_front();
    ++*num_elem;
  }
  return kSuccess;
}
INJECT_CHECK(amdsmi_get_gpu_event_notification, EventGetFn);

#endif  // POLYACCEL_INJECT_PARTIAL

// ---- the test's control ---------------------------------------------------------------------

// Moves the scenario to `step` (the last one when past it) and queues that step's events.
AMDSMI_API void polyaccel_inject_set_step(unsigned step) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.scenario.events.empty()) return;
  std::size_t to = std::min<std::size_t>(step, s.scenario.events.size() - 1);
  if (to == s.step) return;
  s.step = to;
  enqueue_events(s);
}
