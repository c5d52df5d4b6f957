// Accelerator flavors that tile a host with nothing stranded: for 1, 2, 4, 8... accelerators
// per guest, the vCPUs, memory and huge pages per NUMA node left after a host reserve, split so
// that every guest gets whole cores and its accelerators' NUMA nodes. Each flavor is checked by
// placing guests with the fit on the empty host until it refuses. Printed as `openstack flavor
// create` commands with their nova.conf [pci]/[compute] settings, and as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/host_model.h"
#include "place/host_view.h"
#include "place/pci_alias.h"

namespace polyaccel::render {

struct FlavorOptions {
  unsigned reserve_cores_per_node = 1;  // left to the host and emulator threads (cpu_shared_set)
  std::uint64_t reserve_memory_per_node = std::uint64_t{8} << 30;
  // Page size for the guests; unset: the largest size the host already reserves, else 1 GiB.
  std::optional<std::uint64_t> page_size_bytes;
};

struct Flavor {
  std::string name;
  unsigned accelerators = 0;
  unsigned vcpus = 0;
  std::uint64_t memory_bytes = 0;
  unsigned numa_nodes = 0;
  std::vector<std::pair<std::string, std::string>> extra_specs;
  unsigned guests_per_host = 0;  // how many the fit placed on the empty host
  unsigned free_pus_after = 0;   // dedicated PUs left once they are all placed
};

struct FlavorPlan {
  place::PciAlias alias;
  // The RDMA NIC given with the accelerators (polyaccel:nic_affinity), when the host has one: Nova
  // passes a NIC only through an alias in pci_passthrough:alias. device_type is Nova's:
  // "type-PF" for an SR-IOV capable function, else "type-PCI".
  std::optional<place::PciAlias> nic_alias;
  std::string nic_name;
  std::string nic_device_type;
  std::string accelerator_name;
  unsigned accelerator_count = 0;
  place::HostPolicy policy;  // cpu_dedicated_set / cpu_shared_set after the reserve
  std::uint64_t page_size_bytes = 0;
  // node -> pages of page_size_bytes the flavors need reserved (the host may have fewer now)
  std::vector<std::pair<unsigned, std::uint64_t>> hugepages_per_node;
  std::vector<Flavor> flavors;
  std::vector<std::string> notes;
};

inline constexpr int kFlavorsSchemaVersion = 1;

// The PCI alias for an accelerator model: its name in lower case, vendor words dropped, other
// characters turned to hyphens ("Tesla V100-SXM2-16GB" -> "tesla-v100-sxm2-16gb").
std::string alias_name(const Accelerator& accelerator);
std::string alias_name(const std::string& name, const PciDevice& pci);

// bad_input when the options cannot be met on this host: a reserve that leaves a NUMA node with
// CPUs no core or no memory for guests, a page size that does not divide what is left.
Status check_flavor_options(const HostModel& model, const FlavorOptions& options);

// Flavors from the host's capacity (CPUs and memory after the reserve): the huge pages they need
// are a remedy (hugepages_per_node, audit --emit), not a limit. bad_input when the host has no
// accelerator to build flavors for, or as check_flavor_options.
Result<FlavorPlan> plan_flavors(const HostModel& model, const FlavorOptions& options);
std::string openstack_commands(const FlavorPlan& plan);
nlohmann::json to_json(const FlavorPlan& plan);

}  // namespace polyaccel::render
