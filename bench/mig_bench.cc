// MIG planner latency: an 8-GPU H200 node, fresh and with instances in place (the smallest-change
// search), and the first plan of a geometry (layout enumeration) apart from later ones.
#include <benchmark/benchmark.h>

#include "share/mig_planner.h"
#include "share/mig_profiles.h"

namespace {

using namespace polyaccel;

std::vector<MigGpuInput> node(bool with_instances) {
  const MigGeometry* g = find_mig_geometry("H200");
  std::vector<MigGpuInput> gpus;
  for (unsigned i = 0; i < 8; ++i) {
    MigGpuInput in{i, g, true, 0x233510DE, {}};
    if (with_instances) {
      for (unsigned s = 0; s < 7; ++s) {  // 7 x 1g.18gb, one busy per GPU
        MigPlacedInstance m;
        m.gpu_instance_id = 7 + s;
        m.profile_id = g->profile("1g.18gb")->profile_id;
        m.profile = "1g.18gb";
        m.start = s;
        m.size = 1;
        if (s == i % 7) m.pids = {1000 + i};
        in.current.push_back(m);
      }
    }
    gpus.push_back(in);
  }
  return gpus;
}

void BM_PlanSpreadFresh8Gpus(benchmark::State& state) {
  auto gpus = node(false);
  MigRequest request = {{"1g.18gb", 20}, {"2g.35gb", 4}, {"3g.71gb", 5}};
  for (auto _ : state) {
    auto plan = plan_mig_spread(gpus, request, false);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanSpreadFresh8Gpus)->Unit(benchmark::kMicrosecond);

void BM_PlanSpreadSmallestChange8Gpus(benchmark::State& state) {
  auto gpus = node(true);
  MigRequest request = {{"1g.18gb", 32}, {"3g.71gb", 6}};
  for (auto _ : state) {
    auto plan = plan_mig_spread(gpus, request, false);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanSpreadSmallestChange8Gpus)->Unit(benchmark::kMicrosecond);

void BM_PlanPerGpuBalanced8Gpus(benchmark::State& state) {
  auto gpus = node(true);
  std::vector<MigGpuTarget> targets(
      8, MigGpuTarget{true, {{"1g.18gb", 2}, {"2g.35gb", 1}, {"3g.71gb", 1}}});
  for (auto _ : state) {
    auto plan = plan_mig_per_gpu(gpus, targets, false);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanPerGpuBalanced8Gpus)->Unit(benchmark::kMicrosecond);

// A geometry not seen before: enumerates its layouts (a new model name each time).
void BM_FirstPlanOfAGeometry(benchmark::State& state) {
  MigGeometry g = *find_mig_geometry("B200");
  unsigned n = 0;
  for (auto _ : state) {
    g.model = "bench-" + std::to_string(n++);
    bool fit = mig_counts_fit(g, std::vector<unsigned>(g.profiles.size(), 0));
    benchmark::DoNotOptimize(fit);
  }
}
BENCHMARK(BM_FirstPlanOfAGeometry)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
