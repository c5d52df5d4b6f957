// The Intel Gaudi backend: HLML (libhlml.so, from habanalabs-firmware-tools) loaded at run time.
// Every symbol is resolved by name; one the library lacks makes that feature "not supported"
// and the rest goes on. Only a missing hlml_init makes the library unusable.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/pci_address.h"
#include "discover/accel/backends.h"
#include "discover/accel/hlml_abi.h"
#include "discover/accel/library.h"

namespace polyaccel {
namespace {

using namespace polyaccel::hlml;  // NOLINT(google-build-using-namespace): the vendor's names

constexpr const char* kOverrideVariable = "POLYACCEL_HLML_LIB";
constexpr const char* kDefaultLibrary = "libhlml.so";
constexpr unsigned kStringLength = 256;  // for names, UUIDs, serials and versions
constexpr size_t kMaxEventsPerPoll = 1024;

std::string describe(int rc) {
  const char* name = return_name(rc);
  return name ? std::string(name) + " (" + std::to_string(rc) + ")"
              : "HLML error " + std::to_string(rc);
}

// "0000:19:00.0": lower case, 4-digit domain, whatever spelling the library used.
std::string normalise_bus_id(std::string_view text) {
  auto address = PciAddress::parse(text);
  return address ? address->to_string() : std::string();
}

// The PCI address in a PCI info buffer the library filled with `layout`: bus_id sits at offset 4
// in both layouts, but may fill its array without a NUL, so its length is the layout's.
std::string bus_id_of(const hlml_pci_info_t& pci, Layout layout) {
  static_assert(offsetof(gohlml_v1_16::hlml_pci_info_t, bus_id) ==
                offsetof(current::hlml_pci_info_t, bus_id));
  const unsigned length =
      layout == Layout::current ? current::kPciAddrLen : gohlml_v1_16::kPciAddrLen;
  return normalise_bus_id(std::string_view(pci.bus_id, strnlen(pci.bus_id, length)));
}

const char* layout_name(Layout layout) {
  return layout == Layout::current ? "current (hlml_pci_info_t 84 bytes, utilization 8)"
                                   : "gohlml v1.16 (hlml_pci_info_t 52 bytes, utilization 4)";
}

// The functions we use, each null where the library lacks it.
struct Api {
  init_fn* init = nullptr;
  shutdown_fn* shutdown = nullptr;
  get_driver_version_fn* get_driver_version = nullptr;
  device_get_count_fn* get_count = nullptr;
  device_get_handle_by_index_fn* get_handle_by_index = nullptr;
  device_get_handle_by_pci_bus_id_fn* get_handle_by_pci_bus_id = nullptr;
  device_get_pci_info_fn* get_pci_info = nullptr;
  device_get_string_fn* get_name = nullptr;
  device_get_string_fn* get_uuid = nullptr;
  device_get_string_fn* get_serial = nullptr;
  device_get_memory_info_fn* get_memory_info = nullptr;
  device_get_uint_fn* get_power_default_limit = nullptr;
  device_get_ecc_mode_fn* get_ecc_mode = nullptr;
  device_get_utilization_rates_fn* get_utilization = nullptr;
  device_get_temperature_fn* get_temperature = nullptr;
  device_get_uint_fn* get_power_usage = nullptr;
  device_get_ull_fn* get_total_energy = nullptr;
  device_get_clock_info_fn* get_clock_info = nullptr;
  device_get_uint_fn* get_pcie_replay_counter = nullptr;
  device_get_total_ecc_errors_fn* get_total_ecc_errors = nullptr;
  device_get_replaced_rows_fn* get_replaced_rows = nullptr;
  device_get_replaced_rows_pending_status_fn* get_replaced_rows_pending = nullptr;
  device_get_ull_fn* get_throttle_reasons = nullptr;
  device_get_clock_info_fn* get_max_clock_info = nullptr;
  device_get_temperature_threshold_fn* get_temperature_threshold = nullptr;
  device_get_pcie_throughput_fn* get_pcie_throughput = nullptr;
  device_get_uint_fn* get_pcie_link_generation = nullptr;
  device_get_uint_fn* get_pcie_link_width = nullptr;
  nic_get_link_fn* nic_get_link = nullptr;
  event_set_create_fn* event_set_create = nullptr;
  event_set_free_fn* event_set_free = nullptr;
  device_register_events_fn* register_events = nullptr;
  event_set_wait_fn* event_set_wait = nullptr;

