// `polyaccel topo`: the HostModel for people (as nvidia-smi topo -m) or as JSON.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "core/byte_size.h"
#include "core/file_io.h"
#include "core/host_model_json.h"
#include "core/json.h"
#include "core/strings.h"

namespace polyaccel::cli {

int fail(const Error& error) {
  // A value from the config file is blamed on its file and line, whichever layer refused it.
  std::cerr << "polyaccel: " << with_config_file_input(error).message() << "\n";
  return kExitError;
}

namespace {

std::string node_list(const std::vector<unsigned>& nodes) {
  if (nodes.empty()) return "N/A";
  CpuSet s;
  for (unsigned n : nodes)
    s.set(n);
  return s.to_list();
}

std::string hugepage_text(const NumaNode& n) {
  std::string out;
  for (const auto& h : n.hugepages) {
    if (!out.empty()) out += ", ";
    out += format_byte_size(h.size_bytes) + " x" + std::to_string(h.total);
    if (h.free) out += " (" + std::to_string(*h.free) + " free)";
  }
  return out.empty() ? "-" : out;
}

std::string pcie_text(const PciLink& l) {
  std::ostringstream s;
  if (l.speed_gts > 0 && l.width > 0) {
    s << l.speed_gts << " GT/s x" << l.width;
    if (l.max_speed_gts > 0 && (l.max_speed_gts > l.speed_gts || l.max_width > l.width)) {
      s << " (max " << l.max_speed_gts << " GT/s x" << l.max_width << ")";
    }
  } else if (l.bandwidth_gbps > 0) {
    s << std::fixed << std::setprecision(1) << l.bandwidth_gbps << " GB/s";
  } else {
    s << "-";
  }
  return s.str();
}

void print_inventory(const AcceleratorInventory& inv, std::ostream& out) {
  out << "        " << inv.backend << " #" << inv.index;
  if (!inv.uuid.empty()) out << "  " << inv.uuid;
  if (!inv.serial.empty()) out << "  serial " << inv.serial;
  if (inv.memory_total_bytes) out << "  " << format_byte_size(inv.memory_total_bytes);
  if (!inv.driver_version.empty()) out << "  driver " << inv.driver_version;
  if (!inv.compute_capability.empty()) out << "  CC " << inv.compute_capability;
  if (!inv.gfx_version.empty()) out << "  " << inv.gfx_version;
  if (!inv.compute_partition.empty()) out << "  " << inv.compute_partition;
  if (!inv.memory_partition.empty()) out << "/" << inv.memory_partition;
  if (inv.mig_enabled) {
    out << "  MIG " << (*inv.mig_enabled ? "on" : "off");
    if (inv.mig_pending && *inv.mig_pending != *inv.mig_enabled) {
      out << " (" << (*inv.mig_pending ? "on" : "off") << " after reset)";
    }
    if (!inv.mig_instances.empty()) out << ", " << inv.mig_instances.size() << " instances";
  }
  if (inv.power_limit_watts) out << "  power limit " << *inv.power_limit_watts << " W";
  if (inv.ecc_enabled) out << "  ECC " << (*inv.ecc_enabled ? "on" : "off");
  out << "\n";
}

void print_sriov(const PciDevice& d, std::ostream& out) {
  if (d.physical_function)
    out << "        SR-IOV VF of " << d.physical_function->to_string() << "\n";
  if (!d.sriov) return;
  out << "        SR-IOV: " << d.sriov->num_vfs << " of " << d.sriov->total_vfs << " VFs enabled\n";
  for (const auto& vf : d.sriov->vfs) {
    std::vector<std::string> devs = vf.netdevs;
    devs.insert(devs.end(), vf.rdma_devices.begin(), vf.rdma_devices.end());
    out << "          vf" << vf.index << "  " << vf.address.to_string() << "  NUMA "
        << (vf.numa_node ? std::to_string(*vf.numa_node) : "N/A") << "  [" << join(devs, ",") << "]"
        << (vf.driver.empty() ? "" : "  driver " + vf.driver) << "\n";
  }
}

}  // namespace

namespace {

// MemFree of each node from sysfs (numactl --hardware's "free"); empty for an XML capture.
std::map<unsigned, std::uint64_t> free_memory(const HostModel& m, const std::string& root) {
  std::map<unsigned, std::uint64_t> out;
  if (root.empty()) return out;
  for (const auto& n : m.numa_nodes) {
    auto text = read_text_file(std::filesystem::path(root) / "sys/devices/system/node" /
                               ("node" + std::to_string(n.os_index)) / "meminfo");
    if (!text) continue;
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      auto at = line.find("MemFree:");
      if (at == std::string::npos) continue;
      std::istringstream value(line.substr(at + 8));
      std::uint64_t kib = 0;
      if (value >> kib && kib < (std::uint64_t{1} << 50)) out[n.os_index] = kib * 1024;
    }
  }
  return out;
}

Tone link_tone(const Link& l) {
  switch (l.level) {
    case LinkLevel::self:
      return Tone::plain;
    case LinkLevel::nvlink:
    case LinkLevel::xgmi:
    case LinkLevel::pix:
      return Tone::good;
    case LinkLevel::pxb:
    case LinkLevel::phb:
      return Tone::note;
    case LinkLevel::node:
      return Tone::warn;
    case LinkLevel::sys:
      return Tone::bad;
  }
  return Tone::plain;
}

// NVIDIA GPUs that usually have NVLink (SXM/HGX parts) but a capture without NVML's data.
bool nvlink_missing(const HostModel& m) {
  size_t nvidia = 0;
  bool any_peer = false;
  for (const auto& a : m.accelerators) {
    if (a.vendor != Vendor::nvidia) continue;
    ++nvidia;
    any_peer = any_peer || !a.peer_links.empty();
  }
  return nvidia > 1 && !any_peer;
}

// -v: where a device hangs, top down (host bridge, root port, switches).
std::string pci_path(const HostModel& m, const PciDevice& d) {
  std::string out = "        path: ";
  if (d.host_bridge >= 0 && static_cast<size_t>(d.host_bridge) < m.host_bridges.size()) {
    const HostBridge& hb = m.host_bridges[static_cast<size_t>(d.host_bridge)];
    char range[32];
    std::snprintf(range, sizeof range, "%04x:[%02x-%02x]", hb.domain, hb.bus_first, hb.bus_last);
    out += std::string("host bridge ") + range + " (NUMA " + node_list(hb.numa_nodes) + ")";
  } else {
    out += "host bridge unknown";
  }
  if (d.root_port) out += ", root port " + d.root_port->to_string();
  for (const auto& s : d.switches)
    out += ", switch " + s.upstream_port.to_string();
  return out + "\n";
}

std::string device_name(const Nic& n) {
  return !n.rdma_devices.empty() ? n.rdma_devices.front()
         : !n.netdevs.empty()    ? n.netdevs.front()
                                 : n.pci.address.to_string();
}

}  // namespace

