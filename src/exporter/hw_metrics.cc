#include "exporter/hw_metrics.h"

#include <optional>

namespace polyaccel::exporter {
namespace {

const char* hw_vendor(Vendor vendor) {
  switch (vendor) {
    case Vendor::nvidia:
      return "NVIDIA";
    case Vendor::amd:
      return "AMD";
    default:
      return "";
  }
}

HwAttributes gpu_attributes(const MonitoredDevice& d) {
  HwAttributes a = {{"hw.id", hw_id(d)},
                    {"hw.type", "gpu"},
                    {"hw.vendor", hw_vendor(d.vendor)},
                    {"hw.model", d.name},
                    {"hw.name", d.id}};
  if (!d.inventory.driver_version.empty())
    a.push_back({"hw.driver_version", d.inventory.driver_version});
  if (!d.inventory.serial.empty()) a.push_back({"hw.serial_number", d.inventory.serial});
  return a;
}

HwAttributes mig_attributes(const MonitoredDevice& d, const MigInstance& mig) {
  return {{"hw.id", mig.uuid},
          {"hw.type", "gpu"},
          {"hw.vendor", hw_vendor(d.vendor)},
          {"hw.model", d.name + " MIG " + mig.profile_name},
          {"hw.name", d.id + "/gi" + std::to_string(mig.gpu_instance_id)},
          {"hw.parent", hw_id(d)}};
}

HwAttributes plus(HwAttributes base, const HwAttributes& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

class Builder {
 public:
  Builder() { metrics_.reserve(kMetrics); }  // metric() hands out references into it
  static constexpr std::size_t kMetrics = 9;
  HwMetric& metric(const std::string& name, const std::string& description, const std::string& unit,
                   HwInstrument instrument) {
    metrics_.push_back({name, description, unit, instrument, {}});
    return metrics_.back();
  }
  template <typename T>
  void add(HwMetric& m, const HwAttributes& attributes, const std::optional<T>& value,
           double scale = 1) {
    if (value) m.points.push_back({attributes, static_cast<double>(*value) * scale});
  }
  std::vector<HwMetric> take() {
    std::vector<HwMetric> out;
    for (auto& m : metrics_)
      if (!m.points.empty()) out.push_back(std::move(m));
    return out;
  }

 private:
  std::vector<HwMetric> metrics_;
};

}  // namespace

std::string hw_id(const MonitoredDevice& device) {
  return device.inventory.uuid.empty() ? device.pci_bus_id : device.inventory.uuid;
}

std::vector<HwMetric> hw_metrics(const AcceleratorSnapshot& snapshot) {
  Builder b;
  // The order of the conventions' tables; created up front so the order does not depend on
  // which device has which value.
  auto& utilization = b.metric("hw.gpu.utilization", "Fraction of time spent in a specific task.",
                               "1", HwInstrument::gauge);
  auto& memory_usage =
      b.metric("hw.gpu.memory.usage", "GPU memory used.", "By", HwInstrument::up_down_counter);
  auto& memory_limit = b.metric("hw.gpu.memory.limit", "Size of the GPU memory.", "By",
                                HwInstrument::up_down_counter);
  auto& memory_utilization = b.metric("hw.gpu.memory.utilization", "Fraction of GPU memory used.",
                                      "1", HwInstrument::gauge);
  auto& errors = b.metric("hw.errors", "Number of errors encountered by the GPU.", "{error}",
                          HwInstrument::counter);
  auto& status = b.metric("hw.status", "Operational status: 1 (true) or 0 (false) for each state.",
                          "1", HwInstrument::up_down_counter);
  auto& power =
      b.metric("hw.power", "Instantaneous power consumed by the GPU.", "W", HwInstrument::gauge);
  auto& energy = b.metric("hw.energy", "Energy consumed by the GPU since its driver loaded.", "J",
                          HwInstrument::counter);
  auto& temperature =
      b.metric("hw.temperature", "Temperature of the GPU.", "Cel", HwInstrument::gauge);
  for (const auto& d : snapshot.devices) {
    if (d.vendor != Vendor::nvidia && d.vendor != Vendor::amd) continue;
    if (!d.sample) continue;
    const AcceleratorSample& s = *d.sample;
    HwAttributes gpu = gpu_attributes(d);
    // hw.status: one point per state, 1 on the current one (ok, degraded, failed).
    const char* state = !s.reachable || !d.listed ? "failed" : d.health.healthy ? "ok" : "degraded";
    for (const char* st : {"ok", "degraded", "failed"})
      status.points.push_back(
          {plus(gpu, {{"hw.state", st}}), std::string(st) == state ? 1.0 : 0.0});
    if (!s.reachable) continue;
    b.add(utilization, plus(gpu, {{"hw.gpu.task", "general"}}), s.gpu_utilization_percent, 0.01);
    b.add(utilization, plus(gpu, {{"hw.gpu.task", "encoder"}}), s.encoder_utilization_percent,
          0.01);
    b.add(utilization, plus(gpu, {{"hw.gpu.task", "decoder"}}), s.decoder_utilization_percent,
          0.01);
    b.add(memory_usage, gpu, s.memory_used_bytes);
    std::optional<std::uint64_t> total;
    if (d.inventory.memory_total_bytes > 0) total = d.inventory.memory_total_bytes;
    b.add(memory_limit, gpu, total);
    if (total && s.memory_used_bytes)
      memory_utilization.points.push_back(
          {gpu, static_cast<double>(*s.memory_used_bytes) / static_cast<double>(*total)});
    b.add(errors, plus(gpu, {{"error.type", "ecc_corrected"}}), s.ecc_corrected_volatile);
    b.add(errors, plus(gpu, {{"error.type", "ecc_uncorrected"}}), s.ecc_uncorrected_volatile);
    b.add(errors, plus(gpu, {{"error.type", "pcie_replay"}}), s.pcie_replay_count);
    if (d.vendor == Vendor::nvidia) {
      std::uint64_t xids = 0;
      for (const auto& [xid, count] : d.xid_count)
        xids += count;
      b.add(errors, plus(gpu, {{"error.type", "xid"}}), std::optional(xids));
    }
    b.add(power, gpu, s.power_watts);
    b.add(energy, gpu, s.energy_millijoules, 1e-3);
    b.add(temperature, plus(gpu, {{"hw.sensor_location", "gpu"}}), s.gpu_temperature_c);
    b.add(temperature, plus(gpu, {{"hw.sensor_location", "memory"}}), s.memory_temperature_c);
    if (!d.inventory.mig_enabled.value_or(false)) continue;
    for (const auto& mig : d.inventory.mig_instances) {
      HwAttributes m = mig_attributes(d, mig);
      const MigInstanceSample* ms = nullptr;
      for (const auto& x : s.mig_instances)
        if (x.gpu_instance_id == mig.gpu_instance_id) ms = &x;
      std::optional<std::uint64_t> limit;
      if (mig.memory_bytes > 0) limit = mig.memory_bytes;
      b.add(memory_limit, m, limit);
      if (!ms) continue;
      b.add(utilization, plus(m, {{"hw.gpu.task", "general"}}),
            ms->profiling.graphics_active_percent, 0.01);
      b.add(memory_usage, m, ms->memory_used_bytes);
      if (limit && ms->memory_used_bytes)
        memory_utilization.points.push_back(
            {m, static_cast<double>(*ms->memory_used_bytes) / static_cast<double>(*limit)});
    }
  }
  return b.take();
}

}  // namespace polyaccel::exporter
