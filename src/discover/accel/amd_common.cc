#include "discover/accel/amd_common.h"

#include <chrono>
#include <cstdio>
#include <cstring>

namespace polyaccel::amd {

std::vector<std::string> throttle_reason_names(std::uint64_t mask) {
  struct Bit {
    unsigned bit;
    const char* name;
  };
  static constexpr Bit kBits[] = {
      {0, "ppt0"},          {1, "ppt1"},          {2, "ppt2"},          {3, "ppt3"},
      {4, "spl"},           {5, "fppt"},          {6, "sppt"},          {7, "sppt_apu"},
      {16, "tdc_gfx"},      {17, "tdc_soc"},      {18, "tdc_mem"},      {19, "tdc_vdd"},
      {20, "tdc_cvip"},     {21, "edc_cpu"},      {22, "edc_gfx"},      {23, "apcc"},
      {32, "temp_gpu"},     {33, "temp_core"},    {34, "temp_mem"},     {35, "temp_edge"},
      {36, "temp_hotspot"}, {37, "temp_soc"},     {38, "temp_vr_gfx"},  {39, "temp_vr_soc"},
      {40, "temp_vr_mem0"}, {41, "temp_vr_mem1"}, {42, "temp_liquid0"}, {43, "temp_liquid1"},
      {44, "vrhot0"},       {45, "vrhot1"},       {46, "prochot_cpu"},  {47, "prochot_gfx"},
      {56, "ppm"},          {57, "fit"},
  };
  std::vector<std::string> names;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if (!(mask & (1ULL << bit))) continue;
    std::string name = "bit" + std::to_string(bit);
    for (const Bit& b : kBits) {
      if (b.bit == bit) name = b.name;
    }
    names.push_back(std::move(name));
  }
  return names;
}

std::optional<std::uint64_t> independent_throttle_mask(const GpuMetricsPrefix& metrics) {
  // Versions before 1.3 end before the field: the buffer's zeros read as "none".
  if (metrics.indep_throttle_status == ~0ULL || metrics.format_revision != 1 ||
      metrics.content_revision < 3) {
    return std::nullopt;
  }
  return metrics.indep_throttle_status;
}

std::optional<PartitionSample> partition_sample(std::size_t k, unsigned index,
                                                const AcceleratorSample& own,
                                                const AcceleratorSample& gpu) {
  if (!own.gpu_utilization_percent && !own.memory_used_bytes) return std::nullopt;
  PartitionSample ps;
  ps.partition_id = static_cast<unsigned>(k + 1);
  ps.index = index;
  ps.gpu_utilization_percent = own.gpu_utilization_percent;
  ps.memory_utilization_percent = own.memory_utilization_percent;
  ps.memory_used_bytes = own.memory_used_bytes;
  ps.memory_free_bytes = own.memory_free_bytes;
  if (own.memory_used_bytes && own.memory_free_bytes) {
    ps.memory_total_bytes = *own.memory_used_bytes + *own.memory_free_bytes;
  }
  if (k < gpu.partition_gfx_busy_percent.size())
    ps.gfx_busy_percent = gpu.partition_gfx_busy_percent[k];
  return ps;
}

