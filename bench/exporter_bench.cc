// The agent's scrape path: serialising the snapshot of 8 H100 GPUs (test NVML library, 8×H100
// scenario) plus the host of this machine, with every name set, as a scrape does.
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <cstdlib>
#include <sstream>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "exporter/exporter.h"
#include "exporter/text_format.h"

namespace {

using namespace polyaccel;

struct Agent {
  std::unique_ptr<AcceleratorMonitor> monitor;
  std::unique_ptr<exporter::HostSampler> host;
  std::shared_ptr<exporter::Scraper> scraper;

  Agent() {
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("NVML_INJECT_SCENARIO", NVML_SCENARIO, 1);
    ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent", 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent", 1);
    DiscoverOptions o;
    o.backends = BackendMode::off;
    HostModel model = discover_host(o).value();
    MonitorOptions mo;
    mo.interval = std::chrono::seconds(10);
    monitor = std::make_unique<AcceleratorMonitor>(model, make_all_backends(), mo);
    monitor->start();
    auto snap = monitor->wait_newer(0, std::chrono::seconds(30));
    while (snap->devices.empty() || !snap->devices.back().sample)
      snap = monitor->wait_newer(snap->generation, std::chrono::seconds(30));
    host = std::make_unique<exporter::HostSampler>(model, "/", std::chrono::seconds(10));
    // The placement state (absent here: nothing allocated) and the audit, as the agent runs them.
    host->set_extras({"/nonexistent/allocations.json", std::chrono::hours(1), nullptr, nullptr});
    host->start();
    exporter::ExporterOptions eo;
    eo.hostname = "bench";
    scraper = std::make_shared<exporter::Scraper>(
        exporter::make_all_collectors(), eo,
        exporter::Sources{[this] { return monitor->snapshot(); },
                          [this] { return host->snapshot(); }, nullptr});
  }
};

Agent& agent() {
  static Agent* a = new Agent();  // lives for the whole benchmark run
  return *a;
}

HostModel this_host() {
  DiscoverOptions o;
  o.backends = BackendMode::off;
  return discover_host(o).value();
}

void BM_CollectFamilies(benchmark::State& state) {
  auto& a = agent();
  for (auto _ : state) {
    auto families = a.scraper->scrape();
    benchmark::DoNotOptimize(families.data());
  }
}
BENCHMARK(BM_CollectFamilies);

// What a scrape serialises, as the agent does (text_format) and as prometheus-cpp's
// TextSerializer, which the agent used before and whose bytes text_format reproduces.
void BM_ScrapeText(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state)
    bytes = exporter::text_format(a.scraper->scrape()).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeText);

void BM_ScrapeTextPrometheusCpp(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, a.scraper->scrape());
    bytes = out.str().size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeTextPrometheusCpp);

// A whole scrape's answer to Prometheus: collected, serialised and gzipped.
void BM_ScrapeGzip(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state)
    bytes = exporter::gzip(exporter::text_format(a.scraper->scrape())).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeGzip);

void BM_ReadHostSample(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::read_host_sample(model, "/");
    benchmark::DoNotOptimize(s.numa.size());
  }
}
BENCHMARK(BM_ReadHostSample);

// The sampler's placement step on this host: build the host view, read the state, count usage.
void BM_ReadPlacement(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::read_placement(model, "/nonexistent/allocations.json");
    benchmark::DoNotOptimize(s.nodes.size());
  }
}
BENCHMARK(BM_ReadPlacement);

// One audit of this host (read_tuning_facts + every check), once per --audit-interval.
void BM_RunHostAudit(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::run_host_audit(model, "/", {});
    benchmark::DoNotOptimize(s.counts.size());
  }
}
BENCHMARK(BM_RunHostAudit)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
