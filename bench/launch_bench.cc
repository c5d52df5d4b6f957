// The decisions of `polyaccel run` and `nccl-topo` on captured machines: one local rank's plan,
// --gpus N's choice, the NCCL topology file, and a run reservation through the placement engine
// and the allocation store (a real file under $TMPDIR, flock and atomic write included).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "discover/discover.h"
#include "launch/plan.h"
#include "launch/reservation.h"
#include "render/nccl.h"

namespace {

polyaccel::HostModel load(const std::string& file) {
  polyaccel::DiscoverOptions opts;
  opts.topology_xml =
      (std::filesystem::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies" / file).string();
  auto m = polyaccel::discover_host(opts);
  return m ? *m : polyaccel::HostModel{};
}

const char* kXe8640 = "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml";
const char* kG4dn = "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml";

void rank_plan(benchmark::State& state, const char* file) {
  auto m = load(file);
  polyaccel::LaunchRequest r;
  r.argv = {"python", "train.py"};
  r.local_world_size = 8;
  unsigned rank = 0;
  for (auto _ : state) {
    r.local_rank = rank++ % 8;
    auto p = polyaccel::plan_launch(m, r);
    benchmark::DoNotOptimize(p.ok());
  }
}

void choose_gpus(benchmark::State& state, const char* file) {
  auto m = load(file);
  std::vector<const polyaccel::Accelerator*> all;
  for (const auto& a : m.accelerators)
    all.push_back(&a);
  for (auto _ : state)
    benchmark::DoNotOptimize(polyaccel::choose_gpus(m, all, 4).size());
}

void nccl_topology(benchmark::State& state, const char* file) {
  auto m = load(file);
  for (auto _ : state)
    benchmark::DoNotOptimize(polyaccel::render_nccl_topology(m).size());
}

void reserve_and_release(benchmark::State& state) {
  auto m = load(kXe8640);
  auto dir =
      std::filesystem::temp_directory_path() / ("polyaccel-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "allocations.json";
  auto me = polyaccel::process_identity(::getpid());
  polyaccel::RunReservationRequest r;
  r.name = "bench";
  r.gpus = 1;
  r.pus_per_gpu = polyaccel::pus_per_gpu(m, m.pus);
  r.gpu_vendor_id = 0x10de;
  for (auto _ : state) {
    auto res = polyaccel::reserve_for_run(m, path, r, *me);
    if (!res) {
      state.SkipWithError(res.error().message().c_str());
      break;
    }
    (void)polyaccel::release_run(path, r.name, *me);
  }
  std::filesystem::remove_all(dir);
}

BENCHMARK_CAPTURE(rank_plan, xe8640, kXe8640);
BENCHMARK_CAPTURE(rank_plan, g4dn, kG4dn);
BENCHMARK_CAPTURE(choose_gpus, g4dn_4_of_8, kG4dn);
BENCHMARK_CAPTURE(nccl_topology, xe8640, kXe8640);
BENCHMARK(reserve_and_release)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