void print_topology(const HostModel& m, const std::string& root, std::ostream& out,
                    const OutputStyle& style) {
  const std::map<unsigned, std::uint64_t> free = free_memory(m, root);
  // Names come from captures and the hardware: escaped, so that a capture cannot write control
  // characters to the terminal (the tables escape their cells).
  std::string host_line =
      "Host " + (m.hostname.empty() ? "(unnamed)" : printable(m.hostname)) + ", " +
      (m.architecture.empty() ? "unknown architecture" : printable(m.architecture)) +
      ", page size " + format_byte_size(m.page_size) + " (" + m.source + ")";
  for (const auto& line : wrap_words(host_line, style.width))
    out << line << "\n";
  out << plural(m.packages.size(), "package") << ", " << plural(m.cores.size(), "core") << ", "
      << plural(m.pus.count(), "PU") << ", " << plural(m.numa_nodes.size(), "NUMA node") << ", "
      << plural(m.accelerators.size(), "accelerator") << ", " << plural(m.nics.size(), "NIC")
      << "\n";
  Table packages;
  for (const auto& p : m.packages) {
    packages.add_row({"package " + std::to_string(p.os_index) + ":",
                      p.model.empty() ? "?" : squeeze_blanks(p.model), "CPUs " + p.cpus.to_list(),
                      "NUMA " + node_list(p.numa_nodes)});
  }
  packages.set_wrap_column(1);
  packages.print(out, style);

  out << "\nNUMA nodes\n";
  Table nodes;
  nodes.add_row({"node", "kind", "CPUs", "memory", "free", "hugepages"});
  for (const auto& n : m.numa_nodes) {
    auto f = free.find(n.os_index);
    nodes.add_row({std::to_string(n.os_index), to_string(n.kind),
                   n.cpus.empty() ? "-" : n.cpus.to_list(), format_byte_size(n.memory_bytes),
                   f == free.end() ? "-" : format_byte_size(f->second), hugepage_text(n)});
  }
  nodes.set_wrap_column(2);
  nodes.print(out, style);
  if (m.numa_distances && !m.numa_distances->os_index.empty()) {
    // numactl --hardware's table: the relative distance (SLIT), 10 for a node to itself.
    const auto& d = *m.numa_distances;
    out << "\nNUMA distances (" << d.name << ")\n";
    Table distances;
    std::vector<std::string> head{"node"};
    for (unsigned i : d.os_index)
      head.push_back(std::to_string(i));
    distances.add_row(head);
    for (size_t i = 0; i < d.os_index.size() && i < d.values.size(); ++i) {
      std::vector<std::string> row{std::to_string(d.os_index[i]) + ":"};
      for (auto v : d.values[i])
        row.push_back(std::to_string(v));
      distances.add_row(row);
    }
    distances.print(out, style);
  }

  if (!m.accelerators.empty()) {
    out << "\nAccelerators\n";
    Table accelerators;
    for (const auto& a : m.accelerators) {
      std::string name = a.name;
      if (a.partitions > 1) name += " (" + std::to_string(a.partitions) + " partitions)";
      accelerators.add_row(
          {a.id, a.pci.address.to_string(), to_string(a.vendor), name,
           "NUMA " + node_list(a.pci.numa_nodes), "PCIe " + pcie_text(a.pci.link),
           a.closest_nics.empty() ? "" : "nearest NIC " + join(a.closest_nics, ",")});
      std::ostringstream details;
      if (style.verbose) details << pci_path(m, a.pci);
      if (a.inventory) print_inventory(*a.inventory, details);
      print_sriov(a.pci, details);
      accelerators.add_details(details.str());
    }
    accelerators.set_wrap_column(3);
    accelerators.print(out, style);
  }
  if (!m.nics.empty()) {
    out << "\nNICs\n";
    Table nics;
    for (const auto& n : m.nics) {
      std::vector<std::string> devs = n.netdevs;
      devs.insert(devs.end(), n.rdma_devices.begin(), n.rdma_devices.end());
      nics.add_row({n.id, n.pci.address.to_string(), n.fabric.empty() ? "-" : n.fabric, n.name,
                    "[" + join(devs, ",") + "]", "NUMA " + node_list(n.pci.numa_nodes),
                    "PCIe " + pcie_text(n.pci.link)});
      std::ostringstream details;
      if (style.verbose) details << pci_path(m, n.pci);
      print_sriov(n.pci, details);
      nics.add_details(details.str());
    }
    nics.set_wrap_column(3);
    nics.print(out, style);
  }

  if (!m.accelerator_backends.empty()) {
    out << "\nVendor libraries\n";
    for (const auto& b : m.accelerator_backends)
      out << "  " << b.name << ": " << b.detail << "\n";
  }

  if (m.links.devices.empty()) return;
  out << "\nLinks\n";
  Table matrix;
  std::vector<std::string> head{""};
  for (const auto& d : m.links.devices)
    head.push_back(d);
  head.insert(head.end(), {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"});
  matrix.add_row(head);
  const size_t na = m.accelerators.size();
  for (size_t i = 0; i < m.links.devices.size(); ++i) {
    std::vector<std::string> row{m.links.devices[i]};
    for (const auto& c : m.links.cells[i])
      row.push_back(paint(style, c.label(), link_tone(c)));
    const PciDevice& pci = i < na ? m.accelerators[i].pci : m.nics[i - na].pci;
    row.push_back(pci.local_cpus.empty() ? "N/A" : pci.local_cpus.to_list());
    row.push_back(node_list(pci.numa_nodes));
    row.push_back(i < na && !m.accelerators[i].memory_numa_nodes.empty()
                      ? node_list(m.accelerators[i].memory_numa_nodes)
                      : "N/A");
    matrix.add_row(row);
  }
  matrix.set_split_columns(true);
  matrix.print(out, style);
  if (nvlink_missing(m)) {
    out << "\n";
    for (const auto& line : wrap_words(
             "Note: no NVLink data for these NVIDIA GPUs in " + m.source +
                 ". hwloc records NVLink only when its NVML plugin ran at capture time, so the "
                 "levels above are PCIe paths; SXM/HGX boards connect their GPUs by NVLink (read "
                 "them on the live host, where NVML answers).",
             style.width ? style.width : 100))
      out << line << "\n";
  }
  out << "\nLegend:\n"
         "  X    = self\n"
         "  SYS  = traverses PCIe and the link between NUMA nodes (QPI/UPI, xGMI, SNC)\n"
         "  NODE = traverses PCIe and the links between host bridges within a NUMA node\n"
         "  PHB  = traverses PCIe and a host bridge (typically the CPU)\n"
         "  PXB  = traverses multiple PCIe switches (without a host bridge)\n"
         "  PIX  = traverses at most a single PCIe switch\n"
         "  NV#  = a bonded set of # NVLinks; XGMI = an AMD Infinity Fabric link\n";
  if (!m.nics.empty()) {
    out << "\nNIC Legend:\n";
    for (const auto& n : m.nics)
      out << "  " << n.id << ": " << printable(device_name(n)) << "\n";
  }
}

namespace {

// nvidia-smi topo -C: one device's CPUs, NUMA node and link to every other device.
int print_device(const HostModel& m, const std::string& id, bool json, std::ostream& out) {
  auto index = m.links.index_of(id);
  if (!index) {
    // A PCI address or an RDMA/net device name for the same device.
    if (const Accelerator* a = m.accelerator(id)) index = m.links.index_of(a->id);
    if (const Nic* n = m.nic(id); !index && n) index = m.links.index_of(n->id);
  }
  if (!index) {
    return fail(bad_input("-C " + id, "no such accelerator or NIC on this host",
                          "ids: " + join(m.links.devices, ", ")));
  }
  size_t i = *index;
  const size_t na = m.accelerators.size();
  const PciDevice& pci = i < na ? m.accelerators[i].pci : m.nics[i - na].pci;
  if (json) {
    nlohmann::json links = nlohmann::json::object();
    for (size_t j = 0; j < m.links.devices.size(); ++j) {
      if (j != i) links[m.links.devices[j]] = m.links.at(i, j).label();
    }
    nlohmann::json doc = {{"schema_version", 1},
                          {"id", m.links.devices[i]},
                          {"pci_bus_id", pci.address.to_string()},
                          {"cpu_affinity", pci.local_cpus.to_list()},
                          {"numa_affinity", pci.numa_nodes},
                          {"links", links}};
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  out << m.links.devices[i] << " (" << pci.address.to_string() << ")\n";
  out << "  CPU Affinity:  " << (pci.local_cpus.empty() ? "N/A" : pci.local_cpus.to_list()) << "\n";
  out << "  NUMA Affinity: " << node_list(pci.numa_nodes) << "\n";
  for (size_t j = 0; j < m.links.devices.size(); ++j) {
    if (j == i) continue;
    out << "  " << m.links.devices[j] << ": " << m.links.at(i, j).label() << "\n";
  }
  return kExitOk;
}

}  // namespace

int run_topo(const GlobalOptions& options, const TopoOptions& topo, std::ostream& out) {
  if (topo.of == "xml") {
    auto xml = export_hwloc_xml(options.discover);
    if (!xml) return fail(xml.error());
    out << *xml;
    return kExitOk;
  }
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  if (!topo.device.empty()) return print_device(*model, topo.device, options.json, out);
  if (options.json) {
    out << json_text(to_json(*model)) << "\n";
  } else {
    print_topology(*model, filesystem_root(options.discover), out, options.style);
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
