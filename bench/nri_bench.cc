// The NRI plugin's shared pool (issue 39): how the time to answer a claimed container's creation
// and removal grows with the containers sharing the pool, each of which is moved (a cpuset
// update in the answer) when the pool shrinks and again when it grows. The 224-CPU node of the
// XE8640; the runtime's own time to apply the updates is not in it.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "nri/cpu_policy.h"

namespace polyaccel {
namespace {

void shared_pool_update(benchmark::State& state) {
  const auto shared = static_cast<std::size_t>(state.range(0));
  nri::CpuPolicy policy(*CpuSet::parse_list("0-223"), *CpuSet::parse_list("0-7"));
  std::vector<nri::ContainerView> running;
  for (std::size_t i = 0; i < shared; ++i)
    running.push_back({"shared-" + std::to_string(i),
                       "ns/pod-" + std::to_string(i) + "/c",
                       {"PATH=/usr/bin", "HOME=/"},
                       "0-223"});
  std::vector<std::string> problems;
  policy.synchronize(running, problems);
  const nri::ContainerView claimed{
      "claimed", "ns/gpu/c", {"POLYACCEL_CPUS_uid=28-41,140-153", "POLYACCEL_MEMS_uid=1"}, ""};
  std::size_t moved = 0;
  for (auto _ : state) {
    auto created = policy.create(claimed, problems);
    auto removed = policy.remove(claimed.id);
    moved = created.updates.size() + removed.size();
    benchmark::DoNotOptimize(moved);
  }
  state.counters["moved_per_claim"] = static_cast<double>(moved);
  if (!problems.empty()) state.SkipWithError(problems.front().c_str());
}

BENCHMARK(shared_pool_update)->Arg(10)->Arg(100)->Arg(500)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace polyaccel

BENCHMARK_MAIN();
