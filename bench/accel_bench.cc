// What one sample of an AMD GPU costs in the backends themselves: amd-smi and ROCm SMI read
// through their production loaders from our test builds of the vendor libraries (tests/inject),
// whose answers cost next to nothing, so the numbers are the backends' own work (the calls,
// the metrics buffer, the bad page table). On a real GPU the library's sysfs reads come on top.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "discover/accel/backends.h"

namespace {

const std::vector<std::string> kBusIds = {"0000:05:00.0", "0000:26:00.0", "0000:46:00.0",
                                          "0000:65:00.0", "0000:85:00.0", "0000:a6:00.0",
                                          "0000:c6:00.0", "0000:e5:00.0"};

std::unique_ptr<polyaccel::AcceleratorBackend> open_amd_smi() {
  ::setenv("POLYACCEL_AMD_SMI_LIB", AMD_SMI_INJECT_LIB, 1);
  ::setenv("AMD_SMI_INJECT_SCENARIO",
           (std::filesystem::path(AMD_SMI_SCENARIO_DIR) / "mi300x-8x.json").c_str(), 1);
  auto backend = polyaccel::make_amd_smi_backend();
  if (!backend->open()) return nullptr;
  return backend;
}

std::unique_ptr<polyaccel::AcceleratorBackend> open_rocm_smi() {
  ::setenv("POLYACCEL_ROCM_SMI_LIB", ROCM_SMI_INJECT_LIB, 1);
  ::setenv("ROCM_SMI_INJECT_SCENARIO",
           (std::filesystem::path(ROCM_SMI_SCENARIO_DIR) / "mi300x-8x.json").c_str(), 1);
  auto backend = polyaccel::make_rocm_smi_backend();
  if (!backend->open()) return nullptr;
  return backend;
}

void sample_one(benchmark::State& state, std::unique_ptr<polyaccel::AcceleratorBackend> backend) {
  if (!backend) {
    state.SkipWithError("the backend did not open");
    return;
  }
  for (auto _ : state) {
    auto s = backend->sample("0000:05:00.0");
    benchmark::DoNotOptimize(s.power_watts);
  }
}

void sample_eight(benchmark::State& state, std::unique_ptr<polyaccel::AcceleratorBackend> backend) {
  if (!backend) {
    state.SkipWithError("the backend did not open");
    return;
  }
  for (auto _ : state) {
    for (const auto& id : kBusIds) {
      auto s = backend->sample(id);
      benchmark::DoNotOptimize(s.power_watts);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBusIds.size()));
}

void inventory(benchmark::State& state, std::unique_ptr<polyaccel::AcceleratorBackend> backend) {
  if (!backend) {
    state.SkipWithError("the backend did not open");
    return;
  }
  for (auto _ : state) {
    auto devices = backend->devices();
    benchmark::DoNotOptimize(devices->size());
  }
}

void BM_AmdSmiSampleOneGpu(benchmark::State& state) {
  sample_one(state, open_amd_smi());
}
void BM_AmdSmiSampleEightGpus(benchmark::State& state) {
  sample_eight(state, open_amd_smi());
}
void BM_AmdSmiInventoryEightGpus(benchmark::State& state) {
  inventory(state, open_amd_smi());
}
void BM_RocmSmiSampleOneGpu(benchmark::State& state) {
  sample_one(state, open_rocm_smi());
}
void BM_RocmSmiSampleEightGpus(benchmark::State& state) {
  sample_eight(state, open_rocm_smi());
}

}  // namespace

BENCHMARK(BM_AmdSmiSampleOneGpu);
BENCHMARK(BM_AmdSmiSampleEightGpus);
BENCHMARK(BM_AmdSmiInventoryEightGpus);
BENCHMARK(BM_RocmSmiSampleOneGpu);
BENCHMARK(BM_RocmSmiSampleEightGpus);

BENCHMARK_MAIN();
