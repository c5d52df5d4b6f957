#include "dra/cdi.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "core/file_io.h"
#include "core/strings.h"
#include "dra/cpu_devices.h"
#include "kube/resources.h"

namespace polyaccel::dra {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

void add_node(CdiEdits& e, const CdiOptions& o, const std::string& rel) {
  CdiDeviceNode n{"/dev/" + rel, o.dev_root + "/" + rel, "rw"};
  if (std::find(e.device_nodes.begin(), e.device_nodes.end(), n) == e.device_nodes.end())
    e.device_nodes.push_back(std::move(n));
}

void push_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

std::optional<unsigned> trailing_number(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) != 0 || s.size() == prefix.size() || s.size() > prefix.size() + 6)
    return std::nullopt;
  return parse_count(std::string_view(s).substr(prefix.size()));
}

// What one device needs for itself (its nodes) and what the container needs once for any device
// of its kind (control nodes); `visible` collects the ids the claim-wide environment names.
struct DeviceNeeds {
  CdiEdits own;
  CdiEdits common;
  std::string nvidia_visible, habana_visible, rdma;
};

Result<DeviceNeeds> needs_of(const HostModel& model, const Device& d, const CdiHost& host,
                             const CdiOptions& o) {
  DeviceNeeds n;
  if (d.kind == DeviceKind::nic || d.kind == DeviceKind::vf) {
    if (d.nic >= model.nics.size()) return Error{ErrorCode::internal, d.name, "no such NIC", {}};
    const Nic& nic = model.nics[d.nic];
    std::vector<std::string> rdma = nic.rdma_devices;
    if (d.vf) {
      if (!nic.pci.sriov || *d.vf >= nic.pci.sriov->vfs.size())
        return Error{ErrorCode::internal, d.name, "no such VF", {}};
      rdma = nic.pci.sriov->vfs[*d.vf].rdma_devices;
    }
    bool any = false;
    for (const auto& r : rdma) {
      auto it = host.uverbs.find(r);
      if (it == host.uverbs.end()) continue;
      add_node(n.own, o, "infiniband/uverbs" + std::to_string(it->second));
      any = true;
      if (n.rdma.empty()) n.rdma = r;
    }
    if (!any) {
      return Error{ErrorCode::not_found, d.name,
                   "has no /dev/infiniband/uverbs node (no RDMA device, or ib_uverbs not loaded)",
                   "modprobe ib_uverbs"};
    }
    add_node(n.common, o, "infiniband/rdma_cm");
    return n;
  }
  if (d.accelerator >= model.accelerators.size() || d.accelerator >= host.accelerators.size())
    return Error{ErrorCode::internal, d.name, "no such accelerator", {}};
  const Accelerator& a = model.accelerators[d.accelerator];
  const DeviceNodes& dn = host.accelerators[d.accelerator];
  const std::string bdf = a.pci.address.to_string();
  switch (a.vendor) {
    case Vendor::nvidia: {
      if (!dn.nvidia_minor) {
        return Error{ErrorCode::not_found, d.name + " (" + bdf + ")",
                     "its NVIDIA device minor is unknown", "is the nvidia driver loaded?"};
      }
      unsigned minor = *dn.nvidia_minor;
      add_node(n.own, o, "nvidia" + std::to_string(minor));
      for (const char* ctl : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"})
        add_node(n.common, o, ctl);
      // The driver's user space, common to every NVIDIA device (as nvidia-ctk puts it).
      n.common.mounts = host.nvidia_driver.mounts;
      n.common.hooks = nvidia_hooks(host.nvidia_driver, o.hook_path);
      std::string uuid = a.inventory ? a.inventory->uuid : "";
      if (d.kind == DeviceKind::mig) {
        if (!d.mig_instance || !a.inventory ||
            *d.mig_instance >= a.inventory->mig_instances.size()) {
          return Error{ErrorCode::not_found, d.name, "no MIG instance exists at this placement",
                       "create it (polyaccel mig apply) or publish existing instances only"};
        }
        const MigInstance& m = a.inventory->mig_instances[*d.mig_instance];
        uuid = m.uuid;
        std::string gpu = "gpu" + std::to_string(minor);
        std::string gi = gpu + "/gi" + std::to_string(m.gpu_instance_id);
        std::string ci = gi + "/ci" + std::to_string(m.compute_instance_id);
        for (const std::string& cap : {gi + "/access", ci + "/access"}) {
          // Without its capability nodes the container cannot open the instance: no spec.
          auto it = host.mig_caps.find(cap);
          if (it == host.mig_caps.end()) {
            return Error{
                ErrorCode::not_found, d.name + " (" + bdf + ")",
                "has no capability minor for " + cap + " in /proc/driver/nvidia-caps/mig-minors",
                "is the nvidia driver loaded, with nvidia-caps device files?"};
          }
          add_node(n.own, o, "nvidia-caps/nvidia-cap" + std::to_string(it->second));
        }
      }
      n.nvidia_visible = uuid.empty() ? bdf : uuid;
      return n;
    }
    case Vendor::amd:
      if (dn.drm.empty()) {
        return Error{ErrorCode::not_found, d.name + " (" + bdf + ")",
                     "has no DRM card or render node", "is the amdgpu driver loaded?"};
      }
      for (const auto& node : dn.drm)
        add_node(n.own, o, "dri/" + node);
      add_node(n.common, o, "kfd");
      return n;
    case Vendor::intel_gaudi: {
      if (!dn.accel_minor) {
        return Error{ErrorCode::not_found, d.name + " (" + bdf + ")", "has no /dev/accel node",
                     "is the habanalabs driver loaded?"};
      }
      std::string m = std::to_string(*dn.accel_minor);
      add_node(n.own, o, "accel/accel" + m);
      add_node(n.own, o, "accel/accel_controlD" + m);
      // The on-chip NIC's verbs node (habana-container-runtime's addUverbsDevices).
      if (auto it = host.gaudi_uverbs.find(*dn.accel_minor); it != host.gaudi_uverbs.end())
        add_node(n.own, o, "infiniband/uverbs" + std::to_string(it->second));
      n.habana_visible = m;
      return n;
    }
    case Vendor::other:
      break;
  }
  return Error{ErrorCode::unsupported, d.name, "has no vendor to give a container", {}};
}

void merge(CdiEdits& into, const CdiEdits& from) {
  for (const auto& n : from.device_nodes)
    if (std::find(into.device_nodes.begin(), into.device_nodes.end(), n) == into.device_nodes.end())
      into.device_nodes.push_back(n);
  for (const auto& e : from.env)
    push_unique(into.env, e);
  for (const auto& m : from.mounts)
    if (std::find(into.mounts.begin(), into.mounts.end(), m) == into.mounts.end())
      into.mounts.push_back(m);
  for (const auto& h : from.hooks)
    if (std::find(into.hooks.begin(), into.hooks.end(), h) == into.hooks.end())
      into.hooks.push_back(h);
}

json edits_json(const CdiEdits& e) {
  json out = json::object();
  if (!e.env.empty()) out["env"] = e.env;
  if (!e.device_nodes.empty()) {
    json nodes = json::array();
    for (const auto& n : e.device_nodes) {
      json j = {{"path", n.path}};
      if (n.host_path != n.path) j["hostPath"] = n.host_path;
      if (!n.permissions.empty()) j["permissions"] = n.permissions;
      nodes.push_back(std::move(j));
    }
    out["deviceNodes"] = std::move(nodes);
  }
  if (!e.mounts.empty()) {
    json mounts = json::array();
    for (const auto& m : e.mounts)
      mounts.push_back(
          {{"hostPath", m.host_path}, {"containerPath", m.container_path}, {"options", m.options}});
    out["mounts"] = std::move(mounts);
  }
  if (!e.hooks.empty()) {
    json hooks = json::array();
    for (const auto& h : e.hooks)
      hooks.push_back({{"hookName", h.hook_name}, {"path", h.path}, {"args", h.args}});
    out["hooks"] = std::move(hooks);
  }
  return out;
}

}  // namespace

