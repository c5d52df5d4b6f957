// The accelerator sample family: plain values a vendor backend (discover/accel/) fills and the
// audit, the exporter and the agent read. Here, in core/, so that a reader of samples need not
// include the vendor room (DESIGN.md, rule 4).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace polyaccel {

// One reading of a device's changing values. A field left empty is not supported by the device
// or the library ("not supported is an answer, not a failure").
// Profiling ratios and rates over the last sample interval (NVIDIA GPM, Hopper and later): the
// quantities DCGM's DCGM_FI_PROF_* fields give. Percentages 0-100, rates in bytes per second.
struct ProfilingSample {
  std::optional<double> graphics_active_percent;  // graphics/compute engine active
  std::optional<double> sm_active_percent;
  std::optional<double> sm_occupancy_percent;
  std::optional<double> tensor_active_percent;  // any tensor pipe
  std::optional<double> dram_active_percent;
  std::optional<double> fp64_active_percent;
  std::optional<double> fp32_active_percent;
  std::optional<double> fp16_active_percent;
  std::optional<double> pcie_tx_bytes_per_second;
  std::optional<double> pcie_rx_bytes_per_second;
  std::optional<double> nvlink_tx_bytes_per_second;
  std::optional<double> nvlink_rx_bytes_per_second;
  bool empty() const {
    return !graphics_active_percent && !sm_active_percent && !sm_occupancy_percent &&
           !tensor_active_percent && !dram_active_percent && !fp64_active_percent &&
           !fp32_active_percent && !fp16_active_percent && !pcie_tx_bytes_per_second &&
           !pcie_rx_bytes_per_second && !nvlink_tx_bytes_per_second && !nvlink_rx_bytes_per_second;
  }
};

// What one MIG instance has of its own: its memory, its engines' activity.
struct MigInstanceSample {
  unsigned gpu_instance_id = 0;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_free_bytes;
  ProfilingSample profiling;
};

// AMD: one compute partition of a GPU in a partition mode (DPX, QPX, CPX) other than the first,
// whose values are the GPU sample's own: what the partition has of its own, its engines'
// activity and its memory. GPU-wide quantities (power, temperatures, clocks, PCIe, ECC) belong to
// the GPU and are read once, on the first partition, so that a sum counts nothing twice.
struct PartitionSample {
  unsigned partition_id = 0;  // 1..N-1 (0 is the GPU's own sample)
  unsigned index = 0;         // the partition's place in the library's enumeration (AMD's gpu_id)
  std::optional<double> gpu_utilization_percent;
  std::optional<double> memory_utilization_percent;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_free_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  // XCC → busy, of the partition's own XCCs: the metrics table's xcp_stats[partition_id] (v1.6+).
  std::vector<std::pair<unsigned, double>> gfx_busy_percent;
};

// AMD: the error counts of one RAS block since the driver loaded (amdsmi_get_gpu_ecc_count,
// rsmi_dev_ecc_count_get), named as AMD's exporter names the block ("umc", "bif", "xgmi_wafl").
// AMD's RAS blocks, bit k of rsmi_gpu_block_t and amdsmi_gpu_block_t being kAmdRasBlocks[k] (UMC
// 1 to MPIO 1 << 18, the same in both), under the names AMD's exporter gives them.
inline constexpr const char* kAmdRasBlocks[] = {
    "umc", "sdma", "gfx", "mmhub", "athub", "bif", "hdp",  "xgmi_wafl", "df",  "smn",
    "sem", "mp0",  "mp1", "fuse",  "mca",   "vcn", "jpeg", "ih",        "mpio"};

struct RasBlockErrors {
  std::string block;
  std::uint64_t correctable = 0;
  std::uint64_t uncorrectable = 0;
  std::optional<std::uint64_t> deferred;  // amd-smi only
};

