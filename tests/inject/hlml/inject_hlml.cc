// Our own build of Intel Gaudi's libhlml.so, for tests on machines without a Gaudi. It exports
// the HLML C symbols that polyaccel's hlml backend resolves, with hlml.h's ABI (declared in
// src/discover/accel/hlml_abi.h; each definition below is checked against it), and answers from
// a scenario file. Production code loads it through the normal path (POLYACCEL_HLML_LIB) and
// does not know it is a test build.
//
// Scenario: JSON at the path in HLML_INJECT_SCENARIO, read by the first hlml_init.
//   driver_version   string
//   layout           optional: the struct layout the library writes, "gohlml-v1.16" (the
//                    default: hlml_pci_info_t 52 bytes, hlml_utilization_t 4) or "current"
//                    (current Gaudi software: 84 and 8, with pci_rev, pci_subsys_id and the
//                    memory utilization); see hlml_abi.h
//   init_error       optional: an hlml_return_t name ("HLML_ERROR_DRIVER_NOT_LOADED") that
//                    hlml_init returns
//   unsupported      optional: features no device supports (names below)
//   devices[]        pci_bus_id, pci_vendor_id, pci_device_id, pci_rev, pci_subsys_id (hex
//                    strings; the last two written only in the current layout), name, uuid, serial,
//                    memory_total_bytes, power_limit_mw, ecc_enabled, ecc_pending, and
//                    unsupported: features this device answers HLML_ERROR_NOT_SUPPORTED for:
//                    name uuid serial memory power_limit ecc_mode utilization
//                    temperature_on_aip temperature_on_board temperature_hbm power energy clock_soc
//                    pcie_replay_count ecc_errors replaced_rows replaced_rows_pending
//                    throttle_reasons events
//   steps[]          {"devices": {"<pci_bus_id>": values}}; a value not given keeps the previous
//                    step's (0 at the start): utilization (%), memory_utilization (%, written
//                    only in the current layout), memory_used_bytes,
//                    temperature_on_aip, temperature_on_board, temperature_hbm (C; never
//                    given: HLML_ERROR_INVALID_ARGUMENT, as a library from before the HBM
//                    sensor answers), power_mw,
//                    energy_mj,
//                    clock_soc_mhz, pcie_replay_count, ecc_uncorrected_volatile,
//                    ecc_uncorrected_aggregate, replaced_rows_single_bit,
//                    replaced_rows_double_bit, replaced_rows_pending, throttle_reasons (bit mask).
//                    Only for that step: "lost": true (every call on the device answers
//                    HLML_ERROR_AIP_IS_LOST) and "events": [{"critical": true} or {"type":
//                    "critical"|"ecc_derr"|"ecc_serr"|"dram"|"clock_rate"}], queued to the event
//                    sets the device is registered with when the step begins.
// The test picks the step with polyaccel_inject_set_step(n) (dlopen of the same path + dlsym);
// hlml_init starts at step 0, whose events nobody can have registered for yet.
//
// Built twice: inject_hlml (libhlml.so, every symbol) and inject_hlml_partial
// (libhlml-partial.so, POLYACCEL_INJECT_HLML_PARTIAL: about half of them left out).
#include <strings.h>
#include <algorithm>
#include <chrono>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/accel/hlml_abi.h"

#define INJECT_EXPORT extern "C" __attribute__((visibility("default")))

using namespace polyaccel::hlml;  // NOLINT(google-build-using-namespace): the vendor's names

