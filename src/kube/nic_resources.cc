#include "kube/nic_resources.h"

#include "core/file_io.h"
#include "core/number.h"
#include "core/strings.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

namespace polyaccel {

namespace {

// The most pods that may share one HCA: the RDMA shared device plugin's own default is 1000.
constexpr long kMaxPodsPerHca = 100000;

std::string at(const std::string& source, const YAML::Node& n) {
  // yaml-cpp counts lines from 0; people from 1.
  return source + ":" + std::to_string(n.Mark().line + 1);
}

bool is_name_part(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

Result<std::vector<std::string>> strings(const YAML::Node& v, const std::string& where) {
  if (!v.IsSequence()) return bad_input(where, "must be a list of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.IsScalar()) return bad_input(where, "must be a list of strings");
    out.push_back(e.as<std::string>());
  }
  return out;
}

// "15b3" or "0x15b3": a 16-bit PCI id.
Result<std::vector<std::uint16_t>> pci_ids(const YAML::Node& v, const std::string& where) {
  auto list = strings(v, where);
  if (!list) return list.error();
  std::vector<std::uint16_t> out;
  for (const std::string& s : *list) {
    auto id = parse_hex(s, where, 0xffff);
    if (!id)
      return bad_input(where, quote_input(s) + " is not a 16-bit hexadecimal PCI id", "write 15b3");
    out.push_back(static_cast<std::uint16_t>(*id));
  }
  return out;
}

Result<NicSelector> parse_selector(const YAML::Node& node, ResourceKind kind,
                                   const std::string& source, const std::string& prefix) {
  if (!node.IsMap()) return bad_input(at(source, node), prefix + " must be a mapping");
  NicSelector sel;
  const bool vf = kind == ResourceKind::sriov_vf;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string where = at(source, kv.first) + ": " + prefix + "." + key;
    const YAML::Node& v = kv.second;
    Status st = Ok{};
    auto take = [&](std::vector<std::string>& out) {
      auto l = strings(v, where);
      if (!l) {
        st = l.error();
      } else {
        out = std::move(*l);
      }
    };
    auto take_ids = [&](std::vector<std::uint16_t>& out) {
      auto l = pci_ids(v, where);
      if (!l) {
        st = l.error();
      } else {
        out = std::move(*l);
      }
    };
    if (key == "vendors") {
      take_ids(sel.vendors);
    } else if ((vf && key == "devices") || (!vf && key == "deviceIDs")) {
      take_ids(sel.devices);
    } else if (key == "drivers") {
      take(sel.drivers);
    } else if (key == "linkTypes") {
      take(sel.link_types);
    } else if (vf && key == "pciAddresses") {
      take(sel.pci_addresses);
    } else if (vf && key == "pfNames") {
      take(sel.pf_names);
    } else if (vf && key == "rootDevices") {
      take(sel.root_devices);
    } else if (!vf && key == "ifNames") {
      take(sel.if_names);
    } else if (vf && key == "isRdma") {
      if (!v.IsScalar()) return bad_input(where, "must be true or false");
      sel.is_rdma = v.as<bool>();
    } else if (vf && (key == "ddpProfiles" || key == "needVhostNet" || key == "vdpaType" ||
                      key == "acpiIndexes" || key == "auxTypes")) {
      return bad_input(where, "is a selector polyaccel does not implement",
                       "polyaccel serves netDevice pools: vendors, devices, drivers, "
                       "pciAddresses, pfNames, rootDevices, linkTypes, isRdma");
    } else {
      return bad_input(where, "is not a known key",
                       vf ? "known: vendors, devices, drivers, pciAddresses, pfNames, rootDevices, "
                            "linkTypes, isRdma"
                          : "known: vendors, deviceIDs, drivers, ifNames, linkTypes");
    }
    if (!st) return st.error();
  }
  for (const auto& t : sel.link_types) {
    if (t != "ether" && t != "infiniband")
      return bad_input(at(source, node),
                       prefix + ".linkTypes: '" + t + "' is not ether or infiniband");
  }
  return sel;
}

Result<NicPool> parse_pool(const YAML::Node& node, ResourceKind kind, const std::string& source,
                           const std::string& prefix) {
  if (!node.IsMap()) return bad_input(at(source, node), prefix + " must be a mapping");
  const bool vf = kind == ResourceKind::sriov_vf;
  NicPool pool;
  pool.kind = kind;
  pool.line = node.Mark().line + 1;
  std::string name, resource_prefix = vf ? "intel.com" : "rdma";
  bool have_selectors = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string where = at(source, kv.first) + ": " + prefix + "." + key;
    const YAML::Node& v = kv.second;
    if (key == "resourceName") {
      name = v.as<std::string>();
    } else if (key == "resourcePrefix") {
      resource_prefix = v.as<std::string>();
    } else if (key == "selectors") {
      have_selectors = true;
      // sriov-network-device-plugin takes one object or a list of them (any may select).
      if (v.IsSequence()) {
        // An empty list selects no device: a pool that can never have one is a mistake.
        if (v.size() == 0)
          return bad_input(where, "is an empty list: it selects no device",
                           "give one selector object, or a list of them");
        for (size_t i = 0; i < v.size(); ++i) {
          auto s =
              parse_selector(v[i], kind, source, prefix + ".selectors[" + std::to_string(i) + "]");
          if (!s) return s.error();
          pool.selectors.push_back(std::move(*s));
        }
      } else {
        auto s = parse_selector(v, kind, source, prefix + ".selectors");
        if (!s) return s.error();
        pool.selectors.push_back(std::move(*s));
      }
    } else if (vf && key == "deviceType") {
      if (v.as<std::string>() != "netDevice")
        return bad_input(where, "'" + v.as<std::string>() + "' is not served",
                         "polyaccel serves netDevice pools only");
    } else if (vf && key == "excludeTopology") {
      pool.exclude_topology = v.as<bool>();
    } else if (!vf && key == "rdmaHcaMax") {
      long long n = 0;
      try {
        n = v.as<long long>();
      } catch (const YAML::Exception&) {
        return bad_input(where, "'" + v.as<std::string>() + "' is not a whole number");
      }
      if (n < 1 || n > kMaxPodsPerHca)
        return bad_input(where, std::to_string(n) + " is out of range",
                         "give 1 to " + std::to_string(kMaxPodsPerHca));
      pool.max_pods = static_cast<unsigned>(n);
    } else {
      return bad_input(where, "is not a known key",
                       vf ? "known: resourceName, resourcePrefix, deviceType, excludeTopology, "
                            "selectors"
                          : "known: resourceName, resourcePrefix, rdmaHcaMax, selectors");
    }
  }
  if (!is_name_part(name, 63))
    return bad_input(at(source, node),
                     prefix + ".resourceName: '" + name + "' is not a resource name");
  if (!is_name_part(resource_prefix, 253))
    return bad_input(at(source, node),
                     prefix + ".resourcePrefix: '" + resource_prefix + "' is not a domain");
  if (!have_selectors) return bad_input(at(source, node), prefix + ": no selectors");
  if (!vf && !node["rdmaHcaMax"]) pool.max_pods = 1000;  // the RDMA shared device plugin's default
  pool.resource = resource_prefix + "/" + name;
  return pool;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
bool contains_id(const std::vector<std::uint16_t>& v, std::uint16_t id) {
  return v.empty() || std::find(v.begin(), v.end(), id) != v.end();
}

std::string link_type(const Nic& nic) {
  if (nic.fabric == "infiniband") return "infiniband";
  if (nic.fabric == "ethernet") return "ether";
  return {};
}

// "ens1f0#0-3,6" selects VFs 0..3 and 6 of ens1f0; "ens1f0" all of them.
bool pf_name_selects(const std::string& entry, const std::string& netdev, unsigned vf_index) {
  auto hash = entry.find('#');
  if (entry.substr(0, hash) != netdev) return false;
  if (hash == std::string::npos) return true;
  std::string ranges = entry.substr(hash + 1);
  size_t pos = 0;
  while (pos <= ranges.size()) {
    size_t comma = ranges.find(',', pos);
    std::string part =
        ranges.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto dash = part.find('-');
    auto lo = parse_unsigned(part.substr(0, dash), "pfNames range");
    auto hi =
        dash == std::string::npos ? lo : parse_unsigned(part.substr(dash + 1), "pfNames range");
    if (!lo || !hi) return false;  // a range that is not numbers selects nothing
    if (vf_index >= *lo && vf_index <= *hi) return true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return false;
}

bool selects_vf(const NicSelector& s, const Nic& pf, const VirtualFunction& vf,
                const NicNodes& sysfs) {
  std::pair<std::uint16_t, std::uint16_t> ids{0, 0};
  if (auto it = sysfs.vf_ids.find(vf.address.to_string()); it != sysfs.vf_ids.end())
    ids = it->second;
  if (!contains_id(s.vendors, ids.first) || !contains_id(s.devices, ids.second)) return false;
  if (!s.drivers.empty() && !contains(s.drivers, vf.driver)) return false;
  if (!s.pci_addresses.empty() && !contains(s.pci_addresses, vf.address.to_string())) return false;
  if (!s.root_devices.empty() && !contains(s.root_devices, pf.pci.address.to_string()))
    return false;
  if (!s.link_types.empty() && !contains(s.link_types, link_type(pf))) return false;
  if (s.is_rdma && *s.is_rdma != !vf.rdma_devices.empty()) return false;
  if (!s.pf_names.empty()) {
    bool any = false;
    for (const auto& e : s.pf_names) {
      for (const auto& n : pf.netdevs)
        any = any || pf_name_selects(e, n, vf.index);
    }
    if (!any) return false;
  }
  return true;
}

bool selects_hca(const NicSelector& s, const Nic& nic, const NicNodes& sysfs) {
  const auto& drivers = sysfs.drivers;
  // A VF is its PF's to share or a VF pool's to hand out, never a shared HCA of its own.
  if (nic.rdma_devices.empty() || nic.pci.physical_function) return false;
  if (!contains_id(s.vendors, nic.pci.vendor_id) || !contains_id(s.devices, nic.pci.device_id))
    return false;
  if (!s.drivers.empty()) {
    auto it = drivers.find(nic.pci.address.to_string());
    if (it == drivers.end() || !contains(s.drivers, it->second)) return false;
  }
  if (!s.link_types.empty() && !contains(s.link_types, link_type(nic))) return false;
  if (!s.if_names.empty()) {
    bool any = false;
    for (const auto& n : nic.netdevs)
      any = any || contains(s.if_names, n);
    if (!any) return false;
  }
  return true;
}

}  // namespace

Result<NicConfig> read_nic_config(const std::string& path) {
  auto text = read_input_file(path, kMaxConfigFileBytes, "NIC config");
  if (!text) return text.error();
  return parse_nic_config(*text, path);
}

Result<NicConfig> parse_nic_config(const std::string& text, const std::string& source) {
  NicConfig cfg;
  cfg.source = source;
  try {
    YAML::Node root = YAML::Load(text);
    // Empty is refused, not "no NICs": a file caught while being rewritten must not take the
    // NIC resources away (the last good config stays).
    if (root.IsNull()) return bad_input(source, "is empty", "give resourceList or configList");
    if (!root.IsMap()) return bad_input(at(source, root), "must be a mapping");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      ResourceKind kind;
      if (key == "resourceList") {
        kind = ResourceKind::sriov_vf;
      } else if (key == "configList") {
        kind = ResourceKind::shared_hca;
      } else if (key == "periodicUpdateInterval") {
        continue;  // the RDMA shared device plugin's rescan; polyaccel follows the HostModel
      } else {
        return bad_input(at(source, kv.first) + ": " + key, "is not a known key",
                         "known: resourceList (SR-IOV VF pools), configList (shared HCAs), "
                         "periodicUpdateInterval");
      }
      if (!v.IsSequence()) return bad_input(at(source, v), key + " must be a list");
      for (size_t i = 0; i < v.size(); ++i) {
        auto pool = parse_pool(v[i], kind, source, key + "[" + std::to_string(i) + "]");
        if (!pool) return pool.error();
        cfg.pools.push_back(std::move(*pool));
      }
    }
  } catch (const YAML::Exception& e) {
    return bad_input(source + ":" + std::to_string(e.mark.line + 1), "bad value: " + e.msg);
  }
  std::set<std::string> names;
  for (const auto& p : cfg.pools) {
    if (!names.insert(p.resource).second) {
      return bad_input(source + ":" + std::to_string(p.line),
                       "resource " + p.resource + " is defined twice");
    }
  }
  return cfg;
}

Result<std::vector<PluginResource>> plan_nic_resources(const HostModel& model,
                                                       const NicConfig& config,
                                                       const NicNodes& sysfs) {
  std::vector<PluginResource> out;
  std::map<std::string, std::string> taken;  // device id → resource
  for (const auto& pool : config.pools) {
    PluginResource r;
    r.name = pool.resource;
    r.kind = pool.kind;
    r.max_replicas = pool.kind == ResourceKind::shared_hca ? pool.max_pods : 1;
    for (size_t n = 0; n < model.nics.size(); ++n) {
      const Nic& nic = model.nics[n];
      if (pool.kind == ResourceKind::shared_hca) {
        bool any = std::any_of(pool.selectors.begin(), pool.selectors.end(),
                               [&](const NicSelector& s) { return selects_hca(s, nic, sysfs); });
        if (!any) continue;
        const std::string hca = nic.rdma_devices.front();
        if (auto [it, fresh] = taken.emplace(hca, r.name); !fresh) {
          return bad_input(config.source + ":" + std::to_string(pool.line),
                           hca + " is selected by " + it->second + " and by " + r.name,
                           "make the selectors of the two pools exclusive");
        }
        for (unsigned k = 0; k < pool.max_pods; ++k) {
          PluginDevice d;
          d.id = hca + "::" + std::to_string(k);
          d.visible_id = hca;
          d.nic = n;
          d.replica = k;
          d.numa_nodes = nic.pci.numa_nodes;
          r.devices.push_back(std::move(d));
        }
        continue;
      }
      if (!nic.pci.sriov) continue;
      const auto& vfs = nic.pci.sriov->vfs;
      for (size_t v = 0; v < vfs.size(); ++v) {
        bool any =
            std::any_of(pool.selectors.begin(), pool.selectors.end(),
                        [&](const NicSelector& s) { return selects_vf(s, nic, vfs[v], sysfs); });
        if (!any) continue;
        const std::string address = vfs[v].address.to_string();
        if (auto [it, fresh] = taken.emplace(address, r.name); !fresh) {
          return bad_input(config.source + ":" + std::to_string(pool.line),
                           "VF " + address + " is selected by " + it->second + " and by " + r.name,
                           "make the selectors of the two pools exclusive");
        }
        PluginDevice d;
        d.id = address;
        d.visible_id = address;
        d.nic = n;
        d.vf = v;
        if (!pool.exclude_topology) {
          if (vfs[v].numa_node) {
            d.numa_nodes = {*vfs[v].numa_node};
          } else {
            d.numa_nodes = nic.pci.numa_nodes;  // a VF hangs where its PF does
          }
        }
        r.devices.push_back(std::move(d));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> nic_device_hcas(const HostModel& model, const PluginDevice& device) {
  if (!device.nic || *device.nic >= model.nics.size()) return {};
  const Nic& nic = model.nics[*device.nic];
  if (!device.vf)
    return nic.rdma_devices.empty() ? std::vector<std::string>{}
                                    : std::vector<std::string>{nic.rdma_devices[0]};
  if (!nic.pci.sriov || *device.vf >= nic.pci.sriov->vfs.size()) return {};
  return nic.pci.sriov->vfs[*device.vf].rdma_devices;
}

std::vector<std::string> nic_device_netdevs(const HostModel& model, const PluginDevice& device) {
  if (!device.nic || *device.nic >= model.nics.size()) return {};
  const Nic& nic = model.nics[*device.nic];
  if (!device.vf) return nic.netdevs;
  if (!nic.pci.sriov || *device.vf >= nic.pci.sriov->vfs.size()) return {};
  return nic.pci.sriov->vfs[*device.vf].netdevs;
}

Result<std::vector<std::string>> choose_nic_allocation(const HostModel& model,
                                                       const PluginResource& resource,
                                                       const std::vector<size_t>& pod_gpus,
                                                       const std::vector<std::string>& available,
                                                       const std::vector<std::string>& must_include,
                                                       size_t size) {
  if (size > available.size()) {
    return bad_input("allocation size " + std::to_string(size),
                     "is more than the " + std::to_string(available.size()) +
                         " available devices of " + resource.name);
  }
  std::vector<const PluginDevice*> candidates;
  for (const auto& id : available) {
    const PluginDevice* d = resource.device(id);
    if (!d || !d->nic) return bad_input("device " + id, "is not a device of " + resource.name);
    candidates.push_back(d);
  }
  std::vector<std::string> out;
  for (const auto& id : must_include) {
    if (!contains(available, id))
      return bad_input("device " + id, "is to be included but is not available");
    if (!contains(out, id)) out.push_back(id);
  }
  // A shared HCA's replicas in use: those of the advertised ones that are not available.
  std::map<size_t, unsigned> free_replicas;
  for (const auto* d : candidates)
    ++free_replicas[*d->nic];
  // The rank of a NIC for the pod's GPUs: the best link level to any of them (PIX first), and
  // whether one of them counts it among its closest NICs.
  auto rank = [&](size_t nic_index) {
    int best = static_cast<int>(LinkLevel::sys) + 1;
    bool closest = false;
    const Nic& nic = model.nics[nic_index];
    auto j = model.links.index_of(nic.id);
    for (size_t g : pod_gpus) {
      if (g >= model.accelerators.size()) continue;
      const Accelerator& a = model.accelerators[g];
      if (contains(a.closest_nics, nic.id)) closest = true;
      auto i = model.links.index_of(a.id);
      if (i && j) best = std::min(best, static_cast<int>(model.links.at(*i, *j).level));
    }
    return std::pair<int, int>{best, closest ? 0 : 1};
  };
  std::vector<size_t> order(candidates.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const PluginDevice& a = *candidates[x];
    const PluginDevice& b = *candidates[y];
    if (!pod_gpus.empty()) {
      auto ra = rank(*a.nic), rb = rank(*b.nic);
      if (ra != rb) return ra < rb;
    }
    if (resource.kind == ResourceKind::shared_hca && *a.nic != *b.nic) {
      // The least used HCA first: the most of its replicas still free.
      if (free_replicas[*a.nic] != free_replicas[*b.nic])
        return free_replicas[*a.nic] > free_replicas[*b.nic];
    }
    auto key = [](const PluginDevice& d) {
      return std::tuple<size_t, size_t, unsigned>{*d.nic, d.vf.value_or(0), d.replica};
    };
    return key(a) < key(b);
  });
  // Distinct HCAs first: two replicas of one shared HCA give a pod nothing one does not.
  std::set<size_t> nics_taken;
  for (const auto& id : out) {
    if (const PluginDevice* d = resource.device(id)) nics_taken.insert(*d->nic);
  }
  for (bool distinct : {true, false}) {
    for (size_t i : order) {
      if (out.size() >= size) break;
      const PluginDevice& d = *candidates[i];
      if (contains(out, d.id)) continue;
      if (distinct && resource.kind == ResourceKind::shared_hca && nics_taken.count(*d.nic))
        continue;
      out.push_back(d.id);
      nics_taken.insert(*d.nic);
    }
  }
  return out;
}

}  // namespace polyaccel