// AMD MI300 and later: throttling as residency counters (the violation status of amd-smi, the
// metrics table's *_residency_acc of either library). The kinds, in this order: processor hot,
// package power tracking, socket thermal, voltage rail thermal, HBM thermal.
struct ViolationSample {
  static constexpr std::size_t kKinds = 5;
  std::optional<std::uint64_t> accumulation_counter;  // the counter the residencies count in
  std::optional<std::uint64_t> residency_accumulated[kKinds];
  std::optional<double> residency_percent[kKinds];  // 0-100, over the library's interval
  // Per XCC of the first partition (amd-smi 26's violation status): the GFX clock held below
  // the host's limit by power, by temperature, by low utilisation, and in all (XCC → value).
  static constexpr std::size_t kXccKinds = 4;
  std::vector<std::pair<unsigned, std::uint64_t>> xcc_accumulated[kXccKinds];
  std::vector<std::pair<unsigned, double>> xcc_percent[kXccKinds];
  bool empty() const {
    if (accumulation_counter) return false;
    for (std::size_t k = 0; k < kKinds; ++k) {
      if (residency_accumulated[k] || residency_percent[k]) return false;
    }
    for (std::size_t k = 0; k < kXccKinds; ++k) {
      if (!xcc_accumulated[k].empty() || !xcc_percent[k].empty()) return false;
    }
    return true;
  }
};

struct AcceleratorSample {
  std::string pci_bus_id;
  std::chrono::system_clock::time_point time;
  bool reachable = true;  // false: the library no longer answers for this device (fell off the bus)

