// The device plugin's hot paths: GetPreferredAllocation's choice and Allocate's response, on
// real captured machines (the XE8640, g4dn.metal's eight T4s) and on larger hosts built from
// them, whole GPUs and time-slicing replicas.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "discover/discover.h"
#include "kube/allocate.h"
#include "kube/preferred_allocation.h"

namespace {

using namespace polyaccel;

HostModel load(const std::string& file, int copies) {
  DiscoverOptions opts;
  opts.topology_xml =
      (std::filesystem::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies" / file).string();
  auto m = discover_host(opts);
  if (!m) return {};
  HostModel out = *m;
  for (int c = 1; c < copies; ++c) {
    for (auto a : m->accelerators) {
      a.id = "gpu" + std::to_string(out.accelerators.size());
      out.accelerators.push_back(a);
    }
  }
  return out;
}

void preferred(benchmark::State& state, const std::string& file, int copies, int replicas) {
  HostModel m = load(file, copies);
  auto topo = AllocationTopology::from_model(m);
  std::vector<DeviceSlot> slots;
  PreferredAllocationRequest req;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    for (int r = 0; r < replicas; ++r) {
      slots.push_back({m.accelerators[i].id + "::" + std::to_string(r), i});
      req.available.push_back(slots.back().id);
    }
  }
  req.size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    auto r = choose_preferred_allocation(topo, slots, req);
    if (!r) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r->data());
  }
  state.counters["accelerators"] = static_cast<double>(m.accelerators.size());
}

void allocate(benchmark::State& state) {
  HostModel m = load("2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml", 1);
  PluginResource r;
  r.name = "nvidia.com/gpu";
  r.vendor = Vendor::nvidia;
  std::vector<std::string> ids;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    std::string uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
    PluginDevice d;
    d.id = uuid;
    d.accelerator = i;
    d.visible_id = uuid;
    d.numa_nodes = m.accelerators[i].pci.numa_nodes;
    r.devices.push_back(std::move(d));
    ids.push_back(uuid);
  }
  auto nodes = read_device_nodes(m, "");
  for (auto _ : state) {
    auto a = compute_allocation(m, r, nodes, ids, {});
    benchmark::DoNotOptimize(a.ok());
  }
}

}  // namespace

BENCHMARK_CAPTURE(preferred, xe8640_whole,
                  "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml", 1, 1)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4);
BENCHMARK_CAPTURE(preferred, g4dn_whole, "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml", 1,
                  1)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8);
BENCHMARK_CAPTURE(preferred, g4dn_x2_whole, "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml",
                  2, 1)
    ->Arg(4)
    ->Arg(8);
BENCHMARK_CAPTURE(preferred, g4dn_x4_greedy, "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml",
                  4, 1)
    ->Arg(16);
BENCHMARK_CAPTURE(preferred, g4dn_10_replicas,
                  "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml", 1, 10)
    ->Arg(1)
    ->Arg(4);
BENCHMARK(allocate);
BENCHMARK_MAIN();
