// What the two AMD backends (rocm.cc: ROCm SMI, amd_smi.cc: AMD SMI) share: the GPU metrics
// table (the amdgpu driver's gpu_metrics v1.x, which rocm_smi returns as rsmi_gpu_metrics_t and
// amd-smi as amdsmi_gpu_metrics_t), amdgpu's ASIC-independent throttler bits, the gfx name of a
// graphics version, and the tally that tells a vanished device from an unsupported field.
//
// Both libraries lay out the metrics fields up to indep_throttle_status identically in every
// version and only append, so both backends read the table through the same prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "discover/accel/backend.h"

namespace polyaccel::amd {

// The first fields of the table, as both libraries declare them (v1.0 to v1.3).
struct GpuMetricsPrefix {
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
  std::uint16_t temperature_edge;  // C
  std::uint16_t temperature_hotspot;
  std::uint16_t temperature_mem;
  std::uint16_t temperature_vrgfx;
  std::uint16_t temperature_vrsoc;
  std::uint16_t temperature_vrmem;
  std::uint16_t average_gfx_activity;
  std::uint16_t average_umc_activity;
  std::uint16_t average_mm_activity;
  std::uint16_t average_socket_power;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint16_t average_clocks[7];
  std::uint16_t current_clocks[7];
  std::uint32_t throttle_status;  // ASIC-dependent bits
  std::uint16_t current_fan_speed;
  std::uint16_t pcie_link_width;
  std::uint16_t pcie_link_speed;
  std::uint32_t gfx_activity_acc;
  std::uint32_t mem_activity_acc;
  std::uint16_t temperature_hbm[4];
  std::uint64_t firmware_timestamp;
  std::uint16_t voltage_soc;
  std::uint16_t voltage_gfx;
  std::uint16_t voltage_mem;
  std::uint64_t indep_throttle_status;  // amdgpu's SMU_THROTTLER_*_BIT, ASIC-independent
};
static_assert(offsetof(GpuMetricsPrefix, energy_accumulator) == 24);
static_assert(offsetof(GpuMetricsPrefix, current_clocks) == 54);
static_assert(offsetof(GpuMetricsPrefix, throttle_status) == 68);
static_assert(offsetof(GpuMetricsPrefix, temperature_hbm) == 88);
static_assert(offsetof(GpuMetricsPrefix, firmware_timestamp) == 96);
static_assert(offsetof(GpuMetricsPrefix, indep_throttle_status) == 112);
static_assert(sizeof(GpuMetricsPrefix) == 120);

// One XCP (compute partition) of the table, v1.6 and later (amdsmi_gpu_xcp_metrics_t).
struct GpuXcpMetrics {
  std::uint32_t gfx_busy_inst[8];  // percent, per XCC
  std::uint16_t jpeg_busy[40];     // percent, per JPEG engine
  std::uint16_t vcn_busy[4];       // percent, per VCN engine
  std::uint64_t gfx_busy_acc[8];
  std::uint64_t gfx_below_host_limit_acc[8];
  std::uint64_t gfx_below_host_limit_ppt_acc[8];
  std::uint64_t gfx_below_host_limit_thm_acc[8];
  std::uint64_t gfx_low_utilization_acc[8];
  std::uint64_t gfx_below_host_limit_total_acc[8];
};
static_assert(offsetof(GpuXcpMetrics, vcn_busy) == 112);
static_assert(sizeof(GpuXcpMetrics) == 504);

// The whole table as amd-smi 26 (amdsmi_gpu_metrics_t) and ROCm SMI 7 (rsmi_gpu_metrics_t)
// declare it, 4544 bytes: the prefix, then what v1.4 to v1.8 appended. Older libraries' structs
// end earlier (rocm_smi 6.2 and amd-smi 24: at pcie_nak_rcvd_count_acc, 424 bytes); a field is
// read only when the table's content revision has it and its structure_size covers it.
struct GpuMetrics {
  GpuMetricsPrefix prefix;
  std::uint16_t current_socket_power;  // v1.4
  std::uint16_t vcn_activity[4];
  std::uint32_t gfxclk_lock_status;
  std::uint16_t xgmi_link_width;
  std::uint16_t xgmi_link_speed;
  std::uint64_t pcie_bandwidth_acc;  // GB/s
  std::uint64_t pcie_bandwidth_inst;
  std::uint64_t pcie_l0_to_recov_count_acc;
  std::uint64_t pcie_replay_count_acc;
  std::uint64_t pcie_replay_rover_count_acc;
  std::uint64_t xgmi_read_data_acc[8];  // KB, per link
  std::uint64_t xgmi_write_data_acc[8];
  std::uint16_t current_gfxclks[8];
  std::uint16_t current_socclks[4];
  std::uint16_t current_vclk0s[4];
  std::uint16_t current_dclk0s[4];
  std::uint16_t jpeg_activity[32];
  std::uint32_t pcie_nak_sent_count_acc;  // v1.5
  std::uint32_t pcie_nak_rcvd_count_acc;
  std::uint64_t accumulation_counter;  // v1.6
  std::uint64_t prochot_residency_acc;
  std::uint64_t ppt_residency_acc;
  std::uint64_t socket_thm_residency_acc;
  std::uint64_t vr_thm_residency_acc;
  std::uint64_t hbm_thm_residency_acc;
  std::uint16_t num_partition;
  GpuXcpMetrics xcp_stats[8];
  std::uint32_t pcie_lc_perf_other_end_recovery;  // v1.7
  std::uint64_t vram_max_bandwidth;               // GB/s
  std::uint16_t xgmi_link_status[8];
};
static_assert(offsetof(GpuMetrics, pcie_bandwidth_acc) == 144);
static_assert(offsetof(GpuMetrics, xgmi_read_data_acc) == 184);
static_assert(offsetof(GpuMetrics, pcie_nak_rcvd_count_acc) == 420);
static_assert(offsetof(GpuMetrics, accumulation_counter) == 424);
static_assert(offsetof(GpuMetrics, xcp_stats) == 480);
static_assert(offsetof(GpuMetrics, vram_max_bandwidth) == 4520);
static_assert(sizeof(GpuMetrics) == 4544);

// From a metrics table the library wrote into `raw` (kGpuMetricsBufferSize bytes, zeroed
// first), the sample's XGMI data, PCIe accumulated bandwidth, VRAM maximum bandwidth, per-XCC
// GFX busy and VCN/JPEG busy (partition 0's), the further partitions' per-XCC GFX busy and
// throttle residencies (those not set already), each only where the table's revision has it and
// the GPU fills it (all ones: not kept).
void read_metrics_table(const unsigned char* raw, AcceleratorSample& s);

// A further partition's sample (partition_id k + 1) from what its own device answered: its
// activity and memory, nothing when it gave neither (its GPU's sample then stands for it); its
// XCCs' busy from the GPU's metrics table (`gpu`, the GPU's sample).
std::optional<PartitionSample> partition_sample(std::size_t k, unsigned index,
                                                const AcceleratorSample& own,
                                                const AcceleratorSample& gpu);

// Room for any version of either library's table (amd-smi 26's is about 6 KiB): the library
// writes its whole struct, which a newer version may have made longer.
inline constexpr std::size_t kGpuMetricsBufferSize = 64 * 1024;

// amdgpu's ASIC-independent throttler bits (drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h).
inline constexpr std::uint64_t kThrottlePpt0 = 1ULL << 0;
inline constexpr std::uint64_t kThrottleTempMem = 1ULL << 34;
inline constexpr std::uint64_t kThrottleTempHotspot = 1ULL << 36;
inline constexpr std::uint64_t kThrottleVrHot0 = 1ULL << 44;
inline constexpr std::uint64_t kThrottleProchotGfx = 1ULL << 47;

// The names of the bits set in an independent throttle mask ("ppt0", "temp_hotspot", ...; an
// unnamed bit as "bit<N>").
std::vector<std::string> throttle_reason_names(std::uint64_t mask);

// The independent throttle mask of a table (0: not throttled), or nothing when the table does not
// carry one: a version before 1.3, or all ones, the libraries' "not available" (MI300 reports
// throttling as violation counters instead).
std::optional<std::uint64_t> independent_throttle_mask(const GpuMetricsPrefix& metrics);

// The PCI function each device of an AMD library stands on. Both libraries report the partitions
// of a GPU in a compute partition mode (DPX, CPX, ...) as functions 1..N-1 of the GPU's PCI
// device, functions that do not exist on the bus (ROCm/rocm_smi_lib#208,
// ROCm/rocm-systems#5805): devices that share a domain, bus and device number are one GPU, at
// function 0. `reported` holds the libraries' bus ids in their order ("" when unknown); the
// answer is in the same order.
std::vector<std::string> physical_bus_ids(const std::vector<std::string>& reported);

// Reads the metrics table with a library's getter (`get(table)`, true when it answered) into a
// buffer with room for any version, and gives its independent throttle mask.
template <class Get>
std::optional<std::uint64_t> metrics_throttle_mask(Get get) {
  // Only the prefix is zeroed: a library older than v1.3 leaves the rest of it unwritten.
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[kGpuMetricsBufferSize]);
  std::memset(buffer.get(), 0, sizeof(GpuMetricsPrefix));
  if (!get(reinterpret_cast<GpuMetricsPrefix*>(buffer.get()))) return std::nullopt;
  GpuMetricsPrefix prefix;
  std::memcpy(&prefix, buffer.get(), sizeof prefix);
  return independent_throttle_mask(prefix);
}

