// How long the audit takes: reading the tuning facts and running every check, on the live host
// and on the gathered NEC Vector Engine machine (extracted once to a temporary folder), and the
// checks alone on the XE8640 capture (pure: no I/O).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "audit/audit.h"
#include "discover/discover.h"

namespace {

namespace fs = std::filesystem;

fs::path fixtures() {
  return fs::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies";
}

// The NEC tree, extracted once for the whole run.
const std::string& nec_root() {
  static const std::string root = [] {
    std::string tmpl = (fs::temp_directory_path() / "polyaccel-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return std::string();
    std::string cmd =
        "tar -xjf '" +
        (fixtures() / "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2").string() +
        "' -C '" + tmpl + "'";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return tmpl + "/32intel64-2p8co2t+8ve";
  }();
  return root;
}

polyaccel::AuditIntent hypervisor() {
  polyaccel::AuditIntent i;
  i.role = polyaccel::HostRole::hypervisor;
  return i;
}

void facts(benchmark::State& state, const std::string& root) {
  if (root.empty()) {
    state.SkipWithError("no tree");
    return;
  }
  for (auto _ : state) {
    auto f = polyaccel::read_tuning_facts(root);
    benchmark::DoNotOptimize(f.pci.size());
  }
}

void checks(benchmark::State& state, const polyaccel::DiscoverOptions& opts,
            const std::string& root) {
  auto m = polyaccel::discover_host(opts);
  if (!m) {
    state.SkipWithError(m.error().message().c_str());
    return;
  }
  auto f = polyaccel::read_tuning_facts(root);
  std::vector<polyaccel::AcceleratorSample> none;
  size_t found = 0;
  for (auto _ : state) {
    auto findings = polyaccel::run_audit({*m, f, none, hypervisor()});
    found = findings.size();
    benchmark::DoNotOptimize(findings.data());
  }
  state.counters["findings"] = static_cast<double>(found);
}

// What `polyaccel audit` does before printing: discovery, facts, checks.
void whole_audit(benchmark::State& state, const polyaccel::DiscoverOptions& opts,
                 const std::string& root) {
  std::vector<polyaccel::AcceleratorSample> none;
  for (auto _ : state) {
    auto m = polyaccel::discover_host(opts);
    if (!m) {
      state.SkipWithError(m.error().message().c_str());
      return;
    }
    auto f = polyaccel::read_tuning_facts(root);
    auto findings = polyaccel::run_audit({*m, f, none, hypervisor()});
    benchmark::DoNotOptimize(findings.data());
  }
}

polyaccel::DiscoverOptions live() {
  polyaccel::DiscoverOptions o;
  o.backends = polyaccel::BackendMode::off;
  return o;
}
polyaccel::DiscoverOptions nec() {
  polyaccel::DiscoverOptions o;
  o.fsroot = nec_root();
  return o;
}
polyaccel::DiscoverOptions xe8640() {
  polyaccel::DiscoverOptions o;
  o.topology_xml =
      (fixtures() / "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml").string();
  return o;
}

}  // namespace

BENCHMARK_CAPTURE(facts, live_host, std::string("/"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(facts, nec_tree, nec_root())->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(checks, live_host, live(), std::string("/"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(checks, nec_tree, nec(), nec_root())->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(checks, xe8640_xml, xe8640(), std::string())->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(whole_audit, live_host, live(), std::string("/"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(whole_audit, nec_tree, nec(), nec_root())->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
