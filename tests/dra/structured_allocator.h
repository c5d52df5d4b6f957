// A test helper that allocates devices over ResourceSlices as the scheduler's structured
// allocator (k8s.io/dynamic-resource-allocation/structured) does, for the claims the templates in
// deploy/kubernetes/examples/dra-claims make: a request names a DeviceClass (here: the polyaccel.io
// `type` its selector asks for) and maybe a selector (the CEL expression, written as C++), a
// count; constraints are matchAttribute over some requests. It reads the slices as the server
// stored them: only a pool's newest generation, and only when all its resourceSliceCount slices
// are there; a device is taken by one claim at most; devices consume counters and the sum never
// passes what the set holds: as 1.34 does, of their own slice's sharedCounters; as 1.35 and later
// do, of the pool's, in slices of their own (a slice with sharedCounters adds no device, and a
// device that consumes a set the pool lacks makes the pool unusable). With
// `partitionable_devices` off it ignores counters, and with `device_taints` off taints, as
// kube-scheduler with DRAPartitionableDevices / DRADeviceTaints off does. It searches with
// backtracking, so it finds an allocation whenever one exists, as the real allocator does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyaccel::testing {

struct DeviceRequest {
  std::string name;  // the request's name, for constraints
  std::string type;  // the DeviceClass: its selector's polyaccel.io `type` ("gpu", "mig" ...)
  std::function<bool(const nlohmann::json& device)> selector;  // the request's CEL, or empty
  unsigned count = 1;                                          // ExactCount
};

struct MatchAttribute {
  std::vector<std::string> requests;  // empty: all
  std::string attribute;              // "polyaccel.io/nvlinkDomain", "resource.kubernetes.io/..."
};

struct ClaimSpec {
  std::vector<DeviceRequest> requests;
  std::vector<MatchAttribute> constraints;
};

// A device attribute by its qualified name; the driver's own domain may be left out in the
// slice ("type" is "polyaccel.io/type"). Null when absent.
inline nlohmann::json device_attribute(const nlohmann::json& device, const std::string& qualified,
                                       const std::string& driver = "polyaccel.io") {
  const auto& attrs = device.value("attributes", nlohmann::json::object());
  if (attrs.contains(qualified)) return attrs[qualified];
  if (qualified.rfind(driver + "/", 0) == 0) {
    std::string id = qualified.substr(driver.size() + 1);
    if (attrs.contains(id)) return attrs[id];
  }
  return nullptr;
}

// A Quantity as the counters use them: a whole number, maybe with a binary suffix.
inline std::int64_t quantity_value(const std::string& q) {
  size_t used = 0;
  std::int64_t v = std::stoll(q, &used);
  std::string suffix = q.substr(used);
  if (suffix == "Ki") return v << 10;
  if (suffix == "Mi") return v << 20;
  if (suffix == "Gi") return v << 30;
  if (suffix == "Ti") return v << 40;
  if (!suffix.empty()) throw std::runtime_error("quantity " + q);
  return v;
}

class StructuredAllocator {
 public:
  bool partitionable_devices = true;  // DRAPartitionableDevices: counters are honoured
  bool device_taints = true;          // DRADeviceTaints: NoSchedule taints keep devices out
  unsigned kubernetes_minor = 36;     // kube-scheduler 1.<minor>: where counter sets are read

  // The slices of one driver's pools as a list of ResourceSlice objects (server-stored form).
  void set_slices(const std::vector<nlohmann::json>& slices) {
    devices_.clear();
    capacity_.clear();
    std::map<std::string, std::int64_t> newest;  // pool → generation
    for (const auto& s : slices) {
      const auto& pool = s["spec"]["pool"];
      auto& g = newest[pool["name"].get<std::string>()];
      g = std::max(g, pool["generation"].get<std::int64_t>());
    }
    std::map<std::string, size_t> have;  // pool → slices of its newest generation
    for (const auto& s : slices) {
      const auto& pool = s["spec"]["pool"];
      if (pool["generation"].get<std::int64_t>() == newest[pool["name"].get<std::string>()])
        ++have[pool["name"].get<std::string>()];
    }
    const bool pool_wide = kubernetes_minor >= 35 && partitionable_devices;
    for (const auto& s : slices) {
      const auto& spec = s["spec"];
      std::string pool = spec["pool"]["name"];
      if (spec["pool"]["generation"].get<std::int64_t>() != newest[pool]) continue;
      if (have[pool] != spec["pool"]["resourceSliceCount"].get<size_t>()) continue;  // incomplete
      const std::string scope =
          pool_wide ? pool : pool + "/" + s["metadata"]["name"].get<std::string>();
      const auto sets = spec.value("sharedCounters", nlohmann::json::array());
      for (const auto& cs : sets)
        for (const auto& [name, c] : cs["counters"].items())
          capacity_[scope + "/" + cs["name"].get<std::string>() + "/" + name] =
              quantity_value(c["value"]);
      if (pool_wide && !sets.empty()) continue;  // a counter set slice: its devices are not read
      for (const auto& d : spec.value("devices", nlohmann::json::array()))
        devices_.push_back({pool + "/" + d["name"].get<std::string>(), pool, scope, d});
    }
    if (!partitionable_devices) return;
    // A device that consumes a counter set (or counter) not there: the pool is invalid.
    std::set<std::string> invalid;
    for (const auto& e : devices_)
      for (const auto& c : e.json.value("consumesCounters", nlohmann::json::array()))
        for (const auto& [name, v] : c["counters"].items())
          if (!capacity_.count(e.scope + "/" + c["counterSet"].get<std::string>() + "/" + name))
            invalid.insert(e.pool);
    std::erase_if(devices_, [&](const Entry& e) { return invalid.count(e.pool) > 0; });
  }

