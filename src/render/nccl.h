// The NCCL topology file (NCCL_TOPO_FILE): the XML NCCL itself dumps with NCCL_TOPO_DUMP_FILE,
// built from the HostModel: one <cpu> per NUMA node that holds a GPU or an RDMA NIC, the real
// PCIe switches as nested <pci> elements (NCCL keys a switch by its upstream port), <gpu> with its
// NVLinks, and <nic><net/></nic> per RDMA device (the ports of a multi-function NIC merged, as
// NCCL does). Attributes the model does not know (sm without a vendor library, NIC speed, GDR
// support) are left out: NCCL fills absent attributes from its own detection, never overwrites
// present ones, so a guess would be worse than nothing.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/host_model.h"

namespace polyaccel {

// What a guest sees of the host: the functions passed through, each under its guest address and
// on a guest NUMA node, and the guest CPUs (vCPU numbers) of each guest node.
struct NcclGuestView {
  std::map<PciAddress, PciAddress> addresses;  // host function -> guest address
  std::map<PciAddress, unsigned> numa_nodes;   // host function -> guest NUMA node
  std::map<unsigned, CpuSet> cpus;             // guest NUMA node -> guest CPUs
};

struct NcclTopoOptions {
  // gdr="1"/"0" on every gpu and net element when known (nvidia_peermem or dma-buf present).
  std::optional<bool> gpu_direct;
  // A guest's file: only the passed-through functions, under guest addresses and NUMA nodes,
  // below the host's real switches. Switch bus ids become ffff:ff:NN.0, as hypervisor topology
  // files write them, so that they never clash with a guest device.
  std::optional<NcclGuestView> guest;
};

std::string render_nccl_topology(const HostModel& model, const NcclTopoOptions& options = {});

// "ffffffff,0000ffff": the cpumask format of sysfs and NCCL's affinity attribute.
std::string cpu_mask_hex(const CpuSet& cpus);

// The link_speed/link_width NCCL reads ("16.0 GT/s PCIe", 16), from sysfs's maximum when known,
// else from hwloc's bandwidth (the x16 or narrower generation giving that bandwidth).
struct NcclPciLink {
  std::string speed;  // empty when unknown
  unsigned width = 0;
};
NcclPciLink nccl_pci_link(const PciLink& link);

}  // namespace polyaccel
