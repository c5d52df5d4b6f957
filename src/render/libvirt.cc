#include "render/libvirt.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "core/strings.h"

namespace polyaccel::render {

namespace {

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, value);
  return buf;
}

std::string pci_address_xml(unsigned domain, unsigned bus, unsigned slot, unsigned function,
                            bool typed) {
  return std::string("<address ") + (typed ? "type='pci' " : "") + "domain='" + hex(domain, 4) +
         "' bus='" + hex(bus, 2) + "' slot='" + hex(slot, 2) + "' function='" + hex(function, 1) +
         "'/>";
}

std::string cpus_text(const std::vector<unsigned>& vcpus) {
  CpuSet s;
  for (unsigned v : vcpus)
    s.set(v);
  return s.to_list();
}

void write_hostdev(const place::DevicePlacement& d, unsigned bus, unsigned slot,
                   std::ostringstream& x) {
  auto host = PciAddress::parse(d.pci_bus_id).value_or(PciAddress{});
  x << "    <hostdev mode='subsystem' type='pci' managed='yes'>\n"
    << "      <source>\n"
    << "        " << pci_address_xml(host.domain, host.bus, host.device, host.function, false)
    << "\n      </source>\n"
    << "      " << pci_address_xml(0, bus, slot, 0, true) << "\n"
    << "    </hostdev>\n";
}

using DevicesByCell = std::map<unsigned, std::vector<const place::DevicePlacement*>>;

// POWER (pseries) has no PCIe expander: each guest cell with devices gets its own PHB
// (spapr-pci-host-bridge) carrying the cell's NUMA node, the devices on its slots.
void write_pseries_devices(const place::Placement& p, const DevicesByCell& by_cell,
                           std::ostringstream& x) {
  x << "    <controller type='pci' index='0' model='pci-root'/>\n";
  unsigned next_index = 1;
  for (const auto& [cell, devices] : by_cell) {
    unsigned bus = 0;
    if (!p.cells.empty()) {
      bus = next_index++;
      x << "    <controller type='pci' index='" << bus << "' model='pci-root'>\n"
        << "      <model name='spapr-pci-host-bridge'/>\n"
        << "      <target index='" << bus << "'>\n"
        << "        <node>" << cell << "</node>\n"
        << "      </target>\n"
        << "    </controller>\n";
    }
    unsigned slot = 1;
    for (const auto* d : devices)
      write_hostdev(*d, bus, slot++, x);
  }
}

void write_devices(const place::Placement& p, const LibvirtOptions& o, std::ostringstream& x) {
  // Devices grouped by guest cell; without a NUMA topology they hang off the root directly.
  DevicesByCell by_cell;
  for (const auto& d : p.devices)
    by_cell[d.guest_cell].push_back(&d);
  if (o.machine == "pseries") {
    write_pseries_devices(p, by_cell, x);
    return;
  }
  x << "    <controller type='pci' index='0' model='pcie-root'/>\n";
  unsigned next_index = 1;
  std::map<unsigned, unsigned> expander_of;  // guest cell -> controller index
  if (!p.cells.empty()) {
    unsigned next_bus = 254;
    unsigned slot = 0x10;
    for (const auto& [cell, devices] : by_cell) {
      // The expander's own bus is busNr; the root ports below it take busNr+1..busNr+k.
      unsigned bus_nr = next_bus - static_cast<unsigned>(devices.size());
      next_bus = bus_nr - 1;
      expander_of[cell] = next_index;
      x << "    <controller type='pci' index='" << next_index++ << "' model='pcie-expander-bus'>\n"
        << "      <model name='pxb-pcie'/>\n"
        << "      <target busNr='" << bus_nr << "'>\n"
        << "        <node>" << cell << "</node>\n"
        << "      </target>\n"
        << "      " << pci_address_xml(0, 0, slot++, 0, true) << "\n"
        << "    </controller>\n";
    }
  }
  unsigned root_slot = 0x02;
  for (const auto& [cell, devices] : by_cell) {
    unsigned port_slot = 0;
    for (const auto* d : devices) {
      unsigned port = next_index++;
      bool on_expander = expander_of.count(cell) > 0;
      x << "    <controller type='pci' index='" << port << "' model='pcie-root-port'>\n"
        << "      "
        << pci_address_xml(0, on_expander ? expander_of[cell] : 0,
                           on_expander ? port_slot++ : root_slot++, 0, true)
        << "\n    </controller>\n";
      write_hostdev(*d, port, 0, x);
    }
  }
}