  std::optional<double> gpu_utilization_percent;
  std::optional<double> memory_utilization_percent;  // memory controller busy time
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_free_bytes;
  std::optional<double> gpu_temperature_c;
  std::optional<double> memory_temperature_c;   // HBM
  std::optional<double> hotspot_temperature_c;  // AMD: the hottest point of the die (junction)
  std::optional<double> board_temperature_c;    // Gaudi: the on-board sensor
  std::optional<double> power_watts;
  std::optional<std::uint64_t> energy_millijoules;  // since driver load
  std::optional<std::uint32_t> sm_clock_mhz;
  std::optional<std::uint32_t> memory_clock_mhz;
  std::optional<std::uint64_t> pcie_replay_count;
  std::optional<std::uint64_t> ecc_corrected_volatile;
  std::optional<std::uint64_t> ecc_uncorrected_volatile;
  std::optional<std::uint64_t> ecc_corrected_aggregate;
  std::optional<std::uint64_t> ecc_uncorrected_aggregate;
  std::optional<std::uint64_t> retired_pages_single_bit;
  std::optional<std::uint64_t> retired_pages_double_bit;
  std::optional<std::uint64_t> remapped_rows_correctable;
  std::optional<std::uint64_t> remapped_rows_uncorrectable;
  std::optional<bool> remapped_rows_pending;
  std::optional<bool> remapped_rows_failure;
  // AMD: bad memory pages in the RAS table (kept across reboots): retired (reserved), pending
  // (marked bad, retired at the next reset or driver load), and ones that could not be retired.
  std::optional<std::uint64_t> bad_pages_retired;
  std::optional<std::uint64_t> bad_pages_pending;
  std::optional<std::uint64_t> bad_pages_unreservable;
  std::optional<std::uint64_t> throttle_reasons;   // the vendor's bit mask
  std::vector<std::string> throttle_reason_names;  // "sw_power_cap", "hw_thermal_slowdown", ...
  std::optional<double> encoder_utilization_percent;
  std::optional<double> decoder_utilization_percent;
  std::optional<std::uint64_t> memory_reserved_bytes;  // held by the driver (NVML v2 memory info)
  // NVIDIA: NVLink data sent + received over all links since the last sample, in DCGM's unit
  // (KiB/s divided by 1000: DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), 0 on the first sample.
  std::optional<double> nvlink_bandwidth_mb_per_second;
  // NVIDIA: NVLink data received and sent over all links since the driver loaded, KiB (NVML's
  // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX/TX counters, which the bandwidth above is made from).
  std::optional<std::uint64_t> nvlink_rx_kib;
  std::optional<std::uint64_t> nvlink_tx_kib;
  // PCIe counters the device keeps itself (AMD MI300: the metrics table's v1.4+ fields).
  std::optional<double> pcie_link_speed_gts;
  std::optional<unsigned> pcie_link_width;
  std::optional<double> pcie_bandwidth_bytes_per_second;  // now
  std::optional<std::uint64_t> pcie_recovery_count;       // L0 to recovery transitions
  std::optional<std::uint64_t> pcie_replay_rollover_count;
  std::optional<std::uint64_t> pcie_nak_sent_count;
  std::optional<std::uint64_t> pcie_nak_received_count;
  // The clocks' ranges: Gaudi (HLML) the SoC clock's maximum; AMD the GFX and memory clocks'
  // current minimum and maximum (amdsmi_get_clock_info).
  std::optional<std::uint32_t> sm_clock_max_mhz;
  std::optional<std::uint32_t> sm_clock_min_mhz;
  std::optional<std::uint32_t> memory_clock_min_mhz;
  std::optional<std::uint32_t> memory_clock_max_mhz;
  // Gaudi (HLML): the temperature limits, PCIe throughput, NIC links.
  std::optional<double> temperature_shutdown_c;
  std::optional<double> temperature_slowdown_c;
  std::optional<double> temperature_memory_max_c;
  std::optional<double> temperature_gpu_max_c;
  std::optional<double> pcie_tx_bytes_per_second;
  std::optional<double> pcie_rx_bytes_per_second;
  std::vector<std::pair<unsigned, bool>> nic_ports;  // port → link up
  // AMD: GTT (system memory the GPU maps) and the CPU-visible part of VRAM; the average
  // socket power (MI200 and earlier); the error counts of each RAS block; MI300's throttle
  // residencies; from the metrics table (v1.4 to v1.7) the XGMI data moved per link (KB), the
  // PCIe accumulated bandwidth (GB/s), the VRAM's maximum bandwidth (GB/s) and the busy
  // percentages of each XCC (compute die) and VCN and JPEG engine (index: its place in the
  // table, unsupported ones absent).
  std::optional<std::uint64_t> gtt_total_bytes;
  std::optional<std::uint64_t> gtt_used_bytes;
  std::optional<std::uint64_t> visible_vram_total_bytes;
  std::optional<std::uint64_t> visible_vram_used_bytes;
  std::optional<double> average_power_watts;
  // AMD: the edge sensor alone (MI200 and earlier have one, MI300 none; gpu_temperature_c
  // falls back to the junction), and each HBM stack's sensor (stack → C), as AMD's exporter
  // reports them (gpu_edge_temperature, gpu_hbm_temperature).
  std::optional<double> edge_temperature_c;
  std::vector<std::pair<unsigned, double>> hbm_temperature_c;
  std::vector<RasBlockErrors> ecc_blocks;
  std::optional<std::uint64_t> ecc_deferred_volatile;
  ViolationSample violation;
  std::vector<std::pair<unsigned, std::uint64_t>> xgmi_read_kb;   // link → KB read
  std::vector<std::pair<unsigned, std::uint64_t>> xgmi_write_kb;  // link → KB written
  std::optional<double> pcie_bandwidth_accumulated_gbs;
  std::optional<double> vram_max_bandwidth_gbs;
  std::vector<std::pair<unsigned, double>> gfx_busy_percent;  // XCC → busy
  // A GPU in a compute partition mode: the per-XCC busy of its further partitions, the table's
  // xcp_stats[1..N-1] (element k is partition k + 1's), which the backends give to their samples.
  std::vector<std::vector<std::pair<unsigned, double>>> partition_gfx_busy_percent;
  std::vector<std::pair<unsigned, double>> vcn_busy_percent;
  std::vector<std::pair<unsigned, double>> jpeg_busy_percent;
  ProfilingSample profiling;  // the whole device
  // Bytes the device received and transmitted since the agent started (OpenTelemetry's
  // hw.gpu.io), over PCIe and its device links: the monitor adds each sample's share to the last
  // sample's totals (discover/accel/io_totals.h). Absent when the device has no such source.
  std::optional<std::uint64_t> io_received_bytes;
  std::optional<std::uint64_t> io_transmitted_bytes;
  std::vector<MigInstanceSample> mig_instances;  // MIG mode: per GPU instance
  std::vector<PartitionSample> partitions;       // AMD partition mode: partitions 1..N-1
};

enum class AcceleratorEventKind {
  xid,                // NVIDIA XID error, code = XID number
  ecc_uncorrectable,  // a double-bit / uncorrectable memory error
  critical,           // HLML critical error, ROCm SMI fatal event
  other,
};
const char* to_string(AcceleratorEventKind kind);

struct AcceleratorEvent {
  std::string pci_bus_id;
  AcceleratorEventKind kind = AcceleratorEventKind::other;
  std::uint64_t code = 0;  // XID number or the vendor's event code
  std::string text;
  std::chrono::system_clock::time_point time;
  // NVIDIA MIG: the GPU instance and compute instance the event belongs to, when it belongs to one.
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

}  // namespace polyaccel
