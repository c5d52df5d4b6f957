// Our test build of librocm_smi64.so.1: the rsmi_* C functions the rocm-smi backend calls, with
// rocm_smi.h's names and ABI, answering from a JSON scenario (README.md in this folder) read at
// rsmi_init from the file named by ROCM_SMI_INJECT_SCENARIO. A test moves the scenario to another
// step through polyaccel_inject_set_step, which it finds with dlsym; the backend never calls it.
//
// The ABI declarations here are written from rocm_smi.h on their own, not shared with the
// backend's rocm_smi_abi.h, so that a mistake in one shows up as a failing test.
//
// Built twice: inject_rocm_smi exports every function; inject_rocm_smi_partial
// (POLYACCEL_INJECT_PARTIAL) leaves about half of them out, as an old or trimmed library would.
#include <algorithm>
#include <chrono>
#include <condition_variable>
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

#define RSMI_API extern "C" __attribute__((visibility("default")))

namespace {

namespace inject = polyaccel::inject;

// ---- rocm_smi.h ----------------------------------------------------------------------------

using rsmi_status_t = std::uint32_t;
constexpr rsmi_status_t RSMI_STATUS_SUCCESS = 0;
constexpr rsmi_status_t RSMI_STATUS_INVALID_ARGS = 1;
constexpr rsmi_status_t RSMI_STATUS_NOT_SUPPORTED = 2;
constexpr rsmi_status_t RSMI_STATUS_FILE_ERROR = 3;
constexpr rsmi_status_t RSMI_STATUS_PERMISSION = 4;
constexpr rsmi_status_t RSMI_STATUS_INIT_ERROR = 8;
constexpr rsmi_status_t RSMI_STATUS_NOT_FOUND = 10;
constexpr rsmi_status_t RSMI_STATUS_INSUFFICIENT_SIZE = 11;
[[maybe_unused]] constexpr rsmi_status_t RSMI_STATUS_NO_DATA = 14;
constexpr rsmi_status_t RSMI_STATUS_UNEXPECTED_DATA = 15;
constexpr rsmi_status_t RSMI_STATUS_BUSY = 16;
constexpr rsmi_status_t RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF;

enum : std::uint32_t { RSMI_MEM_TYPE_VRAM = 0, RSMI_MEM_TYPE_VIS_VRAM = 1, RSMI_MEM_TYPE_GTT = 2 };
enum : std::uint32_t {
  RSMI_TEMP_TYPE_EDGE = 0,
  RSMI_TEMP_TYPE_JUNCTION = 1,
  RSMI_TEMP_TYPE_MEMORY = 2,
  RSMI_TEMP_TYPE_HBM_0 = 3,
  RSMI_TEMP_TYPE_HBM_3 = 6
};
enum : std::uint32_t { RSMI_TEMP_CURRENT = 0 };
enum : std::uint32_t { RSMI_CLK_TYPE_SYS = 0, RSMI_CLK_TYPE_MEM = 4 };
enum : std::uint32_t { RSMI_IOLINK_TYPE_PCIEXPRESS = 1, RSMI_IOLINK_TYPE_XGMI = 2 };

struct rsmi_version_t {
  std::uint32_t major;
  std::uint32_t minor;
  std::uint32_t patch;
  const char* build;
};

// rsmi_frequencies_t before and after rocm_smi_lib 6.0 added has_deep_sleep.
struct rsmi_frequencies_5_t {
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[32];
};
struct rsmi_frequencies_6_t {
  bool has_deep_sleep;
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[33];
};

// rsmi_error_count_t: the same 16 bytes in every version.
struct rsmi_error_count_t {
  std::uint64_t correctable_err;
  std::uint64_t uncorrectable_err;
};
static_assert(sizeof(rsmi_error_count_t) == 16);

// rsmi_evt_notification_data_t with MAX_EVENT_NOTIFICATION_MSG_SIZE 64 (every release to 7.3)
// or 96 (7.8, rocm-systems' develop branch).
template <std::size_t N>
struct rsmi_evt_notification_data_t {
  std::uint32_t dv_ind;
  std::uint32_t event;
  char message[N];
};

struct rsmi_retired_page_record_t {
  std::uint64_t page_address;
  std::uint64_t page_size;
  std::uint32_t status;
};

// rsmi_gpu_metrics_t up to indep_throttle_status (v1.3); later versions only append.
struct rsmi_gpu_metrics_prefix_t {
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
  std::uint16_t temperature_edge, temperature_hotspot, temperature_mem, temperature_vrgfx,
      temperature_vrsoc, temperature_vrmem;
  std::uint16_t average_gfx_activity, average_umc_activity, average_mm_activity;
  std::uint16_t average_socket_power;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency,
      average_vclk0_frequency, average_dclk0_frequency, average_vclk1_frequency,
      average_dclk1_frequency;
  std::uint16_t current_gfxclk, current_socclk, current_uclk, current_vclk0, current_dclk0,
      current_vclk1, current_dclk1;
  std::uint32_t throttle_status;
  std::uint16_t current_fan_speed;
  std::uint16_t pcie_link_width, pcie_link_speed;
  std::uint32_t gfx_activity_acc, mem_activity_acc;
  std::uint16_t temperature_hbm[4];
  std::uint64_t firmware_timestamp;
  std::uint16_t voltage_soc, voltage_gfx, voltage_mem;
  std::uint64_t indep_throttle_status;
};

// ---- the scenario --------------------------------------------------------------------------

// One device at one step. Values carry over from the step before; an absent one was never given
// and its getter answers "not supported".
struct Values {
  std::optional<std::uint32_t> busy_percent;
  std::optional<std::uint32_t> memory_busy_percent;
  std::optional<std::uint64_t> vram_used;
  std::optional<double> temperature_edge;
  std::optional<double> temperature_junction;
  std::optional<double> temperature_memory;
  std::vector<double> temperature_hbm;  // per stack, HBM_0..HBM_3
  std::optional<double> power_average_watts;
  std::optional<double> socket_power_watts;
  std::optional<std::uint64_t> energy_counter;
  std::optional<std::uint32_t> sclk_mhz;
  std::optional<std::uint32_t> mclk_mhz;
  std::optional<std::uint64_t> pcie_replay;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> ecc;  // block → (ce, ue)
  std::vector<std::pair<std::uint64_t, std::uint32_t>> bad_pages;        // address, page status
  std::optional<std::uint64_t> indep_throttle_status;  // unset: the table says "not available"
  std::optional<std::uint64_t> gtt_used;
  std::optional<std::uint64_t> visible_vram_used;
  std::optional<nlohmann::json> metrics;     // the v1.6/v1.7 fields: a v1.7 table when given
  rsmi_status_t lost = RSMI_STATUS_SUCCESS;  // what every call on the device returns, if not 0
};

struct Device {
  std::string bus_id;
  std::uint64_t bdfid = 0;
  std::optional<std::uint64_t> unique_id;
  std::string serial;
  std::string name;
  std::uint64_t vram_bytes = 0;
  std::uint64_t gtt_bytes = 0;
  std::uint64_t visible_vram_bytes = 0;
  std::string gfx_version;
  std::string compute_partition;
  std::string memory_partition;
  std::vector<std::string> xgmi_peers;
  std::optional<double> power_cap_watts;
  std::uint64_t ecc_enabled_blocks = 0;
  float energy_resolution_uj = 15.259f;
  std::uint32_t sclk_range[2] = {500, 2100};
  std::uint32_t mclk_range[2] = {900, 1300};
  std::set<std::string> unsupported;
  std::vector<Values> steps;  // one per scenario step
};

struct Event {
  std::uint32_t dv = 0;
  std::uint32_t type = 0;
  std::string message;
};

struct Scenario {
  rsmi_version_t version{7, 3, 0, "polyaccel-inject"};
  std::string driver_version;
  rsmi_status_t init_error = RSMI_STATUS_SUCCESS;
  std::size_t event_message_size = 0;  // 64 or 96; 0: as the version has it
  std::vector<Device> devices;
  std::vector<std::vector<Event>> events;  // per step
};

struct State {
  std::mutex mutex;
  std::condition_variable events_ready;
  Scenario scenario;
  int refcount = 0;
  std::size_t step = 0;
  std::deque<Event> pending;
  std::map<std::uint32_t, std::uint64_t> subscribed;  // device index → event mask
};

State& state() {
  static State s;
  return s;
}

const std::map<std::string, rsmi_status_t>& status_names() {
  static const std::map<std::string, rsmi_status_t> names = {
      {"INVALID_ARGS", RSMI_STATUS_INVALID_ARGS},
      {"NOT_SUPPORTED", RSMI_STATUS_NOT_SUPPORTED},
      {"FILE_ERROR", RSMI_STATUS_FILE_ERROR},
      {"PERMISSION", RSMI_STATUS_PERMISSION},
      {"INIT_ERROR", RSMI_STATUS_INIT_ERROR},
      {"NOT_FOUND", RSMI_STATUS_NOT_FOUND},
      {"UNEXPECTED_DATA", RSMI_STATUS_UNEXPECTED_DATA},
      {"BUSY", RSMI_STATUS_BUSY},
      {"UNKNOWN_ERROR", RSMI_STATUS_UNKNOWN_ERROR},
  };
  return names;
}

rsmi_status_t status_named(const std::string& name) {
  auto it = status_names().find(name);
  if (it == status_names().end()) throw std::runtime_error("unknown status name " + name);
  return it->second;
}

// The getters' names in "unsupported".
const std::set<std::string>& field_names() {
  static const std::set<std::string> names = {
      "unique_id",
      "serial",
      "name",
      "vram_total",
      "gfx_version",
      "compute_partition",
      "memory_partition",
      "xgmi",
      "power_cap",
      "ecc_enabled",
      "busy_percent",
      "memory_busy_percent",
      "vram_used",
      "temperature_edge",
      "temperature_junction",
      "temperature_memory",
      "temperature_hbm",
      "power_average",
      "socket_power",
      "energy",
      "sclk",
      "mclk",
      "pcie_replay",
      "ecc",
      "reserved_pages",
      "gpu_metrics",
      "events",
  };
  return names;
}

std::uint64_t bdfid_of(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) {
    throw std::runtime_error("bad PCI bus id " + bus_id);
  }
  return (std::uint64_t{domain} << 32) | (bus << 8) | (dev << 3) | fn;
}

