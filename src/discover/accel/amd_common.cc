#include "discover/accel/amd_common.h"

#include <chrono>
#include <cstdio>

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
