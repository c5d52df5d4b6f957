// polyaccel_accelerator_*: every vendor under one family with a `vendor` label and units in the
// names (ratios 0-1, bytes, celsius, watts, joules, hertz), so one dashboard covers a mixed fleet.
#include <cmath>

#include "exporter/sample_table.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

std::vector<TableMetric> neutral_table() {
  using D = const MonitoredDevice&;
  using S = const AcceleratorSample&;
  auto ratio = [](const std::optional<double>& percent) {
    return percent ? std::optional(*percent / 100.0) : std::nullopt;
  };
  auto flag = [](const std::optional<bool>& b) { return as_double(b); };
  return {
      {"polyaccel_accelerator_utilization_ratio", "Compute engine busy time, 0 to 1.",
       MetricType::Gauge, [ratio](D, S s) { return ratio(s.gpu_utilization_percent); }},
      {"polyaccel_accelerator_memory_utilization_ratio", "Memory controller busy time, 0 to 1.",
       MetricType::Gauge, [ratio](D, S s) { return ratio(s.memory_utilization_percent); }},
      {"polyaccel_accelerator_memory_used_bytes", "Device memory in use.", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_used_bytes); }},
      {"polyaccel_accelerator_memory_free_bytes", "Device memory free.", MetricType::Gauge,
       [](D, S s) { return as_double(s.memory_free_bytes); }},
      {"polyaccel_accelerator_memory_total_bytes", "Device memory size.", MetricType::Gauge,
       [](D d, S) {
         return d.inventory.memory_total_bytes
                    ? std::optional(static_cast<double>(d.inventory.memory_total_bytes))
                    : std::nullopt;
       }},
      {"polyaccel_accelerator_temperature_celsius",
       "Temperature of a sensor.",
       MetricType::Gauge,
       [](D, S s) { return s.gpu_temperature_c; },
       {{"sensor", "gpu"}}},
      {"polyaccel_accelerator_temperature_celsius",
       "Temperature of a sensor.",
       MetricType::Gauge,
       [](D, S s) { return s.memory_temperature_c; },
       {{"sensor", "memory"}}},
      {"polyaccel_accelerator_power_watts", "Power draw.", MetricType::Gauge,
       [](D, S s) { return s.power_watts; }},
      {"polyaccel_accelerator_power_limit_watts", "Power limit in force.", MetricType::Gauge,
       [](D d, S) { return d.inventory.power_limit_watts; }},
      {"polyaccel_accelerator_energy_joules_total", "Energy used since the driver loaded.",
       MetricType::Counter,
       [](D, S s) {
         return s.energy_millijoules
                    ? std::optional(static_cast<double>(*s.energy_millijoules) / 1000)
                    : std::nullopt;
       }},
      {"polyaccel_accelerator_clock_hertz",
       "Clock frequency.",
       MetricType::Gauge,
       [](D, S s) { return s.sm_clock_mhz ? std::optional(*s.sm_clock_mhz * 1e6) : std::nullopt; },
       {{"clock", "compute"}}},
      {"polyaccel_accelerator_clock_hertz",
       "Clock frequency.",
       MetricType::Gauge,
       [](D, S s) {
         return s.memory_clock_mhz ? std::optional(*s.memory_clock_mhz * 1e6) : std::nullopt;
       },
       {{"clock", "memory"}}},
      {"polyaccel_accelerator_pcie_replays_total", "PCIe link replays (retries).",
       MetricType::Counter, [](D, S s) { return as_double(s.pcie_replay_count); }},
      {"polyaccel_accelerator_ecc_errors_total",
       "Memory ECC errors.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.ecc_corrected_volatile); },
       {{"type", "corrected"}, {"scope", "volatile"}}},
      {"polyaccel_accelerator_ecc_errors_total",
       "Memory ECC errors.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.ecc_uncorrected_volatile); },
       {{"type", "uncorrected"}, {"scope", "volatile"}}},
      {"polyaccel_accelerator_ecc_errors_total",
       "Memory ECC errors.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.ecc_corrected_aggregate); },
       {{"type", "corrected"}, {"scope", "aggregate"}}},
      {"polyaccel_accelerator_ecc_errors_total",
       "Memory ECC errors.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.ecc_uncorrected_aggregate); },
       {{"type", "uncorrected"}, {"scope", "aggregate"}}},
      {"polyaccel_accelerator_retired_pages_total",
       "Memory pages retired.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.retired_pages_single_bit); },
       {{"cause", "single_bit"}}},
      {"polyaccel_accelerator_retired_pages_total",
       "Memory pages retired.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.retired_pages_double_bit); },
       {{"cause", "double_bit"}}},
      {"polyaccel_accelerator_remapped_rows_total",
       "Memory rows remapped.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.remapped_rows_correctable); },
       {{"cause", "correctable"}}},
      {"polyaccel_accelerator_remapped_rows_total",
       "Memory rows remapped.",
       MetricType::Counter,
       [](D, S s) { return as_double(s.remapped_rows_uncorrectable); },
       {{"cause", "uncorrectable"}}},
      {"polyaccel_accelerator_row_remap_pending", "1 when a row remap waits for a reset.",
       MetricType::Gauge, [flag](D, S s) { return flag(s.remapped_rows_pending); }},
      {"polyaccel_accelerator_row_remap_failed", "1 when a row remap failed.", MetricType::Gauge,
       [flag](D, S s) { return flag(s.remapped_rows_failure); }},
  };
}

