// AMD GPUs under ROCm device-metrics-exporter's names and labels
// (../shared/reference/amd-gaudi-sriov.md §1.2). Its labels are always present, empty when
// unknown (pod, namespace, container without kubelet), as it emits them.
#include <algorithm>
#include <cctype>

#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;
constexpr double kMiB = 1024.0 * 1024.0;

using D = const MonitoredDevice&;
using S = const AcceleratorSample&;

std::optional<double> mib(const std::optional<std::uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v) / kMiB) : std::nullopt;
}

std::optional<double> free_mib(const std::optional<std::uint64_t>& total,
                               const std::optional<std::uint64_t>& used) {
  if (!total || !used || *used > *total) return std::nullopt;
  return static_cast<double>(*total - *used) / kMiB;
}

// The value at `index` of a sample's (index, value) list.
template <class T>
std::optional<double> at_index(const std::vector<std::pair<unsigned, T>>& list, unsigned index) {
  for (const auto& [i, v] : list) {
    if (i == index) return static_cast<double>(v);
  }
  return std::nullopt;
}

// One series per entry of an indexed list of the sample (an XCC, a link, an engine) among its
// first `count` indexes, labelled `label` with the index. `list(sample)` gives the list.
template <class List>
void add_indexed(std::vector<TableMetric>& rows, const std::string& name, const std::string& help,
                 const char* label, unsigned count, List list) {
  for (unsigned i = 0; i < count; ++i) {
    rows.push_back({name,
                    help,
                    MetricType::Gauge,
                    [list, i](D, S s) { return at_index(list(s), i); },
                    {{label, std::to_string(i)}}});
  }
}

