// Intel Gaudi under the Gaudi metric exporter's habanalabs_* names
// (../shared/reference/amd-gaudi-sriov.md §2.3), with its units (mW, MHz, bytes).
#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

std::vector<TableMetric> habana_table() {
  using D = const MonitoredDevice&;
  using S = const AcceleratorSample&;
  auto milli = [](const std::optional<double>& w) {
    return w ? std::optional(*w * 1000) : std::nullopt;
  };
  return {
      {"habanalabs_utilization", "Device utilization (%)", MetricType::Gauge,
       [](D, S s) { return s.gpu_utilization_percent; }},
      {"habanalabs_memory_used_bytes", "Device memory used (bytes)", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_used_bytes); }},
      {"habanalabs_memory_free_bytes", "Device memory free (bytes)", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_free_bytes); }},
      {"habanalabs_memory_total_bytes", "Device memory total (bytes)", MetricType::Gauge,
       [](D d, S) {
         return d.inventory.memory_total_bytes
                    ? std::optional(static_cast<double>(d.inventory.memory_total_bytes))
                    : std::nullopt;
       }},
      {"habanalabs_power_mW", "Power usage (mW)", MetricType::Gauge,
       [milli](D, S s) { return milli(s.power_watts); }},
      {"habanalabs_power_default_limit_mW", "Default power limit (mW)", MetricType::Gauge,
       [milli](D d, S) { return milli(d.inventory.power_limit_watts); }},
      {"habanalabs_energy", "Energy since the driver loaded (mJ)", MetricType::Gauge,
       [](D, S s) { return as_double(s.energy_millijoules); }},
      {"habanalabs_temperature_onchip", "On-chip temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.gpu_temperature_c; }},
      {"habanalabs_temperature_onboard", "On-board temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; }},
      {"habanalabs_clock_soc_mhz", "SoC clock (MHz)", MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); }},
      {"habanalabs_ecc_feature_mode", "ECC mode: 1 enabled", MetricType::Gauge,
       [](D d, S) { return as_double(d.inventory.ecc_enabled); }},
      {"habanalabs_pending_rows_state", "Rows pending replacement: 1 yes", MetricType::Gauge,
       [](D, S s) { return as_double(s.remapped_rows_pending); }},
      {"habanalabs_pending_rows_with_single_bit_ecc_errors",
       "Rows pending replacement after single-bit ECC errors", MetricType::Gauge,
       [](D, S s) { return as_double(s.remapped_rows_correctable); }},
      {"habanalabs_pending_rows_with_double_bit_ecc_errors",
       "Rows pending replacement after double-bit ECC errors", MetricType::Gauge,
       [](D, S s) { return as_double(s.remapped_rows_uncorrectable); }},
      {"habanalabs_pcie_replay_count", "PCIe replay count", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_replay_count); }},
  };
}

Labels habana_labels(const ScrapeInput& in, const DeviceSeries& s) {
  const MonitoredDevice& d = *s.device;
  Labels l = {{"UUID", d.inventory.uuid},
              {"serial", d.inventory.serial},
              {"bus_id", d.pci_bus_id},
              {"device", "accel" + std::to_string(d.inventory.index)},
              {"hostname", in.hostname}};
  Labels pods = pod_labels(s);
  l.insert(l.end(), pods.begin(), pods.end());
  return l;
}

class HabanaCollector : public Collector {
 public:
  std::string name() const override { return "habana"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::habana)) return Ok{};
    static const std::vector<TableMetric> table = habana_table();
    collect_table(
        in, Vendor::intel_gaudi, table, [&](const DeviceSeries& s) { return habana_labels(in, s); },
        out);
    // The PCIe link comes from sysfs, through the host sample.
    auto speed = family("habanalabs_pci_link_speed", "PCIe link speed (GT/s)", MetricType::Gauge);
    auto width = family("habanalabs_pci_link_width", "PCIe link width (lanes)", MetricType::Gauge);
    for (const auto& d : in.accelerators->devices) {
      if (d.vendor != Vendor::intel_gaudi) continue;
      const Accelerator* a = in.host->host->accelerator(d.pci_bus_id);
      if (!a) continue;
      Labels l = habana_labels(in, DeviceSeries{&d, nullptr, std::nullopt});
      if (a->pci.link.speed_gts > 0) add_sample(speed, l, a->pci.link.speed_gts);
      if (a->pci.link.width > 0) add_sample(width, l, a->pci.link.width);
    }
    emit(out, {&speed, &width});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_habana_collector() {
  return std::make_unique<HabanaCollector>();
}

}  // namespace polyaccel::exporter