void apply_values(const nlohmann::json& j, Values& v) {
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
                      "lost",
                      "gtt_used_bytes",
                      "visible_vram_used_bytes",
                      "metrics"},
                     "step values");
  auto take = [&](const char* key, auto& field) {
    if (j.contains(key))
      field = j.at(key).get<typename std::decay_t<decltype(field)>::value_type>();
  };
  take("busy_percent", v.busy_percent);
  take("memory_busy_percent", v.memory_busy_percent);
  take("vram_used_bytes", v.vram_used);
  take("gtt_used_bytes", v.gtt_used);
  take("visible_vram_used_bytes", v.visible_vram_used);
  if (j.contains("metrics")) v.metrics = inject::checked_metrics(j.at("metrics"));
  take("temperature_edge_c", v.temperature_edge);
  take("temperature_junction_c", v.temperature_junction);
  take("temperature_memory_c", v.temperature_memory);
  if (j.contains("temperature_hbm_c")) {
    v.temperature_hbm = j.at("temperature_hbm_c").get<std::vector<double>>();
    if (v.temperature_hbm.size() > 4) throw std::runtime_error("temperature_hbm_c: four stacks");
  }
  take("power_average_watts", v.power_average_watts);
  take("socket_power_watts", v.socket_power_watts);
  take("energy_counter", v.energy_counter);
  take("sclk_mhz", v.sclk_mhz);
  take("mclk_mhz", v.mclk_mhz);
  take("pcie_replay_count", v.pcie_replay);
  take("indep_throttle_status", v.indep_throttle_status);
  if (j.contains("bad_pages")) v.bad_pages = inject::bad_pages(j.at("bad_pages"));

  if (j.contains("ecc")) {
    for (const auto& [block, counts] : j.at("ecc").items()) {
      v.ecc[inject::gpu_block_named(block)] = {counts.at("correctable").get<std::uint64_t>(),
                                               counts.at("uncorrectable").get<std::uint64_t>()};
    }
  }
  if (j.contains("lost")) {
    const auto& lost = j.at("lost");
    if (lost.is_boolean()) {
      v.lost = lost.get<bool>() ? RSMI_STATUS_NOT_FOUND : RSMI_STATUS_SUCCESS;
    } else {
      v.lost = status_named(lost.get<std::string>());
    }
  }
}