Labels neutral_labels(const DeviceSeries& s) {
  const MonitoredDevice& d = *s.device;
  Labels l = {{"gpu", d.id},
              {"vendor", to_string(d.vendor)},
              {"uuid", d.inventory.uuid},
              {"pci_bus_id", d.pci_bus_id},
              {"model", d.name}};
  Labels pods = pod_labels(s);
  l.insert(l.end(), pods.begin(), pods.end());
  return l;
}

// Families whose samples do not come from the last vendor sample: inventory, health, events.
void collect_state(const ScrapeInput& in, Families& out) {
  auto info = family("polyaccel_accelerator_info", "An accelerator the vendor library reports.",
                     MetricType::Gauge);
  auto healthy = family("polyaccel_accelerator_healthy",
                        "1 when healthy, 0 after a fatal event or when it stops answering.",
                        MetricType::Gauge);
  auto up =
      family("polyaccel_accelerator_up",
             "1 when the vendor library answered for it at the last sample.", MetricType::Gauge);
  auto age = family("polyaccel_accelerator_sample_age_seconds",
                    "Time since the last sample of this device: grows while a vendor call hangs.",
                    MetricType::Gauge);
  auto events = family("polyaccel_accelerator_events_total",
                       "Events from the vendor library since the agent started, by kind.",
                       MetricType::Counter);
  auto xids = family("polyaccel_accelerator_xid_errors_total",
                     "NVIDIA XID errors since the agent started, by XID.", MetricType::Counter);
  auto mig = family("polyaccel_accelerator_mig_instance_info", "A MIG instance of a GPU.",
                    MetricType::Gauge);
  auto mig_memory = family("polyaccel_accelerator_mig_instance_memory_bytes",
                           "Memory of a MIG instance.", MetricType::Gauge);
  auto reasons = family("polyaccel_accelerator_clock_event_reasons",
                        "1 for each reason the vendor library gives now for holding the clocks "
                        "down (NVIDIA clock events, AMD and Gaudi throttling).",
                        MetricType::Gauge);
  for (const auto& d : in.accelerators->devices) {
    DeviceSeries whole{&d, nullptr, std::nullopt};
    Labels base = neutral_labels(whole);
    add_sample(info,
               with(base, {{"backend", d.backend}, {"driver_version", d.inventory.driver_version}}),
               1);
    add_sample(healthy, base, d.health.healthy ? 1 : 0);
    add_sample(up, base, d.sample && d.sample->reachable ? 1 : 0);
    if (d.sample) {
      std::chrono::duration<double> dt = in.now - d.sample->time;
      add_sample(age, base, std::max(0.0, dt.count()));
    }
    for (auto kind : {AcceleratorEventKind::xid, AcceleratorEventKind::ecc_uncorrectable,
                      AcceleratorEventKind::critical, AcceleratorEventKind::other}) {
      add_sample(events, with(base, {{"kind", to_string(kind)}}),
                 static_cast<double>(d.event_count(kind)));
    }
    if (d.sample && d.sample->reachable) {
      for (const auto& r : d.sample->throttle_reason_names)
        add_sample(reasons, with(base, {{"reason", r}}), 1);
    }
    for (const auto& [xid, count] : d.xid_count)
      add_sample(xids, with(base, {{"xid", std::to_string(xid)}}), static_cast<double>(count));
    for (const auto& s : device_series(d, *in.pods, true)) {
      if (!s.mig) continue;
      Labels l = with(neutral_labels(s),
                      {{"gpu_instance_id", std::to_string(s.mig->gpu_instance_id)},
                       {"compute_instance_id", std::to_string(s.mig->compute_instance_id)},
                       {"profile", s.mig->profile_name},
                       {"mig_uuid", s.mig->uuid}});
      add_sample(mig, l, 1);
      add_sample(mig_memory, l, static_cast<double>(s.mig->memory_bytes));
    }
  }
  emit(out, {&info, &healthy, &up, &age, &events, &xids, &mig, &mig_memory, &reasons});
}

class AcceleratorCollector : public Collector {
 public:
  std::string name() const override { return "accelerator"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    if (!in.names.count(NameSet::polyaccel)) return Ok{};
    static const std::vector<TableMetric> table = neutral_table();
    collect_table(in, std::nullopt, table, neutral_labels, out);
    collect_state(in, out);
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_accelerator_collector() {
  return std::make_unique<AcceleratorCollector>();
}

}  // namespace polyaccel::exporter
