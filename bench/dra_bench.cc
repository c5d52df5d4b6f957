// The DRA driver's costs: building the node's pool (devices, counters, slices) and its
// ResourceSlice objects, and NodePrepareResources + NodeUnprepareResources of one claim (CDI
// spec and checkpoint written atomically, fsync included), a whole GPU and a MIG device created
// and destroyed at prepare. On the Dell XE8640 capture with the test NVML (tests/inject): the
// 8xH100 HGX scenario, and the 8xH200 MIG scenario with every placement published.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "dra/plugin.h"
#include "dra/slices.h"

namespace {

using namespace polyaccel;
namespace fs = std::filesystem;

HostModel xe8640_with(const std::string& scenario) {
  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
  ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
  ::setenv("NVML_INJECT_SCENARIO", (std::string(NVML_SCENARIO_DIR) + "/" + scenario).c_str(), 1);
  DiscoverOptions o;
  o.topology_xml = (fs::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies" /
                    "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                       .string();
  o.backends = BackendMode::on;
  auto m = discover_host(o);
  return m ? *m : HostModel{};
}

void build_pool(benchmark::State& state, const std::string& scenario, dra::MigDevices mig) {
  HostModel m = xe8640_with(scenario);
  dra::SliceOptions so;
  so.node = "gpu-node-1";
  so.mig = mig;
  size_t devices = 0, slices = 0;
  for (auto _ : state) {
    auto p = dra::build_pool(m, so);
    if (!p) {
      state.SkipWithError(p.error().message().c_str());
      return;
    }
    devices = p->device_count();
    slices = p->slices.size();
    benchmark::DoNotOptimize(p->slices.data());
  }
  state.counters["accelerators"] = static_cast<double>(m.accelerators.size());
  state.counters["nics"] = static_cast<double>(m.nics.size());
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["slices"] = static_cast<double>(slices);
}

// The objects the publisher compares and sends, from a built pool.
void slice_objects(benchmark::State& state, const std::string& scenario) {
  HostModel m = xe8640_with(scenario);
  dra::SliceOptions so;
  so.node = "gpu-node-1";
  so.mig = dra::MigDevices::all;
  auto p = dra::build_pool(m, so);
  if (!p) {
    state.SkipWithError(p.error().message().c_str());
    return;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = 0;
    for (size_t i = 0; i < p->slices.size(); ++i)
      bytes += dra::slice_json(*p, i, 1).dump().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["json_bytes"] = static_cast<double>(bytes);
}

// Issue 39: the 224-thread XE8640 (2 sockets, 8 NUMA nodes) with its CPUs and memory published
// too (--dra-cpus <grain> --dra-memory): the pool built, and the size of its slices' JSON.
void cpu_slices(benchmark::State& state, dra::CpuGrain grain) {
  HostModel m = xe8640_with("hgx-8xh100.json");
  dra::SliceOptions so;
  so.node = "gpu-node-1";
  so.cpu.grain = grain;
  so.cpu.memory = grain != dra::CpuGrain::off;
  size_t devices = 0, slices = 0, bytes = 0;
  for (auto _ : state) {
    auto p = dra::build_pool(m, so);
    if (!p) {
      state.SkipWithError(p.error().message().c_str());
      return;
    }
    bytes = 0;
    for (size_t i = 0; i < p->slices.size(); ++i)
      bytes += dra::slice_json(*p, i, 1).dump().size();
    devices = p->device_count();
    slices = p->slices.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["pus"] = static_cast<double>(m.pus.count());
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["slices"] = static_cast<double>(slices);
  state.counters["json_bytes"] = static_cast<double>(bytes);
}

// One claim prepared and unprepared through the plugin's own entry points (what the gRPC
// service calls), in a directory on the machine's disk.
void prepare_unprepare(benchmark::State& state, bool dynamic_mig) {
  HostModel m = xe8640_with("hgx-8xh200-mig.json");
  std::shared_ptr<MigControl> control;
  if (dynamic_mig) {
    auto c = open_nvml_mig_control();
    if (!c) {
      state.SkipWithError(c.error().message().c_str());
      return;
    }
    control = std::shared_ptr<MigControl>(std::move(*c));
  }
  dra::SliceOptions so;
  so.node = "gpu-node-1";
  so.mig = dra::MigDevices::all;
  auto pool = dra::build_pool(m, so);
  if (!pool) {
    state.SkipWithError(pool.error().message().c_str());
    return;
  }
  // A whole GPU (the XE8640's own 4e:00.0 is not MIG-enabled) or a 3g.71gb on the empty
  // 5d:00.0.
  std::string device;
  for (const auto& s : pool->slices)
    for (const auto& d : s.devices) {
      const std::string bdf = m.accelerators[d.accelerator].pci.address.to_string();
      if (device.empty() && !dynamic_mig && d.kind == dra::DeviceKind::gpu && bdf == "0000:4e:00.0")
        device = d.name;
      if (device.empty() && dynamic_mig && d.kind == dra::DeviceKind::mig &&
          bdf == "0000:5d:00.0" && d.mig_profile == "3g.71gb" && d.mig_start == 4)
        device = d.name;
    }
  if (device.empty()) {
    state.SkipWithError("no such device in the pool");
    return;
  }
  std::string tmpl = (fs::temp_directory_path() / "polyaccel-dra-bench-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  fs::path dir = tmpl;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    fs::path info = dir / "root/proc/driver/nvidia/gpus" /
                    m.accelerators[i].pci.address.to_string() / "information";
    fs::create_directories(info.parent_path());
    std::ofstream(info) << "Device Minor: " << i << "\n";
  }
  const std::string uid = "0b8e1c2a-1111-2222-3333-444455556666";
  dra::DraPluginOptions o;
  o.plugin_dir = (dir / "plugin").string();
  o.registry_dir = (dir / "registry").string();
  o.cdi_dir = (dir / "cdi").string();
  o.log = [](const std::string&) {};
  o.mig = control;
  o.lookup = [&](const std::string&, const std::string&) -> Result<dra::ClaimInfo> {
    return dra::ClaimInfo{uid, {{"gpu", dra::kDriverName, so.node, device}}};
  };
  {
    dra::DraPlugin plugin(o);
    Status st = plugin.start(m, *pool, dra::read_cdi_host(m, (dir / "root").string()));
    if (!st) {
      state.SkipWithError(st.error().message().c_str());
    } else {
      std::vector<dra::ClaimRef> claim = {{"ns1", uid, "train"}};
      for (auto _ : state) {
        auto r = plugin.prepare(claim);
        if (!r[uid].error.empty()) {
          state.SkipWithError(r[uid].error.c_str());
          break;
        }
        auto u = plugin.unprepare(claim);
        if (!u[uid].empty()) {
          state.SkipWithError(u[uid].c_str());
          break;
        }
      }
      plugin.stop();
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

BENCHMARK_CAPTURE(build_pool, xe8640_hgx8xh100_existing_mig, "hgx-8xh100.json",
                  dra::MigDevices::existing)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(build_pool, xe8640_hgx8xh200_every_mig_placement, "hgx-8xh200-mig.json",
                  dra::MigDevices::all)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(slice_objects, xe8640_hgx8xh200_every_mig_placement, "hgx-8xh200-mig.json")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cpu_slices, xe8640_224_threads_no_cpus, dra::CpuGrain::off)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cpu_slices, xe8640_224_threads_cores_and_memory, dra::CpuGrain::core)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cpu_slices, xe8640_224_threads_numa_nodes_and_memory, dra::CpuGrain::numa)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(prepare_unprepare, whole_gpu, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(prepare_unprepare, dynamic_mig_3g, true)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