namespace {

using nlohmann::json;

const std::set<std::string> kFeatures = {"name",
                                         "uuid",
                                         "serial",
                                         "memory",
                                         "power_limit",
                                         "ecc_mode",
                                         "utilization",
                                         "temperature_on_aip",
                                         "temperature_on_board",
                                         "temperature_hbm",
                                         "power",
                                         "energy",
                                         "clock_soc",
                                         "pcie_replay_count",
                                         "ecc_errors",
                                         "replaced_rows",
                                         "replaced_rows_pending",
                                         "throttle_reasons",
                                         "events"};

struct Values {
  unsigned utilization = 0;
  unsigned memory_utilization = 0;
  unsigned long long memory_used = 0;
  unsigned temperature_on_aip = 0;
  unsigned temperature_on_board = 0;
  std::optional<unsigned> temperature_hbm;  // never given: an old library's answer
  unsigned power_mw = 0;
  unsigned long long energy_mj = 0;
  unsigned clock_soc_mhz = 0;
  unsigned pcie_replay_count = 0;
  unsigned long long ecc_uncorrected_volatile = 0;
  unsigned long long ecc_uncorrected_aggregate = 0;
  unsigned replaced_rows_single_bit = 0;
  unsigned replaced_rows_double_bit = 0;
  bool replaced_rows_pending = false;
  unsigned long long throttle_reasons = 0;
  unsigned pcie_tx_kbps = 0, pcie_rx_kbps = 0;
  bool lost = false;                       // this step only
  std::vector<unsigned long long> events;  // this step only
};

struct Device {
  std::string pci_bus_id;
  unsigned vendor_id = 0x1da3;
  unsigned device_id = 0;
  unsigned pci_rev = 0;
  unsigned pci_subsys_id = 0;
  std::string name, uuid, serial;
  unsigned long long memory_total = 0;
  unsigned power_limit_mw = 0;
  bool ecc_enabled = true;
  bool ecc_pending = true;
  // Gaudi2 (HL-225) values unless the scenario says otherwise: SoC clock limit, temperature
  // limits (shutdown, slowdown, HBM, chip), PCIe Gen4 x16, 24 NIC ports.
  unsigned clock_soc_max_mhz = 1800;
  unsigned temperature_thresholds[4] = {105, 95, 95, 100};
  unsigned pcie_generation = 4, pcie_width = 16;
  std::vector<bool> nic_ports = std::vector<bool>(24, true);
  std::set<std::string> unsupported;
  std::vector<Values> steps;  // one per scenario step
};

struct EventSet {
  std::vector<std::pair<const Device*, unsigned long long>> registrations;
  std::deque<hlml_event_data_t> queue;
};

struct State {
  std::mutex mu;
  std::condition_variable arrived;
  int refcount = 0;
  Layout layout = Layout::gohlml_v1_16;
  std::string driver_version;
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::unique_ptr<EventSet>> sets;
  size_t step_count = 1;
  size_t step = 0;
};

State& state() {
  static State s;
  return s;
}

// --- scenario ----------------------------------------------------------------------------

unsigned parse_hex(const json& j, const char* key, unsigned fallback) {
  if (!j.contains(key)) return fallback;
  return static_cast<unsigned>(std::stoul(j.at(key).get<std::string>(), nullptr, 16));
}

std::set<std::string> parse_features(const json& list) {
  std::set<std::string> out;
  for (const auto& f : list) {
    auto name = f.get<std::string>();
    if (!kFeatures.count(name)) throw std::runtime_error("unknown feature in unsupported: " + name);
    out.insert(name);
  }
  return out;
}

unsigned long long parse_event(const json& e) {
  if (e.value("critical", false)) return HLML_EVENT_CRITICAL_ERR;
  const std::string type = e.value("type", "");
  if (type == "critical") return HLML_EVENT_CRITICAL_ERR;
  if (type == "ecc_derr") return HLML_EVENT_ECC_DERR;
  if (type == "ecc_serr") return HLML_EVENT_ECC_SERR;
  if (type == "dram") return HLML_EVENT_DRAM_ERR;
  if (type == "clock_rate") return HLML_EVENT_CLOCK_RATE;
  throw std::runtime_error("event needs \"critical\": true or a known \"type\": " + e.dump());
}

void apply(Values& v, const json& j) {
  for (const auto& [key, value] : j.items()) {
    if (key == "utilization") {
      v.utilization = value.get<unsigned>();
    } else if (key == "memory_utilization") {
      v.memory_utilization = value.get<unsigned>();
    } else if (key == "memory_used_bytes") {
      v.memory_used = value.get<unsigned long long>();
    } else if (key == "temperature_on_aip") {
      v.temperature_on_aip = value.get<unsigned>();
    } else if (key == "temperature_on_board") {
      v.temperature_on_board = value.get<unsigned>();
    } else if (key == "temperature_hbm") {
      v.temperature_hbm = value.get<unsigned>();
    } else if (key == "power_mw") {
      v.power_mw = value.get<unsigned>();
    } else if (key == "energy_mj") {
      v.energy_mj = value.get<unsigned long long>();
    } else if (key == "clock_soc_mhz") {
      v.clock_soc_mhz = value.get<unsigned>();
    } else if (key == "pcie_replay_count") {
      v.pcie_replay_count = value.get<unsigned>();
    } else if (key == "ecc_uncorrected_volatile") {
      v.ecc_uncorrected_volatile = value.get<unsigned long long>();
    } else if (key == "ecc_uncorrected_aggregate") {
      v.ecc_uncorrected_aggregate = value.get<unsigned long long>();
    } else if (key == "replaced_rows_single_bit") {
      v.replaced_rows_single_bit = value.get<unsigned>();
    } else if (key == "replaced_rows_double_bit") {
      v.replaced_rows_double_bit = value.get<unsigned>();
    } else if (key == "replaced_rows_pending") {
      v.replaced_rows_pending = value.get<bool>();
    } else if (key == "throttle_reasons") {
      v.throttle_reasons = value.get<unsigned long long>();
    } else if (key == "pcie_tx_kbps") {
      v.pcie_tx_kbps = value.get<unsigned>();
    } else if (key == "pcie_rx_kbps") {
      v.pcie_rx_kbps = value.get<unsigned>();
    } else if (key == "lost") {
      v.lost = value.get<bool>();
    } else if (key == "events") {
      for (const auto& e : value)
        v.events.push_back(parse_event(e));
    } else {
      throw std::runtime_error("unknown step value: " + key);
    }
  }
}

// Loads the scenario into s; returns the hlml_init answer.
hlml_return_t load(State& s) {
  const char* path = std::getenv("HLML_INJECT_SCENARIO");
  if (!path || !*path) {
    std::fprintf(stderr, "inject libhlml: HLML_INJECT_SCENARIO is not set\n");
    return HLML_ERROR_DRIVER_NOT_LOADED;
  }
  try {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open the file");
    const json j = json::parse(in);
    if (j.contains("init_error")) {
      const auto name = j.at("init_error").get<std::string>();
      for (int rc = 1; rc < 64; ++rc) {
        const char* n = return_name(rc);
        if (n && name == n) return static_cast<hlml_return_t>(rc);
      }
      throw std::runtime_error("unknown init_error " + name);
    }
    s.driver_version = j.value("driver_version", "");
    const std::string layout = j.value("layout", "gohlml-v1.16");
    if (layout == "gohlml-v1.16") {
      s.layout = Layout::gohlml_v1_16;
    } else if (layout == "current") {
      s.layout = Layout::current;
    } else {
      throw std::runtime_error("unknown layout " + layout + " (gohlml-v1.16 or current)");
    }
    const auto all_unsupported = parse_features(j.value("unsupported", json::array()));
    const json steps = j.value("steps", json::array({json::object()}));
    s.step_count = std::max<size_t>(steps.size(), 1);
    for (const auto& d : j.at("devices")) {
      auto dev = std::make_unique<Device>();
      dev->pci_bus_id = d.at("pci_bus_id").get<std::string>();
      dev->vendor_id = parse_hex(d, "pci_vendor_id", 0x1da3);
      dev->device_id = parse_hex(d, "pci_device_id", 0);
      dev->pci_rev = parse_hex(d, "pci_rev", 0);
      dev->pci_subsys_id = parse_hex(d, "pci_subsys_id", 0);
      dev->name = d.value("name", "");
      dev->uuid = d.value("uuid", "");
      dev->serial = d.value("serial", "");
      dev->memory_total = d.value("memory_total_bytes", 0ULL);
      dev->power_limit_mw = d.value("power_limit_mw", 0U);
      dev->ecc_enabled = d.value("ecc_enabled", true);
      dev->ecc_pending = d.value("ecc_pending", dev->ecc_enabled);
      dev->clock_soc_max_mhz = d.value("clock_soc_max_mhz", dev->clock_soc_max_mhz);
      if (d.contains("nic_ports_up"))
        dev->nic_ports = d.at("nic_ports_up").get<std::vector<bool>>();
      dev->unsupported = parse_features(d.value("unsupported", json::array()));
      dev->unsupported.insert(all_unsupported.begin(), all_unsupported.end());
      s.devices.push_back(std::move(dev));
    }
    for (auto& dev : s.devices)
      dev->steps.resize(s.step_count);
    for (size_t i = 0; i < steps.size(); ++i) {
      const json per_device = steps[i].value("devices", json::object());
      for (const auto& [bus_id, _] : per_device.items()) {
        bool known = std::any_of(s.devices.begin(), s.devices.end(),
                                 [&, &id = bus_id](const auto& d) { return d->pci_bus_id == id; });
        if (!known) throw std::runtime_error("step names an unknown device " + bus_id);
      }
      for (auto& dev : s.devices) {
        Values v = i == 0 ? Values{} : dev->steps[i - 1];
        v.lost = false;
        v.events.clear();
        if (per_device.contains(dev->pci_bus_id)) apply(v, per_device.at(dev->pci_bus_id));
        dev->steps[i] = std::move(v);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inject libhlml: %s: %s\n", path, e.what());
    s.devices.clear();
    return HLML_ERROR_UNKNOWN;
  }
  return HLML_SUCCESS;
}

void reset(State& s) {
  s.layout = Layout::gohlml_v1_16;
  s.driver_version.clear();
  s.devices.clear();
  s.sets.clear();
  s.step_count = 1;
  s.step = 0;
}

// Queues the events of the current step to every set a device is registered with.
void deliver_events(State& s) {
  for (const auto& dev : s.devices) {
    for (unsigned long long type : dev->steps[s.step].events) {
      for (auto& set : s.sets) {
        for (const auto& [registered, mask] : set->registrations) {
          if (registered == dev.get() && (mask & type)) {
            set->queue.push_back(hlml_event_data_t{dev.get(), type});
          }
        }
      }
    }
  }
  s.arrived.notify_all();
}

Device* find_device(State& s, hlml_device_t handle) {
  for (auto& d : s.devices) {
    if (d.get() == handle) return d.get();
  }
  return nullptr;
}

[[maybe_unused]] EventSet* find_set(State& s, hlml_event_set_t handle) {
  for (auto& e : s.sets) {
    if (e.get() == handle) return e.get();
  }
  return nullptr;
}

// Runs fn(device, values) for a live, initialised device that supports `feature`.
template <class Fn>
hlml_return_t on_device(hlml_device_t handle, const char* feature, Fn&& fn) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  Device* d = find_device(s, handle);
  if (!d) return HLML_ERROR_INVALID_ARGUMENT;
  const Values& v = d->steps[s.step];
  if (v.lost) return HLML_ERROR_AIP_IS_LOST;
  if (feature && d->unsupported.count(feature)) return HLML_ERROR_NOT_SUPPORTED;
  return fn(*d, v);
}

hlml_return_t copy_string(const std::string& value, char* out, unsigned length) {
  if (!out || length == 0) return HLML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return HLML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return HLML_SUCCESS;
}

// Writes a struct of the layout the scenario plays into the caller's buffer, as a real library
// of that layout does: exactly sizeof(T) bytes. T is filled in a staging buffer followed by
// guard bytes, which must come out untouched: this library never writes past the layout it
// plays (a mistake here aborts instead of passing unnoticed).
template <class T, class Fill>
hlml_return_t put_layout(void* out, Fill&& fill) {
  if (!out) return HLML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned char kGuard = 0xA5;
  constexpr size_t kGuardBytes = 64;
  alignas(alignof(std::max_align_t)) unsigned char staging[sizeof(T) + kGuardBytes];
  std::memset(staging, kGuard, sizeof staging);
  T value{};
  fill(value);
  std::memcpy(staging, &value, sizeof value);
  for (size_t i = sizeof(T); i < sizeof staging; ++i) {
    if (staging[i] != kGuard) {
      std::fprintf(stderr, "inject libhlml: wrote past the %zu bytes of its layout\n", sizeof(T));
      std::abort();
    }
  }
  std::memcpy(out, staging, sizeof(T));
  return HLML_SUCCESS;
}

template <class Info>
void fill_pci_info(Info& pci, const Device& d) {
  std::snprintf(pci.bus_id, sizeof pci.bus_id, "%s", d.pci_bus_id.c_str());
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(d.pci_bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4) {
    pci.domain = domain;
    pci.bus = bus;
    pci.device = dev;
  }
  pci.pci_device_id = d.device_id << 16 | d.vendor_id;
  std::snprintf(pci.caps.link_speed, sizeof pci.caps.link_speed, "%s", "32.0 GT/s");
  std::snprintf(pci.caps.link_width, sizeof pci.caps.link_width, "%s", "x16");
}

template <class T>
hlml_return_t put(T* out, T value) {
  if (!out) return HLML_ERROR_INVALID_ARGUMENT;
  *out = value;
  return HLML_SUCCESS;
}

}  // namespace

// --- always present ----------------------------------------------------------------------

INJECT_EXPORT hlml_return_t hlml_init() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount > 0) {
    ++s.refcount;  // reference counted, as NVML does
    return HLML_SUCCESS;
  }
  reset(s);
  hlml_return_t rc = load(s);
  if (rc != HLML_SUCCESS) {
    reset(s);
    return rc;
  }
  s.refcount = 1;
  return HLML_SUCCESS;
}