  // Allocates a claim: the device names per request in order, or nullopt when none fits. The
  // devices stay allocated until release().
  std::optional<std::vector<std::string>> allocate(const ClaimSpec& claim) {
    std::vector<Slot> slots;
    for (size_t r = 0; r < claim.requests.size(); ++r)
      for (unsigned k = 0; k < claim.requests[r].count; ++k)
        slots.push_back({r});
    std::vector<size_t> chosen;
    if (!search(claim, slots, chosen)) return std::nullopt;
    std::vector<std::string> names;
    for (size_t i : chosen) {
      allocated_.insert(devices_[i].id);
      names.push_back(devices_[i].json["name"]);
    }
    return names;
  }

  // An allocation made elsewhere (another scheduler run, before a restart): device names.
  void hold(const std::string& pool, const std::string& device) {
    allocated_.insert(pool + "/" + device);
  }
  void release(const std::string& pool, const std::string& device) {
    allocated_.erase(pool + "/" + device);
  }

 private:
  struct Entry {
    std::string id;  // pool/device
    std::string pool;
    std::string scope;  // where its counter sets are: the pool, or (1.34) pool/slice
    nlohmann::json json;
  };
  struct Slot {
    size_t request;
  };

  bool usable(const Entry& e, const DeviceRequest& r) const {
    if (allocated_.count(e.id)) return false;
    nlohmann::json type = device_attribute(e.json, "polyaccel.io/type");
    if (type.is_null() || type.value("string", "") != r.type) return false;
    if (device_taints)
      for (const auto& t : e.json.value("taints", nlohmann::json::array()))
        if (t.value("effect", "") == "NoSchedule" || t.value("effect", "") == "NoExecute")
          return false;
    return !r.selector || r.selector(e.json);
  }

  // Counters in use by every allocated device plus `extra`: within capacity?
  bool counters_fit(const std::vector<size_t>& extra) const {
    if (!partitionable_devices) return true;
    std::map<std::string, std::int64_t> used;
    auto add = [&](const Entry& e) {
      for (const auto& c : e.json.value("consumesCounters", nlohmann::json::array()))
        for (const auto& [name, v] : c["counters"].items())
          used[e.scope + "/" + c["counterSet"].get<std::string>() + "/" + name] +=
              quantity_value(v["value"]);
    };
    for (const auto& e : devices_)
      if (allocated_.count(e.id)) add(e);
    for (size_t i : extra)
      add(devices_[i]);
    for (const auto& [k, v] : used) {
      auto it = capacity_.find(k);
      if (it == capacity_.end() || v > it->second) return false;  // a set not in the slice
    }
    return true;
  }

  bool constraints_hold(const ClaimSpec& claim, const std::vector<Slot>& slots,
                        const std::vector<size_t>& chosen) const {
    for (const auto& c : claim.constraints) {
      std::optional<nlohmann::json> value;
      for (size_t k = 0; k < chosen.size(); ++k) {
        const std::string& req = claim.requests[slots[k].request].name;
        if (!c.requests.empty() &&
            std::find(c.requests.begin(), c.requests.end(), req) == c.requests.end())
          continue;
        nlohmann::json v = device_attribute(devices_[chosen[k]].json, c.attribute);
        if (v.is_null()) return false;
        if (value && *value != v) return false;
        value = v;
      }
    }
    return true;
  }

  bool search(const ClaimSpec& claim, const std::vector<Slot>& slots,
              std::vector<size_t>& chosen) const {
    if (chosen.size() == slots.size()) return true;
    const DeviceRequest& r = claim.requests[slots[chosen.size()].request];
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
      if (!usable(devices_[i], r)) continue;
      chosen.push_back(i);
      if (counters_fit(chosen) && constraints_hold(claim, slots, chosen) &&
          search(claim, slots, chosen))
        return true;
      chosen.pop_back();
    }
    return false;
  }

  std::vector<Entry> devices_;
  std::map<std::string, std::int64_t> capacity_;  // scope/set/counter
  std::set<std::string> allocated_;               // pool/device
};

}  // namespace polyaccel::testing
