// The amd-smi backend: AMD GPUs through libamd_smi.so (AMD SMI, the successor of ROCm SMI),
// dlopened at run time (DESIGN.md, rule 4). Every symbol is resolved by name; a missing one makes
// its feature "not supported" and the rest works. The ABI declarations are our own
// (amd_smi_abi.h); the structs whose layout changed with library version 26 are read only from
// such a library.
//
// Devices are keyed by PCI function: in a compute partition mode (CPX, ...) the library shows one
// processor handle per partition, all on the same function; the first stands for the GPU.
// Reachability is told as in rocm.cc (amd::FieldTally).
//
// Each struct getter is handed a buffer with room to spare, so that a library whose struct grew
// (amd-smi appends fields and bumps its major version) cannot write past our copy.
//
// make_amd_backend(), at the end, is the one AMD entry of backends.cc: amd-smi where its library
// loads, else ROCm SMI (which AMD deprecated in favour of amd-smi).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "discover/accel/amd_common.h"
#include "discover/accel/amd_smi_abi.h"
#include "discover/accel/backends.h"
#include "discover/accel/library.h"

namespace polyaccel {
namespace {

constexpr const char* kOverrideVariable = "POLYACCEL_AMD_SMI_LIB";
constexpr const char* kDefaultSoname = "libamd_smi.so";
// ROCm installs the library under /opt/rocm/lib, which the loader does not always search.
constexpr const char* kRocmPath = "/opt/rocm/lib/libamd_smi.so";

// Events we ask for. VM faults are left out: they belong to a process, not to the device.
constexpr std::uint64_t kEventMask = amdsmi::event_mask(amdsmi::kEventThermalThrottle) |
                                     amdsmi::event_mask(amdsmi::kEventGpuPreReset) |
                                     amdsmi::event_mask(amdsmi::kEventGpuPostReset);

// The event record of libraries before 26: a 64-byte message.
constexpr std::size_t kEventStrideBefore26 = 80;

// A zeroed buffer for one struct getter, with room for a longer struct of a newer library.
template <class T>
class Out {
 public:
  T* get() { return reinterpret_cast<T*>(bytes_); }
  T value() const {
    T t;
    std::memcpy(&t, bytes_, sizeof t);
    return t;
  }

