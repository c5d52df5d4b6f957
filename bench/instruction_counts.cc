// The operations `make bench-check` counts instructions of (scripts/bench-check.sh runs this
// program under valgrind's callgrind, collecting only inside the count_* functions): a one-cell
// and a four-cell fit (on the empty and on the half-full SGI host), the DRA pool of 8 GPUs with
// every MIG placement, and one full scrape of the node at full size. Each runs kRuns times (no
// warm-up: a first call's lazy set-up is counted, the same every time); the script divides.
//   instruction_counts HOST_ROOT   (a captured sysfs/procfs tree for the host families)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "dra/slices.h"
#include "exporter/exporter.h"
#include "exporter/host_sampler.h"
#include "exporter/text_format.h"
#include "place_support.h"

namespace {

using namespace polyaccel;
namespace fs = std::filesystem;

constexpr int kRuns = 5;

const char* kXe8640 = "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml";
const char* kSgi = "24socket-24numa-384pu-cpuonly-1xmlx4_sgi.xml";

// Keeps a result alive so that the work is not optimised away. noipa: the two fits have the same
// body, and identical functions would be folded into one.
volatile std::size_t g_sink = 0;

// One fit, its result kept; each count_fit_* below is its own symbol for callgrind's toggle.
void fit_once(const place::HostView& v, const place::HostUsage& u, const place::Request& r,
              place::Strategy s) {
  g_sink = g_sink + place::fit(v, u, r, s).placement.held_pus.count();
}

[[gnu::noipa]] void count_fit_xe8640_1cell(const place::HostView& v, const place::HostUsage& u,
                                           const place::Request& r) {
  fit_once(v, u, r, place::Strategy::polyaccel);
}

[[gnu::noipa]] void count_fit_sgi_4cell(const place::HostView& v, const place::HostUsage& u,
                                        const place::Request& r) {
  fit_once(v, u, r, place::Strategy::polyaccel);
}

// Nova's own choice on the same request: what the four-cell fit is measured against.
[[gnu::noipa]] void count_fit_sgi_4cell_first_fit(const place::HostView& v,
                                                  const place::HostUsage& u,
                                                  const place::Request& r) {
  fit_once(v, u, r, place::Strategy::first_fit);
}

[[gnu::noipa]] void count_fit_sgi_4cell_half(const place::HostView& v, const place::HostUsage& u,
                                             const place::Request& r) {
  fit_once(v, u, r, place::Strategy::polyaccel);
}

[[gnu::noipa]] void count_fit_sgi_4cell_half_first_fit(const place::HostView& v,
                                                       const place::HostUsage& u,
                                                       const place::Request& r) {
  fit_once(v, u, r, place::Strategy::first_fit);
}

[[gnu::noipa]] void count_dra_pool_8gpu_mig(const HostModel& m, const dra::SliceOptions& o) {
  auto p = dra::build_pool(m, o);
  g_sink = g_sink + (p ? p->slices.size() : 0);
}

// A render, not Scraper::body(): /metrics serves a cached body between samples, which costs
// next to nothing; the render it replaces once per interval is what can regress.
[[gnu::noipa]] void count_scrape_full_node(const exporter::Scraper& s) {
  g_sink = g_sink + exporter::gzip(exporter::text_format(s.scrape())).size();
}

HostModel discover(const std::string& topology, BackendMode backends) {
  DiscoverOptions o;
  o.topology_xml = (fs::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies" / topology).string();
  o.backends = backends;
  auto m = discover_host(o);
  if (!m) {
    std::fprintf(stderr, "instruction_counts: %s\n", m.error().message().c_str());
    std::exit(2);
  }
  return *m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: instruction_counts HOST_ROOT\n");
    return 2;
  }
  const std::string host_root = argv[1];
  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
  ::setenv("NVML_INJECT_SCENARIO", NVML_SCENARIO_DIR "/hgx-8xh200-mig7-gpm.json", 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
  ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);

  {
    auto v = *place::build_host_view(discover(kXe8640, BackendMode::off), {});
    auto u = *place::usage_of(v, {});
    auto r = bench::make_request(8, 16, {{"hw:cpu_policy", "dedicated"}});
    for (int i = 0; i < kRuns; ++i)
      count_fit_xe8640_1cell(v, u, r);
  }
  {
    auto v = *place::build_host_view(discover(kSgi, BackendMode::off), {});
    auto u = *place::usage_of(v, {});
    auto r = bench::make_request(32, 32, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "4"}});
    for (int i = 0; i < kRuns; ++i)
      count_fit_sgi_4cell(v, u, r);
    for (int i = 0; i < kRuns; ++i)
      count_fit_sgi_4cell_first_fit(v, u, r);
    // Half full: Nova's first fit is met early there, and the search's set-up is what is left.
    auto half = bench::half_full(v);
    for (int i = 0; i < kRuns; ++i)
      count_fit_sgi_4cell_half(v, half, r);
    for (int i = 0; i < kRuns; ++i)
      count_fit_sgi_4cell_half_first_fit(v, half, r);
  }
  {
    // MIG on, some instances made (bench/dra_bench's scenario): every placement the free parts
    // leave. The scrape's scenario has every GPU full of instances, which leaves none.
    ::setenv("NVML_INJECT_SCENARIO", NVML_SCENARIO_DIR "/hgx-8xh200-mig.json", 1);
    HostModel mig = discover(kXe8640, BackendMode::on);
    ::setenv("NVML_INJECT_SCENARIO", NVML_SCENARIO_DIR "/hgx-8xh200-mig7-gpm.json", 1);
    dra::SliceOptions o;
    o.node = "gpu-node-1";
    o.mig = dra::MigDevices::all;
    for (int i = 0; i < kRuns; ++i)
      count_dra_pool_8gpu_mig(mig, o);
  }
  HostModel xe = discover(kXe8640, BackendMode::on);
  {
    DiscoverOptions o;
    o.fsroot = host_root;
    o.backends = BackendMode::off;
    auto host_model = discover_host(o);
    if (!host_model) {
      std::fprintf(stderr, "instruction_counts: %s\n", host_model.error().message().c_str());
      return 2;
    }
    // GPM measures between two samples: the third snapshot has every GPU's and instance's rates.
    // The monitor stops then, so that every counted scrape reads the same snapshot.
    MonitorOptions mo;
    mo.interval = std::chrono::milliseconds(100);
    AcceleratorMonitor monitor(xe, make_all_backends(), mo);
    monitor.start();
    auto snap = monitor.wait_newer(0, std::chrono::seconds(60));
    while (snap->generation < 3)
      snap = monitor.wait_newer(snap->generation, std::chrono::seconds(60));
    monitor.stop();
    exporter::HostSampler host(*host_model, host_root, std::chrono::hours(1));
    host.set_extras({"/nonexistent/allocations.json", std::chrono::hours(1), nullptr, nullptr});
    host.start();
    exporter::ExporterOptions eo;
    eo.hostname = "bench";
    exporter::Scraper scraper(exporter::make_all_collectors(), eo,
                              exporter::Sources{[&] { return monitor.snapshot(); },
                                                [&] { return host.snapshot(); }, nullptr});
    if (exporter::text_format(scraper.scrape()).find("DCGM_FI_PROF_SM_ACTIVE") ==
        std::string::npos) {
      std::fprintf(stderr, "instruction_counts: the scrape has no GPM (DCGM_FI_PROF_*) families\n");
      return 2;
    }
    for (int i = 0; i < kRuns; ++i)
      count_scrape_full_node(scraper);
    host.stop();
  }
  std::printf("runs %d\n", kRuns);
  return 0;
}
