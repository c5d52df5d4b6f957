// Which PCI devices a request gets, given the host NUMA nodes its guest cells sit on: Nova's
// four PCI NUMA affinity policies, then polyaccel:rdma_nics with polyaccel:nic_affinity.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "place/fit.h"

namespace polyaccel::place {

// A function that goes to the guest only because it shares the IOMMU group of a chosen device
// (the second port of a dual-port NIC, a GPU's audio function).
struct GroupCompanion {
  std::string pci_bus_id;
  std::optional<size_t> device;  // index into HostView::devices when the fit knows it
  size_t with = 0;               // index into HostView::devices of the device it comes with
  unsigned group = 0;
};

struct DeviceChoice {
  bool ok = false;
  std::string reason;
  std::vector<std::pair<size_t, std::string>> chosen;  // index into HostView::devices, alias
  std::vector<GroupCompanion> companions;
  unsigned penalty = 0;  // 0 when every device is local and every NIC shares a switch

  // Free accelerators on `node` that this choice leaves: a guest that sits there without them
  // takes the CPUs their users will need.
  unsigned stranded_accelerators_on(const HostView& host, const HostUsage& usage,
                                    unsigned node) const;
};

// `nodes` are the host NUMA nodes of the guest's cells; empty for a guest without a NUMA
// topology, for which Nova ignores the PCI NUMA policies.
DeviceChoice choose_devices(const HostView& host, const HostUsage& usage, const Request& request,
                            const std::vector<unsigned>& nodes, Strategy strategy);

// Whether the host has fewer free devices matching an alias (or free RDMA NICs) than the
// request wants, whatever its NUMA nodes: then choose_devices refuses every set of nodes, and a
// search over sets can stop at its first refusal.
bool too_few_free_devices(const HostView& host, const HostUsage& usage, const Request& request);

LinkLevel link_level(NicAffinity affinity);

}  // namespace polyaccel::place