// An event of either AMD library: both report KFD's SMI event numbers (VM fault 1, thermal
// throttle 2, GPU pre-reset 3, post-reset 4, ...). A pre-reset is critical: the GPU is lost
// until the reset is done.
AcceleratorEvent kfd_event(const std::string& pci_bus_id, std::uint32_t event,
                           const std::string& message);

// A temperature a sensor gave, or nothing when it is absurd: the libraries answer 0 or all ones
// for a sensor that is not there (an HBM stack the board lacks), and no GPU runs at 300 C.
inline std::optional<double> plausible_celsius(std::optional<double> c) {
  return c && *c > 0 && *c < 300 ? c : std::nullopt;
}

// Each HBM stack's sensor (HBM_0..HBM_3, sensors 3..6 in both libraries) into the sample's
// per-stack list; the hottest stack is the memory temperature where there is no VRAM sensor
// (memory_temperature_c not set). `read(sensor, field)` is the backend's temperature reader.
template <class Read>
void read_hbm_temperatures(Read read, AcceleratorSample& s) {
  static constexpr const char* kFields[] = {"temperature_hbm0", "temperature_hbm1",
                                            "temperature_hbm2", "temperature_hbm3"};
  const bool vram_sensor = s.memory_temperature_c.has_value();
  for (unsigned stack = 0; stack < 4; ++stack) {
    std::optional<double> c = read(3 + stack, kFields[stack]);
    if (!vram_sensor && c && (!s.memory_temperature_c || *c > *s.memory_temperature_c)) {
      s.memory_temperature_c = c;
    }
    if (auto ok = plausible_celsius(c)) s.hbm_temperature_c.emplace_back(stack, *ok);
  }
}

