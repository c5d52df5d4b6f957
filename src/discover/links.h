// The link matrix between accelerators and NICs, with nvidia-smi topo -m's legend, computed as
// NCCL sees PCIe switches (../shared/reference/link-legend.md). Pure functions of the model.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/host_model.h"

namespace polyaccel {

// The PCIe level between two devices: X, PIX, PXB, PHB, NODE or SYS.
LinkLevel pcie_level(const HostModel& model, const PciDevice& a, const PciDevice& b);

// Accelerators then NICs; NV#/XGMI where an accelerator lists the other among its peer links.
LinkMatrix compute_link_matrix(const HostModel& model);

// The DRAM node a device is local to (hwloc may give a DRAM and an HBM node together).
std::optional<unsigned> dram_node(const HostModel& model, const PciDevice& pci);

// Fills Accelerator::closest_nics from model.links: the RDMA-capable NICs (all NICs when none
// is) at the best level; among NICs at one level (SYS: none on the accelerator's node) those at
// the smallest NUMA distance (the SLIT), so the XE8640's GPU on node 7 gets node 5's HCA on its
// own socket, not one across the socket link. The one rule for topo, run, Allocate and audit.
void assign_closest_nics(HostModel& model);

// The NICs NCCL should use for an accelerator: its closest NICs while they are within its NUMA
// node or on its socket; across sockets NCCL's own choice is as good, so none.
std::vector<const Nic*> nccl_nics(const HostModel& model, const Accelerator& accelerator);

// Whether an EFA device supports RDMA read, which FI_EFA_USE_DEVICE_RDMA=1 needs (from its PCI
// device id: EFA gen 2 and 3 do, gen 1 does not).
bool efa_supports_rdma_read(const Nic& nic);

// What NCCL and its network plugins read to use `nics`, in a stable order: InfiniBand/RoCE
// NCCL_IB_HCA (exact names) and UCX_NET_DEVICES; EFA (aws-ofi-nccl) and Slingshot (the OFI
// plugin on the cxi provider) FI_PROVIDER, with FI_EFA_USE_DEVICE_RDMA=1 when every EFA among them
// supports RDMA read (the setting is process-wide). A netdev goes to NCCL_SOCKET_IFNAME only when
// `usable_netdev` says it is up with an address.
std::vector<std::pair<std::string, std::string>> nccl_network_env(
    const std::vector<const Nic*>& nics,
    const std::function<bool(const std::string&)>& usable_netdev);

}  // namespace polyaccel
