// `polyaccel topo`: the HostModel for people (as nvidia-smi topo -m) or as JSON.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/host_model_json.h"
#include "core/json.h"
#include "core/strings.h"

namespace polyaccel::cli {

int fail(const Error& error) {
  std::cerr << "polyaccel: " << error.message() << "\n";
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

void print_topology(const HostModel& m, std::ostream& printed) {
  // Names come from captures and the hardware: control characters and stray bytes are escaped
  // line by line, so that a capture cannot write to the terminal.
  std::ostringstream out;
  struct Flush {
    std::ostringstream& text;
    std::ostream& to;
    ~Flush() { to << printable_lines(text.str()); }
  } flush{out, printed};
  out << "Host " << (m.hostname.empty() ? "(unnamed)" : m.hostname) << ", "
      << (m.architecture.empty() ? "unknown architecture" : m.architecture) << ", page size "
      << format_byte_size(m.page_size) << " (" << m.source << ")\n";
  out << m.packages.size() << " packages, " << m.cores.size() << " cores, " << m.pus.count()
      << " PUs, " << m.numa_nodes.size() << " NUMA nodes, " << m.accelerators.size()
      << " accelerators, " << m.nics.size() << " NICs\n";
  for (const auto& p : m.packages) {
    out << "  package " << p.os_index << ": " << (p.model.empty() ? "?" : p.model) << ", CPUs "
        << p.cpus.to_list() << ", NUMA " << node_list(p.numa_nodes) << "\n";
  }

  out << "\nNUMA nodes\n";
  out << "  " << std::left << std::setw(6) << "node" << std::setw(12) << "kind" << std::setw(24)
      << "CPUs" << std::setw(12) << "memory"
      << "hugepages\n";
  for (const auto& n : m.numa_nodes) {
    out << "  " << std::setw(6) << n.os_index << std::setw(12) << to_string(n.kind) << std::setw(24)
        << (n.cpus.empty() ? "-" : n.cpus.to_list()) << std::setw(12)
        << format_byte_size(n.memory_bytes) << hugepage_text(n) << "\n";
  }

  if (!m.accelerators.empty()) {
    out << "\nAccelerators\n";
    for (const auto& a : m.accelerators) {
      out << "  " << std::setw(6) << a.id << std::setw(14) << a.pci.address.to_string()
          << std::setw(12) << to_string(a.vendor) << a.name;
      if (a.partitions > 1) out << " (" << a.partitions << " partitions)";
      out << "  NUMA " << node_list(a.pci.numa_nodes) << "  PCIe " << pcie_text(a.pci.link);
      if (!a.closest_nics.empty()) out << "  nearest NIC " << join(a.closest_nics, ",");
      out << "\n";
      if (a.inventory) print_inventory(*a.inventory, out);
      print_sriov(a.pci, out);
    }
  }
  if (!m.nics.empty()) {
    out << "\nNICs\n";
    for (const auto& n : m.nics) {
      std::vector<std::string> devs = n.netdevs;
      devs.insert(devs.end(), n.rdma_devices.begin(), n.rdma_devices.end());
      out << "  " << std::setw(6) << n.id << std::setw(14) << n.pci.address.to_string()
          << std::setw(12) << (n.fabric.empty() ? "-" : n.fabric) << n.name << "  ["
          << join(devs, ",") << "]  NUMA " << node_list(n.pci.numa_nodes) << "  PCIe "
          << pcie_text(n.pci.link) << "\n";
      print_sriov(n.pci, out);
    }
  }

  if (!m.accelerator_backends.empty()) {
    out << "\nVendor libraries\n";
    for (const auto& b : m.accelerator_backends)
      out << "  " << b.name << ": " << b.detail << "\n";
  }

  if (m.links.devices.empty()) return;
  out << "\nLinks\n";
  size_t w = 6;
  for (const auto& d : m.links.devices)
    w = std::max(w, d.size() + 2);
  for (const auto& row : m.links.cells) {
    for (const auto& c : row)
      w = std::max(w, c.label().size() + 2);
  }
  out << "  " << std::setw(static_cast<int>(w)) << "";
  for (const auto& d : m.links.devices)
    out << std::setw(static_cast<int>(w)) << d;
  out << std::setw(24) << "CPU Affinity"
      << "NUMA Affinity\n";
  const size_t na = m.accelerators.size();
  for (size_t i = 0; i < m.links.devices.size(); ++i) {
    out << "  " << std::setw(static_cast<int>(w)) << m.links.devices[i];
    for (const auto& c : m.links.cells[i])
      out << std::setw(static_cast<int>(w)) << c.label();
    const PciDevice& pci = i < na ? m.accelerators[i].pci : m.nics[i - na].pci;
    out << std::setw(24) << (pci.local_cpus.empty() ? "N/A" : pci.local_cpus.to_list())
        << node_list(pci.numa_nodes) << "\n";
  }
  out << "\nLegend:\n"
         "  X    = self\n"
         "  SYS  = traverses PCIe and the interconnect between NUMA nodes (QPI/UPI, xGMI, SNC)\n"
         "  NODE = traverses PCIe and the links between host bridges within a NUMA node\n"
         "  PHB  = traverses PCIe and a host bridge (typically the CPU)\n"
         "  PXB  = traverses multiple PCIe switches (without a host bridge)\n"
         "  PIX  = traverses at most a single PCIe switch\n"
         "  NV#  = a bonded set of # NVLinks; XGMI = an AMD Infinity Fabric link\n";
  if (!m.nics.empty()) {
    out << "\nNIC Legend:\n";
    for (const auto& n : m.nics) {
      std::string name = !n.rdma_devices.empty() ? n.rdma_devices.front()
                         : !n.netdevs.empty()    ? n.netdevs.front()
                                                 : n.pci.address.to_string();
      out << "  " << n.id << ": " << name << "\n";
    }
  }
}

int run_topo(const GlobalOptions& options, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  if (options.json) {
    out << json_text(to_json(*model)) << "\n";
  } else {
    print_topology(*model, out);
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
