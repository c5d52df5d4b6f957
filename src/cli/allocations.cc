// `polyaccel allocations`: what the allocation state holds, and the guests libvirt runs beside
// it, for people or as JSON.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/json.h"
#include "core/strings.h"
#include "place/allocation_store.h"
#include "place/libvirt_domains.h"

namespace polyaccel::cli {

std::string libvirt_status_dir(const GlobalOptions& g, const std::string& libvirt_domains) {
  if (libvirt_domains == "none") return {};
  if (!libvirt_domains.empty()) return libvirt_domains;
  const std::string root = filesystem_root(g.discover);
  if (root.empty()) return {};  // an hwloc XML capture: no /run to read
  return (std::filesystem::path(root) / place::kLibvirtStatusDir).string();
}

void add_libvirt_domains_option(CLI::App* command, std::string& libvirt_domains) {
  command
      ->add_option("--libvirt-domains", libvirt_domains,
                   "libvirt's status directory of running guests (default: /run/libvirt/qemu "
                   "under the host's root; none: count only the state file)")
      ->type_name("DIR|none");
}

namespace {

void print_allocation(const place::Placement& p, std::ostream& out) {
  std::vector<std::string> nodes, devices;
  for (const auto& c : p.cells)
    nodes.push_back(std::to_string(c.host_numa_node));
  for (const auto& d : p.devices)
    devices.push_back(d.id.empty() ? d.pci_bus_id : d.id + " " + d.pci_bus_id);
  out << "  " << printable(p.name) << (p.owner.empty() ? "" : " (" + p.owner + ", read-only)")
      << ": " << p.vcpus << " vCPUs (" << to_string(p.cpu_policy) << "), "
      << format_byte_size(p.memory_bytes) << ", NUMA "
      << (nodes.empty() ? std::string("any") : join(nodes, ",")) << ", PUs "
      << (p.held_pus.empty() ? std::string("-") : p.held_pus.to_list());
  if (!devices.empty()) out << ", " << join(devices, ", ");
  out << "\n";
}

}  // namespace

int run_allocations(const GlobalOptions& g, const std::string& state_path,
                    const std::string& libvirt_domains, std::ostream& out) {
  const std::string domains_dir = libvirt_status_dir(g, libvirt_domains);
  auto state = place::AllocationStore(state_path, domains_dir).load();
  if (!state) return fail(state.error());
  if (g.json) {
    nlohmann::json j;
    j["schema_version"] = kPlaceSchemaVersion;
    j["host"] = state->host;
    j["placements"] = nlohmann::json::array();
    for (const auto& p : state->all())
      j["placements"].push_back(place::to_json(p));
    out << json_text(j) << "\n";
    return kExitOk;
  }
  out << plural(state->placements.size(), "allocation") << " in " << state_path
      << (state->host.empty() ? "" : " (host " + state->host + ")") << "\n";
  for (const auto& p : state->placements)
    print_allocation(p, out);
  if (!state->domains.empty()) {
    out << state->domains.size() << " guests libvirt runs (" << domains_dir << ")\n";
    for (const auto& p : state->domains)
      print_allocation(p, out);
  }
  for (const auto& clash : state->name_clashes)
    out << "warning: " << clash << "\n";
  return kExitOk;
}

}  // namespace polyaccel::cli