// What metricslist.md adds to the table below: each RAS block's ECC counts, GTT and visible
// VRAM, MI300's violation residencies, XGMI data per link, PCIe and VRAM bandwidth, VCN and
// JPEG busy per engine. All GPU-wide: on partition 0 only (metricslist.md: "applicable for
// primary partition").
void add_metricslist_rows(std::vector<TableMetric>& rows) {
  rows.push_back({"gpu_ecc_deferred_total", "Total deferred ECC errors", MetricType::Gauge,
                  [](D, S s) { return as_double(s.ecc_deferred_volatile); }});
  for (const char* block : kAmdRasBlocks) {
    const std::string name = block;
    auto counts = [name](S s) -> const RasBlockErrors* {
      for (const auto& e : s.ecc_blocks) {
        if (e.block == name) return &e;
      }
      return nullptr;
    };
    rows.push_back({"gpu_ecc_correct_" + name, "Correctable ECC errors in " + name,
                    MetricType::Gauge, [counts](D, S s) {
                      const RasBlockErrors* e = counts(s);
                      return e ? std::optional<double>(e->correctable) : std::nullopt;
                    }});
    rows.push_back({"gpu_ecc_uncorrect_" + name, "Uncorrectable ECC errors in " + name,
                    MetricType::Gauge, [counts](D, S s) {
                      const RasBlockErrors* e = counts(s);
                      return e ? std::optional<double>(e->uncorrectable) : std::nullopt;
                    }});
    rows.push_back({"gpu_ecc_deferred_" + name, "Deferred ECC errors in " + name, MetricType::Gauge,
                    [counts](D, S s) {
                      const RasBlockErrors* e = counts(s);
                      return e ? as_double(e->deferred) : std::nullopt;
                    }});
  }
  rows.push_back({"gpu_total_gtt", "Total GTT memory (MB)", MetricType::Gauge,
                  [](D, S s) { return mib(s.gtt_total_bytes); }});
  rows.push_back({"gpu_used_gtt", "Used GTT memory (MB)", MetricType::Gauge,
                  [](D, S s) { return mib(s.gtt_used_bytes); }});
  rows.push_back({"gpu_free_gtt", "Free GTT memory (MB)", MetricType::Gauge,
                  [](D, S s) { return free_mib(s.gtt_total_bytes, s.gtt_used_bytes); }});
  rows.push_back({"gpu_total_visible_vram", "Total visible VRAM (MB)", MetricType::Gauge,
                  [](D, S s) { return mib(s.visible_vram_total_bytes); }});
  rows.push_back({"gpu_used_visible_vram", "Used visible VRAM (MB)", MetricType::Gauge,
                  [](D, S s) { return mib(s.visible_vram_used_bytes); }});
  rows.push_back({"gpu_free_visible_vram", "Free visible VRAM (MB)", MetricType::Gauge, [](D, S s) {
                    return free_mib(s.visible_vram_total_bytes, s.visible_vram_used_bytes);
                  }});
  rows.push_back({"gpu_violation_current_accumulated_counter",
                  "Current accumulated violation counter", MetricType::Gauge,
                  [](D, S s) { return as_double(s.violation.accumulation_counter); }});
  static constexpr const char* kKinds[ViolationSample::kKinds] = {
      "processor_hot", "ppt", "socket_thermal", "vr_thermal", "hbm_thermal"};
  for (std::size_t k = 0; k < ViolationSample::kKinds; ++k) {
    const std::string kind = kKinds[k];
    rows.push_back({"gpu_violation_" + kind + "_residency_accumulated",
                    "Accumulated " + kind + " violation residency", MetricType::Gauge,
                    [k](D, S s) { return as_double(s.violation.residency_accumulated[k]); }});
    rows.push_back({"gpu_violation_" + kind + "_residency_percentage",
                    "Percentage of " + kind + " violation residency", MetricType::Gauge,
                    [k](D, S s) { return s.violation.residency_percent[k]; }});
  }
  // Per XCC (xcc_index, as AMD's exporter): why the GFX clock stayed below the host's limit.
  static constexpr const char* kXccKinds[ViolationSample::kXccKinds] = {
      "gfx_clock_below_host_limit_power", "gfx_clock_below_host_limit_thermal", "low_utilization",
      "gfx_clock_below_host_limit_total"};
  for (std::size_t k = 0; k < ViolationSample::kXccKinds; ++k) {
    const std::string kind = kXccKinds[k];
    add_indexed(
        rows, "gpu_violation_" + kind + "_accumulated",
        "Accumulated " + kind + " violation counter, per XCC", "xcc_index",
        8, [k](S s) -> const auto& { return s.violation.xcc_accumulated[k]; });
    add_indexed(
        rows, "gpu_violation_" + kind + "_percentage",
        "Percentage of " + kind + " violation, per XCC", "xcc_index",
        8, [k](S s) -> const auto& { return s.violation.xcc_percent[k]; });
  }
  // metricslist.md: "usually 8 in an MI300X system", labelled link_index.
  add_indexed(
      rows, "gpu_xgmi_link_rx", "Accumulated XGMI link data read (KB)", "link_index", 8,
      [](S s) -> const auto& { return s.xgmi_read_kb; });
  add_indexed(
      rows, "gpu_xgmi_link_tx", "Accumulated XGMI link data written (KB)", "link_index", 8,
      [](S s) -> const auto& { return s.xgmi_write_kb; });
  rows.push_back({"pcie_bidirectional_bandwidth", "Accumulated PCIe bandwidth (GB/s)",
                  MetricType::Gauge, [](D, S s) { return s.pcie_bandwidth_accumulated_gbs; }});
  rows.push_back({"gpu_vram_max_bandwidth", "Maximum VRAM bandwidth at max memory clock (GB/s)",
                  MetricType::Gauge, [](D, S s) { return s.vram_max_bandwidth_gbs; }});
  // AMD's exporter labels every *_busy_instantaneous entry xcc_index, the VCN and JPEG engines'
  // too (gpuagent_gpu_metrics.go); its gpu_vcn_activity/gpu_jpeg_activity use vcn_/jpeg_index.
  add_indexed(
      rows, "gpu_gfx_busy_instantaneous", "GFX busy, instantaneous, per XCC (%)", "xcc_index", 8,
      [](S s) -> const auto& { return s.gfx_busy_percent; });
  add_indexed(
      rows, "gpu_vcn_busy_instantaneous", "VCN busy, instantaneous (%)", "xcc_index", 4,
      [](S s) -> const auto& { return s.vcn_busy_percent; });
  add_indexed(
      rows, "gpu_jpeg_busy_instantaneous", "JPEG busy, instantaneous (%)", "xcc_index", 40,
      [](S s) -> const auto& { return s.jpeg_busy_percent; });
}