 private:
  alignas(8) unsigned char bytes_[sizeof(T) + 4096] = {};
};

// The library's functions that we use; null when it lacks one.
struct Api {
  amdsmi::InitFn* init = nullptr;
  amdsmi::ShutDownFn* shut_down = nullptr;
  amdsmi::StatusCodeToStringFn* status_string = nullptr;
  amdsmi::LibVersionFn* lib_version = nullptr;
  amdsmi::SocketHandlesFn* socket_handles = nullptr;
  amdsmi::ProcessorHandlesFn* processor_handles = nullptr;
  amdsmi::ProcessorTypeFn* processor_type = nullptr;
  amdsmi::DeviceBdfFn* bdf = nullptr;
  amdsmi::DeviceUuidFn* uuid = nullptr;
  amdsmi::AsicInfoFn* asic_info = nullptr;
  amdsmi::BoardInfoFn* board_info = nullptr;
  amdsmi::DriverInfoFn* driver_info = nullptr;
  amdsmi::MemoryFn* memory_total = nullptr;
  amdsmi::MemoryFn* memory_usage = nullptr;
  amdsmi::PartitionFn* compute_partition = nullptr;
  amdsmi::PartitionFn* memory_partition = nullptr;
  amdsmi::LinkTypeFn* link_type = nullptr;
  amdsmi::PowerCapInfoFn* power_cap_info = nullptr;
  amdsmi::U64Fn* ecc_enabled = nullptr;
  amdsmi::ActivityFn* activity = nullptr;
  amdsmi::TempMetricFn* temperature = nullptr;
  amdsmi::PowerInfoFn* power_info = nullptr;
  amdsmi::EnergyCountFn* energy = nullptr;
  amdsmi::ClockInfoFn* clock_info = nullptr;
  amdsmi::U64Fn* pcie_replay = nullptr;
  amdsmi::PcieInfoFn* pcie_info = nullptr;
  amdsmi::ErrorCountFn* ecc_total = nullptr;
  amdsmi::BlockErrorCountFn* ecc_block = nullptr;
  amdsmi::BadPageInfoFn* bad_pages = nullptr;
  amdsmi::GpuMetricsFn* gpu_metrics = nullptr;
  amdsmi::ViolationStatusFn* violation_status = nullptr;
  amdsmi::HandleFn* event_init = nullptr;
  amdsmi::EventMaskFn* event_mask_set = nullptr;
  amdsmi::EventGetFn* event_get = nullptr;
  amdsmi::HandleFn* event_stop = nullptr;
};

void resolve(SharedLibrary& lib, Api& api) {
  lib.resolve(api.init, "amdsmi_init");
  lib.resolve(api.shut_down, "amdsmi_shut_down");
  lib.resolve(api.status_string, "amdsmi_status_code_to_string");
  lib.resolve(api.lib_version, "amdsmi_get_lib_version");
  lib.resolve(api.socket_handles, "amdsmi_get_socket_handles");
  lib.resolve(api.processor_handles, "amdsmi_get_processor_handles");
  lib.resolve(api.processor_type, "amdsmi_get_processor_type");
  lib.resolve(api.bdf, "amdsmi_get_gpu_device_bdf");
  lib.resolve(api.uuid, "amdsmi_get_gpu_device_uuid");
  lib.resolve(api.asic_info, "amdsmi_get_gpu_asic_info");
  lib.resolve(api.board_info, "amdsmi_get_gpu_board_info");
  lib.resolve(api.driver_info, "amdsmi_get_gpu_driver_info");
  lib.resolve(api.memory_total, "amdsmi_get_gpu_memory_total");
  lib.resolve(api.memory_usage, "amdsmi_get_gpu_memory_usage");
  lib.resolve(api.compute_partition, "amdsmi_get_gpu_compute_partition");
  lib.resolve(api.memory_partition, "amdsmi_get_gpu_memory_partition");
  lib.resolve(api.link_type, "amdsmi_topo_get_link_type");
  lib.resolve(api.power_cap_info, "amdsmi_get_power_cap_info");
  lib.resolve(api.ecc_enabled, "amdsmi_get_gpu_ecc_enabled");
  lib.resolve(api.activity, "amdsmi_get_gpu_activity");
  lib.resolve(api.temperature, "amdsmi_get_temp_metric");
  lib.resolve(api.power_info, "amdsmi_get_power_info");
  lib.resolve(api.energy, "amdsmi_get_energy_count");
  lib.resolve(api.clock_info, "amdsmi_get_clock_info");
  lib.resolve(api.pcie_replay, "amdsmi_get_gpu_pci_replay_counter");
  lib.resolve(api.pcie_info, "amdsmi_get_pcie_info");
  lib.resolve(api.ecc_total, "amdsmi_get_gpu_total_ecc_count");
  lib.resolve(api.ecc_block, "amdsmi_get_gpu_ecc_count");
  lib.resolve(api.bad_pages, "amdsmi_get_gpu_bad_page_info");
  lib.resolve(api.gpu_metrics, "amdsmi_get_gpu_metrics_info");
  lib.resolve(api.violation_status, "amdsmi_get_violation_status");
  lib.resolve(api.event_init, "amdsmi_init_gpu_event_notification");
  lib.resolve(api.event_mask_set, "amdsmi_set_gpu_event_notification_mask");
  lib.resolve(api.event_get, "amdsmi_get_gpu_event_notification");
  lib.resolve(api.event_stop, "amdsmi_stop_gpu_event_notification");
}

Result<SharedLibrary> open_library() {
  const char* override_path = std::getenv(kOverrideVariable);
  auto lib = SharedLibrary::open(library_path(kOverrideVariable, kDefaultSoname), "AMD SMI");
  if (lib || (override_path && *override_path) || lib.error().code != ErrorCode::not_found) {
    return lib;
  }
  auto rocm = SharedLibrary::open(kRocmPath, "AMD SMI");
  if (rocm || rocm.error().code != ErrorCode::not_found) return rocm;
  return lib;
}

std::string bus_id_of(amdsmi::Bdf bdf) {
  PciAddress a;
  a.domain = static_cast<std::uint32_t>(bdf >> 16);
  a.bus = static_cast<std::uint8_t>((bdf >> 8) & 0xff);
  a.device = static_cast<std::uint8_t>((bdf >> 3) & 0x1f);
  a.function = static_cast<std::uint8_t>(bdf & 0x7);
  return a.to_string();
}

// A fixed-size string field of a struct the library filled.
std::string field(const char* text, std::size_t size) {
  std::string s(text, strnlen(text, size));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

bool is_unsupported(amdsmi::Status status) {
  return status == amdsmi::kNotSupported || status == amdsmi::kNotYetImplemented ||
         status == amdsmi::kNoPerm;
}

class Tally {
 public:
  explicit Tally(std::set<std::string>& answered_before) : tally_(answered_before) {}
  bool ok(const char* field_name, amdsmi::Status status) {
    return tally_.ok(field_name, status == amdsmi::kSuccess, is_unsupported(status));
  }
  bool reachable() const { return tally_.reachable(); }

 private:
  amd::FieldTally tally_;
};

// A percentage the library reports, or nothing for its "not available" (UINT16_MAX/UINT32_MAX).
std::optional<double> percent(std::uint32_t value) {
  if (value > 100) return std::nullopt;
  return value;
}

class AmdSmiBackend final : public AcceleratorBackend {
 public:
  AmdSmiBackend() = default;
  AmdSmiBackend(const AmdSmiBackend&) = delete;
  AmdSmiBackend& operator=(const AmdSmiBackend&) = delete;
  ~AmdSmiBackend() override;

  std::string name() const override { return "amd-smi"; }
  Vendor vendor() const override { return Vendor::amd; }
  Status open() override;
  const LibraryReport& library() const override { return report_; }
  Result<std::vector<Device>> devices() override;
  AcceleratorSample sample(const std::string& pci_bus_id) override;
  std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) override;

  // Whether libamd_smi.so itself opened (whatever its init said).
  bool library_loaded() const { return lib_.loaded(); }

 private:
  // A compute partition after the first (whose handle is the Gpu's).
  struct Partition {
    amdsmi::ProcessorHandle handle = nullptr;
    std::uint32_t index = 0;         // its place in the library's enumeration
    std::set<std::string> answered;  // its sample fields that answered at least once
  };
  struct Gpu {
    amdsmi::ProcessorHandle handle = nullptr;
    std::uint32_t index = 0;  // the processor's place in the library's enumeration
    std::string bus_id;
    unsigned partitions = 0;
    std::set<std::string> answered;           // sample fields that answered at least once
    std::vector<Partition> other_partitions;  // partitions 1..N-1, in enumeration order
  };

  Status open_once();
  std::string status_text(amdsmi::Status status) const;
  Error call_failed(const char* function, amdsmi::Status status) const;
  Status enumerate();
  void enable_events();
  bool structs_readable() const { return major_ == 0 || major_ >= amdsmi::kStructLayoutMajor; }
  AcceleratorInventory inventory(const Gpu& gpu) const;
  std::vector<PeerLink> xgmi_peers(const Gpu& gpu) const;

  void read_activity(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_other_memory(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_temperatures(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_power(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_clocks(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_errors(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_bad_pages(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_throttle(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_pcie_metrics(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const;
  void read_partitions(Gpu& gpu, AcceleratorSample& s) const;
  std::optional<double> temperature(amdsmi::ProcessorHandle p, Tally& t, std::uint32_t sensor,
                                    const char* field_name) const;
  std::size_t event_stride(const unsigned char* raw, std::uint32_t n) const;
  void decode_events(const unsigned char* raw, std::uint32_t n,
                     std::vector<AcceleratorEvent>& out) const;

  SharedLibrary lib_;
  Api api_;
  LibraryReport report_;
  std::optional<Status> opened_;  // what the first open() gave
  bool initialized_ = false;
  bool events_on_ = false;
  std::uint32_t major_ = 0;  // the library's major version; 0 when it does not say
  // Fixed by open(): one Gpu per PCI function, the bus id of every processor handle, the
  // handles whose event notification we started.
  std::vector<Gpu> gpus_;
  std::map<amdsmi::ProcessorHandle, std::string> handle_bus_ids_;
  std::vector<amdsmi::ProcessorHandle> event_handles_;
  std::mutex mutex_;  // guards gpus_[].answered
};

AmdSmiBackend::~AmdSmiBackend() {
  if (!initialized_) return;
  if (api_.event_stop) {
    for (amdsmi::ProcessorHandle h : event_handles_)
      api_.event_stop(h);
  }
  if (api_.shut_down) api_.shut_down();
}

std::string AmdSmiBackend::status_text(amdsmi::Status status) const {
  const char* text = nullptr;
  std::string s =
      api_.status_string && api_.status_string(status, &text) == amdsmi::kSuccess && text
          ? std::string(text)
          : std::string(amdsmi::status_name(status));
  return s + " (status " + std::to_string(status) + ")";
}

Error AmdSmiBackend::call_failed(const char* function, amdsmi::Status status) const {
  return Error{ErrorCode::io, report_.path,
               std::string(function) + " failed: " + status_text(status),
               "check that the amdgpu driver is loaded and that /sys/class/drm and /dev/kfd are "
               "readable"};
}

Status AmdSmiBackend::open() {
  if (!opened_) opened_ = open_once();
  return *opened_;
}

Status AmdSmiBackend::open_once() {
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
  for (auto [fn, fn_name] :
       {std::pair{api_.init != nullptr, "amdsmi_init"},
        std::pair{api_.socket_handles != nullptr, "amdsmi_get_socket_handles"},
        std::pair{api_.processor_handles != nullptr, "amdsmi_get_processor_handles"},
        std::pair{api_.bdf != nullptr, "amdsmi_get_gpu_device_bdf"}}) {
    if (!fn) lacking += (lacking.empty() ? "" : ", ") + std::string(fn_name);
  }
  if (!lacking.empty()) {
    return Error{ErrorCode::bad_input, report_.path,
                 "is not a usable AMD SMI library: it does not export " + lacking,
                 "point " + std::string(kOverrideVariable) +
                     " at libamd_smi.so from ROCm (amd-smi-lib), or unset it"};
  }

  amdsmi::Status st = api_.init(amdsmi::kInitAmdGpus);
  if (st == amdsmi::kDriverNotLoaded) {
    // A host with ROCm installed but no AMD GPU (no amdgpu driver): nothing to see, not broken.
    return Error{ErrorCode::not_found,
                 report_.path,
                 "amdsmi_init: the amdgpu driver is not loaded (no AMD GPU)",
                 {}};
  }
  if (st != amdsmi::kSuccess) return call_failed("amdsmi_init", st);
  initialized_ = true;

  amdsmi::Version version{};
  if (api_.lib_version && api_.lib_version(&version) == amdsmi::kSuccess) major_ = version.major;
  if (!structs_readable()) {
    // (Before 26 the version began with a year, which is what major_ holds then: no number here.)
    report_.note =
        "AMD SMI library older than 26 (ROCm 7): ASIC, board, driver and power details are not "
        "read";
  }
  Status listed = enumerate();
  if (!listed) return listed;
  enable_events();
  return Ok{};
}

Status AmdSmiBackend::enumerate() {
  std::uint32_t socket_count = 0;
  amdsmi::Status st = api_.socket_handles(&socket_count, nullptr);
  if (st != amdsmi::kSuccess) return call_failed("amdsmi_get_socket_handles", st);
  std::vector<amdsmi::SocketHandle> sockets(socket_count);
  st = api_.socket_handles(&socket_count, sockets.data());
  if (st != amdsmi::kSuccess) return call_failed("amdsmi_get_socket_handles", st);
  sockets.resize(std::min<std::size_t>(socket_count, sockets.size()));

  // Every GPU processor with its bus id, then the GPUs (partitions: one GPU, function 0).
  std::vector<amdsmi::ProcessorHandle> handles;
  std::vector<std::string> bus_ids;
  for (amdsmi::SocketHandle socket : sockets) {
    std::uint32_t count = 0;
    if (api_.processor_handles(socket, &count, nullptr) != amdsmi::kSuccess) continue;
    std::vector<amdsmi::ProcessorHandle> processors(count);
    if (api_.processor_handles(socket, &count, processors.data()) != amdsmi::kSuccess) continue;
    processors.resize(std::min<std::size_t>(count, processors.size()));
    for (amdsmi::ProcessorHandle p : processors) {
      std::uint32_t type = amdsmi::kProcessorTypeAmdGpu;
      if (api_.processor_type && api_.processor_type(p, &type) == amdsmi::kSuccess &&
          type != amdsmi::kProcessorTypeAmdGpu) {
        continue;
      }
      amdsmi::Bdf bdf = 0;
      handles.push_back(p);
      bus_ids.push_back(api_.bdf(p, &bdf) == amdsmi::kSuccess ? bus_id_of(bdf) : "");
    }
  }
  bus_ids = amd::physical_bus_ids(bus_ids);
  for (std::uint32_t index = 0; index < handles.size(); ++index) {
    const std::string& bus_id = bus_ids[index];
    if (bus_id.empty()) continue;
    handle_bus_ids_[handles[index]] = bus_id;
    auto gpu =
        std::find_if(gpus_.begin(), gpus_.end(), [&](const Gpu& g) { return g.bus_id == bus_id; });
    if (gpu == gpus_.end()) {
      gpus_.push_back(Gpu{handles[index], index, bus_id, 1, {}, {}});
    } else {
      ++gpu->partitions;
      gpu->other_partitions.push_back(Partition{handles[index], index, {}});
    }
  }
  return Ok{};
}

void AmdSmiBackend::enable_events() {
  if (!api_.event_init || !api_.event_mask_set || !api_.event_get) return;
  for (const auto& [handle, bus_id] : handle_bus_ids_) {
    if (api_.event_init(handle) != amdsmi::kSuccess) continue;
    event_handles_.push_back(handle);
    if (api_.event_mask_set(handle, kEventMask) == amdsmi::kSuccess) events_on_ = true;
  }
}

Result<std::vector<AcceleratorBackend::Device>> AmdSmiBackend::devices() {
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
    d.partitions = gpu.partitions;
    out.push_back(std::move(d));
  }
  return out;
}

AcceleratorInventory AmdSmiBackend::inventory(const Gpu& gpu) const {
  const amdsmi::ProcessorHandle p = gpu.handle;
  AcceleratorInventory inv;
  inv.backend = "amd-smi";
  inv.index = gpu.index;
  if (api_.uuid) {
    char uuid[amdsmi::kMaxString] = {};
    unsigned int length = sizeof uuid;
    if (api_.uuid(p, &length, uuid) == amdsmi::kSuccess) inv.uuid = field(uuid, sizeof uuid);
  }
  if (structs_readable() && api_.asic_info) {
    Out<amdsmi::AsicInfo> asic;
    if (api_.asic_info(p, asic.get()) == amdsmi::kSuccess) {
      const amdsmi::AsicInfo a = asic.value();
      inv.product_name = field(a.market_name, sizeof a.market_name);
      inv.serial = field(a.asic_serial, sizeof a.asic_serial);
      if (a.target_graphics_version != ~0ULL && a.target_graphics_version != 0) {
        inv.gfx_version = amd::gfx_name(a.target_graphics_version);
      }
    }
  }
  if (structs_readable() && api_.board_info) {
    Out<amdsmi::BoardInfo> board;
    if (api_.board_info(p, board.get()) == amdsmi::kSuccess) {
      const amdsmi::BoardInfo b = board.value();
      // The board's serial is the one on the label; the ASIC serial is the fallback.
      std::string serial = field(b.product_serial, sizeof b.product_serial);
      if (!serial.empty()) inv.serial = serial;
      if (inv.product_name.empty()) inv.product_name = field(b.product_name, sizeof b.product_name);
      inv.board_part_number = field(b.model_number, sizeof b.model_number);
    }
  }
  if (api_.pcie_info) {
    // The link's maximum as the GPU reports it (AMD's exporter serves pcie_max_speed from it):
    // known where sysfs is not (a VM's emulated root port, a container without /sys).
    std::unique_ptr<unsigned char[]> buffer(new unsigned char[4096]());
    auto* pcie = reinterpret_cast<amdsmi::PcieStaticPrefix*>(buffer.get());
    // PCIe 1.0 to 7.0: 2.5 to 128 GT/s; all ones is "not supported".
    if (api_.pcie_info(p, pcie) == amdsmi::kSuccess && pcie->max_pcie_speed >= 2500 &&
        pcie->max_pcie_speed <= 128000) {
      inv.pcie_max_speed_gts = pcie->max_pcie_speed / 1000.0;
    }
  }
  if (structs_readable() && api_.driver_info) {
    Out<amdsmi::DriverInfo> driver;
    if (api_.driver_info(p, driver.get()) == amdsmi::kSuccess) {
      const amdsmi::DriverInfo d = driver.value();
      inv.driver_version = field(d.driver_version, sizeof d.driver_version);
    }
  }
  std::uint64_t v = 0;
  if (api_.memory_total && api_.memory_total(p, amdsmi::kMemTypeVram, &v) == amdsmi::kSuccess) {
    inv.memory_total_bytes = v;
  }
  char text[amdsmi::kMaxString] = {};
  if (api_.compute_partition &&
      api_.compute_partition(p, text, sizeof text - 1) == amdsmi::kSuccess) {
    inv.compute_partition = field(text, sizeof text);
  }
  std::memset(text, 0, sizeof text);
  if (api_.memory_partition &&
      api_.memory_partition(p, text, sizeof text - 1) == amdsmi::kSuccess) {
    inv.memory_partition = field(text, sizeof text);
  }
  if (api_.power_cap_info) {
    Out<amdsmi::PowerCapInfo> cap;
    if (api_.power_cap_info(p, 0, cap.get()) == amdsmi::kSuccess && cap.value().power_cap != 0) {
      inv.power_limit_watts = static_cast<double>(cap.value().power_cap) / 1e6;  // microwatts
    }
  }
  if (api_.ecc_enabled && api_.ecc_enabled(p, &v) == amdsmi::kSuccess) {
    inv.ecc_enabled = (v & amdsmi::kGpuBlockUmc) != 0;  // ECC of the memory (UMC) block
  }
  return inv;
}

std::vector<PeerLink> AmdSmiBackend::xgmi_peers(const Gpu& gpu) const {
  std::vector<PeerLink> peers;
  if (!api_.link_type) return peers;
  for (const Gpu& other : gpus_) {
    if (other.handle == gpu.handle) continue;
    std::uint64_t hops = 0;
    std::uint32_t type = 0;
    if (api_.link_type(gpu.handle, other.handle, &hops, &type) != amdsmi::kSuccess) continue;
    if (type != amdsmi::kLinkTypeXgmi || hops != 1) continue;  // direct XGMI links only
    auto address = PciAddress::parse(other.bus_id);
    if (address) peers.push_back(PeerLink{*address, Link{LinkLevel::xgmi, 1}});
  }
  return peers;
}

AcceleratorSample AmdSmiBackend::sample(const std::string& pci_bus_id) {
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
  read_activity(gpu->handle, t, s);
  read_other_memory(gpu->handle, t, s);
  read_temperatures(gpu->handle, t, s);
  read_power(gpu->handle, t, s);
  read_clocks(gpu->handle, t, s);
  read_errors(gpu->handle, t, s);
  read_bad_pages(gpu->handle, t, s);
  read_throttle(gpu->handle, t, s);
  read_pcie_metrics(gpu->handle, t, s);
  s.reachable = t.reachable();
  if (s.reachable) read_partitions(*gpu, s);
  return s;
}

// Each further partition's own activity and memory through its own processor handle; one that
// does not answer is left out (its GPU's sample stands).
void AmdSmiBackend::read_partitions(Gpu& gpu, AcceleratorSample& s) const {
  for (std::size_t k = 0; k < gpu.other_partitions.size(); ++k) {
    Partition& part = gpu.other_partitions[k];
    Tally t(part.answered);
    AcceleratorSample own;
    read_activity(part.handle, t, own);
    if (!t.reachable()) continue;
    if (auto ps = amd::partition_sample(k, part.index, own, s)) s.partitions.push_back(*ps);
  }
}

void AmdSmiBackend::read_activity(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const {
  if (api_.activity) {
    Out<amdsmi::EngineUsage> usage;
    if (t.ok("activity", api_.activity(p, usage.get()))) {
      s.gpu_utilization_percent = percent(usage.value().gfx_activity);
      s.memory_utilization_percent = percent(usage.value().umc_activity);
    }
  }
  std::uint64_t used = 0;
  std::uint64_t total = 0;
  if (api_.memory_usage && t.ok("vram_used", api_.memory_usage(p, amdsmi::kMemTypeVram, &used))) {
    s.memory_used_bytes = used;
    if (api_.memory_total &&
        t.ok("vram_total", api_.memory_total(p, amdsmi::kMemTypeVram, &total)) && total >= used) {
      s.memory_free_bytes = total - used;
    }
  }
}

// GTT and the CPU-visible part of VRAM: the GPU's, on its first partition only (metricslist.md).
void AmdSmiBackend::read_other_memory(amdsmi::ProcessorHandle p, Tally& t,
                                      AcceleratorSample& s) const {
  if (!api_.memory_total || !api_.memory_usage) return;
  amd::read_gtt_and_visible_vram(
      [&](const char* field, std::uint32_t type, bool want_total, std::uint64_t* bytes) {
        return t.ok(field, want_total ? api_.memory_total(p, type, bytes)
                                      : api_.memory_usage(p, type, bytes));
      },
      amdsmi::kMemTypeGtt, amdsmi::kMemTypeVisVram, s);
}

std::optional<double> AmdSmiBackend::temperature(amdsmi::ProcessorHandle p, Tally& t,
                                                 std::uint32_t sensor,
                                                 const char* field_name) const {
  std::int64_t celsius = 0;
  if (!t.ok(field_name, api_.temperature(p, sensor, amdsmi::kTempCurrent, &celsius))) {
    return std::nullopt;
  }
  return static_cast<double>(celsius);
}

// GPU: the edge sensor, else the hotspot (MI300 has no edge sensor); the edge sensor alone too.
// Memory: the VRAM sensor, else the hottest HBM stack; each stack too.
void AmdSmiBackend::read_temperatures(amdsmi::ProcessorHandle p, Tally& t,
                                      AcceleratorSample& s) const {
  if (!api_.temperature) return;
  s.hotspot_temperature_c = temperature(p, t, amdsmi::kTempTypeHotspot, "temperature_hotspot");
  s.gpu_temperature_c = temperature(p, t, amdsmi::kTempTypeEdge, "temperature_edge");
  s.edge_temperature_c = amd::plausible_celsius(s.gpu_temperature_c);
  if (!s.gpu_temperature_c) s.gpu_temperature_c = s.hotspot_temperature_c;
  s.memory_temperature_c = temperature(p, t, amdsmi::kTempTypeVram, "temperature_vram");
  static_assert(amdsmi::kTempTypeHbm0 == 3 && amdsmi::kTempTypeHbm3 == 6);
  amd::read_hbm_temperatures(
      [&](std::uint32_t sensor, const char* field) { return temperature(p, t, sensor, field); }, s);
}

// Power: the current socket power (MI300 and later), else the average (older GPUs), in watts;
// all ones means "not supported". Energy: the counter times its resolution in microjoules.
void AmdSmiBackend::read_power(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const {
  if (structs_readable() && api_.power_info) {
    Out<amdsmi::PowerInfo> info;
    if (t.ok("power", api_.power_info(p, info.get()))) {
      const amdsmi::PowerInfo pi = info.value();
      if (pi.current_socket_power != UINT32_MAX) {
        s.power_watts = pi.current_socket_power;
      } else if (pi.average_socket_power != UINT32_MAX) {
        s.power_watts = pi.average_socket_power;
      }
      // Watts; no accelerator draws 10 kW.
      if (pi.average_socket_power < 10000) s.average_power_watts = pi.average_socket_power;
    }
  }
  std::uint64_t counter = 0;
  std::uint64_t timestamp = 0;
  float resolution_uj = 0;
  if (api_.energy && t.ok("energy", api_.energy(p, &counter, &resolution_uj, &timestamp))) {
    long double microjoules = static_cast<long double>(counter) * resolution_uj;
    s.energy_millijoules = static_cast<std::uint64_t>(microjoules / 1000.0L);
  }
}

void AmdSmiBackend::read_clocks(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const {
  if (!api_.clock_info) return;
  Out<amdsmi::ClkInfo> gfx;
  // A range the library leaves at 0 or all ones is not known.
  auto known = [](std::uint32_t mhz) {
    return mhz != 0 && mhz != UINT32_MAX ? std::optional(mhz) : std::nullopt;
  };
  if (t.ok("gfx_clock", api_.clock_info(p, amdsmi::kClkTypeGfx, gfx.get()))) {
    s.sm_clock_mhz = gfx.value().clk;
    s.sm_clock_min_mhz = known(gfx.value().min_clk);
    s.sm_clock_max_mhz = known(gfx.value().max_clk);
  }
  Out<amdsmi::ClkInfo> mem;
  if (t.ok("mem_clock", api_.clock_info(p, amdsmi::kClkTypeMem, mem.get()))) {
    s.memory_clock_mhz = mem.value().clk;
    s.memory_clock_min_mhz = known(mem.value().min_clk);
    s.memory_clock_max_mhz = known(mem.value().max_clk);
  }
}

// PCIe replays, and the ECC counts of every RAS block together. They run since the driver
// loaded: NVML calls that volatile.
void AmdSmiBackend::read_errors(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const {
  std::uint64_t replays = 0;
  if (api_.pcie_replay && t.ok("pcie_replay", api_.pcie_replay(p, &replays))) {
    s.pcie_replay_count = replays;
  }
  if (api_.ecc_total) {
    Out<amdsmi::ErrorCount> counts;
    if (t.ok("ecc", api_.ecc_total(p, counts.get()))) {
      s.ecc_corrected_volatile = counts.value().correctable_count;
      s.ecc_uncorrected_volatile = counts.value().uncorrectable_count;
      if (counts.value().deferred_count != UINT64_MAX) {
        s.ecc_deferred_volatile = counts.value().deferred_count;
      }
    }
  }
  // Each RAS block's own counts, as AMD's exporter reads them; a block the GPU has no RAS for
  // answers "not supported" and is left out.
  if (!api_.ecc_block) return;
  for (std::size_t k = 0; k < std::size(kAmdRasBlocks); ++k) {
    Out<amdsmi::ErrorCount> counts;
    const std::string field_name = std::string("ecc_") + kAmdRasBlocks[k];
    if (!t.ok(field_name.c_str(), api_.ecc_block(p, 1ULL << k, counts.get()))) continue;
    const amdsmi::ErrorCount c = counts.value();
    if (c.correctable_count == UINT64_MAX || c.uncorrectable_count == UINT64_MAX) continue;
    RasBlockErrors e;
    e.block = kAmdRasBlocks[k];
    e.correctable = c.correctable_count;
    e.uncorrectable = c.uncorrectable_count;
    if (c.deferred_count != UINT64_MAX) e.deferred = c.deferred_count;
    s.ecc_blocks.push_back(e);
  }
}

// The RAS table's bad pages, by state.
void AmdSmiBackend::read_bad_pages(amdsmi::ProcessorHandle p, Tally& t,
                                   AcceleratorSample& s) const {
  if (!api_.bad_pages) return;
  amd::read_bad_pages<amdsmi::RetiredPageRecord>(
      [&](std::uint32_t* n, amdsmi::RetiredPageRecord* records) {
        return t.ok("bad_pages", api_.bad_pages(p, n, records));
      },
      s);
}

// Throttling: the metrics table's independent throttle bits where the GPU fills them, else the
// violation status of MI300 and later (its "active" flags, mapped onto the same bits).
// The violation status's counters go to the sample's violation residencies either way.
void AmdSmiBackend::read_throttle(amdsmi::ProcessorHandle p, Tally& t, AcceleratorSample& s) const {
  std::optional<amdsmi::ViolationStatus> status;
  if (structs_readable() && api_.violation_status) {
    Out<amdsmi::ViolationStatus> out;
    if (t.ok("violation_status", api_.violation_status(p, out.get()))) status = out.value();
  }
  if (status) {
    const amdsmi::ViolationStatus& v = *status;
    if (v.acc_counter != UINT64_MAX) s.violation.accumulation_counter = v.acc_counter;
    const std::uint64_t accumulated[ViolationSample::kKinds] = {
        v.acc_prochot_thrm, v.acc_ppt_pwr, v.acc_socket_thrm, v.acc_vr_thrm, v.acc_hbm_thrm};
    const std::uint64_t percent[ViolationSample::kKinds] = {
        v.per_prochot_thrm, v.per_ppt_pwr, v.per_socket_thrm, v.per_vr_thrm, v.per_hbm_thrm};
    for (std::size_t k = 0; k < ViolationSample::kKinds; ++k) {
      if (accumulated[k] != UINT64_MAX) s.violation.residency_accumulated[k] = accumulated[k];
      if (percent[k] <= 100) s.violation.residency_percent[k] = static_cast<double>(percent[k]);
    }
    // Row 0: the first partition's XCCs (the whole GPU in SPX), in ViolationSample's order.
    const std::uint64_t(*xcc_acc[ViolationSample::kXccKinds])[amdsmi::kMaxNumXcc] = {
        v.acc_gfx_clk_below_host_limit_pwr, v.acc_gfx_clk_below_host_limit_thm,
        v.acc_low_utilization, v.acc_gfx_clk_below_host_limit_total};
    const std::uint64_t(*xcc_per[ViolationSample::kXccKinds])[amdsmi::kMaxNumXcc] = {
        v.per_gfx_clk_below_host_limit_pwr, v.per_gfx_clk_below_host_limit_thm,
        v.per_low_utilization, v.per_gfx_clk_below_host_limit_total};
    for (std::size_t k = 0; k < ViolationSample::kXccKinds; ++k) {
      for (unsigned xcc = 0; xcc < amdsmi::kMaxNumXcc; ++xcc) {
        std::uint64_t acc = xcc_acc[k][0][xcc];
        std::uint64_t per = xcc_per[k][0][xcc];
        if (acc != UINT64_MAX) s.violation.xcc_accumulated[k].emplace_back(xcc, acc);
        if (per <= 100) s.violation.xcc_percent[k].emplace_back(xcc, static_cast<double>(per));
      }
    }
  }
  if (api_.gpu_metrics) {
    auto mask = amd::metrics_throttle_mask([&](amd::GpuMetricsPrefix* table) {
      return t.ok("gpu_metrics", api_.gpu_metrics(p, table));
    });
    if (mask) {
      amd::set_throttle(*mask, s);
      return;
    }
  }
  if (!status) return;
  const amdsmi::ViolationStatus& v = *status;
  struct Flag {
    std::uint8_t active;
    std::uint64_t bit;
  };
  const Flag flags[] = {{v.active_ppt_pwr, amd::kThrottlePpt0},
                        {v.active_socket_thrm, amd::kThrottleTempHotspot},
                        {v.active_hbm_thrm, amd::kThrottleTempMem},
                        {v.active_vr_thrm, amd::kThrottleVrHot0},
                        {v.active_prochot_thrm, amd::kThrottleProchotGfx}};
  std::uint64_t mask = 0;
  bool known = false;
  for (const Flag& f : flags) {
    if (f.active == UINT8_MAX) continue;  // not supported
    known = true;
    if (f.active) mask |= f.bit;
  }
  if (known) amd::set_throttle(mask, s);
}

// The PCIe counters of amdsmi_gpu_metrics_t, at the offsets every amdsmi.h since ROCm 6.2 gives
// them (../shared/reference/vendor-abi/amd_smi.json); read only from a table of format 1,
// content 4 or later, that is long enough. All ones: the GPU does not keep that counter.
void AmdSmiBackend::read_pcie_metrics(amdsmi::ProcessorHandle p, Tally& t,
                                      AcceleratorSample& s) const {
  if (!api_.gpu_metrics) return;
  constexpr std::size_t kLinkWidth = 74, kLinkSpeed = 76, kBandwidthInst = 152, kRecovery = 160,
                        kRollover = 176, kNakSent = 416, kNakReceived = 420, kEnd = 424;
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[amd::kGpuMetricsBufferSize]());
  if (!t.ok("gpu_metrics",
            api_.gpu_metrics(p, reinterpret_cast<amd::GpuMetricsPrefix*>(buffer.get())))) {
    return;
  }
  const unsigned char* raw = buffer.get();
  std::uint16_t size = 0;
  std::memcpy(&size, raw, sizeof size);
  const std::uint8_t format = raw[2], content = raw[3];
  if (format != 1 || content < 4 || size < kEnd) {
    amd::read_metrics_table(raw, s);
    return;
  }
  auto read = [&](std::size_t offset, auto zero) -> std::optional<decltype(zero)> {
    decltype(zero) v = 0;
    std::memcpy(&v, raw + offset, sizeof v);
    if (v == static_cast<decltype(zero)>(~decltype(zero){0})) return std::nullopt;
    return v;
  };
  auto width = read(kLinkWidth, std::uint16_t{});
  if (width && *width > 0 && *width <= 32) s.pcie_link_width = *width;
  // In 0.1 GT/s; PCIe 1.0 to 7.0 run 2.5 to 128 GT/s.
  auto speed = read(kLinkSpeed, std::uint16_t{});
  if (speed && *speed >= 25 && *speed <= 1280) s.pcie_link_speed_gts = *speed / 10.0;
  // GB/s now.
  auto bandwidth = read(kBandwidthInst, std::uint64_t{});
  if (bandwidth && *bandwidth <= 1024) s.pcie_bandwidth_bytes_per_second = *bandwidth * 1e9;
  s.pcie_recovery_count = read(kRecovery, std::uint64_t{});
  s.pcie_replay_rollover_count = read(kRollover, std::uint64_t{});
  if (auto v = read(kNakSent, std::uint32_t{})) s.pcie_nak_sent_count = *v;
  if (auto v = read(kNakReceived, std::uint32_t{})) s.pcie_nak_received_count = *v;
  amd::read_metrics_table(raw, s);
}

// The record stride: the one the library's version implies, unless only the other one gives
// records of our processors (a library between layouts, such as 25.x with long strings).
std::size_t AmdSmiBackend::event_stride(const unsigned char* raw, std::uint32_t n) const {
  const std::size_t preferred =
      structs_readable() ? sizeof(amdsmi::EventData) : kEventStrideBefore26;
  const std::size_t other = structs_readable() ? kEventStrideBefore26 : sizeof(amdsmi::EventData);
  auto known = [&](std::size_t stride) {
    for (std::uint32_t k = 0; k < n; ++k) {
      amdsmi::ProcessorHandle handle = nullptr;
      std::memcpy(&handle, raw + k * stride + offsetof(amdsmi::EventData, processor_handle),
                  sizeof handle);
      if (!handle_bus_ids_.count(handle)) return false;
    }
    return true;
  };
  if (n <= 1 || known(preferred) || !known(other)) return preferred;
  return other;
}

void AmdSmiBackend::decode_events(const unsigned char* raw, std::uint32_t n,
                                  std::vector<AcceleratorEvent>& out) const {
  const std::size_t stride = event_stride(raw, n);
  constexpr std::size_t kMessageOffset = offsetof(amdsmi::EventData, message);
  for (std::uint32_t k = 0; k < n; ++k) {
    const unsigned char* entry = raw + k * stride;
    amdsmi::ProcessorHandle handle = nullptr;
    std::uint32_t event = 0;
    std::memcpy(&handle, entry + offsetof(amdsmi::EventData, processor_handle), sizeof handle);
    std::memcpy(&event, entry + offsetof(amdsmi::EventData, event), sizeof event);
    auto bus_id = handle_bus_ids_.find(handle);
    if (bus_id == handle_bus_ids_.end()) continue;
    std::string message =
        field(reinterpret_cast<const char*>(entry + kMessageOffset), stride - kMessageOffset);
    out.push_back(amd::kfd_event(bus_id->second, event, message));
  }
}

std::vector<AcceleratorEvent> AmdSmiBackend::poll_events(std::chrono::milliseconds timeout) {
  std::vector<AcceleratorEvent> out;
  if (!events_on_) {
    // Nothing can arrive: wait anyway, so that a caller's loop does not spin.
    std::this_thread::sleep_for(timeout);
    return out;
  }
  constexpr std::uint32_t kBatch = 16;
  std::vector<unsigned char> raw(kBatch * sizeof(amdsmi::EventData) + 4096);
  int wait_ms =
      static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, INT_MAX));
  for (int round = 0; round < 16; ++round) {
    std::fill(raw.begin(), raw.end(), 0);
    std::uint32_t n = kBatch;
    amdsmi::Status st =
        api_.event_get(wait_ms, &n, reinterpret_cast<amdsmi::EventData*>(raw.data()));
    if (st != amdsmi::kSuccess) {
      if (round == 0 && st != amdsmi::kNoData && st != amdsmi::kTimeout) {
        std::this_thread::sleep_for(timeout);
      }
      break;
    }
    if (n == 0) break;
    decode_events(raw.data(), std::min(n, kBatch), out);
    wait_ms = 0;  // then take what else is waiting, without waiting
  }
  return out;
}

// The one AMD backend of the list: amd-smi when its library opens, else ROCm SMI. Chosen at
// open(); until then it answers as amd-smi.
class AmdBackend final : public AcceleratorBackend {
 public:
  AmdBackend() : chosen_(std::make_unique<AmdSmiBackend>()) {}

  std::string name() const override { return chosen_->name(); }
  Vendor vendor() const override { return Vendor::amd; }
  Status open() override {
    if (opened_) return *opened_;
    opened_ = choose();
    report_ = chosen_->library();
    if (!note_.empty()) {
      report_.note = report_.note.empty() ? note_ : note_ + "; " + report_.note;
    }
    return *opened_;
  }
  const LibraryReport& library() const override { return opened_ ? report_ : chosen_->library(); }
  Result<std::vector<Device>> devices() override { return chosen_->devices(); }
  AcceleratorSample sample(const std::string& pci_bus_id) override {
    return chosen_->sample(pci_bus_id);
  }
  std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) override {
    return chosen_->poll_events(timeout);
  }

 private:
  // amd-smi if it opens; else ROCm SMI if it opens (older ROCm releases, Debian). When neither
  // does, the answer of amd-smi where its library is there (its driver check or its failure
  // explains ROCm SMI's too), else ROCm SMI's.
  Status choose() {
    auto amd_smi = std::make_unique<AmdSmiBackend>();
    Status st = amd_smi->open();
    if (st) {
      chosen_ = std::move(amd_smi);
      return st;
    }
    std::string why = st.error().code == ErrorCode::not_found
                          ? "amd-smi absent (" + st.error().message() + ")"
                          : "amd-smi failed (" + st.error().message() + ")";
    auto rocm = make_rocm_smi_backend();
    Status rocm_st = rocm->open();
    if (rocm_st) {
      note_ = why + ", ROCm SMI used";
      chosen_ = std::move(rocm);
      return rocm_st;
    }
    if (amd_smi->library_loaded() || st.error().code != ErrorCode::not_found) {
      chosen_ = std::move(amd_smi);
      return st;
    }
    note_ = why;
    chosen_ = std::move(rocm);
    return rocm_st;
  }

  std::unique_ptr<AcceleratorBackend> chosen_;
  std::optional<Status> opened_;
  std::string note_;
  LibraryReport report_;
};

}  // namespace

std::unique_ptr<AcceleratorBackend> make_amd_smi_backend() {
  return std::make_unique<AmdSmiBackend>();
}

std::unique_ptr<AcceleratorBackend> make_amd_backend() {
  return std::make_unique<AmdBackend>();
}

}  // namespace polyaccel
