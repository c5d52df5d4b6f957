#include "core/host_model_json.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace polyaccel {

using nlohmann::json;

namespace {
json link_json(const PciLink& l) {
  json j = json::object();
  j["bandwidth_gbps"] = l.bandwidth_gbps > 0 ? json(l.bandwidth_gbps) : json(nullptr);
  j["speed_gts"] = l.speed_gts > 0 ? json(l.speed_gts) : json(nullptr);
  j["width"] = l.width > 0 ? json(l.width) : json(nullptr);
  j["max_speed_gts"] = l.max_speed_gts > 0 ? json(l.max_speed_gts) : json(nullptr);
  j["max_width"] = l.max_width > 0 ? json(l.max_width) : json(nullptr);
  return j;
}

std::string hex4(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}
}  // namespace

json to_json(const PciDevice& d) {
  json j;
  j["vendor_id"] = hex4(d.vendor_id);
  j["device_id"] = hex4(d.device_id);
  j["subsystem_vendor_id"] = hex4(d.subsystem_vendor_id);
  j["subsystem_device_id"] = hex4(d.subsystem_device_id);
  j["class_id"] = hex4(d.class_id);
  j["vendor_name"] = d.vendor_name;
  j["device_name"] = d.device_name;
  j["link"] = link_json(d.link);
  j["host_bridge"] = d.host_bridge;
  j["root_port"] = d.root_port ? json(d.root_port->to_string()) : json(nullptr);
  json sw = json::array();
  for (const auto& s : d.switches) {
    sw.push_back({{"upstream_port", s.upstream_port.to_string()},
                  {"vendor_id", hex4(s.vendor_id)},
                  {"device_id", hex4(s.device_id)}});
  }
  j["switches"] = sw;
  j["local_cpus"] = d.local_cpus.to_vector();
  json os = json::array();
  for (const auto& o : d.os_devices) {
    json od = {{"name", o.name}, {"type", o.type}, {"subtype", o.subtype}};
    if (!o.node_guid.empty()) od["node_guid"] = o.node_guid;
    os.push_back(od);
  }
  j["os_devices"] = os;
  j["sriov"] = d.sriov ? to_json(*d.sriov) : json(nullptr);
  j["physical_function"] =
      d.physical_function ? json(d.physical_function->to_string()) : json(nullptr);
  j["iommu_group"] = d.iommu_group ? json(*d.iommu_group) : json(nullptr);
  return j;
}

json to_json(const Sriov& s) {
  json vfs = json::array();
  for (const auto& vf : s.vfs) {
    vfs.push_back({{"index", vf.index},
                   {"pci_bus_id", vf.address.to_string()},
                   {"numa_node", vf.numa_node ? json(*vf.numa_node) : json(nullptr)},
                   {"netdevs", vf.netdevs},
                   {"rdma_devices", vf.rdma_devices},
                   {"driver", vf.driver}});
  }
  return {{"total_vfs", s.total_vfs}, {"num_vfs", s.num_vfs}, {"vfs", vfs}};
}

namespace {
template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
}  // namespace

json to_json(const AcceleratorInventory& inv) {
  json mig = json::array();
  for (const auto& i : inv.mig_instances) {
    mig.push_back({{"gpu_instance_id", i.gpu_instance_id},
                   {"compute_instance_id", i.compute_instance_id},
                   {"profile_id", i.profile_id},
                   {"profile", i.profile_name},
                   {"start", i.placement_start},
                   {"size", i.placement_size},
                   {"uuid", i.uuid},
                   {"memory_bytes", i.memory_bytes}});
  }
  return {{"backend", inv.backend},
          {"index", inv.index},
          {"uuid", inv.uuid},
          {"serial", inv.serial},
          {"product_name", inv.product_name},
          {"memory_total_bytes", inv.memory_total_bytes},
          {"driver_version", inv.driver_version},
          {"compute_capability", inv.compute_capability},
          {"gfx_version", inv.gfx_version},
          {"mig_enabled", opt(inv.mig_enabled)},
          {"mig_pending", opt(inv.mig_pending)},
          {"mig_instances", mig},
          {"compute_partition", inv.compute_partition},
          {"memory_partition", inv.memory_partition},
          {"power_limit_watts", opt(inv.power_limit_watts)},
          {"ecc_enabled", opt(inv.ecc_enabled)},
          {"ecc_pending", opt(inv.ecc_pending)},
          {"persistence_mode", opt(inv.persistence_mode)}};
}