std::vector<TableMetric> amd_table() {
  std::vector<TableMetric> rows = {
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
      // Where the metrics table has no per-XCC figures (before v1.6, or rocm_smi/amd-smi too old
      // for it), the GPU's GFX activity stands for them, without xcc_index: the MI3xx branch of
      // AMD's panels reads this family only.
      {"gpu_gfx_busy_instantaneous", "GPU GFX busy, instantaneous (%)", MetricType::Gauge,
       [](D, S s) {
         return s.gfx_busy_percent.empty() ? s.gpu_utilization_percent : std::nullopt;
       }},
      {"gpu_junction_temperature", "GPU junction temperature (C)", MetricType::Gauge,
       [](D, S s) {
         return s.hotspot_temperature_c ? s.hotspot_temperature_c : s.gpu_temperature_c;
       }},
      {"gpu_memory_temperature", "GPU memory temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; }},
      // MI2xx: the edge sensor (MI3xx has none; its panels read the junction instead).
      {"gpu_edge_temperature", "GPU edge temperature (C)", MetricType::Gauge,
       [](D, S s) { return s.edge_temperature_c; }},
      {"gpu_total_vram", "GPU total VRAM (MB)", MetricType::Gauge,
       [](D d, S) {
         return d.inventory.memory_total_bytes
                    ? std::optional(static_cast<double>(d.inventory.memory_total_bytes) / kMiB)
                    : std::nullopt;
       }},
      {"gpu_used_vram", "GPU used VRAM (MB)", MetricType::Gauge,
       [](D, S s) { return mib(s.memory_used_bytes); }},
      {"gpu_free_vram", "GPU free VRAM (MB)", MetricType::Gauge,
       [](D, S s) { return mib(s.memory_free_bytes); }},
      {"gpu_clock",
       "GPU clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_mhz); },
       {{"clock_index", "0"}, {"clock_type", "system"}}},
      {"gpu_clock",
       "GPU clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_mhz); },
       {{"clock_index", "0"}, {"clock_type", "memory"}}},
      // The clocks' current range (metricslist.md GPU_MIN_CLOCK / GPU_MAX_CLOCK), labelled as
      // gpu_clock.
      {"gpu_min_clock",
       "GPU minimum clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_min_mhz); },
       {{"clock_index", "0"}, {"clock_type", "system"}}},
      {"gpu_min_clock",
       "GPU minimum clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_min_mhz); },
       {{"clock_index", "0"}, {"clock_type", "memory"}}},
      {"gpu_max_clock",
       "GPU maximum clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.sm_clock_max_mhz); },
       {{"clock_index", "0"}, {"clock_type", "system"}}},
      {"gpu_max_clock",
       "GPU maximum clock (MHz)",
       MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_clock_max_mhz); },
       {{"clock_index", "0"}, {"clock_type", "memory"}}},
      {"pcie_replay_count", "PCIe replay count", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_replay_count); }},
      // AMD's exporter reads amdsmi_get_gpu_total_ecc_count: the counts since the driver loaded
      // (what the backends call volatile); the aggregate where a backend has only that.
      {"gpu_ecc_correct_total", "Total correctable ECC errors", MetricType::Gauge,
       [](D, S s) {
         return as_double(s.ecc_corrected_volatile ? s.ecc_corrected_volatile
                                                   : s.ecc_corrected_aggregate);
       }},
      {"gpu_ecc_uncorrect_total", "Total uncorrectable ECC errors", MetricType::Gauge,
       [](D, S s) {
         return as_double(s.ecc_uncorrected_volatile ? s.ecc_uncorrected_volatile
                                                     : s.ecc_uncorrected_aggregate);
       }},
      {"pcie_speed", "Current PCIe speed (GT/s)", MetricType::Gauge,
       [](D, S s) { return s.pcie_link_speed_gts; }},
      {"pcie_bandwidth", "Current PCIe bandwidth (Mb/s)", MetricType::Gauge,
       [](D, S s) {
         return s.pcie_bandwidth_bytes_per_second
                    ? std::optional(*s.pcie_bandwidth_bytes_per_second * 8 / 1e6)
                    : std::nullopt;
       }},
      {"pcie_recovery_count", "PCIe link recoveries (L0 to recovery)", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_recovery_count); }},
      {"pcie_replay_rollover_count", "PCIe replay rollovers", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_replay_rollover_count); }},
      {"pcie_nack_sent_count", "PCIe NAKs sent", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_nak_sent_count); }},
      {"pcie_nack_received_count", "PCIe NAKs received", MetricType::Gauge,
       [](D, S s) { return as_double(s.pcie_nak_received_count); }},
      {"gpu_health", "GPU health: 1 healthy, 0 unhealthy", MetricType::Gauge,
       [](D d, S) { return std::optional<double>(d.health.healthy ? 1 : 0); }},
      {"gpu_average_package_power", "GPU average socket power (W)", MetricType::Gauge,
       [](D, S s) { return s.average_power_watts; }},
  };
  // Per HBM stack, labelled hbm_index as AMD's exporter (../shared/reference/amd-gaudi-sriov.md
  // §1.2; metricslist.md does not name the label).
  add_indexed(
      rows, "gpu_hbm_temperature", "GPU HBM temperature, per stack (C)", "hbm_index", 4,
      [](S s) -> const auto& { return s.hbm_temperature_c; });
  add_metricslist_rows(rows);
  return rows;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// device-metrics-exporter's labels: the mandatory ones always (empty where unknown: no Slurm job
