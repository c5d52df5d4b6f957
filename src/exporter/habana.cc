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
       [](D, S s) { return s.board_temperature_c; }},
      {"habanalabs_clock_soc_mhz", "SoC clock (MHz)", MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); }},
      {"habanalabs_clock_soc_max_mhz", "SoC clock maximum (MHz)", MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_max_mhz); }},
      {"habanalabs_temperature_threshold_shutdown", "Shutdown temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.temperature_shutdown_c; }},
      {"habanalabs_temperature_threshold_slowdown", "Slowdown temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.temperature_slowdown_c; }},
      {"habanalabs_temperature_threshold_memory", "Memory temperature limit (C)", MetricType::Gauge,
       [](D, S s) { return s.temperature_memory_max_c; }},
      {"habanalabs_temperature_threshold_gpu", "Chip temperature limit (C)", MetricType::Gauge,
       [](D, S s) { return s.temperature_gpu_max_c; }},
      // HLML's PCIe throughput (KB/s over 20 ms): as the library gives it, and in bytes/s.
      {"habanalabs_pcie_rx", "PCIe receive throughput (KB/s)", MetricType::Gauge,
       [](D, S s) {
         return s.pcie_rx_bytes_per_second ? std::optional(*s.pcie_rx_bytes_per_second / 1000)
                                           : std::nullopt;
       }},
      {"habanalabs_pcie_tx", "PCIe transmit throughput (KB/s)", MetricType::Gauge,
       [](D, S s) {
         return s.pcie_tx_bytes_per_second ? std::optional(*s.pcie_tx_bytes_per_second / 1000)
                                           : std::nullopt;
       }},
      {"habanalabs_pcie_receive_throughput", "PCIe receive throughput (bytes/s)", MetricType::Gauge,
       [](D, S s) { return s.pcie_rx_bytes_per_second; }},
      {"habanalabs_pcie_transmit_throughput", "PCIe transmit throughput (bytes/s)",
       MetricType::Gauge, [](D, S s) { return s.pcie_tx_bytes_per_second; }},
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
  // The Gaudi exporter names the pod's labels pod_name and pod_namespace.
  if (s.pod) {
    l.push_back({"pod_name", s.pod->pod});
    l.push_back({"pod_namespace", s.pod->pod_namespace});
  }
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
    // The PCIe link: HLML's, else sysfs's through the host sample.
    auto speed = family("habanalabs_pci_link_speed", "PCIe link speed (GT/s)", MetricType::Gauge);
    auto width = family("habanalabs_pci_link_width", "PCIe link width (lanes)", MetricType::Gauge);
    auto nic =
        family("habanalabs_nic_port_status", "NIC port link: 1 up, 0 down", MetricType::Gauge);
    auto config = family("habanalabs_device_config", "The device and its driver, as labels",
                         MetricType::Gauge);
    auto kube =
        family("habanalabs_kube_info", "The pod a device is allocated to", MetricType::Gauge);
    for (const auto& d : in.accelerators->devices) {
      if (d.vendor != Vendor::intel_gaudi) continue;
      Labels l = habana_labels(in, DeviceSeries{&d, nullptr, std::nullopt});
      add_sample(config,
                 with(l, {{"model", d.name}, {"driver_version", d.inventory.driver_version}}), 1);
      for (const auto& s : device_series(d, *in.pods, false)) {
        if (s.pod)
          add_sample(kube, with(habana_labels(in, s), {{"container", s.pod->container}}), 1);
      }
      const Accelerator* a = in.host->host->accelerator(d.pci_bus_id);
      const AcceleratorSample* sample = d.sample && d.sample->reachable ? &*d.sample : nullptr;
      double gts = sample && sample->pcie_link_speed_gts ? *sample->pcie_link_speed_gts
                   : a                                   ? a->pci.link.speed_gts
                                                         : 0;
      double lanes = sample && sample->pcie_link_width ? *sample->pcie_link_width
                     : a                               ? a->pci.link.width
                                                       : 0;
      if (gts > 0) add_sample(speed, l, gts);
      if (lanes > 0) add_sample(width, l, lanes);
      if (sample) {
        for (const auto& [port, up] : sample->nic_ports)
          add_sample(nic, with(l, {{"port", std::to_string(port)}}), up ? 1 : 0);
      }
    }
    emit(out, {&speed, &width, &nic, &config, &kube});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_habana_collector() {
  return std::make_unique<HabanaCollector>();
}

}  // namespace polyaccel::exporter