Device parse_device(const nlohmann::json& j, const std::set<std::string>& unsupported_everywhere) {
  inject::check_keys(j,
                     {"pci_bus_id", "unique_id", "serial", "name", "vram_bytes", "gtt_bytes",
                      "visible_vram_bytes", "gfx_version", "compute_partition", "memory_partition",
                      "xgmi_peers", "power_cap_watts", "ecc_enabled_blocks", "energy_resolution_uj",
                      "sclk_range_mhz", "mclk_range_mhz", "unsupported"},
                     "device");
  Device d;
  d.bus_id = j.at("pci_bus_id").get<std::string>();
  d.bdfid = bdfid_of(d.bus_id);
  if (j.contains("unique_id")) {
    const auto& id = j.at("unique_id");
    d.unique_id =
        id.is_string() ? std::stoull(id.get<std::string>(), nullptr, 16) : id.get<std::uint64_t>();
  }
  d.serial = j.value("serial", "");
  d.name = j.value("name", "");
  d.vram_bytes = j.value("vram_bytes", std::uint64_t{0});
  d.gtt_bytes = j.value("gtt_bytes", std::uint64_t{0});
  d.visible_vram_bytes = j.value("visible_vram_bytes", d.vram_bytes);
  d.gfx_version = j.value("gfx_version", "");
  d.compute_partition = j.value("compute_partition", "");
  d.memory_partition = j.value("memory_partition", "");
  d.xgmi_peers = j.value("xgmi_peers", std::vector<std::string>{});
  if (j.contains("power_cap_watts")) d.power_cap_watts = j.at("power_cap_watts").get<double>();
  for (const auto& block : j.value("ecc_enabled_blocks", std::vector<std::string>{})) {
    d.ecc_enabled_blocks |= inject::gpu_block_named(block);
  }
  d.energy_resolution_uj = j.value("energy_resolution_uj", d.energy_resolution_uj);
  if (j.contains("sclk_range_mhz")) {
    d.sclk_range[0] = j.at("sclk_range_mhz").at(0).get<std::uint32_t>();
    d.sclk_range[1] = j.at("sclk_range_mhz").at(1).get<std::uint32_t>();
  }
  if (j.contains("mclk_range_mhz")) {
    d.mclk_range[0] = j.at("mclk_range_mhz").at(0).get<std::uint32_t>();
    d.mclk_range[1] = j.at("mclk_range_mhz").at(1).get<std::uint32_t>();
  }
  d.unsupported = unsupported_everywhere;
  if (j.contains("unsupported"))
    d.unsupported.merge(inject::unsupported_list(j.at("unsupported"), field_names()));
  return d;
}

std::uint32_t event_type_named(const std::string& name) {
  static const std::map<std::string, std::uint32_t> types = {
      {"vm_fault", 1}, {"thermal_throttle", 2}, {"gpu_pre_reset", 3}, {"gpu_post_reset", 4}};
  auto it = types.find(name);
  if (it == types.end()) throw std::runtime_error("unknown event type " + name);
  return it->second;
}

