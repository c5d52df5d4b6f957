// Accelerator flavors that tile a host with nothing stranded: for 1, 2, 4, 8... accelerators
// per guest, the vCPUs, memory and huge pages per NUMA node left after a host reserve, split so
// that every guest gets whole cores and its accelerators' NUMA nodes. Each flavor is checked by
// placing guests with the fit on the empty host until it refuses. Printed as `openstack flavor
// create` commands with their nova.conf [pci]/[compute] settings, and as JSON.
#pragma once

#include <cstdint>
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
  // Page size for the guests when the host has no huge pages reserved yet.
  std::uint64_t page_size_bytes = std::uint64_t{1} << 30;
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
  std::string accelerator_name;
  unsigned accelerator_count = 0;
  place::HostPolicy policy;  // cpu_dedicated_set / cpu_shared_set after the reserve
  std::uint64_t page_size_bytes = 0;
  std::vector<std::pair<unsigned, std::uint64_t>> hugepages_per_node;  // node -> pages to reserve
  std::vector<Flavor> flavors;
  std::vector<std::string> notes;
};

inline constexpr int kFlavorsSchemaVersion = 1;

// bad_input when the host has no accelerator to build flavors for.
Result<FlavorPlan> plan_flavors(const HostModel& model, const FlavorOptions& options);
std::string openstack_commands(const FlavorPlan& plan);
nlohmann::json to_json(const FlavorPlan& plan);

}  // namespace polyaccel::render
