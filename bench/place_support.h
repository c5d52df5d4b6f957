// Fixture hosts and requests shared by the placement benchmarks.
#pragma once

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

// A request in Nova's extra specs; "gpu" is an alias for any NVIDIA device.
inline place::Request make_request(unsigned vcpus, unsigned gib,
                                   std::vector<std::pair<std::string, std::string>> specs) {
  auto r = place::parse_request({vcpus, std::uint64_t{gib} << 30, std::move(specs)},
                                {*place::parse_pci_alias_option("gpu=10de")});
  if (!r) throw std::runtime_error(r.error().message());
  return std::move(*r);
}

}  // namespace polyaccel::bench
