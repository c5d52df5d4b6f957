#include "discover/accel/health.h"

#include <yaml-cpp/yaml.h>

#include "core/file_io.h"
#include "core/number.h"

namespace polyaccel {

Result<HealthPolicy> HealthPolicy::from_yaml_file(const std::string& path) {
  auto text = read_input_file(path, kMaxConfigFileBytes, "health config");
  if (!text) return text.error();
  return from_yaml_text(*text, path);
}

Result<HealthPolicy> HealthPolicy::from_yaml_text(const std::string& text,
                                                  const std::string& input) {
  HealthPolicy p;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return bad_input(input, "is not valid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) return p;
  if (!root.IsMap()) return bad_input(input, "must be a mapping with a `health:` section");
  YAML::Node h = root["health"];
  if (!h) return p;
  if (!h.IsMap()) return bad_input(input, "health: must be a mapping");
  try {
    for (const auto& kv : h) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "fatal_xids") {
        if (!v.IsSequence())
          return bad_input(input, "health.fatal_xids must be a list of XID numbers");
        p.fatal_xids.clear();
        for (const auto& x : v) {
          auto xid = parse_integer<std::uint64_t>(x.IsScalar() ? x.Scalar() : "",
                                                  "health.fatal_xids", 0, 0xFFFFFFFF);
          if (!xid) return bad_input(input, xid.error().message());
          p.fatal_xids.insert(*xid);
        }
      } else if (key == "uncorrectable_ecc") {
        p.uncorrectable_ecc = v.as<bool>();
      } else if (key == "critical_events") {
        p.critical_events = v.as<bool>();
      } else if (key == "unreachable") {
        p.unreachable = v.as<bool>();
      } else if (key == "recovery_seconds") {
        // At most a week: chrono arithmetic on anything near the 64-bit limit overflows.
        auto s = parse_integer<std::int64_t>(v.IsScalar() ? v.Scalar() : "",
                                             "health.recovery_seconds", 0, 7 * 86400);
        if (!s) return bad_input(input, s.error().message());
        p.recovery = std::chrono::seconds(*s);
      } else {
        return bad_input(
            input, "unknown key health." + key,
            "known: fatal_xids, uncorrectable_ecc, critical_events, unreachable, recovery_seconds");
      }
    }
  } catch (const YAML::Exception& e) {
    return bad_input(input, "bad value in health: " + e.msg);
  }
  return p;
}

void HealthTracker::observe(const AcceleratorEvent& event) {
  bool fatal = false;
  std::string reason;
  switch (event.kind) {
    case AcceleratorEventKind::xid:
      fatal = policy_.fatal_xids.count(event.code) > 0;
      reason = "XID " + std::to_string(event.code);
      break;
    case AcceleratorEventKind::ecc_uncorrectable:
      fatal = policy_.uncorrectable_ecc;
      reason = "uncorrectable ECC error";
      break;
    case AcceleratorEventKind::critical:
      fatal = policy_.critical_events;
      reason = "critical error event";
      break;
    case AcceleratorEventKind::other:
      break;
  }
  if (!fatal) return;
  auto& st = devices_[event.pci_bus_id];
  st.last_fatal = event.time;
  st.fatal_reason = event.text.empty() ? reason : reason + ": " + event.text;
}

void HealthTracker::observe(const AcceleratorSample& sample) {
  devices_[sample.pci_bus_id].reachable = sample.reachable;
}

DeviceHealth HealthTracker::health(const std::string& pci_bus_id,
                                   std::chrono::system_clock::time_point now) const {
  auto it = devices_.find(pci_bus_id);
  if (it == devices_.end()) return {};
  const State& st = it->second;
  if (policy_.unreachable && !st.reachable)
    return {false, "the vendor library no longer answers for it"};
  if (!st.fatal_reason.empty() && now < st.last_fatal + policy_.recovery)
    return {false, st.fatal_reason};
  return {};
}

}  // namespace polyaccel
