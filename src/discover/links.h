// The link matrix between accelerators and NICs, with nvidia-smi topo -m's legend, computed as
// NCCL sees PCIe switches (../shared/reference/link-legend.md). Pure functions of the model.
#pragma once

#include "core/host_model.h"

namespace polyaccel {

// The PCIe level between two devices: X, PIX, PXB, PHB, NODE or SYS.
LinkLevel pcie_level(const HostModel& model, const PciDevice& a, const PciDevice& b);

// Accelerators then NICs; NV#/XGMI where an accelerator lists the other among its peer links.
LinkMatrix compute_link_matrix(const HostModel& model);

// Fills Accelerator::closest_nics from model.links: the RDMA-capable NICs (all NICs when none
// is) at the best level.
void assign_closest_nics(HostModel& model);

}  // namespace polyaccel
