// What a fit decides: for each guest NUMA cell its host NUMA node, the vCPU -> PU pinning, the
// memory and page size; the emulator thread PUs and the PCI devices. The allocation store keeps
// one Placement per name; the fit reads them back as the host's usage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpuset.h"
#include "core/error.h"
#include "place/request.h"

namespace polyaccel::place {

struct CellPlacement {
  unsigned guest_cell = 0;
  unsigned host_numa_node = 0;
  std::vector<unsigned> vcpus;                         // the guest cell's vCPUs, ascending
  std::vector<std::pair<unsigned, unsigned>> pinning;  // pinned vCPU -> PU
  std::vector<unsigned> shared_vcpus;                  // vCPUs that float ...
  CpuSet shared_pus;                                   // ... over these PUs
  std::uint64_t memory_bytes = 0;
  // The page size backing the cell; 0 when the request named none (Nova records no page size
  // and the memory may be overcommitted).
  std::uint64_t page_size_bytes = 0;
};

struct DevicePlacement {
  std::string pci_bus_id;
  std::optional<unsigned> numa_node;  // absent when the device reports none
  std::string kind;                   // "accelerator" or "nic"
  std::string id;                     // the HostModel's id: "gpu1", "nic4"
  std::string alias;                  // the PCI alias, or "rdma_nic" for polyaccel:rdma_nics
  unsigned guest_cell = 0;            // the guest cell whose host node holds it (else 0)
};

struct Placement {
  std::string name;
  // Empty for polyaccel's own placements (the allocation state). "libvirt" for a guest libvirt
  // runs that polyaccel did not record (place/libvirt_domains.h): counted, never written or
  // released, and counted leniently (usage_of), since it is a fact of the host, not our record.
  std::string owner;
  unsigned vcpus = 0;
  std::uint64_t memory_bytes = 0;
  CpuPolicy cpu_policy = CpuPolicy::shared;
  // Empty for a guest without a NUMA topology: its vCPUs and memory are counted host-wide.
  std::vector<CellPlacement> cells;
  CpuSet emulator_pus;  // where QEMU's emulator threads run
  // Every PU the guest holds alone: pinned vCPUs, an isolated emulator PU and, for
  // hw:cpu_thread_policy=isolate on a host without cpu_dedicated_set, the pinned PUs' siblings.
  CpuSet held_pus;
  std::vector<DevicePlacement> devices;
};

nlohmann::json to_json(const Placement& placement);
// Refuses anything that is not a placement this version wrote (names the field).
Result<Placement> placement_from_json(const nlohmann::json& j);

}  // namespace polyaccel::place