const char* cdi_class(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::gpu:
    case DeviceKind::mig:
    case DeviceKind::gpu_partition:
      return "gpu";
    case DeviceKind::hpu:
      return "hpu";
    case DeviceKind::nic:
    case DeviceKind::vf:
      return "nic";
    case DeviceKind::cpu:
    case DeviceKind::memory:
      return "cpu";
  }
  return "gpu";
}

std::string CdiSpec::file_name() const {
  std::string f = kind;
  std::replace(f.begin(), f.end(), '/', '-');
  return f + file_suffix + ".json";
}

CdiHost read_cdi_host(const HostModel& model, const std::string& root,
                      const std::string& driver_root, const std::string& host_driver_root) {
  CdiHost h;
  h.accelerators = read_device_nodes(model, root);
  bool nvidia = std::any_of(model.accelerators.begin(), model.accelerators.end(),
                            [](const Accelerator& a) { return a.vendor == Vendor::nvidia; });
  if (nvidia && !driver_root.empty())
    h.nvidia_driver = read_nvidia_driver(driver_root, host_driver_root);
  if (root.empty()) return h;
  std::error_code ec;
  // /sys/class/infiniband_verbs/uverbsN/ibdev holds the RDMA device's name.
  for (const auto& e : fs::directory_iterator(fs::path(root) / "sys/class/infiniband_verbs", ec)) {
    auto n = trailing_number(e.path().filename().string(), "uverbs");
    if (!n) continue;
    auto ibdev = read_first_line(e.path() / "ibdev");
    if (ibdev && !ibdev->empty() && ibdev->size() < 64) h.uverbs[*ibdev] = *n;
  }
  // Gaudi's on-chip NIC: /sys/class/infiniband/hlib_<N>/device/infiniband_verbs/uverbs<K>.
  for (const auto& e : fs::directory_iterator(fs::path(root) / "sys/class/infiniband", ec)) {
    auto n = trailing_number(e.path().filename().string(), "hlib_");
    if (!n) continue;
    std::error_code ec2;
    for (const auto& v : fs::directory_iterator(e.path() / "device/infiniband_verbs", ec2)) {
      if (auto k = trailing_number(v.path().filename().string(), "uverbs")) {
        h.gaudi_uverbs[*n] = *k;
        break;
      }
    }
  }
  // "gpu0/gi1/access 12" per line.
  auto caps = read_text_file(fs::path(root) / "proc/driver/nvidia-caps/mig-minors");
  if (caps && caps->size() < (1u << 20)) {
    std::istringstream in(*caps);
    std::string name, minor;
    while (in >> name >> minor) {
      if (auto m = parse_count(minor)) h.mig_caps[name] = *m;
    }
  }
  return h;
}