  void resolve(SharedLibrary& lib) {
    lib.resolve(init, "hlml_init");
    lib.resolve(shutdown, "hlml_shutdown");
    lib.resolve(get_driver_version, "hlml_get_driver_version");
    lib.resolve(get_count, "hlml_device_get_count");
    lib.resolve(get_handle_by_index, "hlml_device_get_handle_by_index");
    lib.resolve(get_handle_by_pci_bus_id, "hlml_device_get_handle_by_pci_bus_id");
    lib.resolve(get_pci_info, "hlml_device_get_pci_info");
    lib.resolve(get_name, "hlml_device_get_name");
    lib.resolve(get_uuid, "hlml_device_get_uuid");
    lib.resolve(get_serial, "hlml_device_get_serial");
    lib.resolve(get_memory_info, "hlml_device_get_memory_info");
    lib.resolve(get_power_default_limit, "hlml_device_get_power_management_default_limit");
    lib.resolve(get_ecc_mode, "hlml_device_get_ecc_mode");
    lib.resolve(get_utilization, "hlml_device_get_utilization_rates");
    lib.resolve(get_temperature, "hlml_device_get_temperature");
    lib.resolve(get_power_usage, "hlml_device_get_power_usage");
    lib.resolve(get_total_energy, "hlml_device_get_total_energy_consumption");
    lib.resolve(get_clock_info, "hlml_device_get_clock_info");
    lib.resolve(get_pcie_replay_counter, "hlml_device_get_pcie_replay_counter");
    lib.resolve(get_total_ecc_errors, "hlml_device_get_total_ecc_errors");
    lib.resolve(get_replaced_rows, "hlml_device_get_replaced_rows");
    lib.resolve(get_replaced_rows_pending, "hlml_device_get_replaced_rows_pending_status");
    lib.resolve(get_throttle_reasons, "hlml_device_get_current_clocks_throttle_reasons");
    lib.resolve(get_max_clock_info, "hlml_device_get_max_clock_info");
    lib.resolve(get_temperature_threshold, "hlml_device_get_temperature_threshold");
    lib.resolve(get_pcie_throughput, "hlml_device_get_pcie_throughput");
    lib.resolve(get_pcie_link_generation, "hlml_device_get_curr_pcie_link_generation");
    lib.resolve(get_pcie_link_width, "hlml_device_get_curr_pcie_link_width");
    lib.resolve(nic_get_link, "hlml_nic_get_link");
    lib.resolve(event_set_create, "hlml_event_set_create");
    lib.resolve(event_set_free, "hlml_event_set_free");
    lib.resolve(register_events, "hlml_device_register_events");
    lib.resolve(event_set_wait, "hlml_event_set_wait");
  }
};

// How the calls on one device went. HLML_ERROR_NOT_SUPPORTED is an answer (the field stays
// empty); any other error is a failure. A device whose every call failed, or that the library
// calls lost, is unreachable.
class Tally {
 public:
  bool ok(hlml_return_t rc) {
    if (rc == HLML_SUCCESS) {
      ++succeeded_;
      return true;
    }
    if (rc == HLML_ERROR_NOT_SUPPORTED) return false;
    if (rc == HLML_ERROR_AIP_IS_LOST) lost_ = true;
    ++failed_;
    return false;
  }
  bool reachable() const { return !lost_ && !(succeeded_ == 0 && failed_ > 0); }

