// AMD GPUs under ROCm device-metrics-exporter's names and labels
// (../shared/reference/amd-gaudi-sriov.md §1.2). Its labels are always present, empty when
// unknown (pod, namespace, container without kubelet), as it emits them.
#include <algorithm>

#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;
constexpr double kMiB = 1024.0 * 1024.0;

std::vector<TableMetric> amd_table() {
  using D = const MonitoredDevice&;
  using S = const AcceleratorSample&;
  auto mib = [](const std::optional<std::uint64_t>& v) {
    return v ? std::optional<double>(static_cast<double>(*v) / kMiB) : std::nullopt;
  };
  return {
      {"gpu_gfx_activity", "GPU GFX engine activity (%)", MetricType::Gauge,
       [](D, S s) { return s.gpu_utilization_percent; }},
      {"gpu_umc_activity", "GPU memory controller activity (%)", MetricType::Gauge,
       [](D, S s) { return s.memory_utilization_percent; }},
      {"gpu_package_power", "GPU socket power (W)", MetricType::Gauge,
       [](D, S s) { return s.power_watts; }},
      {"gpu_power_usage", "GPU power usage (W)", MetricType::Gauge,
       [](D, S s) { return s.power_watts; }},
      {"gpu_energy_consumed", "GPU energy consumed (uJ)", MetricType::Gauge,
       [](D, S s) {
         return s.energy_millijoules
                    ? std::optional(static_cast<double>(*s.energy_millijoules) * 1000)
                    : std::nullopt;
       }},
      {"gpu_junction_temperature", "GPU junction temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.gpu_temperature_c; }},
      {"gpu_memory_temperature", "GPU memory temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; }},
      {"gpu_total_vram", "GPU total VRAM (MB)", MetricType::Gauge,
       [](D d, S) {
         return d.inventory.memory_total_bytes
                    ? std::optional(static_cast<double>(d.inventory.memory_total_bytes) / kMiB)
                    : std::nullopt;
       }},
      {"gpu_used_vram", "GPU used VRAM (MB)", MetricType::Gauge,
       [mib](D, S s) { return mib(s.memory_used_bytes); }},
      {"gpu_free_vram", "GPU free VRAM (MB)", MetricType::Gauge,
       [mib](D, S s) { return mib(s.memory_free_bytes); }},
      {"gpu_clock",
       "GPU clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); },
       false,
       {{"clock_index", "0"}, {"clock_type", "GPU_CLOCK_TYPE_SYSTEM"}}},
      {"gpu_clock",
       "GPU clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_mhz); },
       false,
       {{"clock_index", "0"}, {"clock_type", "GPU_CLOCK_TYPE_MEMORY"}}},
      {"pcie_replay_count", "PCIe replay count", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_replay_count); }},
      {"gpu_ecc_correct_total", "Total correctable ECC errors", MetricType::Gauge,
       [](D, S s) { return as_double(s.ecc_corrected_aggregate); }},
      {"gpu_ecc_uncorrect_total", "Total uncorrectable ECC errors", MetricType::Gauge,
       [](D, S s) { return as_double(s.ecc_uncorrected_aggregate); }},
      {"gpu_health", "GPU health: 1 healthy, 0 unhealthy", MetricType::Gauge,
       [](D d, S) { return std::optional<double>(d.health.healthy ? 1 : 0); }},
  };
}

class AmdCollector : public Collector {
 public:
  std::string name() const override { return "amd"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::amd)) return Ok{};
    static const std::vector<TableMetric> table = amd_table();
    Families amd;
    collect_table(
        in, Vendor::amd, table,
        [&](const DeviceSeries& s) {
          const MonitoredDevice& d = *s.device;
          const auto& pod = s.pod;
          return Labels{{"serial_number", d.inventory.serial},
                        {"gpu_id", std::to_string(d.inventory.index)},
                        {"gpu_uuid", d.inventory.uuid},
                        {"card_model", d.name},
                        {"hostname", in.hostname},
                        {"gpu_partition_id", "0"},
                        {"gpu_compute_partition_type", d.inventory.compute_partition},
                        {"gpu_memory_partition_type", d.inventory.memory_partition},
                        {"driver_version", d.inventory.driver_version},
                        {"pod", pod ? pod->pod : ""},
                        {"namespace", pod ? pod->pod_namespace : ""},
                        {"container", pod ? pod->container : ""}};
        },
        amd);
    // Two rows of the table share gpu_clock: merge them into one family.
    for (auto& f : amd) {
      auto first = std::find_if(out.begin(), out.end(), [&](const prometheus::MetricFamily& g) {
        return g.name == f.name;
      });
      if (first != out.end()) {
        first->metric.insert(first->metric.end(), f.metric.begin(), f.metric.end());
      } else {
        out.push_back(std::move(f));
      }
    }
    double count = 0;
    for (const auto& d : in.accelerators->devices)
      count += d.vendor == Vendor::amd ? 1 : 0;
    if (count > 0) {
      auto nodes = family("gpu_nodes_total", "Number of GPUs in the node", MetricType::Gauge);
      add_sample(nodes, {{"hostname", in.hostname}}, count);
      emit(out, {&nodes});
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_amd_collector() {
  return std::make_unique<AmdCollector>();
}

}  // namespace polyaccel::exporter
