// Accelerator health from the backends' events and samples (docs/accelerators.md lists the rule).
// Pure: time comes in as an argument, so the rule is tested without sleeping.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "discover/accel/backend.h"

namespace polyaccel {

struct HealthPolicy {
  // XIDs that mean the GPU is lost or its memory cannot be trusted until a reset. Application
  // errors (13, 31, 43, 45, 68, 109) are not here, as in NVIDIA's device plugin.
  std::set<std::uint64_t> fatal_xids = {48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120};
  bool uncorrectable_ecc = true;  // an uncorrectable ECC event makes the device unhealthy
  bool critical_events = true;    // HLML critical errors and ROCm fatal events
  bool unreachable = true;        // a device the library no longer answers for
  // How long a device stays unhealthy after its last fatal event, while the library sees it.
  std::chrono::seconds recovery{60};

  // Reads the `health:` section of a YAML file (docs/accelerators.md). Keys left out keep their
  // defaults; an unknown key or a bad value is an Error naming the file and the key.
  static Result<HealthPolicy> from_yaml_file(const std::string& path);
  static Result<HealthPolicy> from_yaml_text(const std::string& text, const std::string& input);
};

struct DeviceHealth {
  bool healthy = true;
  std::string reason;  // why not, for people and for the device plugin's logs
};

class HealthTracker {
 public:
  explicit HealthTracker(HealthPolicy policy) : policy_(std::move(policy)) {}

  void observe(const AcceleratorEvent& event);
  void observe(const AcceleratorSample& sample);
  DeviceHealth health(const std::string& pci_bus_id,
                      std::chrono::system_clock::time_point now) const;

  const HealthPolicy& policy() const { return policy_; }

 private:
  struct State {
    bool reachable = true;
    std::chrono::system_clock::time_point last_fatal{};
    std::string fatal_reason;
  };
  HealthPolicy policy_;
  std::map<std::string, State> devices_;
};

}  // namespace polyaccel
