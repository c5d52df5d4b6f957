// libvirt domain XML for a placement: <cputune> (vcpupin, emulatorpin), <numatune> (a memnode per
// guest cell), <memoryBacking><hugepages> with each page size's guest cells, <cpu><numa> cells
// and a <hostdev> per device, each behind a root port on a pcie-expander-bus that carries its
// guest cell's NUMA node, so the guest sees every GPU and NIC on its own NUMA node (on POWER,
// machine "pseries", a spapr-pci-host-bridge per guest cell does the same).
#pragma once

#include <string>

#include "place/placement.h"

namespace polyaccel::render {

struct LibvirtOptions {
  std::string name = "guest";
  std::string domain_type = "kvm";
  std::string arch = "x86_64";
  std::string machine = "q35";  // "pseries" on ppc64le, "virt" on aarch64
};

// A whole domain (enough for virt-xml-validate and `virsh define`), the placement's parts in it.
std::string libvirt_domain_xml(const place::Placement& placement, const LibvirtOptions& options);

}  // namespace polyaccel::render