INJECT_EXPORT hlml_return_t hlml_shutdown() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (--s.refcount == 0) reset(s);
  return HLML_SUCCESS;
}

INJECT_EXPORT hlml_return_t hlml_device_get_count(unsigned int* count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  return put(count, static_cast<unsigned>(s.devices.size()));
}

INJECT_EXPORT hlml_return_t hlml_device_get_handle_by_index(unsigned int index,
                                                            hlml_device_t* device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (index >= s.devices.size()) return HLML_ERROR_INVALID_ARGUMENT;
  return put<hlml_device_t>(device, s.devices[index].get());
}

INJECT_EXPORT hlml_return_t hlml_device_get_pci_info(hlml_device_t device, hlml_pci_info_t* pci) {
  return on_device(device, nullptr, [&](const Device& d, const Values&) {
    if (state().layout == Layout::gohlml_v1_16) {
      return put_layout<gohlml_v1_16::hlml_pci_info_t>(
          pci, [&](gohlml_v1_16::hlml_pci_info_t& p) { fill_pci_info(p, d); });
    }
    return put_layout<current::hlml_pci_info_t>(pci, [&](current::hlml_pci_info_t& p) {
      fill_pci_info(p, d);
      std::snprintf(p.caps.link_max_speed, sizeof p.caps.link_max_speed, "%s", "32.0 GT/s");
      std::snprintf(p.caps.link_max_width, sizeof p.caps.link_max_width, "%s", "x16");
      p.pci_rev = d.pci_rev;
      p.pci_subsys_id = d.pci_subsys_id;
    });
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_name(hlml_device_t device, char* name,
                                                 unsigned int length) {
  return on_device(device, "name", [&](const Device& d, const Values&) {
    return copy_string(d.name, name, length);
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_memory_info(hlml_device_t device,
                                                        hlml_memory_t* memory) {
  return on_device(device, "memory", [&](const Device& d, const Values& v) {
    const unsigned long long used = std::min(v.memory_used, d.memory_total);
    return put(memory, hlml_memory_t{d.memory_total - used, d.memory_total, used});
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_utilization_rates(hlml_device_t device,
                                                              hlml_utilization_t* utilization) {
  return on_device(device, "utilization", [&](const Device&, const Values& v) {
    if (state().layout == Layout::gohlml_v1_16) {
      return put_layout<gohlml_v1_16::hlml_utilization_t>(
          utilization, [&](gohlml_v1_16::hlml_utilization_t& u) { u.aip = v.utilization; });
    }
    return put_layout<current::hlml_utilization_t>(utilization,
                                                   [&](current::hlml_utilization_t& u) {
                                                     u.aip = v.utilization;
                                                     u.memory = v.memory_utilization;
                                                   });
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_temperature(hlml_device_t device,
                                                        hlml_temperature_sensors_t sensor_type,
                                                        unsigned int* temp) {
  const char* feature = sensor_type == HLML_TEMPERATURE_ON_AIP     ? "temperature_on_aip"
                        : sensor_type == HLML_TEMPERATURE_ON_BOARD ? "temperature_on_board"
                        : sensor_type == HLML_TEMPERATURE_HBM      ? "temperature_hbm"
                                                                   : nullptr;
  return on_device(device, feature, [&](const Device&, const Values& v) {
    if (!feature) return HLML_ERROR_NOT_SUPPORTED;
    if (sensor_type == HLML_TEMPERATURE_HBM) {
      // Never given: answer as a library from before the HBM sensor does.
      return v.temperature_hbm ? put(temp, *v.temperature_hbm) : HLML_ERROR_INVALID_ARGUMENT;
    }
    return put(temp, sensor_type == HLML_TEMPERATURE_ON_AIP ? v.temperature_on_aip
                                                            : v.temperature_on_board);
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_power_usage(hlml_device_t device, unsigned int* power) {
  return on_device(device, "power",
                   [&](const Device&, const Values& v) { return put(power, v.power_mw); });
}

INJECT_EXPORT hlml_return_t hlml_device_get_total_energy_consumption(hlml_device_t device,
                                                                     unsigned long long* energy) {
  return on_device(device, "energy",
                   [&](const Device&, const Values& v) { return put(energy, v.energy_mj); });
}

INJECT_EXPORT hlml_return_t hlml_device_get_clock_info(hlml_device_t device, hlml_clock_type_t type,
                                                       unsigned int* clock) {
  return on_device(device, "clock_soc", [&](const Device&, const Values& v) {
    if (type != HLML_CLOCK_SOC) return HLML_ERROR_NOT_SUPPORTED;
    return put(clock, v.clock_soc_mhz);
  });
}

static_assert(std::is_same_v<decltype(hlml_init), init_fn>);
static_assert(std::is_same_v<decltype(hlml_shutdown), shutdown_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_count), device_get_count_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_handle_by_index), device_get_handle_by_index_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_pci_info), device_get_pci_info_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_name), device_get_string_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_memory_info), device_get_memory_info_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_utilization_rates), device_get_utilization_rates_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_temperature), device_get_temperature_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_power_usage), device_get_uint_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_total_energy_consumption), device_get_ull_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_clock_info), device_get_clock_info_fn>);

// --- left out of the partial build -------------------------------------------------------
#ifndef POLYACCEL_INJECT_HLML_PARTIAL

INJECT_EXPORT hlml_return_t hlml_get_driver_version(char* driver_version, unsigned int length) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  return copy_string(s.driver_version, driver_version, length);
}

INJECT_EXPORT hlml_return_t hlml_device_get_handle_by_pci_bus_id(const char* pci_addr,
                                                                 hlml_device_t* device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (!pci_addr) return HLML_ERROR_INVALID_ARGUMENT;
  for (auto& d : s.devices) {
    if (strcasecmp(d->pci_bus_id.c_str(), pci_addr) == 0) {
      return put<hlml_device_t>(device, d.get());
    }
  }
  return HLML_ERROR_NOT_FOUND;
}

INJECT_EXPORT hlml_return_t hlml_device_get_uuid(hlml_device_t device, char* uuid,
                                                 unsigned int length) {
  return on_device(device, "uuid", [&](const Device& d, const Values&) {
    return copy_string(d.uuid, uuid, length);
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_serial(hlml_device_t device, char* serial,
                                                   unsigned int length) {
  return on_device(device, "serial", [&](const Device& d, const Values&) {
    return copy_string(d.serial, serial, length);
  });
}

INJECT_EXPORT hlml_return_t
hlml_device_get_power_management_default_limit(hlml_device_t device, unsigned int* default_limit) {
  return on_device(device, "power_limit", [&](const Device& d, const Values&) {
    return put(default_limit, d.power_limit_mw);
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_ecc_mode(hlml_device_t device,
                                                     hlml_enable_state_t* current,
                                                     hlml_enable_state_t* pending) {
  return on_device(device, "ecc_mode", [&](const Device& d, const Values&) {
    if (!current || !pending) return HLML_ERROR_INVALID_ARGUMENT;
    *current = d.ecc_enabled ? HLML_FEATURE_ENABLED : HLML_FEATURE_DISABLED;
    *pending = d.ecc_pending ? HLML_FEATURE_ENABLED : HLML_FEATURE_DISABLED;
    return HLML_SUCCESS;
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_pcie_replay_counter(hlml_device_t device,
                                                                unsigned int* value) {
  return on_device(device, "pcie_replay_count",
                   [&](const Device&, const Values& v) { return put(value, v.pcie_replay_count); });
}

INJECT_EXPORT hlml_return_t hlml_device_get_total_ecc_errors(hlml_device_t device,
                                                             hlml_memory_error_type_t error_type,
                                                             hlml_ecc_counter_type_t counter_type,
                                                             unsigned long long* ecc_counts) {
  return on_device(device, "ecc_errors", [&](const Device&, const Values& v) {
    // hlml.h: HLML_MEMORY_ERROR_TYPE_CORRECTED is not supported.
    if (error_type != HLML_MEMORY_ERROR_TYPE_UNCORRECTED) return HLML_ERROR_NOT_SUPPORTED;
    if (counter_type == HLML_VOLATILE_ECC) return put(ecc_counts, v.ecc_uncorrected_volatile);
    if (counter_type == HLML_AGGREGATE_ECC) return put(ecc_counts, v.ecc_uncorrected_aggregate);
    return HLML_ERROR_INVALID_ARGUMENT;
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_replaced_rows(hlml_device_t device,
                                                          hlml_row_replacement_cause_t cause,
                                                          unsigned int* row_count,
                                                          hlml_row_address_t* addresses) {
  return on_device(device, "replaced_rows", [&](const Device&, const Values& v) {
    if (!row_count) return HLML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    if (cause == HLML_ROW_REPLACEMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS) {
      n = v.replaced_rows_single_bit;
    } else if (cause == HLML_ROW_REPLACEMENT_CAUSE_DOUBLE_BIT_ECC_ERROR) {
      n = v.replaced_rows_double_bit;
    } else {
      return HLML_ERROR_INVALID_ARGUMENT;
    }
    // With no buffer (as gohlml calls it) only the count comes back.
    const unsigned room = addresses ? *row_count : 0;
    for (unsigned i = 0; i < std::min(room, n); ++i) {
      addresses[i] = hlml_row_address_t{static_cast<std::uint8_t>(i % 8), 0, 0, 0,
                                        static_cast<std::uint16_t>(0x100 + i)};
    }
    *row_count = n;
    return HLML_SUCCESS;
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_replaced_rows_pending_status(
    hlml_device_t device, hlml_enable_state_t* is_pending) {
  return on_device(device, "replaced_rows_pending", [&](const Device&, const Values& v) {
    return put(is_pending, v.replaced_rows_pending ? HLML_FEATURE_ENABLED : HLML_FEATURE_DISABLED);
  });
}

INJECT_EXPORT hlml_return_t hlml_device_get_current_clocks_throttle_reasons(
    hlml_device_t device, unsigned long long* clocks_throttle_reasons) {
  return on_device(device, "throttle_reasons", [&](const Device&, const Values& v) {
    return put(clocks_throttle_reasons, v.throttle_reasons);
  });
}

INJECT_EXPORT hlml_return_t hlml_event_set_create(hlml_event_set_t* set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (!set) return HLML_ERROR_INVALID_ARGUMENT;
  s.sets.push_back(std::make_unique<EventSet>());
  *set = s.sets.back().get();
  return HLML_SUCCESS;
}

INJECT_EXPORT hlml_return_t hlml_event_set_free(hlml_event_set_t set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  auto it =
      std::find_if(s.sets.begin(), s.sets.end(), [&](const auto& e) { return e.get() == set; });
  if (it == s.sets.end()) return HLML_ERROR_INVALID_ARGUMENT;
  s.sets.erase(it);
  return HLML_SUCCESS;
}

INJECT_EXPORT hlml_return_t hlml_device_register_events(hlml_device_t device,
                                                        unsigned long long event_types,
                                                        hlml_event_set_t set) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  Device* d = find_device(s, device);
  EventSet* e = find_set(s, set);
  if (!d || !e || event_types == 0) return HLML_ERROR_INVALID_ARGUMENT;
  if (d->steps[s.step].lost) return HLML_ERROR_AIP_IS_LOST;
  if (d->unsupported.count("events")) return HLML_ERROR_NOT_SUPPORTED;
  e->registrations.emplace_back(d, event_types);
  return HLML_SUCCESS;
}

INJECT_EXPORT hlml_return_t hlml_event_set_wait(hlml_event_set_t set, hlml_event_data_t* data,
                                                unsigned int timeoutms) {
  State& s = state();
  std::unique_lock lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (!data || !find_set(s, set)) return HLML_ERROR_INVALID_ARGUMENT;
  const auto ready = [&] {
    EventSet* e = find_set(s, set);
    return !e || !e->queue.empty();
  };
  s.arrived.wait_for(lock, std::chrono::milliseconds(timeoutms), ready);
  EventSet* e = find_set(s, set);
  if (!e) return HLML_ERROR_INVALID_ARGUMENT;  // freed while we waited
  if (e->queue.empty()) return HLML_ERROR_TIMEOUT;
  *data = e->queue.front();
  e->queue.pop_front();
  return HLML_SUCCESS;
}

static_assert(std::is_same_v<decltype(hlml_get_driver_version), get_driver_version_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_handle_by_pci_bus_id),
                             device_get_handle_by_pci_bus_id_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_uuid), device_get_string_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_serial), device_get_string_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_power_management_default_limit), device_get_uint_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_ecc_mode), device_get_ecc_mode_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_pcie_replay_counter), device_get_uint_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_total_ecc_errors), device_get_total_ecc_errors_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_replaced_rows), device_get_replaced_rows_fn>);
static_assert(std::is_same_v<decltype(hlml_device_get_replaced_rows_pending_status),
                             device_get_replaced_rows_pending_status_fn>);
static_assert(
    std::is_same_v<decltype(hlml_device_get_current_clocks_throttle_reasons), device_get_ull_fn>);
static_assert(std::is_same_v<decltype(hlml_event_set_create), event_set_create_fn>);
static_assert(std::is_same_v<decltype(hlml_event_set_free), event_set_free_fn>);
static_assert(std::is_same_v<decltype(hlml_device_register_events), device_register_events_fn>);
static_assert(std::is_same_v<decltype(hlml_event_set_wait), event_set_wait_fn>);

INJECT_EXPORT hlml_return_t hlml_device_get_max_clock_info(hlml_device_t device,
                                                           hlml_clock_type_t type,
                                                           unsigned int* clock) {
  return on_device(device, "clock_soc_max", [&](const Device& d, const Values&) {
    if (type != HLML_CLOCK_SOC) return HLML_ERROR_NOT_SUPPORTED;
    return put(clock, d.clock_soc_max_mhz);
  });
}
static_assert(std::is_same_v<decltype(hlml_device_get_max_clock_info), device_get_clock_info_fn>);

INJECT_EXPORT hlml_return_t hlml_device_get_temperature_threshold(
    hlml_device_t device, hlml_temperature_thresholds_t threshold, unsigned int* temp) {
  return on_device(device, "temperature_threshold", [&](const Device& d, const Values&) {
    if (threshold < 0 || threshold > 3) return HLML_ERROR_INVALID_ARGUMENT;
    return put(temp, d.temperature_thresholds[threshold]);
  });
}
static_assert(std::is_same_v<decltype(hlml_device_get_temperature_threshold),
                             device_get_temperature_threshold_fn>);

INJECT_EXPORT hlml_return_t hlml_device_get_pcie_throughput(hlml_device_t device,
                                                            hlml_pcie_util_counter_t counter,
                                                            unsigned int* value) {
  return on_device(device, "pcie_throughput", [&](const Device&, const Values& v) {
    if (counter == HLML_PCIE_UTIL_TX_BYTES) return put(value, v.pcie_tx_kbps);
    if (counter == HLML_PCIE_UTIL_RX_BYTES) return put(value, v.pcie_rx_kbps);
    return HLML_ERROR_INVALID_ARGUMENT;
  });
}
static_assert(
    std::is_same_v<decltype(hlml_device_get_pcie_throughput), device_get_pcie_throughput_fn>);

INJECT_EXPORT hlml_return_t hlml_device_get_curr_pcie_link_generation(hlml_device_t device,
                                                                      unsigned int* generation) {
  return on_device(device, "pcie_link", [&](const Device& d, const Values&) {
    return put(generation, d.pcie_generation);
  });
}
static_assert(
    std::is_same_v<decltype(hlml_device_get_curr_pcie_link_generation), device_get_uint_fn>);

INJECT_EXPORT hlml_return_t hlml_device_get_curr_pcie_link_width(hlml_device_t device,
                                                                 unsigned int* width) {
  return on_device(device, "pcie_link",
                   [&](const Device& d, const Values&) { return put(width, d.pcie_width); });
}
static_assert(std::is_same_v<decltype(hlml_device_get_curr_pcie_link_width), device_get_uint_fn>);

INJECT_EXPORT hlml_return_t hlml_nic_get_link(hlml_device_t device, unsigned int port, bool* up) {
  return on_device(device, "nic", [&](const Device& d, const Values&) {
    if (port >= d.nic_ports.size()) return HLML_ERROR_INVALID_ARGUMENT;
    return put(up, static_cast<bool>(d.nic_ports[port]));
  });
}
static_assert(std::is_same_v<decltype(hlml_nic_get_link), nic_get_link_fn>);

#endif  // POLYACCEL_INJECT_HLML_PARTIAL

// --- test control: not part of HLML ------------------------------------------------------

// Makes `step` the current step of the scenario and delivers its events. 0, or
// HLML_ERROR_UNINITIALIZED / HLML_ERROR_INVALID_ARGUMENT (no such step).
INJECT_EXPORT int polyaccel_inject_set_step(unsigned step) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return HLML_ERROR_UNINITIALIZED;
  if (step >= s.step_count) return HLML_ERROR_INVALID_ARGUMENT;
  s.step = step;
  deliver_events(s);
  return HLML_SUCCESS;
}