namespace {

bool valid_cdi_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || !std::isalnum(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  });
}

// kube/resources.h device_plugin_id for the devices the device plugin advertises (whole GPUs
// and HPUs, existing MIG instances); empty for the others.
std::string device_plugin_alias(const HostModel& model, const Device& d) {
  if (d.accelerator >= model.accelerators.size()) return {};
  const Accelerator& a = model.accelerators[d.accelerator];
  // The device plugin serves NVIDIA GPUs that NVML answered for only.
  if (a.vendor == Vendor::nvidia && (!a.inventory || a.inventory->uuid.empty())) return {};
  std::string id;
  if (d.kind == DeviceKind::gpu || d.kind == DeviceKind::hpu) id = device_plugin_id(a);
  if (d.kind == DeviceKind::mig && d.mig_instance) id = device_plugin_id(a, d.mig_instance);
  return valid_cdi_name(id) ? id : std::string();
}

}  // namespace

std::vector<CdiSpec> node_specs(const HostModel& model, const Pool& pool, const CdiHost& host,
                                const CdiOptions& options, std::vector<std::string>* skipped) {
  std::map<std::string, CdiSpec> by_class;
  std::map<std::string, std::vector<CdiDevice>> aliases;  // per class
  for (const auto& s : pool.slices) {
    for (const auto& d : s.devices) {
      // CPUs and memory have no device nodes: what they grant is a claim's (claim_spec).
      if (d.kind == DeviceKind::cpu || d.kind == DeviceKind::memory) continue;
      auto needs = needs_of(model, d, host, options);
      if (!needs) {
        if (skipped) skipped->push_back(needs.error().message());
        continue;
      }
      std::string cls = cdi_class(d.kind);
      CdiSpec& spec = by_class[cls];
      spec.version = options.version;
      spec.kind = std::string(kCdiVendor) + "/" + cls;
      CdiDevice dev{d.name, needs->own};
      // A device alone names itself; a claim's spec names all of them at once.
      if (!needs->nvidia_visible.empty())
        dev.edits.env.push_back("NVIDIA_VISIBLE_DEVICES=" + needs->nvidia_visible);
      if (!needs->habana_visible.empty())
        dev.edits.env.push_back("HABANA_VISIBLE_DEVICES=" + needs->habana_visible);
      // The same device under the id the device plugin advertises it by (a UUID, bus id or
      // serial): the name its Allocate gives with --device-list-strategy cdi-cri. After the
      // pool's names, so that those keep their places.
      std::string alias = device_plugin_alias(model, d);
      if (!alias.empty()) aliases[cls].push_back({alias, dev.edits});
      spec.devices.push_back(std::move(dev));
      merge(spec.edits, needs->common);
    }
  }
  std::vector<CdiSpec> out;
  for (auto& [cls, spec] : by_class) {
    std::set<std::string> names;
    for (const auto& d : spec.devices)
      names.insert(d.name);
    for (auto& a : aliases[cls])
      if (names.insert(a.name).second) spec.devices.push_back(std::move(a));
    out.push_back(std::move(spec));
  }
  return out;
}

