#include "exporter/device_series.h"

#include <algorithm>
#include <cctype>

namespace polyaccel::exporter {
namespace {

void add_per_pod(std::vector<DeviceSeries>& out, DeviceSeries base, std::vector<PodRef> pods) {
  if (pods.empty()) {
    out.push_back(base);
    return;
  }
  for (auto& p : pods) {
    base.pod = std::move(p);
    out.push_back(base);
  }
}

}  // namespace

std::vector<DeviceSeries> device_series(const MonitoredDevice& device, const PodAssignments& pods,
                                        bool with_mig_instances) {
  std::vector<DeviceSeries> out;
  add_per_pod(out, DeviceSeries{&device, nullptr, std::nullopt}, device_pods(device, pods));
  if (!with_mig_instances || !device.inventory.mig_enabled.value_or(false)) return out;
  for (const auto& mig : device.inventory.mig_instances) {
    add_per_pod(out, DeviceSeries{&device, &mig, std::nullopt}, pods.pods_of({mig.uuid}));
  }
  return out;
}

std::vector<PodRef> device_pods(const MonitoredDevice& device, const PodAssignments& pods) {
  // A device plugin names a whole device by its UUID, bus id or our id.
  std::vector<std::string> ids = {device.pci_bus_id, device.id};
  if (!device.inventory.uuid.empty()) ids.push_back(device.inventory.uuid);
  return pods.pods_of(ids);
}

PodAssignments with_claim_devices(const PodAssignments& pods, const DraStatus& dra) {
  PodAssignments out = pods;
  const std::string prefix = claim_device_key(dra.driver, dra.pool, "");
  for (auto it = pods.by_claim_device.lower_bound(prefix);
       it != pods.by_claim_device.end() && it->first.starts_with(prefix); ++it) {
    auto ids = dra.device_ids.find(it->first.substr(prefix.size()));
    if (ids == dra.device_ids.end()) continue;
    for (const auto& id : ids->second) {
      auto& holders = out.by_device[id];
      for (const auto& ref : it->second)
        add_holder(holders, ref);
    }
  }
  return out;
}

Labels pod_labels(const DeviceSeries& series) {
  if (!series.pod) return {};
  return {{"pod", series.pod->pod},
          {"namespace", series.pod->pod_namespace},
          {"container", series.pod->container}};
}

std::string nvml_bus_id(const std::string& pci_bus_id) {
  std::string upper = pci_bus_id;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return "0000" + upper;  // NVML's busId has an 8-digit domain
}

}  // namespace polyaccel::exporter