// 2 when every pinned pair of vCPUs (2k, 2k+1) sits on one host core, else 1.
unsigned guest_threads(const place::Placement& p, const std::vector<CpuSet>& cores) {
  std::map<unsigned, unsigned> pu_of;
  for (const auto& c : p.cells) {
    for (const auto& [vcpu, pu] : c.pinning)
      pu_of[vcpu] = pu;
  }
  if (cores.empty() || pu_of.size() != p.vcpus || p.vcpus % 2 != 0) return 1;
  for (unsigned v = 0; v < p.vcpus; v += 2) {
    bool together = false;
    for (const auto& core : cores)
      together = together || (core.test(pu_of[v]) && core.test(pu_of[v + 1]));
    if (!together) return 1;
  }
  return 2;
}

}  // namespace

std::string libvirt_domain_xml(const place::Placement& p, const LibvirtOptions& o) {
  std::ostringstream x;
  const std::uint64_t kib = p.memory_bytes / 1024;
  x << "<domain type='" << xml_escape(o.domain_type) << "'>\n"
    << "  <name>" << xml_escape(o.name) << "</name>\n"
    << "  <memory unit='KiB'>" << kib << "</memory>\n"
    << "  <vcpu placement='static'>" << p.vcpus << "</vcpu>\n";
  if (!p.cells.empty()) {
    x << "  <cputune>\n";
    std::map<unsigned, std::string> pins;
    for (const auto& c : p.cells) {
      for (const auto& [vcpu, pu] : c.pinning)
        pins[vcpu] = std::to_string(pu);
      for (unsigned v : c.shared_vcpus)
        pins[v] = c.shared_pus.to_list();
    }
    for (const auto& [vcpu, cpuset] : pins)
      x << "    <vcpupin vcpu='" << vcpu << "' cpuset='" << cpuset << "'/>\n";
    if (!p.emulator_pus.empty())
      x << "    <emulatorpin cpuset='" << p.emulator_pus.to_list() << "'/>\n";
    x << "  </cputune>\n";
    CpuSet host_nodes;
    for (const auto& c : p.cells)
      host_nodes.set(c.host_numa_node);
    x << "  <numatune>\n"
      << "    <memory mode='strict' nodeset='" << host_nodes.to_list() << "'/>\n";
    for (const auto& c : p.cells)
      x << "    <memnode cellid='" << c.guest_cell << "' mode='strict' nodeset='"
        << c.host_numa_node << "'/>\n";
    x << "  </numatune>\n";
    std::map<std::uint64_t, CpuSet> cells_by_page;  // huge page size -> guest cells
    for (const auto& c : p.cells) {
      if (c.page_size_bytes > 4096) cells_by_page[c.page_size_bytes].set(c.guest_cell);
    }
    if (!cells_by_page.empty()) {
      x << "  <memoryBacking>\n    <hugepages>\n";
      for (const auto& [size, cells] : cells_by_page)
        x << "      <page size='" << size / 1024 << "' unit='KiB' nodeset='" << cells.to_list()
          << "'/>\n";
      x << "    </hugepages>\n  </memoryBacking>\n";
    }
  }
  bool accelerator = false;
  for (const auto& d : p.devices)
    accelerator = accelerator || d.kind == "accelerator";
  const bool uefi = accelerator && o.arch == "x86_64";
  x << "  <os" << (uefi ? " firmware='efi'" : "") << ">\n    <type arch='" << xml_escape(o.arch)
    << "' machine='" << xml_escape(o.machine) << "'>hvm</type>\n  </os>\n";
  if (o.arch == "x86_64") x << "  <features>\n    <acpi/>\n  </features>\n";
  if (!p.cells.empty()) {
    x << "  <cpu mode='host-passthrough'>\n";
    const unsigned threads = guest_threads(p, o.host_cores);
    const unsigned cells = static_cast<unsigned>(p.cells.size());
    if (threads == 2 && p.vcpus % (2 * cells) == 0)
      x << "    <topology sockets='" << cells << "' dies='1' cores='" << p.vcpus / (2 * cells)
        << "' threads='2'/>\n";
    if (uefi) x << "    <maxphysaddr mode='passthrough'/>\n";
    x << "    <numa>\n";
    for (const auto& c : p.cells)
      x << "      <cell id='" << c.guest_cell << "' cpus='" << cpus_text(c.vcpus) << "' memory='"
        << c.memory_bytes / 1024 << "' unit='KiB'/>\n";
    x << "    </numa>\n  </cpu>\n";
  }
  x << "  <devices>\n";
  write_devices(p, o, x);
  x << "  </devices>\n</domain>\n";
  return x.str();
}

}  // namespace polyaccel::render