std::size_t device_named(const Scenario& sc, const std::string& bus_id) {
  for (std::size_t i = 0; i < sc.devices.size(); ++i) {
    if (sc.devices[i].bus_id == bus_id) return i;
  }
  throw std::runtime_error("no device " + bus_id);
}

Scenario parse_scenario(const nlohmann::json& j) {
  inject::check_keys(j,
                     {"comment", "library_version", "driver_version", "init_error",
                      "event_message_size", "unsupported", "devices", "steps"},
                     "scenario");
  Scenario sc;
  if (j.contains("library_version")) {
    const std::string v = j.at("library_version").get<std::string>();
    if (std::sscanf(v.c_str(), "%u.%u.%u", &sc.version.major, &sc.version.minor,
                    &sc.version.patch) != 3) {
      throw std::runtime_error("library_version must be MAJOR.MINOR.PATCH");
    }
  }
  sc.driver_version = j.value("driver_version", "");
  sc.event_message_size = j.value("event_message_size", std::size_t{0});
  if (sc.event_message_size != 0 && sc.event_message_size != 64 && sc.event_message_size != 96) {
    throw std::runtime_error("event_message_size must be 64 or 96");
  }
  if (j.contains("init_error")) sc.init_error = status_named(j.at("init_error").get<std::string>());
  std::set<std::string> everywhere;
  if (j.contains("unsupported"))
    everywhere = inject::unsupported_list(j.at("unsupported"), field_names());
  for (const auto& dj : j.value("devices", nlohmann::json::array())) {
    sc.devices.push_back(parse_device(dj, everywhere));
  }
  std::vector<std::vector<Values>> values;
  inject::read_steps<Values, Event>(
      j.value("steps", nlohmann::json::array()), sc.devices.size(),
      [&](const std::string& bus_id) { return device_named(sc, bus_id); }, apply_values,
      [&](const nlohmann::json& ej) {
        return Event{
            static_cast<std::uint32_t>(device_named(sc, ej.at("device").get<std::string>())),
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

// The device a call is about, once the library is initialised, the index exists, the device is
// not lost and `field` is supported; else the status the call returns.
struct Call {
  rsmi_status_t status = RSMI_STATUS_SUCCESS;
  const Device* dev = nullptr;
  const Values* now = nullptr;
};

Call begin(std::uint32_t dv, const char* field) {
  State& s = state();
  Call c;
  if (s.refcount == 0) {
    c.status = RSMI_STATUS_INIT_ERROR;
  } else if (dv >= s.scenario.devices.size()) {
    c.status = RSMI_STATUS_INVALID_ARGS;
  } else {
    c.dev = &s.scenario.devices[dv];
    c.now = &c.dev->steps[s.step];
    if (c.now->lost != RSMI_STATUS_SUCCESS) {
      c.status = c.now->lost;
    } else if (c.dev->unsupported.count(field)) {
      c.status = RSMI_STATUS_NOT_SUPPORTED;
    }
  }
  return c;
}

template <class T, class U>
rsmi_status_t put(const std::optional<T>& value, U* out) {
  if (!value) return RSMI_STATUS_NOT_SUPPORTED;
  *out = static_cast<U>(*value);
  return RSMI_STATUS_SUCCESS;
}

rsmi_status_t put_string(const std::string& value, char* out, std::size_t len) {
  if (value.empty()) return RSMI_STATUS_NOT_SUPPORTED;
  if (len == 0) return RSMI_STATUS_INVALID_ARGS;
  std::size_t n = std::min(value.size(), len - 1);
  std::memcpy(out, value.data(), n);
  out[n] = '\0';
  return n < value.size() ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

// A getter of one device value: locks, checks, then runs `read` on the device and its values.
template <class Read>
rsmi_status_t device_call(std::uint32_t dv, const char* field, const void* out, Read read) {
  if (!out) return RSMI_STATUS_INVALID_ARGS;
  std::lock_guard lock(state().mutex);
  Call c = begin(dv, field);
  if (c.status != RSMI_STATUS_SUCCESS) return c.status;
  return read(*c.dev, *c.now);
}

bool newer_abi() {
  return state().scenario.version.major >= 6;
}

// 96-byte event messages: library 7.8 and later.
[[maybe_unused]] bool long_event_messages() {
  const rsmi_version_t& v = state().scenario.version;
  return v.major > 7 || (v.major == 7 && v.minor >= 8);
}

template <class Frequencies>
void fill_levels(Frequencies* f, std::size_t max_levels, std::uint32_t min_mhz,
                 std::uint32_t current_mhz, std::uint32_t max_mhz) {
  std::vector<std::uint32_t> levels = {min_mhz, current_mhz, max_mhz};
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  f->num_supported = static_cast<std::uint32_t>(std::min(levels.size(), max_levels));
  for (std::uint32_t i = 0; i < f->num_supported; ++i) {
    f->frequency[i] = std::uint64_t{levels[i]} * 1000000;
    if (levels[i] == current_mhz) f->current = i;
  }
}

template <std::size_t N>
void write_event(void* data, std::size_t k, const Event& e) {
  rsmi_evt_notification_data_t<N> out{};
  out.dv_ind = e.dv;
  out.event = e.type;
  std::snprintf(out.message, sizeof out.message, "%s", e.message.c_str());
  std::memcpy(static_cast<unsigned char*>(data) + k * sizeof out, &out, sizeof out);
}

}  // namespace

// ---- exported: every build ------------------------------------------------------------------

RSMI_API rsmi_status_t rsmi_init(std::uint64_t /*init_flags*/) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.refcount > 0) {
    ++s.refcount;
    return RSMI_STATUS_SUCCESS;
  }
  const char* path = std::getenv("ROCM_SMI_INJECT_SCENARIO");
  try {
    if (!path || !*path) throw std::runtime_error("ROCM_SMI_INJECT_SCENARIO is not set");
    std::ifstream in(path);
    if (!in) throw std::runtime_error(std::string("cannot read ") + path);
    s.scenario = parse_scenario(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rocm_smi inject: %s\n", e.what());
    return RSMI_STATUS_INIT_ERROR;
  }
  if (s.scenario.init_error != RSMI_STATUS_SUCCESS) return s.scenario.init_error;
  s.refcount = 1;
  s.step = 0;
  s.pending.clear();
  s.subscribed.clear();
  enqueue_events(s);
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_shut_down() {
  std::lock_guard lock(state().mutex);
  if (state().refcount > 0) --state().refcount;
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_status_string(rsmi_status_t status, const char** text) {
  if (!text) return RSMI_STATUS_INVALID_ARGS;
  switch (status) {
    case RSMI_STATUS_SUCCESS:
      *text = "RSMI_STATUS_SUCCESS: The function has been executed successfully.";
      break;
    case RSMI_STATUS_NOT_SUPPORTED:
      *text = "RSMI_STATUS_NOT_SUPPORTED: The requested information or action is not available";
      break;
    case RSMI_STATUS_INIT_ERROR:
      *text =
          "RSMI_STATUS_INIT_ERROR: An error occurred during initialization or monitor discovery";
      break;
    case RSMI_STATUS_NOT_FOUND:
      *text = "RSMI_STATUS_NOT_FOUND: An item required to complete the call was not found";
      break;
    case RSMI_STATUS_PERMISSION:
      *text = "RSMI_STATUS_PERMISSION: The user does not have permission";
      break;
    default:
      *text = "RSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
      break;
  }
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_num_monitor_devices(std::uint32_t* count) {
  if (!count) return RSMI_STATUS_INVALID_ARGS;
  std::lock_guard lock(state().mutex);
  if (state().refcount == 0) return RSMI_STATUS_INIT_ERROR;
  *count = static_cast<std::uint32_t>(state().scenario.devices.size());
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_version_str_get(std::uint32_t component, char* text,
                                            std::uint32_t len) {
  if (!text) return RSMI_STATUS_INVALID_ARGS;
  std::lock_guard lock(state().mutex);
  if (component != 0) return RSMI_STATUS_INVALID_ARGS;  // RSMI_SW_COMP_DRIVER
  return put_string(state().scenario.driver_version, text, len);
}

RSMI_API rsmi_status_t rsmi_dev_pci_id_get(std::uint32_t dv, std::uint64_t* bdfid) {
  return device_call(dv, "pci_id", bdfid, [&](const Device& d, const Values&) {
    *bdfid = d.bdfid;
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_name_get(std::uint32_t dv, char* name, std::size_t len) {
  return device_call(dv, "name", name,
                     [&](const Device& d, const Values&) { return put_string(d.name, name, len); });
}

RSMI_API rsmi_status_t rsmi_dev_memory_total_get(std::uint32_t dv, std::uint32_t type,
                                                 std::uint64_t* total) {
  return device_call(dv, "vram_total", total, [&](const Device& d, const Values&) {
    const std::uint64_t bytes = type == RSMI_MEM_TYPE_VRAM       ? d.vram_bytes
                                : type == RSMI_MEM_TYPE_VIS_VRAM ? d.visible_vram_bytes
                                : type == RSMI_MEM_TYPE_GTT      ? d.gtt_bytes
                                                                 : 0;
    if (bytes == 0) return RSMI_STATUS_NOT_SUPPORTED;
    *total = bytes;
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_memory_usage_get(std::uint32_t dv, std::uint32_t type,
                                                 std::uint64_t* used) {
  return device_call(dv, "vram_used", used, [&](const Device&, const Values& v) {
    return type == RSMI_MEM_TYPE_VRAM       ? put(v.vram_used, used)
           : type == RSMI_MEM_TYPE_VIS_VRAM ? put(v.visible_vram_used, used)
           : type == RSMI_MEM_TYPE_GTT      ? put(v.gtt_used, used)
                                            : RSMI_STATUS_NOT_SUPPORTED;
  });
}

RSMI_API rsmi_status_t rsmi_dev_busy_percent_get(std::uint32_t dv, std::uint32_t* percent) {
  return device_call(dv, "busy_percent", percent,
                     [&](const Device&, const Values& v) { return put(v.busy_percent, percent); });
}

// Millidegrees C; only the current value. The HBM stacks as the step gives them.
RSMI_API rsmi_status_t rsmi_dev_temp_metric_get(std::uint32_t dv, std::uint32_t sensor,
                                                std::uint32_t metric, std::int64_t* millidegrees) {
  static const char* const kFields[] = {"temperature_edge", "temperature_junction",
                                        "temperature_memory"};
  const char* field = sensor <= RSMI_TEMP_TYPE_MEMORY ? kFields[sensor] : "temperature_hbm";
  return device_call(dv, field, millidegrees, [&](const Device&, const Values& v) {
    if (metric != RSMI_TEMP_CURRENT || sensor > RSMI_TEMP_TYPE_HBM_3)
      return RSMI_STATUS_NOT_SUPPORTED;
    std::optional<double> c = sensor == RSMI_TEMP_TYPE_EDGE       ? v.temperature_edge
                              : sensor == RSMI_TEMP_TYPE_JUNCTION ? v.temperature_junction
                              : sensor == RSMI_TEMP_TYPE_MEMORY   ? v.temperature_memory
                                                                  : std::nullopt;
    if (sensor >= RSMI_TEMP_TYPE_HBM_0 && sensor - RSMI_TEMP_TYPE_HBM_0 < v.temperature_hbm.size())
      c = v.temperature_hbm[sensor - RSMI_TEMP_TYPE_HBM_0];
    if (!c) return RSMI_STATUS_NOT_SUPPORTED;
    *millidegrees = static_cast<std::int64_t>(*c * 1000.0);
    return RSMI_STATUS_SUCCESS;
  });
}

// Microwatts.
RSMI_API rsmi_status_t rsmi_dev_power_ave_get(std::uint32_t dv, std::uint32_t /*sensor*/,
                                              std::uint64_t* microwatts) {
  return device_call(dv, "power_average", microwatts, [&](const Device&, const Values& v) {
    if (!v.power_average_watts) return RSMI_STATUS_NOT_SUPPORTED;
    *microwatts = static_cast<std::uint64_t>(*v.power_average_watts * 1e6);
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_current_socket_power_get(std::uint32_t dv,
                                                         std::uint64_t* microwatts) {
  return device_call(dv, "socket_power", microwatts, [&](const Device&, const Values& v) {
    if (!v.socket_power_watts) return RSMI_STATUS_NOT_SUPPORTED;
    *microwatts = static_cast<std::uint64_t>(*v.socket_power_watts * 1e6);
    return RSMI_STATUS_SUCCESS;
  });
}

// The levels are the device's range and the current clock, in Hz, in the layout of the
// scenario's library version.
RSMI_API rsmi_status_t rsmi_dev_gpu_clk_freq_get(std::uint32_t dv, std::uint32_t type, void* f) {
  const char* field = type == RSMI_CLK_TYPE_SYS ? "sclk" : type == RSMI_CLK_TYPE_MEM ? "mclk" : "";
  return device_call(dv, field, f, [&](const Device& d, const Values& v) {
    const std::optional<std::uint32_t> mhz = type == RSMI_CLK_TYPE_SYS   ? v.sclk_mhz
                                             : type == RSMI_CLK_TYPE_MEM ? v.mclk_mhz
                                                                         : std::nullopt;
    if (!mhz) return RSMI_STATUS_NOT_SUPPORTED;
    const std::uint32_t* range = type == RSMI_CLK_TYPE_SYS ? d.sclk_range : d.mclk_range;
    if (newer_abi()) {
      auto* out = static_cast<rsmi_frequencies_6_t*>(f);
      *out = {};
      fill_levels(out, 33, range[0], *mhz, range[1]);
    } else {
      auto* out = static_cast<rsmi_frequencies_5_t*>(f);
      *out = {};
      fill_levels(out, 32, range[0], *mhz, range[1]);
    }
    return RSMI_STATUS_SUCCESS;
  });
}

// ---- exported: the full build only ----------------------------------------------------------
#ifndef POLYACCEL_INJECT_PARTIAL

RSMI_API rsmi_status_t rsmi_version_get(rsmi_version_t* version) {
  if (!version) return RSMI_STATUS_INVALID_ARGS;
  std::lock_guard lock(state().mutex);
  *version = state().scenario.version;
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_dev_unique_id_get(std::uint32_t dv, std::uint64_t* id) {
  return device_call(dv, "unique_id", id,
                     [&](const Device& d, const Values&) { return put(d.unique_id, id); });
}

RSMI_API rsmi_status_t rsmi_dev_serial_number_get(std::uint32_t dv, char* serial,
                                                  std::uint32_t len) {
  return device_call(dv, "serial", serial, [&](const Device& d, const Values&) {
    return put_string(d.serial, serial, len);
  });
}

// The gfx name's digits read as hex (gfx942 → 0x942), as rocm_smi_lib 7.5 answers.
RSMI_API rsmi_status_t rsmi_dev_target_graphics_version_get(std::uint32_t dv,
                                                            std::uint64_t* version) {
  return device_call(dv, "gfx_version", version, [&](const Device& d, const Values&) {
    if (d.gfx_version.size() <= 3) return RSMI_STATUS_NOT_SUPPORTED;
    *version = std::stoull(d.gfx_version.substr(3), nullptr, 16);
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_compute_partition_get(std::uint32_t dv, char* partition,
                                                      std::uint32_t len) {
  return device_call(dv, "compute_partition", partition, [&](const Device& d, const Values&) {
    return put_string(d.compute_partition, partition, len);
  });
}

RSMI_API rsmi_status_t rsmi_dev_memory_partition_get(std::uint32_t dv, char* partition,
                                                     std::uint32_t len) {
  return device_call(dv, "memory_partition", partition, [&](const Device& d, const Values&) {
    return put_string(d.memory_partition, partition, len);
  });
}

// XGMI, one hop, to the scenario's peers; PCIe through the host, two hops, to the others.
RSMI_API rsmi_status_t rsmi_topo_get_link_type(std::uint32_t src, std::uint32_t dst,
                                               std::uint64_t* hops, std::uint32_t* type) {
  if (!type) return RSMI_STATUS_INVALID_ARGS;
  return device_call(src, "xgmi", hops, [&](const Device& d, const Values&) {
    Call to = begin(dst, "xgmi");
    if (to.status != RSMI_STATUS_SUCCESS) return to.status;
    if (to.dev == &d) return RSMI_STATUS_INVALID_ARGS;
    bool xgmi = std::count(d.xgmi_peers.begin(), d.xgmi_peers.end(), to.dev->bus_id) > 0;
    *hops = xgmi ? 1 : 2;
    *type = xgmi ? RSMI_IOLINK_TYPE_XGMI : RSMI_IOLINK_TYPE_PCIEXPRESS;
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_power_cap_get(std::uint32_t dv, std::uint32_t /*sensor*/,
                                              std::uint64_t* microwatts) {
  return device_call(dv, "power_cap", microwatts, [&](const Device& d, const Values&) {
    if (!d.power_cap_watts) return RSMI_STATUS_NOT_SUPPORTED;
    *microwatts = static_cast<std::uint64_t>(*d.power_cap_watts * 1e6);
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_ecc_enabled_get(std::uint32_t dv, std::uint64_t* blocks) {
  return device_call(dv, "ecc_enabled", blocks, [&](const Device& d, const Values&) {
    *blocks = d.ecc_enabled_blocks;
    return RSMI_STATUS_SUCCESS;
  });
}

// One block (a single bit) with ECC on; its counts at this step, zero when the step gives none.
RSMI_API rsmi_status_t rsmi_dev_ecc_count_get(std::uint32_t dv, std::uint64_t block, void* counts) {
  return device_call(dv, "ecc", counts, [&](const Device& d, const Values& v) {
    if (block == 0 || (block & (block - 1)) != 0) return RSMI_STATUS_INVALID_ARGS;
    if (!(d.ecc_enabled_blocks & block)) return RSMI_STATUS_NOT_SUPPORTED;
    auto it = v.ecc.find(block);
    std::uint64_t ce = it == v.ecc.end() ? 0 : it->second.first;
    std::uint64_t ue = it == v.ecc.end() ? 0 : it->second.second;
    *static_cast<rsmi_error_count_t*>(counts) = {ce, ue};
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_memory_busy_percent_get(std::uint32_t dv, std::uint32_t* percent) {
  return device_call(dv, "memory_busy_percent", percent, [&](const Device&, const Values& v) {
    return put(v.memory_busy_percent, percent);
  });
}

RSMI_API rsmi_status_t rsmi_dev_energy_count_get(std::uint32_t dv, std::uint64_t* counter,
                                                 float* resolution_uj, std::uint64_t* timestamp) {
  if (!resolution_uj || !timestamp) return RSMI_STATUS_INVALID_ARGS;
  return device_call(dv, "energy", counter, [&](const Device& d, const Values& v) {
    if (!v.energy_counter) return RSMI_STATUS_NOT_SUPPORTED;
    *counter = *v.energy_counter;
    *resolution_uj = d.energy_resolution_uj;
    *timestamp = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now().time_since_epoch())
                                                .count());
    return RSMI_STATUS_SUCCESS;
  });
}

RSMI_API rsmi_status_t rsmi_dev_pci_replay_counter_get(std::uint32_t dv, std::uint64_t* count) {
  return device_call(dv, "pcie_replay", count,
                     [&](const Device&, const Values& v) { return put(v.pcie_replay, count); });
}

RSMI_API rsmi_status_t rsmi_event_notification_init(std::uint32_t dv) {
  std::lock_guard lock(state().mutex);
  Call c = begin(dv, "events");
  if (c.status == RSMI_STATUS_SUCCESS) state().subscribed[dv] = 0;
  return c.status;
}

RSMI_API rsmi_status_t rsmi_event_notification_mask_set(std::uint32_t dv, std::uint64_t mask) {
  std::lock_guard lock(state().mutex);
  auto it = state().subscribed.find(dv);
  if (it == state().subscribed.end()) return RSMI_STATUS_INIT_ERROR;
  it->second = mask;
  return RSMI_STATUS_SUCCESS;
}

RSMI_API rsmi_status_t rsmi_event_notification_stop(std::uint32_t dv) {
  std::lock_guard lock(state().mutex);
  return state().subscribed.erase(dv) ? RSMI_STATUS_SUCCESS : RSMI_STATUS_INVALID_ARGS;
}

// Hands out the pending events of subscribed devices whose type is in the device's mask (the
// others are dropped, as KFD never queues them), waiting up to timeout_ms for the first.
RSMI_API rsmi_status_t rsmi_event_notification_get(int timeout_ms, std::uint32_t* num_elem,
                                                   void* data) {
  if (!num_elem || !data) return RSMI_STATUS_INVALID_ARGS;
  State& s = state();
  const std::uint32_t capacity = *num_elem;
  *num_elem = 0;
  std::unique_lock lock(s.mutex);
  auto wanted = [&](const Event& e) {
    auto it = s.subscribed.find(e.dv);
    return it != s.subscribed.end() && (it->second & (1ULL << (e.type - 1))) != 0;
  };
  auto ready = [&]() {
    while (!s.pending.empty() && !wanted(s.pending.front()))
      s.pending.pop_front();
    return !s.pending.empty();
  };
  if (!s.events_ready.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, 0)), ready)) {
    return RSMI_STATUS_NO_DATA;
  }
  const std::size_t message_size = s.scenario.event_message_size ? s.scenario.event_message_size
                                   : long_event_messages()       ? 96
                                                                 : 64;
  while (*num_elem < capacity && ready()) {
    if (message_size == 96) {
      write_event<96>(data, *num_elem, s.pending.front());
    } else {
      write_event<64>(data, *num_elem, s.pending.front());
    }
    s.pending.pop_front();
    ++*num_elem;
  }
  return RSMI_STATUS_SUCCESS;
}

// With no records buffer: how many pages; else up to *num_pages records.
RSMI_API rsmi_status_t rsmi_dev_memory_reserved_pages_get(std::uint32_t dv,
                                                          std::uint32_t* num_pages,
                                                          rsmi_retired_page_record_t* records) {
  return device_call(dv, "reserved_pages", num_pages, [&](const Device&, const Values& v) {
    const auto n = static_cast<std::uint32_t>(v.bad_pages.size());
    if (!records) {
      *num_pages = n;
      return RSMI_STATUS_SUCCESS;
    }
    const std::uint32_t k = std::min(*num_pages, n);
    for (std::uint32_t i = 0; i < k; ++i) {
      records[i] = {v.bad_pages[i].first, 4096, v.bad_pages[i].second};
    }
    *num_pages = k;
    return k < n ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
  });
}

// The table's v1.3 prefix (what every version starts with); the throttle fields are all ones
// ("not available") unless the step gives them, as on MI300.
RSMI_API rsmi_status_t rsmi_dev_gpu_metrics_info_get(std::uint32_t dv,
                                                     rsmi_gpu_metrics_prefix_t* metrics) {
  return device_call(dv, "gpu_metrics", metrics, [&](const Device& d, const Values& v) {
    rsmi_gpu_metrics_prefix_t m{};
    m.structure_size = sizeof m;
    m.format_revision = 1;
    m.content_revision = 3;
    m.throttle_status = UINT32_MAX;
    m.indep_throttle_status = v.indep_throttle_status.value_or(~0ULL);
    if (!v.metrics) {
      *metrics = m;
      return RSMI_STATUS_SUCCESS;
    }
    // A v1.7 table in rocm-smi-lib 7's rsmi_gpu_metrics_t (4544 bytes; offsets from its header,
    // ../shared/reference/vendor-abi/rocm_smi.json): the caller's buffer holds it all. What the
    // step does not give stays all ones, "not available".
    constexpr std::size_t kSize = 4544, kXcp0 = 480;
    m.structure_size = kSize;
    m.content_revision = 7;
    auto* raw = reinterpret_cast<unsigned char*>(metrics);
    std::memset(raw, 0xff, kSize);
    std::memcpy(raw, &m, sizeof m);
    // The GPU's table, the same through every partition's index: one XCP per partition, the
    // devices on the functions of its PCI device (in the scenario's order).
    const State& st = state();
    std::vector<std::optional<std::uint32_t>> partition_busy;
    for (const Device& other : st.scenario.devices) {
      if ((other.bdfid >> 3) == (d.bdfid >> 3))
        partition_busy.push_back(other.steps[st.step].busy_percent);
    }
    inject::put_metrics_v17(raw, *v.metrics, partition_busy,
                            {.pcie_bandwidth_acc = 144,
                             .xgmi_read = 184,
                             .xgmi_write = 248,
                             .accumulation_counter = 424,
                             .residencies = 432,
                             .num_partition = 472,
                             .xcp0_gfx_busy = kXcp0,
                             .xcp0_vcn_busy = kXcp0 + 112,
                             .xcp0_jpeg_busy = kXcp0 + 32,
                             .vram_max_bandwidth = 4520,
                             .xcp_size = 504});
    return RSMI_STATUS_SUCCESS;
  });
}

#endif  // POLYACCEL_INJECT_PARTIAL

// ---- the test's control ---------------------------------------------------------------------

// Moves the scenario to `step` (the last one when past it) and queues that step's events.
RSMI_API void polyaccel_inject_set_step(unsigned step) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.scenario.events.empty()) return;
  std::size_t to = std::min<std::size_t>(step, s.scenario.events.size() - 1);
  if (to == s.step) return;
  s.step = to;
  enqueue_events(s);
}
