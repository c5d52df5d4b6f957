// How long discovery takes on each captured machine: the whole discover_host() (hwloc load,
// classification, names, link matrix), and the link matrix alone.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "discover/discover.h"
#include "discover/links.h"

namespace {

std::filesystem::path fixtures() {
  return std::filesystem::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies";
}

void discover_fixture(benchmark::State& state, const std::string& file) {
  polyaccel::DiscoverOptions opts;
  opts.topology_xml = (fixtures() / file).string();
  for (auto _ : state) {
    auto m = polyaccel::discover_host(opts);
    if (!m) {
      state.SkipWithError(m.error().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(m->links.cells.size());
  }
}

void link_matrix(benchmark::State& state, const std::string& file) {
  polyaccel::DiscoverOptions opts;
  opts.topology_xml = (fixtures() / file).string();
  auto m = polyaccel::discover_host(opts);
  if (!m) {
    state.SkipWithError(m.error().message().c_str());
    return;
  }
  for (auto _ : state) {
    auto matrix = polyaccel::compute_link_matrix(*m);
    benchmark::DoNotOptimize(matrix.cells.data());
  }
  state.counters["devices"] = static_cast<double>(m->links.devices.size());
}

void live_host(benchmark::State& state) {
  for (auto _ : state) {
    auto m = polyaccel::discover_host({});
    benchmark::DoNotOptimize(m.ok());
  }
}

void register_all() {
  for (const auto& e : std::filesystem::directory_iterator(fixtures())) {
    std::string name = e.path().filename().string();
    if (!name.ends_with(".xml")) continue;
    std::string shortname = name.substr(0, name.find('_'));
    benchmark::RegisterBenchmark(("discover/" + shortname).c_str(), discover_fixture, name)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("link_matrix/" + shortname).c_str(), link_matrix, name)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("discover/live-host", live_host)->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
