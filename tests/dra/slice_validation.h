// kube-apiserver's validation of a ResourceSlice where the Kubernetes versions differ: where a
// pool's counter sets may be and the limits on them (pkg/apis/resource/validation/validation.go,
// validateResourceSliceSpec, and the limits of k8s.io/api resource/v1 types.go of each version).
// What all versions check alike (names, attributes, node selection) is k8s_schema.h's.
//
//   1.34       a device consumes only counter sets of its own slice: "must reference a counterSet
//              defined in the ResourceSlice sharedCounters" (and each counter it names); 32
//              counters in all sets of a slice, 32 consumed by a device, 1024 in a slice; 128
//              devices.
//   1.35-1.37  a slice holds counter sets or devices, never both: "only one of `sharedCounters`
//              or `devices` is allowed"; a device consumes counter sets of other slices of its
//              pool; 8 counter sets a slice, 32 counters a set, 2 counter sets a device, 32
//              counters from each; 64 devices where one has taints or consumes counters, else
//              128.
//   all        a capacity's requestPolicy only on a device with allowMultipleAllocations, and
//              its validRange within the capacity: min <= default <= max <= value, min + step
//              <= value, default and max on a step from min (KEP 5075, DeviceCapacity's and
//              CapacityRequestPolicyRange's own descriptions in the v1.36 schema; the fake
//              checks plain integer Quantities only, the wording of these errors is ours).
//
// The errors read as field.Error prints them, which the server joins into its 422's message.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyaccel::testing {

// Whether a list field is set as the Go API server sees it: present and not null (an empty JSON
// array decodes to a non-nil, empty slice, which counts as set).
inline bool slice_field_set(const nlohmann::json& spec, const char* field) {
  return spec.is_object() && spec.contains(field) && !spec[field].is_null();
}

