// Fits per second: one request on an empty and on a half-full host, on a 2-socket GPU server
// (XE8640: 8 NUMA nodes, 224 PUs) and on the 24-NUMA-node SGI machine (384 PUs).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "place_support.h"

namespace {

using namespace polyaccel;
using namespace polyaccel::place;

const char* kXe8640 = "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml";
const char* kSgi = "24socket-24numa-384pu-cpuonly-1xmlx4_sgi.xml";

HostView load(const std::string& file) {
  return *build_host_view(bench::load_fixture(file), {});
}

using bench::half_full;
using bench::make_request;

void run(benchmark::State& state, const char* file, const Request& r, bool used, Strategy s) {
  HostView view = load(file);
  HostUsage usage = used ? half_full(view) : *usage_of(view, {});
  for (auto _ : state) {
    auto f = fit(view, usage, r, s);
    if (!f.fit) {
      state.SkipWithError(f.reason.c_str());
      return;
    }
    benchmark::DoNotOptimize(f.placement.held_pus);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Xe8640_1cell_pinned(benchmark::State& s) {
  run(s, kXe8640, make_request(8, 16, {{"hw:cpu_policy", "dedicated"}}), s.range(0),
      Strategy::polyaccel);
}
void BM_Xe8640_2cell_2gpu_nic(benchmark::State& s) {
  run(s, kXe8640,
      make_request(16, 64,
                   {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", "2"},
                    {"pci_passthrough:alias", "gpu:2"},
                    {"hw:pci_numa_affinity_policy", "required"},
                    {"polyaccel:nic_affinity", "node"}}),
      s.range(0), Strategy::polyaccel);
}
void BM_Sgi_1cell_pinned(benchmark::State& s) {
  run(s, kSgi, make_request(8, 8, {{"hw:cpu_policy", "dedicated"}}), s.range(0),
      Strategy::polyaccel);
}
void BM_Sgi_4cell_pinned(benchmark::State& s) {
  run(s, kSgi, make_request(32, 32, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "4"}}),
      s.range(0), Strategy::polyaccel);
}
void BM_Sgi_4cell_pinned_first_fit(benchmark::State& s) {
  run(s, kSgi, make_request(32, 32, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "4"}}),
      s.range(0), Strategy::first_fit);
}

BENCHMARK(BM_Xe8640_1cell_pinned)->Arg(0)->Arg(1)->ArgName("half_full");
BENCHMARK(BM_Xe8640_2cell_2gpu_nic)->Arg(0)->Arg(1)->ArgName("half_full");
BENCHMARK(BM_Sgi_1cell_pinned)->Arg(0)->Arg(1)->ArgName("half_full");
BENCHMARK(BM_Sgi_4cell_pinned)->Arg(0)->Arg(1)->ArgName("half_full");
BENCHMARK(BM_Sgi_4cell_pinned_first_fit)->Arg(0)->Arg(1)->ArgName("half_full");

}  // namespace

BENCHMARK_MAIN();
