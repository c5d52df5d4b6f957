// Fixture hosts and requests shared by the placement benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "discover/discover.h"
#include "place/fit.h"

namespace polyaccel::bench {

inline HostModel load_fixture(const std::string& file) {
  DiscoverOptions o;
  o.topology_xml =
      (std::filesystem::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies" / file).string();
  o.backends = BackendMode::off;
  auto m = discover_host(o);
  if (!m) throw std::runtime_error(m.error().message());
  return std::move(*m);
}

// The policy an operator would give the host: the first core of each NUMA node left to the host
// (cpu_shared_set), every other PU dedicated, and `reserved_memory_per_node` kept on each node.
inline place::HostPolicy first_core_to_host_policy(const HostModel& m,
                                                   std::uint64_t reserved_memory_per_node) {
  place::HostPolicy policy;
  CpuSet reserved;
  for (const auto& n : m.numa_nodes) {
    for (const auto& core : m.cores) {
      if (n.cpus.contains(core.pus)) {
        reserved |= core.pus;
        break;
      }
    }
  }
  policy.cpu_dedicated_set = m.pus - reserved;
  policy.cpu_shared_set = reserved;
  policy.reserved_memory_per_node = reserved_memory_per_node;
  return policy;
}

// A request in Nova's extra specs; "gpu" is an alias for any NVIDIA device.
inline place::Request make_request(unsigned vcpus, unsigned gib,
                                   std::vector<std::pair<std::string, std::string>> specs) {
  auto r = place::parse_request({vcpus, std::uint64_t{gib} << 30, std::move(specs)},
                                {*place::parse_pci_alias_option("gpu=10de")});
  if (!r) throw std::runtime_error(r.error().message());
  return std::move(*r);
}

// The host filled to about half with 4-vCPU pinned guests, so that a fit works on a used host.
inline place::HostUsage half_full(const place::HostView& view) {
  place::HostUsage usage = *place::usage_of(view, {});
  auto filler = make_request(4, 4, {{"hw:cpu_policy", "dedicated"}});
  unsigned pus = 0;
  for (const auto& c : view.cells)
    pus += c.pcpus.count();
  for (unsigned placed = 0; placed * 4 < pus / 2; ++placed) {
    auto f = place::fit(view, usage, filler);
    if (!f.fit) break;
    place::add_usage(view, f.placement, usage);
  }
  return usage;
}

}  // namespace polyaccel::bench