json to_json(const HostModel& m) {
  json j;
  j["schema_version"] = m.schema_version;
  j["source"] = m.source;
  j["hostname"] = m.hostname;
  j["architecture"] = m.architecture;
  j["page_size_bytes"] = m.page_size;
  j["cores"] = m.cores.size();
  j["pus"] = m.pus.count();
  j["cpus"] = m.pus.to_vector();

  json pkgs = json::array();
  for (const auto& p : m.packages) {
    json cores = json::array();
    for (const auto& c : m.cores) {
      if (c.package == p.os_index && p.cpus.contains(c.pus)) {
        nlohmann::json core = {{"os_index", c.os_index}, {"pus", c.pus.to_vector()}};
        if (c.l3_cache) core["l3_cache"] = *c.l3_cache;
        cores.push_back(std::move(core));
      }
    }
    pkgs.push_back({{"os_index", p.os_index},
                    {"model", p.model},
                    {"vendor", p.vendor},
                    {"family", p.family ? json(*p.family) : json(nullptr)},
                    {"model_number", p.model_number ? json(*p.model_number) : json(nullptr)},
                    {"cpus", p.cpus.to_vector()},
                    {"numa_nodes", p.numa_nodes},
                    {"cores", cores}});
  }
  j["packages"] = pkgs;

  json nodes = json::array();
  for (const auto& n : m.numa_nodes) {
    json hp = json::array();
    for (const auto& h : n.hugepages) {
      hp.push_back({{"size_bytes", h.size_bytes},
                    {"total", h.total},
                    {"free", h.free ? json(*h.free) : json(nullptr)}});
    }
    nodes.push_back({{"os_index", n.os_index},
                     {"memory_bytes", n.memory_bytes},
                     {"cpus", n.cpus.to_vector()},
                     {"local_cpus", n.local_cpus.to_vector()},
                     {"kind", to_string(n.kind)},
                     {"subtype", n.subtype},
                     {"hugepages", hp}});
  }
  j["numa_nodes"] = nodes;

  if (m.numa_distances) {
    j["numa_distances"] = {{"name", m.numa_distances->name},
                           {"os_index", m.numa_distances->os_index},
                           {"values", m.numa_distances->values}};
  } else {
    j["numa_distances"] = nullptr;
  }

  json accs = json::array();
  for (const auto& a : m.accelerators) {
    json peers = json::array();
    for (const auto& p : a.peer_links) {
      peers.push_back({{"pci_bus_id", p.peer.to_string()}, {"link", p.link.label()}});
    }
    accs.push_back({{"id", a.id},
                    {"vendor", to_string(a.vendor)},
                    {"pci_bus_id", a.pci.address.to_string()},
                    {"name", a.name},
                    {"numa_nodes", a.pci.numa_nodes},
                    {"partitions", a.partitions},
                    {"memory_numa_nodes", a.memory_numa_nodes},
                    {"closest_nics", a.closest_nics},
                    {"peer_links", peers},
                    {"inventory", a.inventory ? to_json(*a.inventory) : json(nullptr)},
                    {"pci", to_json(a.pci)}});
  }
  j["accelerators"] = accs;

  json nics = json::array();
  for (const auto& n : m.nics) {
    nics.push_back({{"id", n.id},
                    {"pci_bus_id", n.pci.address.to_string()},
                    {"name", n.name},
                    {"netdevs", n.netdevs},
                    {"rdma_devices", n.rdma_devices},
                    {"fabric", n.fabric},
                    {"numa_nodes", n.pci.numa_nodes},
                    {"pci", to_json(n.pci)}});
  }
  j["nics"] = nics;

  json nvme = json::array();
  for (const auto& n : m.nvme) {
    nvme.push_back({{"id", n.id},
                    {"pci_bus_id", n.pci.address.to_string()},
                    {"block_devices", n.block_devices},
                    {"numa_nodes", n.pci.numa_nodes},
                    {"pci", to_json(n.pci)}});
  }
  j["nvme"] = nvme;

  json rows = json::array();
  for (const auto& r : m.links.cells) {
    json row = json::array();
    for (const auto& c : r)
      row.push_back(c.label());
    rows.push_back(row);
  }
  j["links"] = {{"devices", m.links.devices}, {"matrix", rows}};
  json groups = json::array();
  for (const auto& g : m.iommu_groups) {
    json members = json::array();
    for (const auto& member : g.members) {
      char class_code[16];
      std::snprintf(class_code, sizeof class_code, "0x%06x", member.class_code);
      members.push_back({{"pci_bus_id", member.address.to_string()},
                         {"class", class_code},
                         {"vendor_id", hex4(member.vendor_id)},
                         {"device_id", hex4(member.device_id)},
                         {"bridge", member.is_bridge()}});
    }
    groups.push_back({{"id", g.id}, {"members", members}});
  }
  j["iommu_groups"] = groups;
  json backends = json::array();
  for (const auto& b : m.accelerator_backends) {
    backends.push_back({{"name", b.name}, {"present", b.present}, {"detail", b.detail}});
  }
  j["accelerator_backends"] = backends;
  return j;
}

}  // namespace polyaccel
