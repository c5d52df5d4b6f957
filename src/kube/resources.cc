#include "kube/resources.h"

#include <algorithm>
#include <map>
#include <set>

namespace polyaccel {

const char* to_string(MigStrategy strategy) {
  switch (strategy) {
    case MigStrategy::none:
      return "none";
    case MigStrategy::single:
      return "single";
    case MigStrategy::mixed:
      return "mixed";
  }
  return "none";
}

Result<MigStrategy> parse_mig_strategy(const std::string& text, const std::string& input) {
  if (text == "none") return MigStrategy::none;
  if (text == "single") return MigStrategy::single;
  if (text == "mixed") return MigStrategy::mixed;
  return bad_input(input, "'" + text + "' is not a MIG strategy", "use none, single or mixed");
}

const PluginDevice* PluginResource::device(const std::string& id) const {
  for (const auto& d : devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

std::string device_plugin_id(const Accelerator& a, std::optional<size_t> mig) {
  const AcceleratorInventory* inv = a.inventory ? &*a.inventory : nullptr;
  switch (a.vendor) {
    case Vendor::nvidia:
      if (inv && mig && *mig < inv->mig_instances.size() && !inv->mig_instances[*mig].uuid.empty())
        return inv->mig_instances[*mig].uuid;
      if (inv && !mig && !inv->uuid.empty()) return inv->uuid;
      break;
    case Vendor::intel_gaudi:
      if (inv && !inv->serial.empty()) return inv->serial;
      break;
    case Vendor::amd:
    case Vendor::other:
      break;
  }
  return a.pci.address.to_string();
}

std::string cdi_device_name(const HostModel& model, const PluginDevice& device) {
  const Accelerator& a = model.accelerators.at(device.accelerator);
  return std::string("polyaccel.io/") + (a.vendor == Vendor::intel_gaudi ? "hpu" : "gpu") + "=" +
         device_plugin_id(a, device.mig);
}

std::string PluginResource::socket_name() const {
  std::string s = name;
  std::replace(s.begin(), s.end(), '/', '_');
  return "polyaccel-" + s + ".sock";
}

namespace {

// A device before sharing: what it is and the resource it belongs to.
struct BaseDevice {
  std::string resource;
  PluginDevice device;
  ShareableDevice shareable;
};

bool mig_enabled(const Accelerator& a) {
  return a.inventory && a.inventory->mig_enabled.value_or(false);
}

// NVIDIA's resource name of a MIG profile: "+" becomes ".".
std::string mig_resource(const std::string& profile) {
  std::string p = profile;
  std::replace(p.begin(), p.end(), '+', '.');
  return "nvidia.com/mig-" + p;
}

Result<std::vector<BaseDevice>> nvidia_devices(const HostModel& model, size_t i,
                                               MigStrategy strategy) {
  const Accelerator& a = model.accelerators[i];
  std::vector<BaseDevice> out;
  if (!a.inventory || a.inventory->uuid.empty()) {
    // Without NVML there is nothing to advertise; with it, NVML lost this one.
    bool nvml = std::any_of(model.accelerator_backends.begin(), model.accelerator_backends.end(),
                            [](const auto& b) { return b.name == "nvml" && b.present; });
    if (!nvml) return out;
    BaseDevice b;
    b.resource = "nvidia.com/gpu";
    b.device.id = device_plugin_id(a);
    b.device.visible_id = b.device.id;
    b.device.accelerator = i;
    b.device.numa_nodes = a.pci.numa_nodes;
    b.device.lost = true;
    b.shareable.resource = b.resource;
    b.shareable.uuid = b.device.id;
    b.shareable.product = a.name;
    out.push_back(std::move(b));
    return out;
  }
  const auto& inv = *a.inventory;
  auto base = [&](const std::string& resource, const std::string& uuid) {
    BaseDevice b;
    b.resource = resource;
    b.device.id = uuid;
    b.device.visible_id = uuid;
    b.device.accelerator = i;
    b.device.numa_nodes = a.pci.numa_nodes;
    b.shareable.resource = resource;
    b.shareable.gpu_index = inv.index;
    b.shareable.uuid = uuid;
    b.shareable.product = a.name;
    return b;
  };
  if (strategy == MigStrategy::none || !mig_enabled(a)) {
    if (strategy == MigStrategy::single) {
      return bad_input("MIG strategy single",
                       a.pci.address.to_string() + " does not have MIG enabled while others do",
                       "use the mixed strategy on nodes that mix MIG and whole GPUs");
    }
    out.push_back(base("nvidia.com/gpu", inv.uuid));
    return out;
  }
  if (strategy == MigStrategy::single && inv.mig_instances.empty()) {
    return bad_input("MIG strategy single",
                     a.pci.address.to_string() + " has MIG enabled and no MIG devices");
  }
  for (size_t m = 0; m < inv.mig_instances.size(); ++m) {
    const MigInstance& mi = inv.mig_instances[m];
    BaseDevice b =
        base(strategy == MigStrategy::single ? "nvidia.com/gpu" : mig_resource(mi.profile_name),
             mi.uuid);
    b.device.mig = m;
    b.shareable.mig_index = static_cast<unsigned>(m);
    b.shareable.parent_uuid = inv.uuid;
    b.shareable.gpu_instance = mi.gpu_instance_id;
    b.shareable.compute_instance = mi.compute_instance_id;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<BaseDevice> other_vendor_devices(const HostModel& model, size_t i) {
  const Accelerator& a = model.accelerators[i];
  BaseDevice b;
  b.resource = a.vendor == Vendor::amd ? "amd.com/gpu" : "habana.ai/gaudi";
  // As the vendors' plugins: the PCI bus id for AMD, the board serial for Gaudi.
  std::string id = device_plugin_id(a);
  b.device.id = id;
  b.device.visible_id = id;
  b.device.accelerator = i;
  b.device.numa_nodes = a.pci.numa_nodes;
  b.shareable.resource = b.resource;
  b.shareable.gpu_index = a.inventory ? a.inventory->index : 0;
  b.shareable.uuid = a.inventory ? a.inventory->uuid : std::string();
  b.shareable.product = a.name;
  return {b};
}

}  // namespace

Result<std::vector<PluginResource>> plan_resources(const HostModel& model,
                                                   const ResourceOptions& options) {
  const SharingConfig none;
  const SharingConfig& sharing = options.sharing ? *options.sharing : none;
  if (sharing.strategy == SharingStrategy::mps) {
    return Error{ErrorCode::unsupported, sharing.source,
                 "sharing.mps is not supported: polyaccel runs no MPS control daemon",
                 "use sharing.timeSlicing"};
  }
  std::vector<BaseDevice> base;
  for (size_t i = 0; i < model.accelerators.size(); ++i) {
    const Accelerator& a = model.accelerators[i];
    if (a.vendor == Vendor::nvidia) {
      auto devs = nvidia_devices(model, i, options.mig_strategy);
      if (!devs) return devs.error();
      for (auto& d : *devs)
        base.push_back(std::move(d));
    } else if (a.vendor == Vendor::amd || a.vendor == Vendor::intel_gaudi) {
      for (auto& d : other_vendor_devices(model, i))
        base.push_back(std::move(d));
    }
  }
  if (options.mig_strategy == MigStrategy::single) {
    std::set<std::string> profiles;
    for (const auto& b : base) {
      if (b.device.mig) {
        const auto& a = model.accelerators[b.device.accelerator];
        profiles.insert(a.inventory->mig_instances[*b.device.mig].profile_name);
      }
    }
    if (profiles.size() > 1) {
      return bad_input("MIG strategy single", "more than one MIG device type present",
                       "use the mixed strategy");
    }
  }

  std::map<std::string, PluginResource> by_name;
  std::map<std::string, unsigned> position;  // per base resource
  for (auto& b : base) {
    b.shareable.position = position[b.resource]++;
    auto rep = replication_for(sharing, b.shareable);
    if (!rep) return rep.error();
    PluginResource& r = by_name[rep->resource];
    r.name = rep->resource;
    r.vendor = model.accelerators[b.device.accelerator].vendor;
    r.policy = sharing.policy;
    if (rep->replicas > 1) {
      r.sharing = sharing.strategy;
      r.fail_requests_greater_than_one = sharing.fail_requests_greater_than_one;
    }
    r.max_replicas = std::max(r.max_replicas, rep->replicas);
    r.renamed = rep->resource != b.resource;
    if (rep->replicas == 1) {
      r.devices.push_back(b.device);
      continue;
    }
    for (unsigned k = 0; k < rep->replicas; ++k) {
      PluginDevice d = b.device;
      d.id += "::" + std::to_string(k);
      d.replica = k;
      r.devices.push_back(std::move(d));
    }
  }
  std::vector<PluginResource> out;
  for (auto& [name, r] : by_name)
    out.push_back(std::move(r));
  return out;
}

}  // namespace polyaccel
