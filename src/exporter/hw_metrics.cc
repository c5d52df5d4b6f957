#include "exporter/hw_metrics.h"

#include <optional>

#include "exporter/device_series.h"

namespace polyaccel::exporter {
namespace {

const char* hw_vendor(Vendor vendor) {
  switch (vendor) {
    case Vendor::nvidia:
      return "NVIDIA";
    case Vendor::amd:
      return "AMD";
    case Vendor::intel_gaudi:
      return "Intel";  // Habana Labs, Intel's since 2019; hl-smi and HLML say "Habana Labs"
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

// A temperature sensor is a component of its own (hw.type "temperature"), whose parent is the
// GPU: the conventions' hw.temperature describes sensors, the way hw.status with hw.type
// "temperature" does.
HwAttributes sensor_attributes(const MonitoredDevice& d, const std::string& location) {
  return {{"hw.id", hw_id(d) + ":temperature:" + location},
          {"hw.type", "temperature"},
          {"hw.name", d.id + " " + location},
          {"hw.parent", hw_id(d)},
          {"hw.sensor_location", location}};
}

HwAttributes plus(const HwAttributes& base, const HwAttributes& more) {
  HwAttributes out;
  out.reserve(base.size() + more.size());  // one allocation: a full node has 400 points
  out.insert(out.end(), base.begin(), base.end());
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// OpenTelemetry's Kubernetes attributes of the pod holding a device.
HwAttributes k8s_attributes(const PodRef& pod) {
  return {{"k8s.namespace.name", pod.pod_namespace},
          {"k8s.pod.name", pod.pod},
          {"k8s.container.name", pod.container}};
}

// The attributes of one device's points: `base` once per pod holding it (as the DCGM names get
// one series per pod), or once without pod attributes.
std::vector<HwAttributes> per_pod(const HwAttributes& base, const std::vector<PodRef>& pods) {
  if (pods.empty()) return {base};
  std::vector<HwAttributes> out;
  out.reserve(pods.size());
  for (const auto& p : pods)
    out.push_back(plus(base, k8s_attributes(p)));
  return out;
}

class Builder {
 public:
  Builder() { metrics_.reserve(kMetrics); }  // metric() hands out references into it
  static constexpr std::size_t kMetrics = 10;
  HwMetric& metric(const std::string& name, const std::string& description, const std::string& unit,
                   HwInstrument instrument) {
    metrics_.push_back({name, description, unit, instrument, {}});
    return metrics_.back();
  }
  // One point per element of `holders` (a device's attributes, once per pod), with `more`.
  template <typename T>
  void add(HwMetric& m, const std::vector<HwAttributes>& holders, const HwAttributes& more,
           const std::optional<T>& value, double scale = 1) {
    if (!value) return;
    for (const auto& h : holders)
      m.points.push_back({plus(h, more), static_cast<double>(*value) * scale});
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

std::vector<HwMetric> hw_metrics(const AcceleratorSnapshot& snapshot, const PodAssignments& pods) {
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
  auto& io = b.metric("hw.gpu.io", "Received and transmitted bytes by the GPU.", "By",
                      HwInstrument::counter);
  auto& errors = b.metric("hw.errors", "Number of errors encountered by the GPU.", "{error}",
                          HwInstrument::counter);
  auto& status = b.metric("hw.status", "Operational status: 1 (true) or 0 (false) for each state.",
                          "1", HwInstrument::up_down_counter);
  auto& power =
      b.metric("hw.power", "Instantaneous power consumed by the GPU.", "W", HwInstrument::gauge);
  auto& energy = b.metric("hw.energy", "Energy consumed by the GPU since its driver loaded.", "J",
                          HwInstrument::counter);
  auto& temperature =
      b.metric("hw.temperature", "Temperature of the GPU's sensors.", "Cel", HwInstrument::gauge);
  for (const auto& d : snapshot.devices) {
    if (d.vendor != Vendor::nvidia && d.vendor != Vendor::amd && d.vendor != Vendor::intel_gaudi)
      continue;
    if (!d.sample) continue;
    const AcceleratorSample& s = *d.sample;
    const std::vector<PodRef> holders = device_pods(d, pods);
    const std::vector<HwAttributes> gpu = per_pod(gpu_attributes(d), holders);
    // hw.status: one point per state, 1 on the current one (ok, degraded, failed).
    const char* state = !s.reachable || !d.listed ? "failed" : d.health.healthy ? "ok" : "degraded";
    for (const char* st : {"ok", "degraded", "failed"})
      b.add(status, gpu, {{"hw.state", st}}, std::optional(std::string(st) == state ? 1.0 : 0.0));
    if (!s.reachable) continue;
    b.add(utilization, gpu, {{"hw.gpu.task", "general"}}, s.gpu_utilization_percent, 0.01);
    b.add(utilization, gpu, {{"hw.gpu.task", "encoder"}}, s.encoder_utilization_percent, 0.01);
    b.add(utilization, gpu, {{"hw.gpu.task", "decoder"}}, s.decoder_utilization_percent, 0.01);
    b.add(memory_usage, gpu, {}, s.memory_used_bytes);
    std::optional<std::uint64_t> total;
    if (d.inventory.memory_total_bytes > 0) total = d.inventory.memory_total_bytes;
    b.add(memory_limit, gpu, {}, total);
    if (total && s.memory_used_bytes)
      b.add(memory_utilization, gpu, {},
            std::optional(static_cast<double>(*s.memory_used_bytes) / static_cast<double>(*total)));
    b.add(io, gpu, {{"network.io.direction", "receive"}}, s.io_received_bytes);
    b.add(io, gpu, {{"network.io.direction", "transmit"}}, s.io_transmitted_bytes);
    b.add(errors, gpu, {{"error.type", "ecc_corrected"}}, s.ecc_corrected_volatile);
    b.add(errors, gpu, {{"error.type", "ecc_uncorrected"}}, s.ecc_uncorrected_volatile);
    b.add(errors, gpu, {{"error.type", "pcie_replay"}}, s.pcie_replay_count);
    if (d.vendor == Vendor::nvidia) {
      std::uint64_t xids = 0;
      for (const auto& [xid, count] : d.xid_count)
        xids += count;
      b.add(errors, gpu, {{"error.type", "xid"}}, std::optional(xids));
    }
    b.add(power, gpu, {}, s.power_watts);
    b.add(energy, gpu, {}, s.energy_millijoules, 1e-3);
    b.add(temperature, per_pod(sensor_attributes(d, "gpu"), holders), {}, s.gpu_temperature_c);
    b.add(temperature, per_pod(sensor_attributes(d, "memory"), holders), {},
          s.memory_temperature_c);
    b.add(temperature, per_pod(sensor_attributes(d, "board"), holders), {}, s.board_temperature_c);
    if (!d.inventory.mig_enabled.value_or(false)) continue;
    for (const auto& mig : d.inventory.mig_instances) {
      const std::vector<HwAttributes> m = per_pod(mig_attributes(d, mig), pods.pods_of({mig.uuid}));
      const MigInstanceSample* ms = nullptr;
      for (const auto& x : s.mig_instances)
        if (x.gpu_instance_id == mig.gpu_instance_id) ms = &x;
      std::optional<std::uint64_t> limit;
      if (mig.memory_bytes > 0) limit = mig.memory_bytes;
      b.add(memory_limit, m, {}, limit);
      if (!ms) continue;
      b.add(utilization, m, {{"hw.gpu.task", "general"}}, ms->profiling.graphics_active_percent,
            0.01);
      b.add(memory_usage, m, {}, ms->memory_used_bytes);
      if (limit && ms->memory_used_bytes)
        b.add(memory_utilization, m, {},
              std::optional(static_cast<double>(*ms->memory_used_bytes) /
                            static_cast<double>(*limit)));
    }
  }
  return b.take();
}

}  // namespace polyaccel::exporter