// here), and the opt-in ones of its example config. card_model is the board part number, which
// its dashboards match to tell MI3xx from MI2xx; card_series the marketing name.
Labels amd_labels(const ScrapeInput& in, const DeviceSeries& s) {
  const MonitoredDevice& d = *s.device;
  const auto& pod = s.pod;
  return Labels{{"serial_number", d.inventory.serial},
                {"gpu_id", std::to_string(d.inventory.index)},
                {"gpu_uuid", d.inventory.uuid},
                {"card_model",
                 d.inventory.board_part_number.empty() ? d.name : d.inventory.board_part_number},
                {"card_series", d.name},
                {"card_vendor", "AMD"},
                {"vbios_version", ""},
                {"hostname", in.hostname},
                {"cluster_name", in.cluster_name},
                {"deployment_mode", "baremetal"},
                {"gpu_partition_id", "0"},
                {"gpu_compute_partition_type", lower(d.inventory.compute_partition)},
                {"gpu_memory_partition_type", lower(d.inventory.memory_partition)},
                {"driver_version", d.inventory.driver_version},
                {"job_id", ""},
                {"job_user", ""},
                {"job_partition", ""},
                {"pod", pod ? pod->pod : ""},
                {"namespace", pod ? pod->pod_namespace : ""},
                {"container", pod ? pod->container : ""}};
}

// The further partitions of a GPU in a compute partition mode (DPX, QPX, CPX), one series set
// each as AMD's exporter has them (metricslist.md): its own gpu_id (the partition's place in the
// library's enumeration) and gpu_partition_id, the GPU's other labels, and what metricslist.md
// gives per partition: GFX busy (per XCC of its own where the metrics table has them, as on
// partition 0), VRAM, health. What it gives for the primary partition only
// (gpu_gfx_activity, gpu_umc_activity, power, energy, temperatures, clocks, PCIe) stays on
// partition 0, the GPU's series, so that a sum counts nothing twice.
struct PartitionRow {
  const char* name;
  std::optional<double> (*value)(const MonitoredDevice&, const PartitionSample&);
};
const PartitionRow kPartitionRows[] = {
    {"gpu_total_vram",
     [](const MonitoredDevice&, const PartitionSample& p) {
       return p.memory_total_bytes
                  ? std::optional(static_cast<double>(*p.memory_total_bytes) / kMiB)
                  : std::nullopt;
     }},
    {"gpu_used_vram",
     [](const MonitoredDevice&, const PartitionSample& p) {
       return p.memory_used_bytes ? std::optional(static_cast<double>(*p.memory_used_bytes) / kMiB)
                                  : std::nullopt;
     }},
    {"gpu_free_vram",
     [](const MonitoredDevice&, const PartitionSample& p) {
       return p.memory_free_bytes ? std::optional(static_cast<double>(*p.memory_free_bytes) / kMiB)
                                  : std::nullopt;
     }},
    {"gpu_health",
     [](const MonitoredDevice& d, const PartitionSample&) {
       return std::optional<double>(d.health.healthy ? 1 : 0);
     }},
};

