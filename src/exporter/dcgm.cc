// NVIDIA GPUs under DCGM-exporter's names and labels (../shared/reference/nvidia.md §4), so that
// dashboards and alerts written for it keep working. Its habits are kept on purpose: counters
// without _total, the camelCase modelName label, MiB and mJ units.
#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;
constexpr double kMiB = 1024.0 * 1024.0;

std::vector<TableMetric> dcgm_table() {
  using D = const MonitoredDevice&;
  using S = const AcceleratorSample&;
  return {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.gpu_utilization_percent; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.memory_utilization_percent; }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", MetricType::Gauge,
       [](D, S s) {
         return s.memory_used_bytes ? std::optional(*s.memory_used_bytes / kMiB) : std::nullopt;
       }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", MetricType::Gauge,
       [](D, S s) {
         return s.memory_free_bytes ? std::optional(*s.memory_free_bytes / kMiB) : std::nullopt;
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", MetricType::Gauge,
       [](D, S s) { return s.gpu_temperature_c; }, true},
      {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; }, true},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", MetricType::Gauge,
       [](D, S s) { return s.power_watts; }, true},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
       MetricType::Counter, [](D, S s) { return as_double(s.energy_millijoules); }, true},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); }, true},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_mhz); }, true},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", MetricType::Counter,
       [](D, S s) { return as_double(s.pcie_replay_count); }, true},
      {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", MetricType::Gauge,
       [](D d, S) { return std::optional<double>(static_cast<double>(d.last_xid.value_or(0))); },
       true},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.ecc_corrected_volatile); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.ecc_uncorrected_volatile); }},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.ecc_corrected_aggregate); }},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.ecc_uncorrected_aggregate); }},
      {"DCGM_FI_DEV_RETIRED_SBE", "Total number of retired pages due to single-bit errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.retired_pages_single_bit); }},
      {"DCGM_FI_DEV_RETIRED_DBE", "Total number of retired pages due to double-bit errors.",
       MetricType::Counter, [](D, S s) { return as_double(s.retired_pages_double_bit); }},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
       "Number of remapped rows for uncorrectable errors", MetricType::Counter,
       [](D, S s) { return as_double(s.remapped_rows_uncorrectable); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
       MetricType::Counter, [](D, S s) { return as_double(s.remapped_rows_correctable); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", MetricType::Gauge,
       [](D, S s) { return as_double(s.remapped_rows_failure); }},
      {"DCGM_FI_DEV_ROW_REMAP_PENDING", "Whether a row remapping is pending (reset the GPU)",
       MetricType::Gauge, [](D, S s) { return as_double(s.remapped_rows_pending); }},
  };
}

class DcgmCollector : public Collector {
 public:
  std::string name() const override { return "dcgm"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::dcgm)) return Ok{};
    static const std::vector<TableMetric> table = dcgm_table();
    collect_table(
        in, Vendor::nvidia, table,
        [&](const DeviceSeries& s) {
          const MonitoredDevice& d = *s.device;
          std::string index = std::to_string(d.inventory.index);
          Labels l = {{"gpu", index},
                      {"UUID", d.inventory.uuid},
                      {"device", "nvidia" + index},
                      {"modelName", d.name},
                      {"pci_bus_id", nvml_bus_id(d.pci_bus_id)},
                      {in.dcgm_hostname_label, in.hostname},
                      {"DCGM_FI_DRIVER_VERSION", d.inventory.driver_version}};
          if (s.mig) {
            l.push_back({"GPU_I_PROFILE", s.mig->profile_name});
            l.push_back({"GPU_I_ID", std::to_string(s.mig->gpu_instance_id)});
          }
          Labels pods = pod_labels(s);
          l.insert(l.end(), pods.begin(), pods.end());
          return l;
        },
        out);
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_dcgm_collector() {
  return std::make_unique<DcgmCollector>();
}

}  // namespace polyaccel::exporter
