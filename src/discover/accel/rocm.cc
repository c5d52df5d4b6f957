// The rocm-smi backend: AMD GPUs through librocm_smi64, dlopened at run time (DESIGN.md, rule 4).
// Every symbol is resolved by name; a missing one makes its feature "not supported" and the rest
// works. The ABI declarations are our own (rocm_smi_abi.h).
//
// Devices are keyed by PCI function: in a compute partition mode (CPX, ...) the library shows one
// index per partition, all on the same function; the lowest index stands for the GPU.
//
// A device is unreachable in a sample when no call answered and at least one failed. A call fails
// when it returns an error, or "not supported" for a field that the device answered before:
// rocm_smi reports a sysfs file that vanished (a GPU that fell off the bus) as not supported.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "discover/accel/amd_common.h"
#include "discover/accel/backends.h"
#include "discover/accel/library.h"
#include "discover/accel/rocm_smi_abi.h"

namespace polyaccel {
namespace {

constexpr const char* kOverrideVariable = "POLYACCEL_ROCM_SMI_LIB";
constexpr const char* kDefaultSoname = "librocm_smi64.so.1";  // Debian's librocm-smi64-1
// Tried after the default when the override is unset: ROCm's own packages name the library
// after its major version (.so.7 from ROCm 6.1, .so.6 in 6.0, .so.5 in 5.x).
constexpr const char* kRocmSonames[] = {"librocm_smi64.so.7", "librocm_smi64.so.6",
                                        "librocm_smi64.so.5"};

// Events we ask for. VM faults are left out: they belong to a process, not to the device.
constexpr std::uint64_t kEventMask = rsmi::event_mask(rsmi::kEventThermalThrottle) |
                                     rsmi::event_mask(rsmi::kEventGpuPreReset) |
                                     rsmi::event_mask(rsmi::kEventGpuPostReset);

// The library's functions that we use; null when it lacks one.
struct Api {
  rsmi::InitFn* init = nullptr;
  rsmi::ShutDownFn* shut_down = nullptr;
  rsmi::StatusStringFn* status_string = nullptr;
  rsmi::CountFn* num_devices = nullptr;
  rsmi::VersionGetFn* version = nullptr;
  rsmi::VersionStrGetFn* version_str = nullptr;
  rsmi::DevU64Fn* pci_id = nullptr;
  rsmi::DevU64Fn* unique_id = nullptr;
  rsmi::DevStringFn* serial = nullptr;
  rsmi::DevNameFn* name = nullptr;
  rsmi::DevMemoryFn* memory_total = nullptr;
  rsmi::DevMemoryFn* memory_usage = nullptr;
  rsmi::DevU64Fn* gfx_version = nullptr;
  rsmi::DevStringFn* compute_partition = nullptr;
  rsmi::DevStringFn* memory_partition = nullptr;
  rsmi::TopoLinkTypeFn* link_type = nullptr;
  rsmi::DevSensorU64Fn* power_cap = nullptr;
  rsmi::DevU64Fn* ecc_enabled = nullptr;
  rsmi::DevU32Fn* busy_percent = nullptr;
  rsmi::DevU32Fn* memory_busy_percent = nullptr;
  rsmi::DevTempFn* temperature = nullptr;
  rsmi::DevSensorU64Fn* power_average = nullptr;
  rsmi::DevU64Fn* socket_power = nullptr;
  rsmi::DevEnergyFn* energy = nullptr;
  rsmi::DevClockFn* clock = nullptr;
  rsmi::DevU64Fn* pcie_replay = nullptr;
  rsmi::DevEccCountFn* ecc_count = nullptr;
  rsmi::DevFn* event_init = nullptr;
  rsmi::EventMaskSetFn* event_mask_set = nullptr;
  rsmi::EventGetFn* event_get = nullptr;
  rsmi::DevFn* event_stop = nullptr;
  rsmi::ReservedPagesFn* reserved_pages = nullptr;
  rsmi::GpuMetricsFn* gpu_metrics = nullptr;
};

void resolve(SharedLibrary& lib, Api& api) {
  lib.resolve(api.init, "rsmi_init");
  lib.resolve(api.shut_down, "rsmi_shut_down");
  lib.resolve(api.status_string, "rsmi_status_string");
  lib.resolve(api.num_devices, "rsmi_num_monitor_devices");
  lib.resolve(api.version, "rsmi_version_get");
  lib.resolve(api.version_str, "rsmi_version_str_get");
  lib.resolve(api.pci_id, "rsmi_dev_pci_id_get");
  lib.resolve(api.unique_id, "rsmi_dev_unique_id_get");
  lib.resolve(api.serial, "rsmi_dev_serial_number_get");
  lib.resolve(api.name, "rsmi_dev_name_get");
  lib.resolve(api.memory_total, "rsmi_dev_memory_total_get");
  lib.resolve(api.memory_usage, "rsmi_dev_memory_usage_get");
  lib.resolve(api.gfx_version, "rsmi_dev_target_graphics_version_get");
  lib.resolve(api.compute_partition, "rsmi_dev_compute_partition_get");
  lib.resolve(api.memory_partition, "rsmi_dev_memory_partition_get");
  lib.resolve(api.link_type, "rsmi_topo_get_link_type");
  lib.resolve(api.power_cap, "rsmi_dev_power_cap_get");
  lib.resolve(api.ecc_enabled, "rsmi_dev_ecc_enabled_get");
  lib.resolve(api.busy_percent, "rsmi_dev_busy_percent_get");
  lib.resolve(api.memory_busy_percent, "rsmi_dev_memory_busy_percent_get");
  lib.resolve(api.temperature, "rsmi_dev_temp_metric_get");
  lib.resolve(api.power_average, "rsmi_dev_power_ave_get");
  lib.resolve(api.socket_power, "rsmi_dev_current_socket_power_get");
  lib.resolve(api.energy, "rsmi_dev_energy_count_get");
  lib.resolve(api.clock, "rsmi_dev_gpu_clk_freq_get");
  lib.resolve(api.pcie_replay, "rsmi_dev_pci_replay_counter_get");
  lib.resolve(api.ecc_count, "rsmi_dev_ecc_count_get");
  lib.resolve(api.event_init, "rsmi_event_notification_init");
  lib.resolve(api.event_mask_set, "rsmi_event_notification_mask_set");
  lib.resolve(api.event_get, "rsmi_event_notification_get");
  lib.resolve(api.event_stop, "rsmi_event_notification_stop");
  lib.resolve(api.reserved_pages, "rsmi_dev_memory_reserved_pages_get");
  lib.resolve(api.gpu_metrics, "rsmi_dev_gpu_metrics_info_get");
}

Result<SharedLibrary> open_library() {
  const char* override_path = std::getenv(kOverrideVariable);
  auto lib = SharedLibrary::open(library_path(kOverrideVariable, kDefaultSoname), "ROCm SMI");
  if (lib || (override_path && *override_path) || lib.error().code != ErrorCode::not_found) {
    return lib;
  }
  for (const char* soname : kRocmSonames) {
    auto other = SharedLibrary::open(soname, "ROCm SMI");
    if (other || other.error().code != ErrorCode::not_found) return other;
  }
  return lib;
}

// rocm_smi.h's BDF id: domain in bits 63..32, (6.x) partition in 31..28, bus 15..8, device 7..3,
// function 2..0.
std::string bus_id_of(std::uint64_t bdfid) {
  PciAddress a;
  a.domain = static_cast<std::uint32_t>(bdfid >> 32);
  a.bus = static_cast<std::uint8_t>((bdfid >> 8) & 0xff);
  a.device = static_cast<std::uint8_t>((bdfid >> 3) & 0x1f);
  a.function = static_cast<std::uint8_t>(bdfid & 0x7);
  return a.to_string();
}

std::string trimmed(const char* text) {
  std::string s(text);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// A string getter; empty when not supported or failing.
template <class Fn>
std::string read_string(Fn* fn, std::uint32_t dv) {
  if (!fn) return {};
  char buf[256] = {};
  if (fn(dv, buf, static_cast<std::uint32_t>(sizeof buf - 1)) != rsmi::kSuccess) return {};
  return trimmed(buf);
}

bool is_unsupported(std::uint32_t status) {
  return status == rsmi::kNotSupported || status == rsmi::kNotYetImplemented ||
         status == rsmi::kPermission;
}

// The current clock of an rsmi_frequencies_t in either layout, the library's own first. The
// other layout is tried when the first one's fields make no sense.
std::optional<std::uint64_t> current_frequency(const unsigned char* raw, bool newer_first) {
  rsmi::FrequenciesV5 v5;
  rsmi::FrequenciesV6 v6;
  std::memcpy(&v5, raw, sizeof v5);
  std::memcpy(&v6, raw, sizeof v6);
  auto older = [&]() -> std::optional<std::uint64_t> {
    if (v5.num_supported == 0 || v5.num_supported > 32 || v5.current >= v5.num_supported) {
      return std::nullopt;
    }
    return v5.frequency[v5.current];
  };
  auto newer = [&]() -> std::optional<std::uint64_t> {
    if (raw[0] > 1 || v6.num_supported == 0 || v6.num_supported > 33 ||
        v6.current >= v6.num_supported) {
      return std::nullopt;
    }
    return v6.frequency[v6.current];
  };
  auto first = newer_first ? newer() : older();
  return first ? first : (newer_first ? older() : newer());
}

// One entry of the library's event array, whichever its message size: the message starts at the
// same offset in both.
constexpr std::size_t kEventMessageOffset = offsetof(rsmi::EventDataShort, message);
static_assert(kEventMessageOffset == offsetof(rsmi::EventDataLong, message));

struct EventEntry {
  std::uint32_t dv = 0;
  std::uint32_t event = 0;
  const char* message = nullptr;
};

EventEntry event_entry(const unsigned char* raw) {
  EventEntry e;
  std::memcpy(&e.dv, raw + offsetof(rsmi::EventDataShort, dv_ind), sizeof e.dv);
  std::memcpy(&e.event, raw + offsetof(rsmi::EventDataShort, event), sizeof e.event);
  e.message = reinterpret_cast<const char*>(raw + kEventMessageOffset);
  return e;
}

// Tallies one sample's calls (see the top of this file).
class Tally {
 public:
  explicit Tally(std::set<std::string>& answered_before) : tally_(answered_before) {}
  bool ok(const char* field, std::uint32_t status) {
    return tally_.ok(field, status == rsmi::kSuccess, is_unsupported(status));
  }
  bool reachable() const { return tally_.reachable(); }

 private:
  amd::FieldTally tally_;
};

class RocmSmiBackend final : public AcceleratorBackend {
 public:
  RocmSmiBackend() = default;
  RocmSmiBackend(const RocmSmiBackend&) = delete;
  RocmSmiBackend& operator=(const RocmSmiBackend&) = delete;
  ~RocmSmiBackend() override;

  std::string name() const override { return "rocm-smi"; }
  Vendor vendor() const override { return Vendor::amd; }
  Status open() override;
  const LibraryReport& library() const override { return report_; }
  Result<std::vector<Device>> devices() override;
  AcceleratorSample sample(const std::string& pci_bus_id) override;
  std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) override;

 private:
  // A compute partition after the first (whose index is the Gpu's).
  struct Partition {
    std::uint32_t index = 0;         // the library's device index
    std::set<std::string> answered;  // its sample fields that answered at least once
  };
  struct Gpu {
    std::uint32_t index = 0;
    std::string bus_id;
    std::set<std::string> answered;           // sample fields that answered at least once
    std::vector<Partition> other_partitions;  // partitions 1..N-1, in index order
  };

  Status open_once();
  std::string status_text(std::uint32_t status) const;
  Error call_failed(const char* function, std::uint32_t status) const;
  void enumerate(std::uint32_t count);
  void enable_events();
  AcceleratorInventory inventory(const Gpu& gpu) const;
  std::vector<PeerLink> xgmi_peers(const Gpu& gpu) const;

  void read_activity(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_temperatures(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_power(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_clocks(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_errors(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_bad_pages(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_throttle(std::uint32_t dv, Tally& t, AcceleratorSample& s) const;
  void read_partitions(Gpu& gpu, AcceleratorSample& s) const;
  std::optional<double> temperature(std::uint32_t dv, Tally& t, std::uint32_t sensor,
                                    const char* field) const;
  std::optional<std::uint32_t> clock_mhz(std::uint32_t dv, Tally& t, std::uint32_t clock,
                                         const char* field) const;
  std::size_t event_stride(const unsigned char* raw, std::uint32_t n) const;
  void decode_events(const unsigned char* raw, std::uint32_t n,
                     std::vector<AcceleratorEvent>& out) const;

  SharedLibrary lib_;
  Api api_;
  LibraryReport report_;
  std::optional<Status> opened_;  // what the first open() gave
  bool initialized_ = false;
  bool events_on_ = false;
  std::uint32_t major_version_ = 0;  // 0 when rsmi_version_get is missing
  std::uint32_t minor_version_ = 0;
  std::string driver_version_;
  // Fixed by open(): the bus id of every library index ("" when unknown), one Gpu per function,
  // the indices whose event notification we started.
  std::vector<std::string> index_bus_ids_;
  std::vector<Gpu> gpus_;
  std::vector<std::uint32_t> event_indices_;
  std::mutex mutex_;  // guards gpus_[].answered
};

RocmSmiBackend::~RocmSmiBackend() {
  if (!initialized_) return;
  if (api_.event_stop) {
    for (std::uint32_t i : event_indices_)
      api_.event_stop(i);
  }
  if (api_.shut_down) api_.shut_down();
}

std::string RocmSmiBackend::status_text(std::uint32_t status) const {
  const char* text = nullptr;
  std::string s = api_.status_string && api_.status_string(status, &text) == rsmi::kSuccess && text
                      ? std::string(text)
                      : std::string(rsmi::status_name(status));
  return s + " (status " + std::to_string(status) + ")";
}

Error RocmSmiBackend::call_failed(const char* function, std::uint32_t status) const {
  return Error{ErrorCode::io, report_.path,
               std::string(function) + " failed: " + status_text(status),
               "check that the amdgpu driver is loaded and that /sys/class/drm and /dev/kfd are "
               "readable"};
}

Status RocmSmiBackend::open() {
  if (!opened_) opened_ = open_once();
  return *opened_;
}

Status RocmSmiBackend::open_once() {
  auto lib = open_library();
  if (!lib) {
    report_.path = lib.error().input;
    return lib.error();
  }
  lib_ = std::move(*lib);
  report_.path = lib_.path();
  resolve(lib_, api_);
  report_.missing_symbols = lib_.missing();

  std::string lacking;
  for (auto [fn, name] : {std::pair{api_.init != nullptr, "rsmi_init"},
                          std::pair{api_.num_devices != nullptr, "rsmi_num_monitor_devices"},
                          std::pair{api_.pci_id != nullptr, "rsmi_dev_pci_id_get"}}) {
    if (!fn) lacking += (lacking.empty() ? "" : ", ") + std::string(name);
  }
  if (!lacking.empty()) {
    return Error{ErrorCode::bad_input, report_.path,
                 "is not a usable ROCm SMI library: it does not export " + lacking,
                 "point " + std::string(kOverrideVariable) +
                     " at librocm_smi64 from ROCm or Debian's librocm-smi64-1, or unset it"};
  }

  std::uint32_t st = api_.init(0);
  if (st != rsmi::kSuccess) return call_failed("rsmi_init", st);
  initialized_ = true;

  rsmi::Version version{};
  if (api_.version && api_.version(&version) == rsmi::kSuccess) {
    major_version_ = version.major;
    minor_version_ = version.minor;
  }
  if (api_.version_str) {
    char buf[256] = {};
    if (api_.version_str(rsmi::kSwComponentDriver, buf, sizeof buf - 1) == rsmi::kSuccess) {
      driver_version_ = trimmed(buf);
    }
  }
  std::uint32_t count = 0;
  st = api_.num_devices(&count);
  if (st != rsmi::kSuccess) return call_failed("rsmi_num_monitor_devices", st);
  enumerate(count);
  enable_events();
  return Ok{};
}

void RocmSmiBackend::enumerate(std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint64_t bdfid = 0;
    index_bus_ids_.push_back(api_.pci_id(i, &bdfid) == rsmi::kSuccess ? bus_id_of(bdfid) : "");
  }
  index_bus_ids_ = amd::physical_bus_ids(index_bus_ids_);  // partitions: one GPU, function 0
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string& bus_id = index_bus_ids_[i];
    if (bus_id.empty()) continue;
    auto gpu =
        std::find_if(gpus_.begin(), gpus_.end(), [&](const Gpu& g) { return g.bus_id == bus_id; });
    if (gpu == gpus_.end()) {
      gpus_.push_back(Gpu{i, bus_id, {}, {}});
    } else {
      gpu->other_partitions.push_back(Partition{i, {}});
    }
  }
}

void RocmSmiBackend::enable_events() {
  if (!api_.event_init || !api_.event_mask_set || !api_.event_get) return;
  for (std::uint32_t i = 0; i < index_bus_ids_.size(); ++i) {
    if (index_bus_ids_[i].empty() || api_.event_init(i) != rsmi::kSuccess) continue;
    event_indices_.push_back(i);
    if (api_.event_mask_set(i, kEventMask) == rsmi::kSuccess) events_on_ = true;
  }
}

Result<std::vector<AcceleratorBackend::Device>> RocmSmiBackend::devices() {
  if (!initialized_) {
    return Error{
        ErrorCode::internal, report_.path, "devices() called before a successful open()", {}};
  }
  std::lock_guard lock(mutex_);
  std::vector<Device> out;
  for (const Gpu& gpu : gpus_) {
    Device d;
    d.pci_bus_id = gpu.bus_id;
    d.inventory = inventory(gpu);
    d.peer_links = xgmi_peers(gpu);
    d.partitions =
        static_cast<unsigned>(std::count(index_bus_ids_.begin(), index_bus_ids_.end(), gpu.bus_id));
    out.push_back(std::move(d));
  }
  return out;
}

AcceleratorInventory RocmSmiBackend::inventory(const Gpu& gpu) const {
  const std::uint32_t dv = gpu.index;
  AcceleratorInventory inv;
  inv.backend = "rocm-smi";
  inv.index = dv;
  std::uint64_t v = 0;
  if (api_.unique_id && api_.unique_id(dv, &v) == rsmi::kSuccess) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "GPU-%016llx", static_cast<unsigned long long>(v));
    inv.uuid = buf;
  }
  inv.serial = read_string(api_.serial, dv);
  inv.product_name = read_string(api_.name, dv);
  if (api_.memory_total && api_.memory_total(dv, rsmi::kMemoryTypeVram, &v) == rsmi::kSuccess) {
    inv.memory_total_bytes = v;
  }
  inv.driver_version = driver_version_;
  if (api_.gfx_version && api_.gfx_version(dv, &v) == rsmi::kSuccess)
    inv.gfx_version = amd::gfx_name(v);
  inv.compute_partition = read_string(api_.compute_partition, dv);
  inv.memory_partition = read_string(api_.memory_partition, dv);
  if (api_.power_cap && api_.power_cap(dv, 0, &v) == rsmi::kSuccess) {
    inv.power_limit_watts = static_cast<double>(v) / 1e6;  // microwatts
  }
  if (api_.ecc_enabled && api_.ecc_enabled(dv, &v) == rsmi::kSuccess) {
    inv.ecc_enabled = (v & rsmi::kGpuBlockUmc) != 0;  // ECC of the memory (UMC) block
  }
  return inv;
}

std::vector<PeerLink> RocmSmiBackend::xgmi_peers(const Gpu& gpu) const {
  std::vector<PeerLink> peers;
  if (!api_.link_type) return peers;
  for (const Gpu& other : gpus_) {
    if (other.index == gpu.index) continue;
    std::uint64_t hops = 0;
    std::uint32_t type = 0;
    if (api_.link_type(gpu.index, other.index, &hops, &type) != rsmi::kSuccess) continue;
    if (type != rsmi::kIoLinkTypeXgmi || hops != 1) continue;  // direct XGMI links only
    auto address = PciAddress::parse(other.bus_id);
    if (address) peers.push_back(PeerLink{*address, Link{LinkLevel::xgmi, 1}});
  }
  return peers;
}

AcceleratorSample RocmSmiBackend::sample(const std::string& pci_bus_id) {
  AcceleratorSample s;
  s.pci_bus_id = pci_bus_id;
  s.time = std::chrono::system_clock::now();
  std::lock_guard lock(mutex_);
  auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                          [&](const Gpu& g) { return g.bus_id == pci_bus_id; });
  if (!initialized_ || gpu == gpus_.end()) {
    s.reachable = false;
    return s;
  }
  Tally t(gpu->answered);
  read_activity(gpu->index, t, s);
  read_temperatures(gpu->index, t, s);
  read_power(gpu->index, t, s);
  read_clocks(gpu->index, t, s);
  read_errors(gpu->index, t, s);
  read_bad_pages(gpu->index, t, s);
  read_throttle(gpu->index, t, s);
  s.reachable = t.reachable();
  if (s.reachable) read_partitions(*gpu, s);
  return s;
}

// Each further partition's own activity and memory through its own device index, as the amd-smi
// backend reads them; one that does not answer is left out (its GPU's sample stands).
void RocmSmiBackend::read_partitions(Gpu& gpu, AcceleratorSample& s) const {
  for (std::size_t k = 0; k < gpu.other_partitions.size(); ++k) {
    Partition& part = gpu.other_partitions[k];
    Tally t(part.answered);
    AcceleratorSample own;
    read_activity(part.index, t, own);
    if (!t.reachable()) continue;
    if (auto ps = amd::partition_sample(k, part.index, own, s)) s.partitions.push_back(*ps);
  }
}

void RocmSmiBackend::read_activity(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  std::uint32_t percent = 0;
  if (api_.busy_percent && t.ok("busy_percent", api_.busy_percent(dv, &percent))) {
    s.gpu_utilization_percent = percent;
  }
  if (api_.memory_busy_percent &&
      t.ok("memory_busy_percent", api_.memory_busy_percent(dv, &percent))) {
    s.memory_utilization_percent = percent;
  }
  std::uint64_t used = 0;
  std::uint64_t total = 0;
  if (api_.memory_usage && t.ok("vram_used", api_.memory_usage(dv, rsmi::kMemoryTypeVram, &used))) {
    s.memory_used_bytes = used;
    if (api_.memory_total &&
        t.ok("vram_total", api_.memory_total(dv, rsmi::kMemoryTypeVram, &total)) && total >= used) {
      s.memory_free_bytes = total - used;
    }
  }
  // GTT and the CPU-visible part of VRAM, as amd-smi's backend reads them.
  if (!api_.memory_total || !api_.memory_usage) return;
  amd::read_gtt_and_visible_vram(
      [&](const char* field, std::uint32_t type, bool want_total, std::uint64_t* bytes) {
        return t.ok(field, want_total ? api_.memory_total(dv, type, bytes)
                                      : api_.memory_usage(dv, type, bytes));
      },
      rsmi::kMemoryTypeGtt, rsmi::kMemoryTypeVisVram, s);
}

std::optional<double> RocmSmiBackend::temperature(std::uint32_t dv, Tally& t, std::uint32_t sensor,
                                                  const char* field) const {
  std::int64_t millidegrees = 0;
  if (!t.ok(field, api_.temperature(dv, sensor, rsmi::kTempCurrent, &millidegrees))) {
    return std::nullopt;
  }
  return static_cast<double>(millidegrees) / 1000.0;
}

// GPU: the edge sensor, else the junction (MI300 has no edge sensor); the edge sensor alone too.
// Memory: the VRAM sensor, else the hottest HBM stack; each stack too.
void RocmSmiBackend::read_temperatures(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  if (!api_.temperature) return;
  s.gpu_temperature_c = temperature(dv, t, rsmi::kTempTypeEdge, "temperature_edge");
  s.edge_temperature_c = amd::plausible_celsius(s.gpu_temperature_c);
  if (!s.gpu_temperature_c) {
    s.gpu_temperature_c = temperature(dv, t, rsmi::kTempTypeJunction, "temperature_junction");
  }
  s.memory_temperature_c = temperature(dv, t, rsmi::kTempTypeMemory, "temperature_memory");
  static_assert(rsmi::kTempTypeHbm0 == 3 && rsmi::kTempTypeHbm3 == 6);
  amd::read_hbm_temperatures(
      [&](std::uint32_t sensor, const char* field) { return temperature(dv, t, sensor, field); },
      s);
}

// Power: the average (older GPUs), else the current socket power (MI300); microwatts. Energy: the
// counter times its resolution in microjoules.
void RocmSmiBackend::read_power(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  std::uint64_t microwatts = 0;
  if (api_.power_average && t.ok("power_average", api_.power_average(dv, 0, &microwatts))) {
    s.power_watts = static_cast<double>(microwatts) / 1e6;
    if (microwatts < 10000ULL * 1000000) s.average_power_watts = s.power_watts;
  } else if (api_.socket_power && t.ok("socket_power", api_.socket_power(dv, &microwatts))) {
    s.power_watts = static_cast<double>(microwatts) / 1e6;
  }
  std::uint64_t counter = 0;
  std::uint64_t timestamp = 0;
  float resolution_uj = 0;
  if (api_.energy && t.ok("energy", api_.energy(dv, &counter, &resolution_uj, &timestamp))) {
    long double microjoules = static_cast<long double>(counter) * resolution_uj;
    s.energy_millijoules = static_cast<std::uint64_t>(microjoules / 1000.0L);
  }
}

std::optional<std::uint32_t> RocmSmiBackend::clock_mhz(std::uint32_t dv, Tally& t,
                                                       std::uint32_t clock,
                                                       const char* field) const {
  // Room for the larger layout whichever the library writes.
  alignas(rsmi::FrequenciesV6) unsigned char raw[sizeof(rsmi::FrequenciesV6)] = {};
  if (!t.ok(field, api_.clock(dv, clock, raw))) return std::nullopt;
  auto hz = current_frequency(raw, major_version_ >= 6);
  if (!hz) return std::nullopt;
  return static_cast<std::uint32_t>((*hz + 500000) / 1000000);
}

void RocmSmiBackend::read_clocks(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  if (!api_.clock) return;
  s.sm_clock_mhz = clock_mhz(dv, t, rsmi::kClockSys, "sclk");
  s.memory_clock_mhz = clock_mhz(dv, t, rsmi::kClockMem, "mclk");
}

// PCIe replays, and ECC counts summed over the RAS blocks that have ECC on (every block when the
// library cannot say which). RAS counts run since the driver loaded: NVML calls that volatile.
void RocmSmiBackend::read_errors(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  std::uint64_t replays = 0;
  if (api_.pcie_replay && t.ok("pcie_replay", api_.pcie_replay(dv, &replays))) {
    s.pcie_replay_count = replays;
  }
  if (!api_.ecc_count) return;
  std::uint64_t enabled = 0;
  if (!api_.ecc_enabled || api_.ecc_enabled(dv, &enabled) != rsmi::kSuccess || enabled == 0) {
    enabled = ~0ULL;
  }
  std::uint32_t status = rsmi::kNotSupported;
  bool answered = false;
  std::uint64_t corrected = 0;
  std::uint64_t uncorrected = 0;
  for (std::uint64_t block = 1; block <= rsmi::kGpuBlockLast; block <<= 1) {
    if (!(enabled & block)) continue;
    rsmi::ErrorCount count{};
    std::uint32_t st = api_.ecc_count(dv, block, &count);
    if (st == rsmi::kSuccess && count.correctable != UINT64_MAX &&
        count.uncorrectable != UINT64_MAX) {
      answered = true;
      corrected += count.correctable;
      uncorrected += count.uncorrectable;
      for (std::size_t k = 0; k < std::size(kAmdRasBlocks); ++k) {
        if (block == 1ULL << k) {
          s.ecc_blocks.push_back({kAmdRasBlocks[k], count.correctable, count.uncorrectable, {}});
        }
      }
    } else if (!is_unsupported(st)) {
      status = st;
    }
  }
  if (t.ok("ecc", answered ? rsmi::kSuccess : status)) {
    s.ecc_corrected_volatile = corrected;
    s.ecc_uncorrected_volatile = uncorrected;
  }
}

// The RAS table's bad pages (retired, pending, unreservable). AMD keeps them across reboots;
// the ECC counts above restart with the driver, and no AMD library keeps lifetime ("aggregate")
// counts, so ecc_*_aggregate stay empty.
void RocmSmiBackend::read_bad_pages(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  if (!api_.reserved_pages) return;
  amd::read_bad_pages<rsmi::RetiredPageRecord>(
      [&](std::uint32_t* n, rsmi::RetiredPageRecord* records) {
        return t.ok("reserved_pages", api_.reserved_pages(dv, n, records));
      },
      s);
}

// Throttling from the metrics table's independent throttle bits, where the GPU fills them (not
// MI300, whose table says "not available").
// The same table's later fields (XGMI data, PCIe bandwidth, residencies, VCN/JPEG busy) too.
void RocmSmiBackend::read_throttle(std::uint32_t dv, Tally& t, AcceleratorSample& s) const {
  if (!api_.gpu_metrics) return;
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[amd::kGpuMetricsBufferSize]());
  if (!t.ok("gpu_metrics",
            api_.gpu_metrics(dv, reinterpret_cast<amd::GpuMetricsPrefix*>(buffer.get())))) {
    return;
  }
  amd::GpuMetricsPrefix prefix;
  std::memcpy(&prefix, buffer.get(), sizeof prefix);
  if (auto mask = amd::independent_throttle_mask(prefix)) amd::set_throttle(*mask, s);
  amd::read_metrics_table(buffer.get(), s);
}

// The stride of the library's event array: the one its version implies, unless only the other
// one gives sensible entries (see rsmi::EventData).
std::size_t RocmSmiBackend::event_stride(const unsigned char* raw, std::uint32_t n) const {
  const bool long_messages = major_version_ > rsmi::kEventLongMessageMajor ||
                             (major_version_ == rsmi::kEventLongMessageMajor &&
                              minor_version_ >= rsmi::kEventLongMessageMinor);
  const std::size_t preferred =
      long_messages ? sizeof(rsmi::EventDataLong) : sizeof(rsmi::EventDataShort);
  const std::size_t other =
      long_messages ? sizeof(rsmi::EventDataShort) : sizeof(rsmi::EventDataLong);
  auto sensible = [&](std::size_t stride) {
    for (std::uint32_t k = 0; k < n; ++k) {
      EventEntry e = event_entry(raw + k * stride);
      if (e.dv >= index_bus_ids_.size() || e.event == 0 || e.event > rsmi::kEventAllProcess) {
        return false;
      }
      if (!std::memchr(e.message, 0, stride - kEventMessageOffset)) return false;
    }
    return true;
  };
  if (n <= 1 || sensible(preferred) || !sensible(other)) return preferred;
  return other;
}

void RocmSmiBackend::decode_events(const unsigned char* raw, std::uint32_t n,
                                   std::vector<AcceleratorEvent>& out) const {
  const std::size_t stride = event_stride(raw, n);
  for (std::uint32_t k = 0; k < n; ++k) {
    const EventEntry entry = event_entry(raw + k * stride);
    const std::uint32_t dv = entry.dv;
    const std::uint32_t event = entry.event;
    if (dv >= index_bus_ids_.size() || index_bus_ids_[dv].empty()) continue;
    std::string message = trimmed(
        std::string(entry.message, strnlen(entry.message, stride - kEventMessageOffset)).c_str());

    out.push_back(amd::kfd_event(index_bus_ids_[dv], event, message));
  }
}

std::vector<AcceleratorEvent> RocmSmiBackend::poll_events(std::chrono::milliseconds timeout) {
  std::vector<AcceleratorEvent> out;
  if (!events_on_) {
    // Nothing can arrive: wait anyway, so that a caller's loop does not spin.
    std::this_thread::sleep_for(timeout);
    return out;
  }
  constexpr std::uint32_t kBatch = 16;
  std::vector<unsigned char> raw(kBatch * sizeof(rsmi::EventDataLong));
  int wait_ms =
      static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, INT_MAX));
  for (int round = 0; round < 16; ++round) {
    std::fill(raw.begin(), raw.end(), 0);
    std::uint32_t n = kBatch;
    std::uint32_t st = api_.event_get(wait_ms, &n, raw.data());
    if (st != rsmi::kSuccess) {
      if (round == 0 && st != rsmi::kNoData) std::this_thread::sleep_for(timeout);
      break;
    }
    if (n == 0) break;
    decode_events(raw.data(), std::min(n, kBatch), out);
    wait_ms = 0;  // then take what else is waiting, without waiting
  }
  return out;
}

}  // namespace

std::unique_ptr<AcceleratorBackend> make_rocm_smi_backend() {
  return std::make_unique<RocmSmiBackend>();
}

}  // namespace polyaccel