 private:
  int succeeded_ = 0;
  int failed_ = 0;
  bool lost_ = false;
};

std::string read_string(device_get_string_fn* fn, hlml_device_t handle, Tally& tally) {
  if (!fn) return {};
  char buf[kStringLength] = {};
  if (!tally.ok(fn(handle, buf, kStringLength))) return {};
  buf[kStringLength - 1] = '\0';
  return buf;
}

std::optional<unsigned> read_uint(device_get_uint_fn* fn, hlml_device_t handle, Tally& tally) {
  if (!fn) return std::nullopt;
  unsigned value = 0;
  if (!tally.ok(fn(handle, &value))) return std::nullopt;
  return value;
}

// The SoC clock's maximum, the temperature limits, the PCIe link and its throughput, and the
// NIC ports' links: each range-checked, absent where the library lacks the call.
void read_limits_and_links(hlml_device_t h, Tally& tally, AcceleratorSample& s, const Api& api) {
  unsigned v = 0;
  if (api.get_max_clock_info && tally.ok(api.get_max_clock_info(h, HLML_CLOCK_SOC, &v)) && v > 0 &&
      v < 100000) {
    s.sm_clock_max_mhz = v;
  }
  if (api.get_temperature_threshold) {
    struct Limit {
      hlml_temperature_thresholds_t type;
      std::optional<double> AcceleratorSample::*into;
    };
    const Limit limits[] = {
        {HLML_TEMPERATURE_THRESHOLD_SHUTDOWN, &AcceleratorSample::temperature_shutdown_c},
        {HLML_TEMPERATURE_THRESHOLD_SLOWDOWN, &AcceleratorSample::temperature_slowdown_c},
        {HLML_TEMPERATURE_THRESHOLD_MEM_MAX, &AcceleratorSample::temperature_memory_max_c},
        {HLML_TEMPERATURE_THRESHOLD_GPU_MAX, &AcceleratorSample::temperature_gpu_max_c},
    };
    for (const auto& l : limits) {
      if (tally.ok(api.get_temperature_threshold(h, l.type, &v)) && v > 0 && v < 300)
        s.*(l.into) = v;
    }
  }
  if (api.get_pcie_throughput) {
    if (tally.ok(api.get_pcie_throughput(h, HLML_PCIE_UTIL_TX_BYTES, &v)))
      s.pcie_tx_bytes_per_second = v * 1000.0;
    if (tally.ok(api.get_pcie_throughput(h, HLML_PCIE_UTIL_RX_BYTES, &v)))
      s.pcie_rx_bytes_per_second = v * 1000.0;
  }
  // PCIe generations 1 to 7: 2.5 to 128 GT/s.
  static constexpr double kGts[] = {0, 2.5, 5, 8, 16, 32, 64, 128};
  if (auto gen = read_uint(api.get_pcie_link_generation, h, tally); gen && *gen >= 1 && *gen <= 7)
    s.pcie_link_speed_gts = kGts[*gen];
  if (auto w = read_uint(api.get_pcie_link_width, h, tally); w && *w >= 1 && *w <= 32)
    s.pcie_link_width = *w;
  if (api.nic_get_link) {
    // The library refuses a port past the last (Gaudi2 and Gaudi3 have 24).
    for (unsigned port = 0; port < 32; ++port) {
      bool up = false;
      if (api.nic_get_link(h, port, &up) != HLML_SUCCESS) break;
      s.nic_ports.push_back({port, up});
    }
  }
}

std::optional<unsigned long long> read_ull(device_get_ull_fn* fn, hlml_device_t handle,
                                           Tally& tally) {
  if (!fn) return std::nullopt;
  unsigned long long value = 0;
  if (!tally.ok(fn(handle, &value))) return std::nullopt;
  return value;
}

std::string init_remedy(hlml_return_t rc) {
  if (rc == HLML_ERROR_DRIVER_NOT_LOADED) {
    return "load the habanalabs kernel driver (modprobe habanalabs) and check dmesg";
  }
  return "check the Gaudi driver and devices with hl-smi";
}

AcceleratorEventKind event_kind(unsigned long long type) {
  if (type & HLML_EVENT_CRITICAL_ERR) return AcceleratorEventKind::critical;
  if (type & HLML_EVENT_ECC_DERR) return AcceleratorEventKind::ecc_uncorrectable;
  return AcceleratorEventKind::other;
}

std::string event_text(unsigned long long type) {
  if (type & HLML_EVENT_CRITICAL_ERR) return "HLML critical error";
  if (type & HLML_EVENT_ECC_DERR) return "HLML double-bit ECC error";
  if (type & HLML_EVENT_ECC_SERR) return "HLML single-bit ECC error";
  if (type & HLML_EVENT_DRAM_ERR) return "HLML DRAM error";
  if (type & HLML_EVENT_CLOCK_RATE) return "HLML clock rate change";
  return "HLML event " + std::to_string(type);
}

class HlmlBackend final : public AcceleratorBackend {
 public:
  HlmlBackend() = default;
  HlmlBackend(const HlmlBackend&) = delete;
  HlmlBackend& operator=(const HlmlBackend&) = delete;
  ~HlmlBackend() override { close(); }