void collect_partitions(const ScrapeInput& in, const std::vector<TableMetric>& table,
                        Families& out) {
  auto family_named = [&](const std::string& name) -> prometheus::MetricFamily& {
    for (auto& f : out) {
      if (f.name == name) return f;
    }
    auto row = std::find_if(table.begin(), table.end(),
                            [&](const TableMetric& m) { return m.name == name; });
    out.push_back(family(name, row->help, row->type));
    return out.back();
  };
  for (const auto& d : in.accelerators->devices) {
    if (d.vendor != Vendor::amd || !d.sample || !d.sample->reachable) continue;
    for (const auto& part : d.sample->partitions) {
      Labels l = amd_labels(in, DeviceSeries{&d, nullptr, std::nullopt});
      for (auto& label : l) {
        if (label.name == "gpu_id") label.value = std::to_string(part.index);
        if (label.name == "gpu_partition_id") label.value = std::to_string(part.partition_id);
      }
      // Its own XCCs' busy, labelled xcc_index as partition 0's; without the table's figures
      // its activity, without xcc_index, as partition 0's fallback.
      if (part.gfx_busy_percent.empty() && part.gpu_utilization_percent)
        add_sample(family_named("gpu_gfx_busy_instantaneous"), l, *part.gpu_utilization_percent);
      for (const auto& [xcc, busy] : part.gfx_busy_percent) {
        Labels with_xcc = l;
        with_xcc.push_back({"xcc_index", std::to_string(xcc)});
        add_sample(family_named("gpu_gfx_busy_instantaneous"), with_xcc, busy);
      }
      for (const auto& row : kPartitionRows) {
        if (auto v = row.value(d, part)) add_sample(family_named(row.name), l, *v);
      }
    }
  }
}

class AmdCollector : public Collector {
 public:
  std::string name() const override { return "amd"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::amd)) return Ok{};
    static const std::vector<TableMetric> table = amd_table();
    auto labels = [&](const DeviceSeries& s) { return amd_labels(in, s); };
    collect_table(in, Vendor::amd, table, labels, out);
    collect_partitions(in, table, out);
    // The link's maximum speed: AMD SMI's (amdsmi_get_pcie_info, as AMD's exporter), else
    // sysfs's max_link_speed through the host sample (ROCm SMI has none).
    auto max_speed = family("pcie_max_speed", "Maximum PCIe speed (GT/s)", MetricType::Gauge);
    for (const auto& d : in.accelerators->devices) {
      if (d.vendor != Vendor::amd || !d.sample || !d.sample->reachable) continue;
      const Accelerator* a = in.host->host->accelerator(d.pci_bus_id);
      const double gts = d.inventory.pcie_max_speed_gts.value_or(a ? a->pci.link.max_speed_gts : 0);
      if (gts <= 0) continue;
      for (const auto& s : device_series(d, *in.pods, false))
        add_sample(max_speed, labels(s), gts);
    }
    emit(out, {&max_speed});
    double count = 0;
    for (const auto& d : in.accelerators->devices)
      count += d.vendor == Vendor::amd ? 1 : 0;
    if (count > 0) {
      auto nodes = family("gpu_nodes_total", "Number of GPUs in the node", MetricType::Gauge);
      add_sample(nodes, {{"hostname", in.hostname}, {"cluster_name", in.cluster_name}}, count);
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