Result<CdiSpec> claim_spec(const HostModel& model, const std::vector<const Device*>& devices,
                           const CdiHost& host, const std::string& claim_uid,
                           const CdiOptions& options, const std::vector<std::string>& share_ids) {
  CdiSpec spec;
  spec.version = options.version;
  spec.kind = std::string(kCdiVendor) + "/claim";
  spec.file_suffix = "_" + claim_uid;
  std::vector<std::string> nvidia, habana, rdma;
  // The claim's CPUs and memory nodes, for the NRI plugin (nri/cpu_policy.h): in the edits of
  // each of its CPU and memory devices, so that a container given any of them is pinned to all.
  const CpuGrant grant = grant_of(model, devices);
  CdiEdits pinned;
  if (!grant.cpus.empty())
    pinned.env.push_back(std::string(kCpusEnvPrefix) + claim_uid + "=" + grant.cpus.to_list());
  if (!grant.mems.empty())
    pinned.env.push_back(std::string(kMemsEnvPrefix) + claim_uid + "=" + grant.mems.to_list());
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device* d = devices[i];
    if (d->kind == DeviceKind::cpu || d->kind == DeviceKind::memory) {
      spec.devices.push_back({claim_uid + "-" + d->name, pinned});
      continue;
    }
    auto needs = needs_of(model, *d, host, options);
    if (!needs) return needs.error();
    std::string name = claim_uid + "-" + d->name;
    // Each share its own CDI device: a claim may hold two shares of one NIC.
    if (i < share_ids.size() && !share_ids[i].empty()) name += "-" + share_ids[i];
    spec.devices.push_back({std::move(name), needs->own});
    merge(spec.edits, needs->common);
    push_unique(nvidia, needs->nvidia_visible);
    push_unique(habana, needs->habana_visible);
    push_unique(rdma, needs->rdma);
  }
  if (!nvidia.empty()) spec.edits.env.push_back("NVIDIA_VISIBLE_DEVICES=" + join(nvidia, ","));
  if (!habana.empty()) spec.edits.env.push_back("HABANA_VISIBLE_DEVICES=" + join(habana, ","));
  // "=" asks NCCL for exact names: mlx5_1 would otherwise also match mlx5_10.
  if (!rdma.empty()) spec.edits.env.push_back("NCCL_IB_HCA==" + join(rdma, ","));
  return spec;
}

nlohmann::json to_json(const CdiSpec& spec) {
  json devices = json::array();
  for (const auto& d : spec.devices)
    devices.push_back({{"name", d.name}, {"containerEdits", edits_json(d.edits)}});
  json out = {{"cdiVersion", spec.version}, {"kind", spec.kind}, {"devices", std::move(devices)}};
  if (!spec.edits.empty()) out["containerEdits"] = edits_json(spec.edits);
  return out;
}

Status write_cdi_spec(const fs::path& dir, const CdiSpec& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{ErrorCode::io, dir.string(), "cannot create: " + ec.message(), {}};
  return write_file_atomically(
      dir / spec.file_name(),
      to_json(spec).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

Status remove_cdi_spec(const fs::path& dir, const std::string& file) {
  std::error_code ec;
  fs::remove(dir / file, ec);
  if (ec) return Error{ErrorCode::io, (dir / file).string(), "cannot remove: " + ec.message(), {}};
  return Ok{};
}

}  // namespace polyaccel::dra