  std::string name() const override { return "hlml"; }
  Vendor vendor() const override { return Vendor::intel_gaudi; }
  Status open() override;
  const LibraryReport& library() const override { return report_; }
  Result<std::vector<Device>> devices() override;
  AcceleratorSample sample(const std::string& pci_bus_id) override;
  std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) override;

 private:
  // A device the library has shown us, by PCI address; kept when it stops answering.
  struct Known {
    std::string pci_bus_id;
    unsigned index = 0;
    hlml_device_t handle = nullptr;
    bool reachable = true;
    bool events_registered = false;
    std::optional<AcceleratorInventory> last_inventory;  // the last one read in full
  };

  Status refresh_locked();
  Known* find_locked(const std::string& pci_bus_id);
  void register_events_locked(Known& device);
  AcceleratorInventory read_inventory_locked(const Known& device, Tally& tally);
  void close();

  std::optional<Layout> probe_layout_locked(hlml_device_t handle) const;

  SharedLibrary lib_;  // first: unloaded last
  Api api_;
  LibraryReport report_;
  // The struct layout the library writes (see hlml_abi.h), known once a device answered
  // hlml_device_get_pci_info; until then only the fields both layouts share are read.
  std::optional<Layout> layout_;
  bool open_ = false;
  bool owns_init_ = false;  // our hlml_init succeeded, so we owe an hlml_shutdown
  std::string driver_version_;
  std::vector<Known> known_;  // in PCI address order
  hlml_event_set_t event_set_ = nullptr;
  std::mutex wait_mu_;  // one event wait at a time; taken before mu_
  std::mutex mu_;       // guards everything else
};

Status HlmlBackend::open() {
  std::lock_guard lock(mu_);
  if (open_) return Ok{};
  const std::string path = library_path(kOverrideVariable, kDefaultLibrary);
  report_ = LibraryReport{path, {}, {}};
  auto lib = SharedLibrary::open(path, "HLML");
  if (!lib) return lib.error();
  lib_ = std::move(lib.value());
  api_ = Api{};
  api_.resolve(lib_);
  report_.missing_symbols = lib_.missing();
  if (!api_.init) {
    api_ = Api{};
    lib_ = SharedLibrary{};
    return Error{ErrorCode::bad_input, path, "does not export hlml_init: not a usable HLML library",
                 "point POLYACCEL_HLML_LIB at libhlml.so from habanalabs-firmware-tools, or unset "
                 "it"};
  }
  hlml_return_t rc = api_.init();
  if (rc != HLML_SUCCESS && rc != HLML_ERROR_ALREADY_INITIALIZED) {
    api_ = Api{};
    lib_ = SharedLibrary{};
    return Error{ErrorCode::internal, path, "hlml_init failed: " + describe(rc), init_remedy(rc)};
  }
  owns_init_ = rc == HLML_SUCCESS;
  open_ = true;

  if (api_.get_driver_version) {
    char buf[kStringLength] = {};
    if (api_.get_driver_version(buf, kStringLength) == HLML_SUCCESS) {
      buf[kStringLength - 1] = '\0';
      driver_version_ = buf;
    }
  }
  if (api_.event_set_create && api_.register_events && api_.event_set_wait) {
    hlml_event_set_t set = nullptr;
    if (api_.event_set_create(&set) == HLML_SUCCESS) event_set_ = set;
  }
  // Registers every device for events now; a failure here shows again in devices().
  (void)refresh_locked();
  if (layout_) report_.note = std::string("HLML struct layout: ") + layout_name(*layout_);
  return Ok{};
}

void HlmlBackend::close() {
  std::scoped_lock lock(wait_mu_, mu_);
  if (event_set_ && api_.event_set_free) api_.event_set_free(event_set_);
  event_set_ = nullptr;
  if (owns_init_ && api_.shutdown) api_.shutdown();
  owns_init_ = false;
  open_ = false;
  layout_.reset();
  known_.clear();
}

HlmlBackend::Known* HlmlBackend::find_locked(const std::string& pci_bus_id) {
  auto it = std::find_if(known_.begin(), known_.end(),
                         [&](const Known& k) { return k.pci_bus_id == pci_bus_id; });
  return it == known_.end() ? nullptr : &*it;
}

void HlmlBackend::register_events_locked(Known& device) {
  if (!event_set_ || !api_.register_events || device.events_registered) return;
  // Uncorrectable ECC too where the device offers it; the critical error alone otherwise.
  hlml_return_t rc = api_.register_events(
      device.handle, HLML_EVENT_CRITICAL_ERR | HLML_EVENT_ECC_DERR, event_set_);
  if (rc != HLML_SUCCESS) {
    rc = api_.register_events(device.handle, HLML_EVENT_CRITICAL_ERR, event_set_);
  }
  device.events_registered = rc == HLML_SUCCESS;
}

// Which layout the library writes, told by what it writes: asked twice, into a buffer of zeros
// and one of 0xff bytes, a library of the current layout writes the bytes past the older
// layout's 52 (the same value both times), one of the older layout leaves them as they were.
std::optional<Layout> HlmlBackend::probe_layout_locked(hlml_device_t handle) const {
  hlml_pci_info_t zeros;
  hlml_pci_info_t ones;
  std::memset(&zeros, 0x00, sizeof zeros);
  std::memset(&ones, 0xff, sizeof ones);
  if (api_.get_pci_info(handle, &zeros) != HLML_SUCCESS ||
      api_.get_pci_info(handle, &ones) != HLML_SUCCESS) {
    return std::nullopt;
  }
  const auto* z = reinterpret_cast<const unsigned char*>(&zeros);
  const auto* o = reinterpret_cast<const unsigned char*>(&ones);
  for (size_t i = sizeof(gohlml_v1_16::hlml_pci_info_t); i < sizeof(hlml_pci_info_t); ++i) {
    if (z[i] == o[i]) return Layout::current;
  }
  return Layout::gohlml_v1_16;
}

Status HlmlBackend::refresh_locked() {
  if (!api_.get_count || !api_.get_handle_by_index || !api_.get_pci_info) return Ok{};
  unsigned count = 0;
  hlml_return_t rc = api_.get_count(&count);
  if (rc != HLML_SUCCESS) {
    return Error{ErrorCode::internal, report_.path, "hlml_device_get_count failed: " + describe(rc),
                 "check the Gaudi driver and devices with hl-smi"};
  }
  for (unsigned i = 0; i < count; ++i) {
    hlml_device_t handle = nullptr;
    if (api_.get_handle_by_index(i, &handle) != HLML_SUCCESS || !handle) continue;
    if (!layout_) layout_ = probe_layout_locked(handle);
    hlml_pci_info_t pci{};
    std::string id;
    if (api_.get_pci_info(handle, &pci) == HLML_SUCCESS) {
      id = bus_id_of(pci, layout_.value_or(Layout::gohlml_v1_16));
    }
    Known* device = nullptr;
    if (id.empty()) {
      // A device that no longer answers stays known by its handle.
      auto it = std::find_if(known_.begin(), known_.end(),
                             [&](const Known& k) { return k.handle == handle; });
      if (it == known_.end()) continue;
      device = &*it;
    } else {
      device = find_locked(id);
      if (!device) {
        known_.push_back(Known{id, i, handle, true, false, std::nullopt});
        device = &known_.back();
      }
    }
    device->index = i;
    if (device->handle != handle) {
      device->handle = handle;
      device->events_registered = false;
    }
    register_events_locked(*device);
    if (!device->last_inventory) {
      // Kept from first sight, for when the device stops answering before devices() is asked.
      Tally tally;
      AcceleratorInventory inv = read_inventory_locked(*device, tally);
      if (tally.reachable()) device->last_inventory = std::move(inv);
    }
  }
  std::sort(known_.begin(), known_.end(),
            [](const Known& a, const Known& b) { return a.pci_bus_id < b.pci_bus_id; });
  return Ok{};
}

AcceleratorInventory HlmlBackend::read_inventory_locked(const Known& device, Tally& tally) {
  const hlml_device_t h = device.handle;
  AcceleratorInventory inv;
  inv.backend = "hlml";
  inv.index = device.index;
  inv.driver_version = driver_version_;
  inv.product_name = read_string(api_.get_name, h, tally);
  inv.uuid = read_string(api_.get_uuid, h, tally);
  inv.serial = read_string(api_.get_serial, h, tally);
  if (api_.get_memory_info) {
    hlml_memory_t memory{};
    if (tally.ok(api_.get_memory_info(h, &memory))) inv.memory_total_bytes = memory.total;
  }
  if (auto mw = read_uint(api_.get_power_default_limit, h, tally)) {
    inv.power_limit_watts = *mw / 1000.0;
  }
  if (api_.get_ecc_mode) {
    hlml_enable_state_t current = HLML_FEATURE_DISABLED, pending = HLML_FEATURE_DISABLED;
    if (tally.ok(api_.get_ecc_mode(h, &current, &pending))) {
      inv.ecc_enabled = current == HLML_FEATURE_ENABLED;
      inv.ecc_pending = pending == HLML_FEATURE_ENABLED;
    }
  }
  return inv;
}

Result<std::vector<AcceleratorBackend::Device>> HlmlBackend::devices() {
  std::lock_guard lock(mu_);
  if (!open_) {
    return Error{ErrorCode::internal,
                 report_.path.empty() ? kDefaultLibrary : report_.path,
                 "HLML backend asked for devices before a successful open()",
                 {}};
  }
  if (auto st = refresh_locked(); !st) return st.error();
  std::vector<Device> out;
  out.reserve(known_.size());
  for (Known& k : known_) {
    Tally tally;
    AcceleratorInventory inv = read_inventory_locked(k, tally);
    if (tally.reachable()) {
      k.last_inventory = inv;
    } else if (k.last_inventory) {
      inv = *k.last_inventory;  // what it said while it answered
      inv.index = k.index;
    }
    out.push_back(Device{k.pci_bus_id, std::move(inv), {}});
  }
  return out;
}

AcceleratorSample HlmlBackend::sample(const std::string& pci_bus_id) {
  AcceleratorSample s;
  const std::string id = normalise_bus_id(pci_bus_id);
  s.pci_bus_id = id.empty() ? pci_bus_id : id;
  s.time = std::chrono::system_clock::now();

  std::lock_guard lock(mu_);
  Known* device = open_ && !id.empty() ? find_locked(id) : nullptr;
  if (!device) {
    s.reachable = false;
    return s;
  }
  if (!device->reachable && api_.get_handle_by_pci_bus_id) {
    // A device that comes back after a reset may have a new handle.
    hlml_device_t handle = nullptr;
    if (api_.get_handle_by_pci_bus_id(id.c_str(), &handle) == HLML_SUCCESS && handle &&
        handle != device->handle) {
      device->handle = handle;
      device->events_registered = false;
    }
  }
  const hlml_device_t h = device->handle;
  Tally tally;

  if (api_.get_utilization) {
    // aip comes first in both layouts; memory only in the current one.
    hlml_utilization_t u{};
    if (tally.ok(api_.get_utilization(h, &u))) {
      s.gpu_utilization_percent = u.aip;
      if (layout_ == Layout::current) s.memory_utilization_percent = u.memory;
    }
  }
  if (api_.get_memory_info) {
    hlml_memory_t m{};
    if (tally.ok(api_.get_memory_info(h, &m))) {
      s.memory_used_bytes = m.used;
      s.memory_free_bytes = m.free;
    }
  }
  if (api_.get_temperature) {
    // The chip, the board and, in newer libraries, the HBM. A library that predates the HBM
    // sensor refuses it as an invalid argument: that is "not supported", not a failure.
    unsigned celsius = 0;
    if (tally.ok(api_.get_temperature(h, HLML_TEMPERATURE_ON_AIP, &celsius))) {
      s.gpu_temperature_c = celsius;
    }
    if (tally.ok(api_.get_temperature(h, HLML_TEMPERATURE_ON_BOARD, &celsius))) {
      s.board_temperature_c = celsius;
    }
    hlml_return_t hbm = api_.get_temperature(h, HLML_TEMPERATURE_HBM, &celsius);
    if (tally.ok(hbm == HLML_ERROR_INVALID_ARGUMENT ? HLML_ERROR_NOT_SUPPORTED : hbm)) {
      s.memory_temperature_c = celsius;
    }
  }
  if (auto mw = read_uint(api_.get_power_usage, h, tally)) s.power_watts = *mw / 1000.0;
  // Millijoules since the driver loaded (Intel's pyhlml: hlmlDeviceGetTotalEnergyConsumption).
  if (auto mj = read_ull(api_.get_total_energy, h, tally)) s.energy_millijoules = *mj;
  if (api_.get_clock_info) {
    // HLML's clocks are SOC, IC, MME and TPC; it has no memory clock (memory_clock_mhz stays
    // empty).
    unsigned mhz = 0;
    if (tally.ok(api_.get_clock_info(h, HLML_CLOCK_SOC, &mhz))) s.sm_clock_mhz = mhz;
  }
  if (auto n = read_uint(api_.get_pcie_replay_counter, h, tally)) s.pcie_replay_count = *n;
  read_limits_and_links(h, tally, s, api_);
  if (api_.get_total_ecc_errors) {
    auto ecc = [&](hlml_memory_error_type_t type, hlml_ecc_counter_type_t counter,
                   std::optional<std::uint64_t>& field) {
      unsigned long long n = 0;
      if (tally.ok(api_.get_total_ecc_errors(h, type, counter, &n))) field = n;
    };
    ecc(HLML_MEMORY_ERROR_TYPE_CORRECTED, HLML_VOLATILE_ECC, s.ecc_corrected_volatile);
    ecc(HLML_MEMORY_ERROR_TYPE_UNCORRECTED, HLML_VOLATILE_ECC, s.ecc_uncorrected_volatile);
    ecc(HLML_MEMORY_ERROR_TYPE_CORRECTED, HLML_AGGREGATE_ECC, s.ecc_corrected_aggregate);
    ecc(HLML_MEMORY_ERROR_TYPE_UNCORRECTED, HLML_AGGREGATE_ECC, s.ecc_uncorrected_aggregate);
  }
  if (api_.get_replaced_rows) {
    // Asked with no address buffer, HLML reports only the count (as gohlml asks it).
    auto rows = [&](hlml_row_replacement_cause_t cause, std::optional<std::uint64_t>& field) {
      unsigned n = 0;
      hlml_return_t rc = api_.get_replaced_rows(h, cause, &n, nullptr);
      if (rc == HLML_ERROR_INSUFFICIENT_SIZE) rc = HLML_SUCCESS;
      if (tally.ok(rc)) field = n;
    };
    rows(HLML_ROW_REPLACEMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, s.remapped_rows_correctable);
    rows(HLML_ROW_REPLACEMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, s.remapped_rows_uncorrectable);
  }
  if (api_.get_replaced_rows_pending) {
    hlml_enable_state_t pending = HLML_FEATURE_DISABLED;
    if (tally.ok(api_.get_replaced_rows_pending(h, &pending))) {
      s.remapped_rows_pending = pending == HLML_FEATURE_ENABLED;
    }
  }
  if (auto mask = read_ull(api_.get_throttle_reasons, h, tally)) {
    s.throttle_reasons = *mask;
    if (*mask & HLML_CLOCKS_THROTTLE_REASON_POWER)
      s.throttle_reason_names.push_back("sw_power_cap");
    if (*mask & HLML_CLOCKS_THROTTLE_REASON_THERMAL) {
      s.throttle_reason_names.push_back("hw_thermal_slowdown");
    }
    if (*mask & ~(HLML_CLOCKS_THROTTLE_REASON_POWER | HLML_CLOCKS_THROTTLE_REASON_THERMAL)) {
      s.throttle_reason_names.push_back("other");
    }
  }

  s.reachable = tally.reachable();
  device->reachable = s.reachable;
  if (s.reachable) register_events_locked(*device);  // again, if it failed while lost
  return s;
}

std::vector<AcceleratorEvent> HlmlBackend::poll_events(std::chrono::milliseconds timeout) {
  std::vector<AcceleratorEvent> out;
  const auto ms = static_cast<unsigned>(
      std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, UINT_MAX));
  std::unique_lock wait_lock(wait_mu_);
  hlml_event_set_t set = nullptr;
  event_set_wait_fn* wait = nullptr;
  {
    std::lock_guard lock(mu_);
    set = event_set_;
    wait = api_.event_set_wait;
  }
  if (!set || !wait) {
    // No events from this library: wait as asked, so that a polling loop does not spin.
    wait_lock.unlock();
    std::this_thread::sleep_for(timeout);
    return out;
  }
  hlml_event_data_t data{};
  hlml_return_t rc = wait(set, &data, ms);
  if (rc != HLML_SUCCESS && rc != HLML_ERROR_TIMEOUT) {
    wait_lock.unlock();
    std::this_thread::sleep_for(timeout);
    return out;
  }
  while (rc == HLML_SUCCESS && out.size() < kMaxEventsPerPoll) {
    AcceleratorEvent event;
    event.kind = event_kind(data.event_type);
    event.code = data.event_type;
    event.text = event_text(data.event_type);
    event.time = std::chrono::system_clock::now();
    {
      std::lock_guard lock(mu_);
      auto it = std::find_if(known_.begin(), known_.end(),
                             [&](const Known& k) { return k.handle == data.device; });
      if (it != known_.end()) {
        event.pci_bus_id = it->pci_bus_id;
      } else if (api_.get_pci_info) {
        hlml_pci_info_t pci{};
        if (api_.get_pci_info(data.device, &pci) == HLML_SUCCESS) {
          event.pci_bus_id = bus_id_of(pci, layout_.value_or(Layout::gohlml_v1_16));
        }
      }
    }
    out.push_back(std::move(event));
    data = hlml_event_data_t{};
    rc = wait(set, &data, 0);  // the rest that already arrived
  }
  return out;
}

}  // namespace

std::unique_ptr<AcceleratorBackend> make_hlml_backend() {
  return std::make_unique<HlmlBackend>();
}

}  // namespace polyaccel