// Sets the sample's throttle mask and the names of its bits.
inline void set_throttle(std::uint64_t mask, AcceleratorSample& s) {
  s.throttle_reasons = mask;
  s.throttle_reason_names = throttle_reason_names(mask);
}

// rsmi_dev_target_graphics_version_get (and amd-smi's target_graphics_version, which comes from
// it) has answered in three forms: KFD's gfx_target_version (90402), the name's digits read as
// decimal (942, before ROCm 6.4) and read as hex (0x942, 0x90a). All give "gfx942".
std::string gfx_name(std::uint64_t version);

// Tallies the calls of one sample. A device is unreachable when no call answered and at least
// one failed. A call fails when it returns an error, or "not supported" for a field that the
// device answered before: both libraries report a sysfs file that vanished (a GPU that fell off
// the bus) as not supported.
class FieldTally {
 public:
  explicit FieldTally(std::set<std::string>& answered_before) : answered_(answered_before) {}

  // Records one call; true when it answered.
  bool ok(const char* field, bool success, bool unsupported) {
    if (success) {
      ++answers_;
      answered_.insert(field);
      return true;
    }
    if (!unsupported || answered_.count(field)) ++failures_;
    return false;
  }
  bool reachable() const { return answers_ > 0 || failures_ == 0; }

 private:
  std::set<std::string>& answered_;
  unsigned answers_ = 0;
  unsigned failures_ = 0;
};

// Reads a RAS bad page table (rsmi_dev_memory_reserved_pages_get, amdsmi_get_gpu_bad_page_info:
// the same records and page states in both libraries) into the sample's bad_pages_* counts.
// `get(&n, records)` is the library's getter, true when it answered; with records null it tells
// how many pages there are.
template <class Record, class Get>
void read_bad_pages(Get get, AcceleratorSample& s) {
  std::uint32_t count = 0;
  if (!get(&count, nullptr)) return;
  std::vector<Record> records(count + 64);  // room for pages retired in between
  std::uint32_t n = static_cast<std::uint32_t>(records.size());
  if (count == 0) {
    n = 0;
  } else if (!get(&n, records.data())) {
    return;
  }
  std::uint64_t retired = 0;
  std::uint64_t pending = 0;
  std::uint64_t unreservable = 0;
  for (std::uint32_t i = 0; i < n && i < records.size(); ++i) {
    if (records[i].status == 0) {
      ++retired;  // RESERVED
    } else if (records[i].status == 1) {
      ++pending;  // PENDING: retired at the next reset or driver load
    } else {
      ++unreservable;
    }
  }
  s.bad_pages_retired = retired;
  s.bad_pages_pending = pending;
  s.bad_pages_unreservable = unreservable;
}

// GTT and the CPU-visible part of VRAM, as amd-smi's backend reads them (both libraries name
// the same memory types with their own constants). `get(field, type, want_total, &bytes)` is
// the library's total or usage getter, true when it answered.
template <class Get>
void read_gtt_and_visible_vram(Get get, std::uint32_t gtt_type, std::uint32_t visible_vram_type,
                               AcceleratorSample& s) {
  struct Kind {
    std::uint32_t type;
    const char* total_field;
    const char* used_field;
    std::optional<std::uint64_t>* total;
    std::optional<std::uint64_t>* used;
  };
  const Kind kinds[] = {
      {gtt_type, "gtt_total", "gtt_used", &s.gtt_total_bytes, &s.gtt_used_bytes},
      {visible_vram_type, "vis_vram_total", "vis_vram_used", &s.visible_vram_total_bytes,
       &s.visible_vram_used_bytes},
  };
  for (const Kind& k : kinds) {
    std::uint64_t total = 0;
    std::uint64_t used = 0;
    if (!get(k.total_field, k.type, true, &total) || total == 0 || total == UINT64_MAX) continue;
    *k.total = total;
    if (get(k.used_field, k.type, false, &used) && used <= total) *k.used = used;
  }
}

}  // namespace polyaccel::amd