void read_metrics_table(const unsigned char* raw, AcceleratorSample& s) {
  GpuMetricsPrefix head;
  std::memcpy(&head, raw, sizeof head);
  if (head.format_revision != 1) return;
  // A field of the table when the content revision has it and the library's struct holds it.
  auto has = [&](std::size_t offset, std::size_t size, unsigned revision) {
    return head.content_revision >= revision && offset + size <= head.structure_size &&
           offset + size <= sizeof(GpuMetrics);
  };
  auto u64 = [&](std::size_t offset) {
    std::uint64_t v = 0;
    std::memcpy(&v, raw + offset, sizeof v);
    return v;
  };
  auto u16 = [&](std::size_t offset) {
    std::uint16_t v = 0;
    std::memcpy(&v, raw + offset, sizeof v);
    return v;
  };
  constexpr std::uint64_t kAbsent = ~0ULL;
  constexpr std::size_t kLinks = 8;
  if (has(offsetof(GpuMetrics, xgmi_write_data_acc), 8 * kLinks, 4)) {
    for (unsigned k = 0; k < kLinks; ++k) {
      std::uint64_t read = u64(offsetof(GpuMetrics, xgmi_read_data_acc) + 8 * k);
      std::uint64_t written = u64(offsetof(GpuMetrics, xgmi_write_data_acc) + 8 * k);
      if (read != kAbsent) s.xgmi_read_kb.emplace_back(k, read);
      if (written != kAbsent) s.xgmi_write_kb.emplace_back(k, written);
    }
  }
  // The bandwidth the firmware accumulates (GB/s summed over its sampling intervals), a counter.
  if (has(offsetof(GpuMetrics, pcie_bandwidth_acc), 8, 4)) {
    std::uint64_t v = u64(offsetof(GpuMetrics, pcie_bandwidth_acc));
    if (v != kAbsent) s.pcie_bandwidth_accumulated_gbs = static_cast<double>(v);
  }
  // GB/s; MI355X's HBM3E gives 8000.
  if (has(offsetof(GpuMetrics, vram_max_bandwidth), 8, 7)) {
    std::uint64_t v = u64(offsetof(GpuMetrics, vram_max_bandwidth));
    if (v != kAbsent && v > 0 && v <= 100000) s.vram_max_bandwidth_gbs = static_cast<double>(v);
  }
  if (has(offsetof(GpuMetrics, hbm_thm_residency_acc), 8, 6)) {
    ViolationSample& v = s.violation;
    if (!v.accumulation_counter) {
      std::uint64_t c = u64(offsetof(GpuMetrics, accumulation_counter));
      if (c != kAbsent) v.accumulation_counter = c;
    }
    const std::size_t residencies[ViolationSample::kKinds] = {
        offsetof(GpuMetrics, prochot_residency_acc), offsetof(GpuMetrics, ppt_residency_acc),
        offsetof(GpuMetrics, socket_thm_residency_acc), offsetof(GpuMetrics, vr_thm_residency_acc),
        offsetof(GpuMetrics, hbm_thm_residency_acc)};
    for (std::size_t k = 0; k < ViolationSample::kKinds; ++k) {
      std::uint64_t r = u64(residencies[k]);
      if (!v.residency_accumulated[k] && r != kAbsent) v.residency_accumulated[k] = r;
    }
  }
  // Partition 0's XCCs and engines (the whole GPU in SPX); percentages, all ones for an XCC or
  // engine the partition lacks.
  constexpr std::size_t kXcp0 = offsetof(GpuMetrics, xcp_stats);
  auto xcc_busy = [&](std::size_t xcp) {
    std::vector<std::pair<unsigned, double>> busy;
    const std::size_t at =
        kXcp0 + xcp * sizeof(GpuXcpMetrics) + offsetof(GpuXcpMetrics, gfx_busy_inst);
    for (unsigned k = 0; k < 8; ++k) {
      std::uint32_t v = 0;
      std::memcpy(&v, raw + at + 4 * k, sizeof v);
      if (v <= 100) busy.emplace_back(k, v);
    }
    return busy;
  };
  if (has(kXcp0, sizeof(GpuXcpMetrics), 6)) {
    s.gfx_busy_percent = xcc_busy(0);
    for (unsigned k = 0; k < 4; ++k) {
      std::uint16_t v = u16(kXcp0 + offsetof(GpuXcpMetrics, vcn_busy) + 2 * k);
      if (v <= 100) s.vcn_busy_percent.emplace_back(k, v);
    }
    for (unsigned k = 0; k < 40; ++k) {
      std::uint16_t v = u16(kXcp0 + offsetof(GpuXcpMetrics, jpeg_busy) + 2 * k);
      if (v <= 100) s.jpeg_busy_percent.emplace_back(k, v);
    }
  }
  // In DPX, QPX and CPX the driver fills one XCP per partition, in the partitions' order
  // (num_partition of them; all ones: not kept). Partition k's XCCs are xcp_stats[k]'s.
  if (!has(offsetof(GpuMetrics, num_partition), 2, 6)) return;
  const unsigned partitions = u16(offsetof(GpuMetrics, num_partition));
  if (partitions < 2 || partitions > 8) return;
  for (std::size_t xcp = 1; xcp < partitions; ++xcp) {
    if (!has(kXcp0 + xcp * sizeof(GpuXcpMetrics), sizeof(GpuXcpMetrics), 6)) break;
    s.partition_gfx_busy_percent.push_back(xcc_busy(xcp));
  }
}

std::vector<std::string> physical_bus_ids(const std::vector<std::string>& reported) {
  std::vector<std::optional<PciAddress>> addresses;
  for (const auto& id : reported)
    addresses.push_back(PciAddress::parse(id));
  auto same_device = [](const PciAddress& a, const PciAddress& b) {
    return a.domain == b.domain && a.bus == b.bus && a.device == b.device;
  };
  std::vector<std::string> physical = reported;
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (!addresses[i]) continue;
    bool partitioned = false;
    for (std::size_t j = 0; j < addresses.size(); ++j) {
      if (j != i && addresses[j] && same_device(*addresses[i], *addresses[j]) &&
          addresses[j]->function != addresses[i]->function) {
        partitioned = true;
      }
    }
    if (!partitioned) continue;
    PciAddress gpu = *addresses[i];
    gpu.function = 0;
    physical[i] = gpu.to_string();
  }
  return physical;
}

AcceleratorEvent kfd_event(const std::string& pci_bus_id, std::uint32_t event,
                           const std::string& message) {
  AcceleratorEvent ev;
  ev.pci_bus_id = pci_bus_id;
  ev.code = event;
  ev.time = std::chrono::system_clock::now();
  std::string what;
  switch (event) {
    case 3:
      ev.kind = AcceleratorEventKind::critical;
      what = "GPU reset (pre-reset)";
      break;
    case 4:
      what = "GPU reset done (post-reset)";
      break;
    case 2:
      what = "thermal throttling";
      break;
    case 1:
      what = "VM fault";
      break;
    default:
      what = "event " + std::to_string(event);
  }
  ev.text = message.empty() ? what : what + ": " + message;
  return ev;
}

std::string gfx_name(std::uint64_t v) {
  char buf[48];
  if (v >= 10000) {
    std::snprintf(buf, sizeof buf, "gfx%llu%llx%llx", static_cast<unsigned long long>(v / 10000),
                  static_cast<unsigned long long>(v / 100 % 100),
                  static_cast<unsigned long long>(v % 100));
  } else if (v >= 0x800) {
    std::snprintf(buf, sizeof buf, "gfx%llx", static_cast<unsigned long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "gfx%llu", static_cast<unsigned long long>(v));
  }
  return buf;
}

}  // namespace polyaccel::amd
