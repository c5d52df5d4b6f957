// NVIDIA GPUs under DCGM-exporter's names and labels (../shared/reference/nvidia.md §4), so that
// dashboards and alerts written for it keep working. Its habits are kept on purpose: counters
// without _total, the camelCase modelName label, MiB and mJ units.
#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;
constexpr double kMiB = 1024.0 * 1024.0;

std::optional<double> mib(const std::optional<std::uint64_t>& bytes) {
  return bytes ? std::optional(static_cast<double>(*bytes) / kMiB) : std::nullopt;
}
// DCGM's profiling fields are ratios, 0 to 1; GPM gives percentages.
std::optional<double> ratio(const std::optional<double>& percent) {
  return percent ? std::optional(*percent / 100.0) : std::nullopt;
}

std::vector<TableMetric> dcgm_table() {
  using D = const MonitoredDevice&;
  using S = const AcceleratorSample&;
  using M = const MigInstanceSample&;
  using P = std::optional<double> ProfilingSample::*;
  std::vector<TableMetric> t = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.gpu_utilization_percent; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.memory_utilization_percent; }},
      {"DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.encoder_utilization_percent; }},
      {"DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", MetricType::Gauge,
       [](D, S s) { return s.decoder_utilization_percent; }},
      {"DCGM_FI_DEV_FB_USED",
       "Framebuffer memory used (in MiB).",
       MetricType::Gauge,
       [](D, S s) { return mib(s.memory_used_bytes); },
       {},
       [](M m) { return mib(m.memory_used_bytes); }},
      {"DCGM_FI_DEV_FB_FREE",
       "Framebuffer memory free (in MiB).",
       MetricType::Gauge,
       [](D, S s) { return mib(s.memory_free_bytes); },
       {},
       [](M m) { return mib(m.memory_free_bytes); }},
      {"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", MetricType::Gauge,
       [](D, S s) { return mib(s.memory_reserved_bytes); }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", MetricType::Gauge,
       [](D, S s) { return s.gpu_temperature_c; }},
      {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", MetricType::Gauge,
       [](D, S s) { return s.power_watts; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
       MetricType::Counter, [](D, S s) { return as_double(s.energy_millijoules); }},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_mhz); }},
      {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
       "Current clock event (throttle) reasons: NVML's bit mask.", MetricType::Gauge,
       [](D, S s) { return as_double(s.throttle_reasons); }},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", MetricType::Counter,
       [](D, S s) { return as_double(s.pcie_replay_count); }},
      // dcgm-exporter declares it a counter; DCGM's value is the bandwidth over its last
      // interval (MB/s), which we keep: a dashboard reads it as DCGM gives it. GPU-wide: once.
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
       "Total number of NVLink bandwidth counters for all lanes.", MetricType::Counter,
       [](D, S s) { return s.nvlink_bandwidth_mb_per_second; }},
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
  // The profiling (DCP) fields, from NVML's GPM: per GPU, and per MIG instance in MIG mode.
  struct Prof {
    const char* name;
    const char* help;
    P field;
  };
  const Prof ratios[] = {
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
       &ProfilingSample::graphics_active_percent},
      {"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned (in %).",
       &ProfilingSample::sm_active_percent},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM (in %).",
       &ProfilingSample::sm_occupancy_percent},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
       &ProfilingSample::tensor_active_percent},
      {"DCGM_FI_PROF_DRAM_ACTIVE",
       "Ratio of cycles the device memory interface is active sending or receiving data.",
       &ProfilingSample::dram_active_percent},
      {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active.",
       &ProfilingSample::fp64_active_percent},
      {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active.",
       &ProfilingSample::fp32_active_percent},
      {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active.",
       &ProfilingSample::fp16_active_percent},
  };
  for (const auto& p : ratios) {
    P f = p.field;
    t.push_back({p.name,
                 p.help,
                 MetricType::Gauge,
                 [f](D, S s) { return ratio(s.profiling.*f); },
                 {},
                 [f](M m) { return ratio(m.profiling.*f); }});
  }
  const Prof rates[] = {
      {"DCGM_FI_PROF_PCIE_TX_BYTES",
       "The rate of data transmitted over the PCIe bus - including both protocol headers and "
       "data payloads - in bytes per second.",
       &ProfilingSample::pcie_tx_bytes_per_second},
      {"DCGM_FI_PROF_PCIE_RX_BYTES",
       "The rate of data received over the PCIe bus - including both protocol headers and data "
       "payloads - in bytes per second.",
       &ProfilingSample::pcie_rx_bytes_per_second},
      {"DCGM_FI_PROF_NVLINK_TX_BYTES",
       "The rate of data transmitted over NVLink, not including protocol headers, in bytes per "
       "second.",
       &ProfilingSample::nvlink_tx_bytes_per_second},
      {"DCGM_FI_PROF_NVLINK_RX_BYTES",
       "The rate of data received over NVLink, not including protocol headers, in bytes per "
       "second.",
       &ProfilingSample::nvlink_rx_bytes_per_second},
  };
  // The links and the PCIe bus are the GPU's: on its own series only.
  for (const auto& p : rates) {
    P f = p.field;
    t.push_back({p.name, p.help, MetricType::Gauge, [f](D, S s) { return s.profiling.*f; }});
  }
  return t;
}

// What XID N means, as NVIDIA's XID catalog names the common ones (dcgm-exporter's err_msg).
std::string xid_message(std::uint64_t xid) {
  switch (xid) {
    case 0:
      return "No Error";
    case 13:
      return "Graphics Engine Exception";
    case 31:
      return "GPU memory page fault";
    case 32:
      return "Invalid or corrupted push buffer stream";
    case 43:
      return "GPU stopped processing";
    case 45:
      return "Preemptive cleanup, due to previous errors";
    case 48:
      return "Double Bit ECC Error";
    case 61:
      return "Internal micro-controller breakpoint/warning";
    case 62:
      return "Internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapper recording failure";
    case 74:
      return "NVLINK Error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "High single-bit ECC error rate";
    case 94:
      return "Contained ECC error";
    case 95:
      return "Uncontained ECC error";
    case 119:
      return "GSP RPC Timeout";
    case 120:
      return "GSP Error";
    default:
      return "Unknown Error";
  }
}

class DcgmCollector : public Collector {
 public:
  std::string name() const override { return "dcgm"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::dcgm)) return Ok{};
    static const std::vector<TableMetric> table = dcgm_table();
    auto labels = [&](const DeviceSeries& s) {
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
    };
    collect_table(in, Vendor::nvidia, table, labels, out);
    // The last XID with its code and message as labels, as dcgm-exporter has them; 0 before any.
    auto xid = family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
                      MetricType::Gauge);
    for (const auto& d : in.accelerators->devices) {
      if (d.vendor != Vendor::nvidia || !d.sample || !d.sample->reachable) continue;
      for (const auto& series : device_series(d, *in.pods, false)) {
        std::uint64_t last = d.last_xid.value_or(0);
        add_sample(xid,
                   with(labels(series),
                        {{"err_code", std::to_string(last)}, {"err_msg", xid_message(last)}}),
                   static_cast<double>(last));
      }
    }
    emit(out, {&xid});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_dcgm_collector() {
  return std::make_unique<DcgmCollector>();
}

}  // namespace polyaccel::exporter
