// libvirt domain XML for a placement: <cputune> (vcpupin, emulatorpin), <numatune> (a memnode per
// guest cell), <memoryBacking><hugepages> with each page size's guest cells, <cpu><numa> cells
// and a <hostdev> per device, each behind a root port on a pcie-expander-bus that carries its
// guest cell's NUMA node, so the guest sees every GPU and NIC on its own NUMA node (on POWER,
// machine "pseries", a spapr-pci-host-bridge per guest cell does the same).
#pragma once

#include <string>
#include <vector>

#include "core/cpuset.h"

#include "place/placement.h"

namespace polyaccel::render {

struct LibvirtOptions {
  std::string name = "guest";
  std::string domain_type = "kvm";
  std::string arch = "x86_64";
  std::string machine = "q35";  // "pseries" on ppc64le, "virt" on aarch64
  // The host's SMT sibling sets (HostModel::cores' PUs): where every pair of vCPUs 2k, 2k+1 is
  // pinned to one core, the guest CPU topology says threads='2' so its scheduler sees the pairs.
  std::vector<CpuSet> host_cores;
};

// A whole domain (enough for virt-xml-validate and `virsh define`), the placement's parts in it.
// With an accelerator passed through on x86_64: UEFI firmware and the host's physical address
// width (maxphysaddr passthrough), so OVMF sizes a 64-bit MMIO window that holds H100-class BARs.
std::string libvirt_domain_xml(const place::Placement& placement, const LibvirtOptions& options);

}  // namespace polyaccel::render
