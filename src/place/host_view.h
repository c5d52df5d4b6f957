// The host as the fit sees it: NUMA cells with their configured CPUs, SMT sibling sets, memory
// and page pools, and the PCI devices that can be passed through. Built once from a HostModel
// and the host's policy (Nova's cpu_dedicated_set / cpu_shared_set and allocation ratios), then
// reused for every fit; the usage comes from the allocations at each call.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cpuset.h"
#include "core/error.h"
#include "core/host_model.h"
#include "place/placement.h"

namespace polyaccel::place {

struct HostPolicy {
  // Nova's [compute] cpu_dedicated_set and cpu_shared_set. With neither, the host is "legacy":
  // every PU may be pinned and every PU may run shared vCPUs.
  std::optional<CpuSet> cpu_dedicated_set;
  std::optional<CpuSet> cpu_shared_set;
  double cpu_allocation_ratio = 16.0;          // Nova's initial_cpu_allocation_ratio
  double ram_allocation_ratio = 1.0;           // no RAM overcommit on an accelerator host
  std::uint64_t reserved_memory_per_node = 0;  // kept for the host on every NUMA node
};

struct PagePool {
  std::uint64_t size_bytes = 0;
  std::uint64_t total = 0;  // pages
};

struct HostCell {
  unsigned node = 0;  // NUMA node OS index
  std::optional<unsigned> socket;
  CpuSet pcpus;               // may be pinned
  CpuSet shared_cpus;         // may run shared vCPUs
  std::vector<CpuSet> cores;  // SMT sibling sets cut down to pcpus, ordered by first PU
  unsigned threads_per_core = 1;
  std::uint64_t memory_bytes = 0;  // after the host reserve
  std::vector<PagePool> pools;     // [0] is the base page (4 KiB), then huge pages ascending
};

struct HostDevice {
  std::string id;  // "gpu0", "nic3"
  std::string pci_bus_id;
  bool accelerator = false;  // else a NIC
  bool rdma = false;
  PciDevice pci;
  std::optional<unsigned> numa_node;  // the DRAM node it is local to
  std::optional<unsigned> socket;
  std::string switch_key;            // upstream port of its top PCIe switch, "" when none
  std::optional<size_t> link_index;  // row in HostModel::links
};

struct HostView {
  std::string hostname;
  bool legacy = true;  // no cpu_dedicated_set and no cpu_shared_set
  HostPolicy policy;
  std::vector<HostCell> cells;  // NUMA nodes with CPUs, by OS index
  std::vector<HostDevice> devices;
  LinkMatrix links;
  // NUMA distance (the SLIT, 10 = local) between cells, by index into cells. Where the host gave
  // no distances: 10 local, 20 remote, as Linux assumes without a SLIT.
  std::vector<std::vector<unsigned>> cell_distances;
  // Per cell: the other cells, nearest first (by the shorter way round where the SLIT is not
  // symmetric), ties by index, each with that distance. The multi-cell fit bounds its search
  // with it.
  struct NearCell {
    size_t cell;
    unsigned distance;  // the shorter way round
  };
  std::vector<std::vector<NearCell>> cells_by_distance;
  // The host's IOMMU groups (HostModel::iommu_groups): a device goes to a guest with every
  // endpoint of its group.
  std::vector<IommuGroup> iommu_groups;

  const HostCell* cell(unsigned node) const;
  unsigned distance(size_t a, size_t b) const { return cell_distances[a][b]; }
  const HostDevice* device(const std::string& pci_bus_id) const;
  const IommuGroup* iommu_group_of(const std::string& pci_bus_id) const;
  // The endpoints that share a device's IOMMU group, itself and bridges left out, by address.
  std::vector<PciAddress> group_companions(const PciDevice& pci) const;
  // Link level between two devices of the view (by index into devices).
  LinkLevel link(size_t a, size_t b) const;
};

// Refuses a policy that names PUs the host lacks, or the same PU in both sets.
Result<HostView> build_host_view(const HostModel& model, const HostPolicy& policy);

// What the allocations use on each cell; an allocation that names a node, PU or device this host
// lacks, or that double-books one, is refused (a foreign or broken state).
struct CellUsage {
  CpuSet held;                            // PUs held alone
  unsigned cpu_usage = 0;                 // shared vCPUs
  std::uint64_t memory_used = 0;          // every guest with a cell here
  std::vector<std::uint64_t> pages_used;  // per pool of the cell
};

struct HostUsage {
  std::vector<CellUsage> cells;   // parallel to HostView::cells
  std::set<std::string> devices;  // PCI bus ids in use
  unsigned floating_vcpus = 0;    // guests without a NUMA topology
  std::uint64_t floating_memory = 0;
};

Result<HostUsage> usage_of(const HostView& view, const std::vector<Placement>& allocations);

// Adds one placement, already known to belong to this host, to a usage.
void add_usage(const HostView& view, const Placement& placement, HostUsage& usage);

}  // namespace polyaccel::place
