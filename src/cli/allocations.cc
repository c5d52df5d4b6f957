// `polyaccel allocations`: what the allocation state holds, for people or as JSON.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/json.h"
#include "core/strings.h"
#include "place/allocation_store.h"

namespace polyaccel::cli {

int run_allocations(const GlobalOptions& g, const std::string& state_path, std::ostream& out) {
  auto state = place::AllocationStore(state_path).load();
  if (!state) return fail(state.error());
  if (g.json) {
    nlohmann::json j;
    j["schema_version"] = kPlaceSchemaVersion;
    j["host"] = state->host;
    j["placements"] = nlohmann::json::array();
    for (const auto& p : state->placements)
      j["placements"].push_back(place::to_json(p));
    out << json_text(j) << "\n";
    return kExitOk;
  }
  out << plural(state->placements.size(), "allocation") << " in " << state_path
      << (state->host.empty() ? "" : " (host " + state->host + ")") << "\n";
  for (const auto& p : state->placements) {
    std::vector<std::string> nodes, devices;
    for (const auto& c : p.cells)
      nodes.push_back(std::to_string(c.host_numa_node));
    for (const auto& d : p.devices)
      devices.push_back(d.id + " " + d.pci_bus_id);
    out << "  " << p.name << ": " << p.vcpus << " vCPUs (" << to_string(p.cpu_policy) << "), "
        << format_byte_size(p.memory_bytes) << ", NUMA "
        << (nodes.empty() ? std::string("any") : join(nodes, ",")) << ", PUs "
        << (p.held_pus.empty() ? std::string("-") : p.held_pus.to_list());
    if (!devices.empty()) out << ", " << join(devices, ", ");
    out << "\n";
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
