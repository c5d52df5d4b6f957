#include "kube/allocate.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/strings.h"
#include "discover/links.h"
#include "kube/nic_resources.h"

namespace polyaccel {

namespace {

void add_node(ContainerAllocation& out, const AllocateOptions& options, const std::string& rel) {
  DeviceNodeSpec spec{"/dev/" + rel, options.dev_root + "/" + rel, "rw"};
  if (std::find(out.devices.begin(), out.devices.end(), spec) == out.devices.end())
    out.devices.push_back(std::move(spec));
}

void push_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// /dev/infiniband/rdma_cm and each HCA's verbs and MAD nodes. An HCA whose uverbs node is
// unknown is an Error: a container without it cannot open the device.
Status add_rdma_nodes(ContainerAllocation& out, const AllocateOptions& options,
                      const NicNodes& nodes, const std::vector<std::string>& hcas) {
  if (hcas.empty()) return Ok{};
  add_node(out, options, "infiniband/rdma_cm");
  for (const auto& h : hcas) {
    auto it = nodes.rdma.find(h);
    if (it == nodes.rdma.end() || it->second.uverbs.empty()) {
      return Error{ErrorCode::not_found, h, "has no /dev/infiniband/uverbs node in sysfs",
                   "is ib_uverbs loaded?"};
    }
    add_node(out, options, "infiniband/" + it->second.uverbs);
    for (const auto& n : it->second.umad)
      add_node(out, options, "infiniband/" + n);
    for (const auto& n : it->second.issm)
      add_node(out, options, "infiniband/" + n);
  }
  return Ok{};
}

// The model's NICs that carry any of these RDMA devices, in the model's order.
std::vector<const Nic*> nics_with_hcas(const HostModel& model,
                                       const std::vector<std::string>& hcas) {
  std::vector<const Nic*> out;
  for (const Nic& nic : model.nics) {
    for (const auto& r : nic.rdma_devices) {
      if (std::find(hcas.begin(), hcas.end(), r) != hcas.end()) {
        out.push_back(&nic);
        break;
      }
    }
  }
  return out;
}

// PCIDEVICE_<RESOURCE>: the sriov-network-device-plugin's name, "intel.com/cx7_vfs" →
// PCIDEVICE_INTEL_COM_CX7_VFS.
std::string pci_device_variable(const std::string& resource) {
  std::string v = "PCIDEVICE_";
  for (char c : resource)
    v += std::isalnum(static_cast<unsigned char>(c))
             ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
             : '_';
  return v;
}

Result<ContainerAllocation> compute_nic_allocation(const HostModel& model,
                                                   const PluginResource& resource,
                                                   const std::vector<std::string>& device_ids,
                                                   const AllocateOptions& options,
                                                   const NicNodes& nic_nodes) {
  std::vector<std::string> hcas, netdevs, addresses;
  for (const auto& id : device_ids) {
    const PluginDevice* d = resource.device(id);
    if (!d) return bad_input("device " + id, "is not a device of " + resource.name);
    for (const auto& h : nic_device_hcas(model, *d))
      push_unique(hcas, h);
    if (resource.kind == ResourceKind::sriov_vf) {
      push_unique(addresses, d->visible_id);
      for (const auto& n : nic_device_netdevs(model, *d))
        push_unique(netdevs, n);
    }
  }
  ContainerAllocation out;
  Status st = add_rdma_nodes(out, options, nic_nodes, hcas);
  if (!st) return st.error();
  for (auto& [k, v] : nccl_network_env(nics_with_hcas(model, hcas), {}))
    out.envs[k] = v;
  if (resource.kind == ResourceKind::sriov_vf) {
    out.envs[pci_device_variable(resource.name)] = join(addresses, ",");
    // The netdev itself moves into the pod's network namespace by the SR-IOV CNI, not by a
    // device plugin; the container is told which it is.
    if (!netdevs.empty()) out.envs["POLYACCEL_VF_NETDEVS"] = join(netdevs, ",");
  }
  return out;
}

}  // namespace

std::vector<const Nic*> nccl_nics_of(const HostModel& model,
                                     const std::vector<size_t>& accelerators) {
  std::vector<const Nic*> out;
  for (size_t a : accelerators) {
    for (const Nic* n : nccl_nics(model, model.accelerators[a])) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
  }
  return out;
}

std::vector<std::string> closest_rdma_devices(const HostModel& model,
                                              const std::vector<size_t>& accelerators) {
  const auto near = nccl_nics_of(model, accelerators);
  std::vector<std::string> out;
  for (const Nic& nic : model.nics) {
    if (nic.fabric == "efa" || nic.fabric == "slingshot") continue;
    if (std::find(near.begin(), near.end(), &nic) == near.end()) continue;
    for (const auto& r : nic.rdma_devices)
      push_unique(out, r);
  }
  return out;
}

Result<DeviceListStrategy> parse_device_list_strategy(const std::string& text,
                                                      const std::string& input) {
  DeviceListStrategy out{false, false};
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    if (item == "envvar") {
      out.envvar = true;
    } else if (item == "cdi-cri") {
      out.cdi_cri = true;
    } else {
      return bad_input(input, "'" + item + "' is not a device list strategy",
                       "use envvar, cdi-cri, envvar,cdi-cri or auto");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string to_string(const DeviceListStrategy& strategy) {
  if (strategy.envvar && strategy.cdi_cri) return "envvar,cdi-cri";
  return strategy.cdi_cri ? "cdi-cri" : "envvar";
}

namespace {

// Why the runtime's configuration has CDI on or off, or cannot tell (cdi_enabled's rules).
std::string cdi_setting(const RuntimeConfigFacts& r, std::optional<bool> on) {
  if (!r.problem.empty()) return r.name + "'s configuration cannot be read (" + r.problem + ")";
  if (r.name == "containerd") {
    if (!on) return "containerd has no /etc/containerd/config.toml: its CDI default is unknown";
    std::string file = r.config_path + " (config version " + std::to_string(r.config_version) + ")";
    if (r.enable_cdi) return file + " sets enable_cdi = " + (*r.enable_cdi ? "true" : "false");
    return file + " leaves enable_cdi at containerd " +
           (*on ? "2.x's default, true" : "1.x's default, false");
  }
  return *on ? std::string("CRI-O has CDI on")
             : "CRI-O's cdi_spec_dirs = [] leaves it no CDI spec to read";
}

// A spec of `polyaccel cdi generate` (kinds polyaccel.io/gpu and hpu; claim specs are the DRA
// driver's) in one of the runtime's CDI directories; "" when none.
std::string polyaccel_spec_in(const ContainerRuntimeFacts& facts, const RuntimeConfigFacts& r) {
  const auto& dirs = r.cdi_spec_dirs.empty() ? default_cdi_spec_dirs() : r.cdi_spec_dirs;
  for (const auto& spec : facts.cdi_specs) {
    if (!spec.problem.empty()) continue;
    if (spec.kind != "polyaccel.io/gpu" && spec.kind != "polyaccel.io/hpu") continue;
    for (const auto& dir : dirs) {
      std::string d = dir;
      while (d.size() > 1 && d.back() == '/')
        d.pop_back();
      if (spec.path.starts_with(d + "/")) return spec.path;
    }
  }
  return "";
}

}  // namespace

Result<DeviceListChoice> choose_device_list_strategy(const std::string& text,
                                                     const std::string& input,
                                                     const ContainerRuntimeFacts& runtime) {
  if (text != "auto") {
    auto parsed = parse_device_list_strategy(text, input);
    if (!parsed) return parsed.error();
    return DeviceListChoice{*parsed, "set by " + input};
  }
  const DeviceListStrategy envvar{true, false};
  std::vector<const RuntimeConfigFacts*> installed;
  for (const auto* r : {&runtime.containerd, &runtime.crio})
    if (r->installed) installed.push_back(r);
  if (installed.empty()) return DeviceListChoice{envvar, "auto: no containerd or CRI-O found"};
  std::string why;
  for (const auto* r : installed) {
    auto on = cdi_enabled(*r);
    std::string setting = cdi_setting(*r, on);
    if (!on || !*on || !r->problem.empty()) return DeviceListChoice{envvar, "auto: " + setting};
    std::string spec = polyaccel_spec_in(runtime, *r);
    if (spec.empty()) {
      return DeviceListChoice{
          envvar, "auto: " + setting + ", but no polyaccel.io spec is in the CDI directories " +
                      r->name +
                      " reads (`polyaccel cdi generate --cdi-dir /var/run/cdi` writes them)"};
    }
    why += (why.empty() ? "" : "; ") + setting + " and reads " + spec;
  }
  return DeviceListChoice{DeviceListStrategy{true, true}, "auto: " + why};
}

Result<ContainerAllocation> compute_allocation(const HostModel& model,
                                               const PluginResource& resource,
                                               const std::vector<DeviceNodes>& nodes,
                                               const std::vector<std::string>& device_ids,
                                               const AllocateOptions& options,
                                               const NicNodes& nic_nodes) {
  if (resource.kind != ResourceKind::accelerator)
    return compute_nic_allocation(model, resource, device_ids, options, nic_nodes);
  if (resource.fail_requests_greater_than_one && device_ids.size() > 1) {
    return bad_input(
        "request for " + std::to_string(device_ids.size()) + " devices of " + resource.name,
        "this shared resource allows one device per container",
        "failRequestsGreaterThanOne is set in the sharing config");
  }
  std::vector<const PluginDevice*> devices;
  std::vector<size_t> accelerators;
  for (const auto& id : device_ids) {
    const PluginDevice* d = resource.device(id);
    if (!d) return bad_input("device " + id, "is not a device of " + resource.name);
    if (d->accelerator >= nodes.size() || d->accelerator >= model.accelerators.size()) {
      return Error{ErrorCode::internal, id, "has no accelerator in the model", {}};
    }
    devices.push_back(d);
    if (std::find(accelerators.begin(), accelerators.end(), d->accelerator) == accelerators.end())
      accelerators.push_back(d->accelerator);
  }
  // Replicas of one device name it once.
  std::vector<std::string> visible;
  for (const auto* d : devices)
    push_unique(visible, d->visible_id);

  ContainerAllocation out;
  if (options.device_list.cdi_cri) {
    for (const auto* d : devices)
      push_unique(out.cdi_devices, cdi_device_name(model, *d));
  }
  switch (options.device_list.envvar ? resource.vendor : Vendor::other) {
    case Vendor::nvidia:
      out.envs["NVIDIA_VISIBLE_DEVICES"] = join(visible, ",");
      if (options.nvidia_device_specs) {
        out.envs["CUDA_VISIBLE_DEVICES"] = join(visible, ",");
        for (size_t a : accelerators) {
          if (!nodes[a].nvidia_minor) {
            return Error{ErrorCode::not_found, model.accelerators[a].pci.address.to_string(),
                         "its NVIDIA device minor is unknown", "is the nvidia driver loaded?"};
          }
          add_node(out, options, "nvidia" + std::to_string(*nodes[a].nvidia_minor));
        }
        for (const char* ctl : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"})
          add_node(out, options, ctl);
      }
      break;
    case Vendor::amd:
      add_node(out, options, "kfd");
      for (size_t a : accelerators) {
        if (nodes[a].drm.empty()) {
          return Error{ErrorCode::not_found, model.accelerators[a].pci.address.to_string(),
                       "has no DRM card or render node", "is the amdgpu driver loaded?"};
        }
        for (const auto& n : nodes[a].drm)
          add_node(out, options, "dri/" + n);
      }
      break;
    case Vendor::intel_gaudi: {
      std::vector<std::string> minors, paths;
      for (size_t a : accelerators) {
        if (!nodes[a].accel_minor) {
          return Error{ErrorCode::not_found, model.accelerators[a].pci.address.to_string(),
                       "has no /dev/accel node", "is the habanalabs driver loaded?"};
        }
        std::string m = std::to_string(*nodes[a].accel_minor);
        add_node(out, options, "accel/accel" + m);
        add_node(out, options, "accel/accel_controlD" + m);
        minors.push_back(m);
        paths.push_back("/dev/accel/accel" + m);
      }
      out.envs["HABANA_VISIBLE_DEVICES"] = join(minors, ",");
      out.envs["HL_VISIBLE_DEVICES"] = join(paths, ",");
      out.envs["HL_VISIBLE_DEVICES_UUID"] = join(visible, ",");
      break;
    }
    case Vendor::other:
      // cdi-cri alone: the CDI spec carries the vendor's nodes and variables.
      if (!options.device_list.envvar && resource.vendor != Vendor::other) break;
      return Error{ErrorCode::unsupported, resource.name, "has no vendor to allocate for", {}};
  }
  if ((options.nccl_ib_hca || options.gpu_rdma_devices) && resource.vendor != Vendor::intel_gaudi) {
    if (options.nccl_ib_hca) {
      // The container's network namespace is not the host's: no NCCL_SOCKET_IFNAME.
      for (const auto& [k, v] : nccl_network_env(nccl_nics_of(model, accelerators), {}))
        out.envs[k] = v;
    }
    if (options.gpu_rdma_devices) {
      Status st =
          add_rdma_nodes(out, options, nic_nodes, closest_rdma_devices(model, accelerators));
      if (!st) return st.error();
    }
  }
  return out;
}

}  // namespace polyaccel
