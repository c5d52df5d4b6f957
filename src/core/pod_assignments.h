// Which pods hold which devices, as kubelet's pod-resources API tells (src/kube/pod_resources.h
// reads it; the exporter labels series with it). Plain data, keyed by the device id a device
// plugin reported: a UUID, a MIG UUID, a bus id, with a "::N" time-slicing replica suffix removed.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace polyaccel {

struct PodRef {
  std::string pod;
  std::string pod_namespace;
  std::string container;
  std::string resource;  // "nvidia.com/gpu"
  bool operator==(const PodRef&) const = default;
};

// Appends `ref` to `holders` unless it is there: a pod holds a device once, however many of its
// ids (or replicas, or claims) name it.
inline void add_holder(std::vector<PodRef>& holders, const PodRef& ref) {
  for (const auto& q : holders)
    if (q == ref) return;
  holders.push_back(ref);
}

// The key of a DRA claim's device in PodAssignments::by_claim_device: driver/pool/device, as
// kubelet's dynamic_resources name it.
inline std::string claim_device_key(const std::string& driver, const std::string& pool,
                                    const std::string& device) {
  return driver + "/" + pool + "/" + device;
}

struct PodAssignments {
  std::chrono::system_clock::time_point time{};  // of the last successful List; epoch: never
  bool reachable = false;                        // the last List answered
  std::string error;                             // why not, when it did not
  std::map<std::string, std::vector<PodRef>> by_device;
  // Devices of DRA claims (kubelet >= 1.34 by default: KubeletPodResourcesDynamicResources), by
  // claim_device_key; PodRef::resource is the claim, "namespace/name". The DRA driver knows
  // which of its devices is which GPU: the exporter joins the two (DraStatus::device_ids).
  std::map<std::string, std::vector<PodRef>> by_claim_device;

  // The pods holding any of `ids` (a device's UUID, bus id, MIG UUID...), each once.
  std::vector<PodRef> pods_of(const std::vector<std::string>& ids) const {
    std::vector<PodRef> out;
    for (const auto& id : ids) {
      auto it = by_device.find(id);
      if (it == by_device.end()) continue;
      for (const auto& p : it->second)
        add_holder(out, p);
    }
    return out;
  }
};

}  // namespace polyaccel
