// Fixture hosts and request building shared by the place and render tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "discover/discover.h"
#include "place/fit.h"
#include "place/request.h"
#include "support/test_support.h"

namespace polyaccel::place::testing {

using polyaccel::testing::kXe8640;
inline const char* kJureca = "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml";
inline const char* kSgi = "24socket-24numa-384pu-cpuonly-1xmlx4_sgi.xml";
inline const char* kG4dn = "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml";
inline const char* kQuartz = "2socket-2numa-36core-cpuonly-omnipath_xeon-e5-2695v4.xml";

// Discovery of a fixture, once per file.
inline const HostModel& fixture(const std::string& file) {
  static std::map<std::string, HostModel> cache;
  auto it = cache.find(file);
  if (it == cache.end()) {
    DiscoverOptions o;
    o.topology_xml = polyaccel::testing::topology_fixture(file).string();
    o.backends = BackendMode::off;
    auto m = discover_host(o);
    if (!m) throw std::runtime_error(m.error().message());
    it = cache.emplace(file, std::move(*m)).first;
  }
  return it->second;
}

inline HostView view_of(const HostModel& model, const HostPolicy& policy = {}) {
  auto v = build_host_view(model, policy);
  if (!v) throw std::runtime_error(v.error().message());
  return std::move(*v);
}

inline Request request(unsigned vcpus, std::uint64_t memory_gib,
                       std::vector<std::pair<std::string, std::string>> specs,
                       const std::vector<PciAlias>& aliases = {}) {
  auto r = parse_request({vcpus, memory_gib << 30, std::move(specs)}, aliases);
  if (!r) throw std::runtime_error(r.error().message());
  return std::move(*r);
}

inline FitResult fit_on(const HostView& view, const Request& r,
                        const std::vector<Placement>& allocations = {},
                        Strategy strategy = Strategy::polyaccel) {
  auto f = fit(view, allocations, r, strategy);
  if (!f) throw std::runtime_error(f.error().message());
  return std::move(*f);
}

// The PUs of a fixture NUMA node.
inline CpuSet node_pus(const HostModel& m, unsigned node) {
  return m.numa_node(node)->cpus;
}

// The core (sibling set) a PU belongs to.
inline CpuSet core_of(const HostModel& m, unsigned pu) {
  for (const auto& c : m.cores) {
    if (c.pus.test(pu)) return c.pus;
  }
  return {};
}

}  // namespace polyaccel::place::testing