// The errors kube-apiserver 1.<minor> finds in `slice` by the rules above; empty when valid.
inline std::vector<std::string> resource_slice_errors(const nlohmann::json& slice, unsigned minor) {
  std::vector<std::string> errors;
  if (!slice.is_object() || !slice.contains("spec") || !slice["spec"].is_object()) return errors;
  const auto& spec = slice["spec"];
  const nlohmann::json none = nlohmann::json::array();
  const auto& devices =
      spec.contains("devices") && spec["devices"].is_array() ? spec["devices"] : none;
  const auto& sets = spec.contains("sharedCounters") && spec["sharedCounters"].is_array()
                         ? spec["sharedCounters"]
                         : none;
  auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(); };
  auto too_many = [&](const std::string& path, size_t n, size_t max) {
    errors.push_back(path + ": Too many: " + std::to_string(n) + ": must have at most " +
                     std::to_string(max) + " items");
  };
  // Counter set name → its counters.
  std::map<std::string, std::set<std::string>> counters_of;
  size_t shared = 0;
  for (const auto& cs : sets) {
    auto& names = counters_of[cs.value("name", "")];
    const auto counters = cs.value("counters", nlohmann::json::object());
    for (const auto& [name, c] : counters.items()) {
      names.insert(name);
      ++shared;
    }
  }

  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    if (!d.is_object() || !d.contains("capacity") || !d["capacity"].is_object()) continue;
    const bool multiple = d.value("allowMultipleAllocations", false);
    for (const auto& [name, c] : d["capacity"].items()) {
      if (!c.is_object() || !c.contains("requestPolicy")) continue;
      const std::string at =
          "spec.devices[" + std::to_string(i) + "].capacity[" + name + "].requestPolicy";
      if (!multiple) {
        errors.push_back(at + ": Forbidden: may only be set when allowMultipleAllocations is true");
        continue;
      }
      auto number = [](const nlohmann::json& q) -> long long {
        if (!q.is_string()) return -1;
        const std::string t = q.get<std::string>();
        if (t.empty() || t.size() > 15 || t.find_first_not_of("0123456789") != std::string::npos)
          return -1;
        return std::stoll(t);
      };
      const auto& p = c["requestPolicy"];
      const auto range = p.value("validRange", nlohmann::json::object());
      if (range.empty()) continue;
      const long long value = number(c.value("value", nlohmann::json())),
                      def = number(p.value("default", nlohmann::json())),
                      min = number(range.value("min", nlohmann::json())),
                      max = range.contains("max") ? number(range["max"]) : value,
                      step = range.contains("step") ? number(range["step"]) : 1;
      if (value < 0 || def < 0 || min < 0 || max < 0 || step <= 0) continue;
      if (!(min <= def && def <= max && max <= value))
        errors.push_back(at + ".validRange: Invalid value: " + quoted(std::to_string(max)) +
                         ": must hold min <= default <= max <= the capacity's value");
      if (min + step > value)
        errors.push_back(at + ".validRange.step: Invalid value: " + std::to_string(step) +
                         ": min + step must be less than or equal to the capacity's value");
      if ((def - min) % step != 0 || (max - min) % step != 0)
        errors.push_back(at + ".validRange.step: Invalid value: " + std::to_string(step) +
                         ": default and max must be a multiple of step from min");
    }
  }

  if (minor <= 34) {
    if (devices.size() > 128) {
      too_many("spec.devices", devices.size(), 128);
      return errors;
    }
    size_t consumed_in_slice = 0;
    for (size_t i = 0; i < devices.size(); ++i) {
      const std::string at = "spec.devices[" + std::to_string(i) + "]";
      size_t consumed = 0;
      const auto consumes = devices[i].value("consumesCounters", nlohmann::json::array());
      for (size_t k = 0; k < consumes.size(); ++k) {
        const std::string cat = at + ".consumesCounters[" + std::to_string(k) + "]";
        const std::string set = consumes[k].value("counterSet", "");
        const auto counters = consumes[k].value("counters", nlohmann::json::object());
        consumed += counters.size();
        auto it = counters_of.find(set);
        if (it == counters_of.end()) {
          errors.push_back(cat + ".counterSet: Invalid value: " + quoted(set) +
                           ": must reference a counterSet defined in the ResourceSlice "
                           "sharedCounters");
          continue;
        }
        for (const auto& [name, c] : counters.items())
          if (!it->second.count(name))
            errors.push_back(cat + ".counters: Invalid value: " + quoted(name) +
                             ": must reference a counter defined in the ResourceSlice "
                             "sharedCounters");
      }
      if (consumed > 32)
        errors.push_back(at + ": Invalid value: " + std::to_string(consumed) +
                         ": the total number of counters must not exceed 32");
      consumed_in_slice += consumed;
    }
    if (shared > 32)
      errors.push_back("spec.sharedCounters: Invalid value: " + std::to_string(shared) +
                       ": the total number of shared counters must not exceed 32");
    if (consumed_in_slice > 1024)
      errors.push_back("spec.devices: Invalid value: " + std::to_string(consumed_in_slice) +
                       ": the total number of counters in devices must not exceed 1024");
    return errors;
  }

  // 1.35 and later.
  if (slice_field_set(spec, "sharedCounters") && slice_field_set(spec, "devices"))
    errors.push_back(
        "spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is "
        "allowed");
  bool advanced = false;  // taints or consumed counters
  for (const auto& d : devices)
    if (!d.value("taints", nlohmann::json::array()).empty() ||
        !d.value("consumesCounters", nlohmann::json::array()).empty())
      advanced = true;
  const size_t max_devices = advanced ? 64 : 128;
  if (devices.size() > max_devices) {
    too_many("spec.devices", devices.size(), max_devices);
  } else {
    for (size_t i = 0; i < devices.size(); ++i) {
      const std::string at = "spec.devices[" + std::to_string(i) + "]";
      const auto consumes = devices[i].value("consumesCounters", nlohmann::json::array());
      if (consumes.size() > 2) {
        too_many(at + ".consumesCounters", consumes.size(), 2);
        continue;
      }
      for (size_t k = 0; k < consumes.size(); ++k) {
        const auto counters = consumes[k].value("counters", nlohmann::json::object());
        if (counters.size() > 32)
          too_many(at + ".consumesCounters[" + std::to_string(k) + "].counters", counters.size(),
                   32);
      }
    }
  }
  if (sets.size() > 8) {
    too_many("spec.sharedCounters", sets.size(), 8);
  } else {
    for (size_t i = 0; i < sets.size(); ++i) {
      const auto counters = sets[i].value("counters", nlohmann::json::object());
      if (counters.size() > 32)
        too_many("spec.sharedCounters[" + std::to_string(i) + "].counters", counters.size(), 32);
    }
  }
  return errors;
}

// The 422 kube-apiserver answers for those errors: "ResourceSlice.resource.k8s.io "<name>" is
// invalid: <error>", several in brackets, comma-separated.
inline nlohmann::json resource_slice_invalid(const std::string& name,
                                             const std::vector<std::string>& errors) {
  std::string joined;
  for (const auto& e : errors)
    joined += (joined.empty() ? "" : ", ") + e;
  if (errors.size() > 1) joined = "[" + joined + "]";
  nlohmann::json causes = nlohmann::json::array();
  for (const auto& e : errors) {
    auto colon = e.find(": ");
    causes.push_back({{"reason", "FieldValueInvalid"},
                      {"message", colon == std::string::npos ? e : e.substr(colon + 2)},
                      {"field", e.substr(0, colon)}});
  }
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", nlohmann::json::object()},
          {"status", "Failure"},
          {"message", "ResourceSlice.resource.k8s.io \"" + name + "\" is invalid: " + joined},
          {"reason", "Invalid"},
          {"details",
           {{"name", name},
            {"group", "resource.k8s.io"},
            {"kind", "ResourceSlice"},
            {"causes", causes}}},
          {"code", 422}};
}

}  // namespace polyaccel::testing
