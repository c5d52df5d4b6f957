// The DRA runner on a running accelerator monitor (the 8xH200 MIG test NVML, rescans every
// 100 ms): a MIG instance made or destroyed while the agent runs (as `polyaccel mig apply` does,
// through MigControl) reaches the published ResourceSlices as a new pool generation, every
// object valid by the resource.k8s.io/v1 schema (the test API server). A server with the feature
// gates off (1.34's defaults) drops counters: the runner sees it, publishes nothing that can be
// over-committed and switches back when the server keeps them. Servers of 1.34 to 1.37 with the
// gates on each get the counter sets where their validation takes them (beside the devices for
// 1.34, in slices of their own from 1.35). The kubelet's wipe of the node's slices is put back
// within seconds (the watch), and the time it took is printed. The kubelet's health stream follows
// the same health: an XID makes a GPU and its MIG devices Unhealthy there within seconds, its
// recovery Healthy again, and the agent's stop ends the stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "discover/accel/monitor.h"
#include "dra/dra_fixture.h"
#include "dra/fake_api_server.h"
#include "dra/kubelet_health_client.h"
#include "dra/runner.h"
#include "dra/structured_allocator.h"
#include "share/mig_profiles.h"
#include "support/inject_steps.h"

namespace polyaccel::dra {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::TempDir;
using polyaccel::testing::wait_for;

using polyaccel::testing::kEmptyGpu;

// The published device whose polyaccel.io/uuid is `uuid`, and the pool's generation.
std::pair<json, std::int64_t> published(FakeApiServer& server, const std::string& uuid) {
  std::lock_guard<std::mutex> lock(server.mu);
  json found;
  std::int64_t generation = -1;
  for (const auto& [name, s] : server.slices) {
    generation = s["spec"]["pool"]["generation"];
    for (const auto& d : s["spec"].value("devices", json::array()))
      if (d.contains("attributes") && d["attributes"].contains("uuid") &&
          d["attributes"]["uuid"].value("string", "") == uuid)
        found = d;
  }
  return {found, generation};
}

TEST(DraRunner, AMigLayoutChangedWhileRunningIsPublished) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  auto control = open_nvml_mig_control();  // first: it keeps the library's MIG state
  ASSERT_TRUE(control) << control.error().message();
  TempDir dir;
  FakeApiServer server(dir.path());
  MonitorOptions mo;
  mo.interval = 100ms;
  mo.rescan = 100ms;
  AcceleratorMonitor monitor(polyaccel::testing::load_fixture(polyaccel::testing::kXe8640),
                             make_all_backends(), mo);
  monitor.start();
  DraRunnerOptions ro;
  ro.slices.node = "node-1";
  ro.plugin = polyaccel::testing::dra_plugin_options(dir.path());
  ro.root = "";
  ro.log = [](const std::string&) {};
  kube_api::KubeConfig kc;
  kc.server = server.url();
  kc.token = "test-token";
  DraRunner runner(monitor, ro, std::make_unique<kube_api::KubeClient>(kc));
  ASSERT_TRUE(runner.start(60s));
  ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") > 0; }, 30s));
  EXPECT_EQ(published(server, "").second, 1);

  // An instance made beside the agent: the next rescan shows it, the pool gains its device.
  unsigned index = 0;
  auto gpus = (*control)->gpus();
  ASSERT_TRUE(gpus);
  for (const auto& g : *gpus)
    if (g.pci_bus_id == kEmptyGpu) index = g.index;
  auto made = (*control)->create(index, 9, 4);  // 3g.71gb at memory slice 4
  ASSERT_TRUE(made) << made.error().message();
  ASSERT_TRUE(wait_for([&] { return !published(server, made->uuid).first.is_null(); }, 30s));
  auto [device, generation] = published(server, made->uuid);
  EXPECT_EQ(device["attributes"]["migProfile"]["string"], "3g.71gb");
  EXPECT_EQ(device["attributes"]["migPlacementStart"]["int"], 4);
  EXPECT_EQ(generation, 2);
  EXPECT_NE(runner.pool().device(device["name"]), nullptr) << "the kubelet plugin has it too";

  // Destroyed again: withdrawn at the next generation.
  ASSERT_TRUE((*control)->destroy(index, made->gpu_instance_id));
  ASSERT_TRUE(wait_for([&] { return published(server, made->uuid).first.is_null(); }, 30s));
  EXPECT_EQ(published(server, "").second, 3);
  runner.stop();
  monitor.stop();
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_TRUE(server.schema_errors.empty()) << server.schema_errors.front();
}

// The agent of these tests: the XE8640 capture with the 8xH200 MIG test NVML, every MIG
// placement published, on the test API server.
struct RunningAgent {
  explicit RunningAgent(FakeApiServer& server, const TempDir& dir,
                        std::function<void(DraRunnerOptions&)> tune = {},
                        std::function<void(MonitorOptions&)> tune_monitor = {}) {
    MonitorOptions mo;
    mo.interval = 100ms;
    mo.rescan = 100ms;
    if (tune_monitor) tune_monitor(mo);
    monitor = std::make_unique<AcceleratorMonitor>(
        polyaccel::testing::load_fixture(polyaccel::testing::kXe8640), make_all_backends(), mo);
    monitor->start();
    DraRunnerOptions ro;
    ro.slices.node = "node-1";
    ro.slices.mig = MigDevices::all;
    ro.plugin = polyaccel::testing::dra_plugin_options(dir.path());
    ro.root = "";
    ro.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      log += line + "\n";
    };
    if (tune) tune(ro);
    kube_api::KubeConfig kc;
    kc.server = server.url();
    kc.token = "test-token";
    runner = std::make_unique<DraRunner>(*monitor, ro, std::make_unique<kube_api::KubeClient>(kc));
  }
  ~RunningAgent() {
    runner->stop();
    monitor->stop();
  }
  std::string logged() {
    std::lock_guard<std::mutex> lock(mu);
    return log;
  }
  std::unique_ptr<AcceleratorMonitor> monitor;
  std::unique_ptr<DraRunner> runner;
  std::mutex mu;
  std::string log;
};

std::vector<json> stored_slices(FakeApiServer& server) {
  std::lock_guard<std::mutex> lock(server.mu);
  std::vector<json> out;
  for (const auto& [name, s] : server.slices)
    out.push_back(s);
  return out;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// Kubernetes 1.34 with its defaults: DRAPartitionableDevices (and DRADeviceTaints) off. The
// runner asks before it publishes, so no slice with placements is ever stored; a scheduler that
// ignores counters (as 1.34's does with the gate off) can allocate every MIG device published
// and never over-commits a GPU. When the server keeps counters again, placements come back.
TEST(DraRunner, AServerWithoutPartitionableDevicesGetsNothingItCanOverCommit) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  server.play(34);  // both gates off
  RunningAgent agent(server, dir, [](DraRunnerOptions& o) { o.recheck = 300ms; });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") > 0; }, 30s));
  ASSERT_TRUE(wait_for([&] { return agent.runner->status().server_fields_known; }, 30s));
  EXPECT_FALSE(agent.runner->status().server_keeps_counters);
  EXPECT_FALSE(agent.runner->status().server_keeps_taints);
  auto slices = stored_slices(server);
  size_t mig = 0;
  for (const auto& s : slices) {
    EXPECT_FALSE(s["spec"].contains("sharedCounters"));
    for (const auto& d : s["spec"].value("devices", json::array())) {
      EXPECT_FALSE(d.contains("consumesCounters")) << d["name"];
      if (d["attributes"]["type"]["string"] != "mig") continue;
      ++mig;
      EXPECT_TRUE(d["attributes"].contains("uuid")) << d["name"] << " is not an instance";
    }
  }
  EXPECT_GT(mig, 0u) << "the instances of the capture, and no placement";

  // The scheduler of 1.34 (counters ignored) fills the node: each MIG device once, each an
  // instance that exists, so the GPUs' compute slices are never over-committed.
  polyaccel::testing::StructuredAllocator scheduler;
  scheduler.partitionable_devices = false;
  scheduler.set_slices(slices);
  polyaccel::testing::ClaimSpec any_mig{{{"mig", "mig", {}, 1}}, {}};
  std::map<std::string, unsigned> compute;  // by parent GPU
  unsigned allocated = 0;
  while (auto got = scheduler.allocate(any_mig)) {
    ++allocated;
    const Pool pool = agent.runner->pool();  // a copy: device() points into it
    const Device* d = pool.device(got->front());
    ASSERT_NE(d, nullptr);
    ASSERT_TRUE(d->mig_instance) << d->name;
    compute[d->attributes.at("parentUUID").text] +=
        find_mig_geometry(0x233510DE)->profile(d->mig_profile)->compute_slices;
    ASSERT_LE(allocated, 100u);
  }
  EXPECT_EQ(allocated, mig);
  for (const auto& [gpu, c] : compute)
    EXPECT_LE(c, 7u) << gpu;

  // Said once, not at every sync or recheck; and a steady node writes nothing.
  std::this_thread::sleep_for(1s);
  auto writes = agent.runner->api_writes();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(agent.runner->api_writes(), writes) << "no rewrite loop over the dropped fields";
  EXPECT_EQ(occurrences(agent.logged(), "drops sharedCounters and consumesCounters"), 1u)
      << agent.logged();
  EXPECT_EQ(occurrences(agent.logged(), "drops device taints"), 1u) << agent.logged();

  // The gate is turned on: the next recheck sees it, the placements come back with counters,
  // each counter set beside its devices as 1.34 wants.
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.partitionable_devices = true;
  }
  ASSERT_TRUE(wait_for([&] { return agent.runner->status().server_keeps_counters; }, 30s))
      << agent.logged();
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto& s : stored_slices(server))
          if (s["spec"].contains("sharedCounters")) return true;
        return false;
      },
      30s));
  EXPECT_THAT(agent.logged(),
              ::testing::HasSubstr("keeps sharedCounters and consumesCounters again"));
  EXPECT_THAT(agent.logged(), ::testing::HasSubstr("only beside the devices"));
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto& s : stored_slices(server))
          if (s["spec"].contains("sharedCounters") &&
              s["spec"].value("devices", json::array()).empty())
            return false;
        return true;
      },
      30s));
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.refused_writes, 0u);
  EXPECT_TRUE(server.schema_errors.empty()) << server.schema_errors.front();
}

std::string refusals(FakeApiServer& server) {
  std::lock_guard<std::mutex> lock(server.mu);
  std::string out;
  for (const auto& r : server.refusals)
    out += r + "\n";
  return out;
}

// The stored slices as the scheduler of 1.<minor> reads them: every MIG placement of the empty
// GPU is there, seven 1g.18gb fit together and then nothing more on that GPU.
void expect_placements_allocatable(const std::vector<json>& slices, unsigned minor) {
  polyaccel::testing::StructuredAllocator scheduler;
  scheduler.kubernetes_minor = minor;
  scheduler.set_slices(slices);
  auto on_empty_gpu = [](const json& d) {
    const auto& a = d["attributes"];
    return a["resource.kubernetes.io/pciBusID"]["string"] == polyaccel::testing::kEmptyGpu &&
           !a.contains("uuid");
  };
  polyaccel::testing::ClaimSpec seven{
      {{"mig", "mig",
        [&](const json& d) {
          return on_empty_gpu(d) && d["attributes"]["migProfile"]["string"] == "1g.18gb";
        },
        7}},
      {}};
  EXPECT_TRUE(scheduler.allocate(seven)) << "seven 1g.18gb on an empty H200";
  polyaccel::testing::ClaimSpec one_more{{{"mig", "mig", on_empty_gpu, 1}}, {}};
  EXPECT_FALSE(scheduler.allocate(one_more)) << "its 7 compute slices are taken";
}

// Every MIG placement published to a server of each version from 1.34 to 1.37 with the gates on
// (DRAPartitionableDevices, DRADeviceTaints: 1.36's and 1.37's defaults, turned on in 1.34 and
// 1.35). kube-apiserver 1.35 and later refuse a slice that holds both sharedCounters and devices
// (v1.36.3: "only one of `sharedCounters` or `devices` is allowed"), 1.34 one whose device
// consumes a counter set of another slice. The agent writes the layout the server takes: no write
// is refused, the pool is complete, and that version's scheduler allocates the placements without
// over-committing a GPU.
class DraRunnerOnKubernetes : public ::testing::TestWithParam<unsigned> {};

TEST_P(DraRunnerOnKubernetes, MigPlacementsArePublishedInTheLayoutTheServerTakes) {
  const unsigned minor = GetParam();
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  server.play(minor);
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.partitionable_devices = true;
    server.device_taints = true;
  }
  RunningAgent agent(server, dir, [](DraRunnerOptions& o) { o.recheck = 1h; });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for([&] { return agent.runner->status().syncs > 0; }, 30s))
      << agent.logged() << refusals(server);
  EXPECT_TRUE(agent.runner->status().server_keeps_counters);
  {
    std::lock_guard<std::mutex> lock(server.mu);
    EXPECT_EQ(server.refused_writes, 0u);
  }
  const auto slices = stored_slices(server);
  size_t consumers = 0, counter_slices = 0;
  for (const auto& s : slices) {
    const auto& spec = s["spec"];
    EXPECT_EQ(spec["pool"]["resourceSliceCount"], slices.size());
    EXPECT_EQ(spec["nodeName"], "node-1");
    std::set<std::string> sets;
    for (const auto& cs : spec.value("sharedCounters", json::array()))
      sets.insert(cs["name"].get<std::string>());
    const json devices = spec.value("devices", json::array());
    if (!sets.empty()) ++counter_slices;
    if (minor >= 35) {
      EXPECT_TRUE(sets.empty() || devices.is_null() || devices.empty())
          << s["metadata"]["name"] << " holds counter sets and devices";
    }
    for (const auto& d : devices) {
      for (const auto& c : d.value("consumesCounters", json::array())) {
        ++consumers;
        if (minor == 34) {
          EXPECT_TRUE(sets.count(c["counterSet"].get<std::string>()))
              << d["name"] << " consumes a counter set of another slice";
        }
      }
    }
  }
  EXPECT_GT(consumers, 50u) << "the placements of the empty H200s";
  EXPECT_GT(counter_slices, 0u);
  expect_placements_allocatable(slices, minor);
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_TRUE(server.schema_errors.empty()) << server.schema_errors.front();
}

INSTANTIATE_TEST_SUITE_P(Versions, DraRunnerOnKubernetes, ::testing::Values(34u, 35u, 36u, 37u),
                         [](const ::testing::TestParamInfo<unsigned>& p) {
                           return "Kubernetes1_" + std::to_string(p.param);
                         });

// Dry runs refused (a proxy that does not pass them) on a 1.34 with the gates on, and on a 1.36:
// the agent writes 1.35's layout first; 1.34 refuses it with its own 422 ("must reference a
// counterSet defined in the ResourceSlice sharedCounters"), the agent publishes the counter sets
// beside their devices at once, and that write is the last one refused. 1.36 takes the first.
TEST(DraRunner, WithoutDryRunsTheLayoutIsLearntFromARefusedWrite) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  for (unsigned minor : {34u, 36u}) {
    SCOPED_TRACE("Kubernetes 1." + std::to_string(minor));
    TempDir dir;
    FakeApiServer server(dir.path());
    server.play(minor);
    {
      std::lock_guard<std::mutex> lock(server.mu);
      server.partitionable_devices = true;
      server.device_taints = true;
      server.refuse_dry_runs = true;
    }
    RunningAgent agent(server, dir, [](DraRunnerOptions& o) { o.recheck = 1h; });
    ASSERT_TRUE(agent.runner->start(60s));
    ASSERT_TRUE(wait_for([&] { return agent.runner->status().syncs > 0; }, 30s))
        << agent.logged() << refusals(server);
    const std::string refused = refusals(server);
    {
      std::lock_guard<std::mutex> lock(server.mu);
      EXPECT_EQ(server.refused_writes, minor == 34 ? 1u : 0u) << refused;
    }
    expect_placements_allocatable(stored_slices(server), minor);
    if (minor == 34) {
      EXPECT_THAT(agent.logged(), ::testing::HasSubstr("only beside the devices"));
    }
  }
}

// A server that starts without the gate while slices with counters are stored (the read-back
// path, without the dry run to warn first): the first write's answer shows the counters gone.
// --dra-nic-shares on each version with its default gates: 1.36 and later keep
// allowMultipleAllocations and the capacity's requestPolicy (DRAConsumableCapacity beta, on), so
// the RDMA NICs are published shared; 1.34 and 1.35 (alpha, off) drop them: the runner learns it
// before it publishes, says so once and publishes the NICs whole, without a rewrite loop.
class DraRunnerNicShares : public ::testing::TestWithParam<unsigned> {};

TEST_P(DraRunnerNicShares, NicsAreSharedWhereTheServerKeepsWhatSharingNeeds) {
  const unsigned minor = GetParam();
  const bool kept = minor >= 36;
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  server.play(minor);
  RunningAgent agent(server, dir, [](DraRunnerOptions& o) {
    o.slices.nic_shares = 8;
    o.recheck = 300ms;
  });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") > 0; }, 30s));
  ASSERT_TRUE(wait_for([&] { return agent.runner->status().server_fields_known; }, 30s));
  std::this_thread::sleep_for(1s);
  auto writes = agent.runner->api_writes();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(agent.runner->api_writes(), writes) << "no rewrite loop over dropped fields";
  size_t nics = 0, shared = 0;
  for (const auto& s : stored_slices(server)) {
    for (const auto& d : s["spec"].value("devices", json::array())) {
      if (d["attributes"]["type"]["string"] != "nic") continue;
      ++nics;
      if (d.value("allowMultipleAllocations", false)) ++shared;
    }
  }
  EXPECT_GT(nics, 0u);
  EXPECT_EQ(shared, kept ? nics : 0u);
  const Pool pool = agent.runner->pool();
  for (const auto& slice : pool.slices)
    for (const auto& d : slice.devices) {
      if (d.kind == DeviceKind::nic) {
        EXPECT_EQ(d.allow_multiple_allocations, kept) << d.name;
      }
    }
  EXPECT_EQ(occurrences(agent.logged(), "drops allowMultipleAllocations"), kept ? 0u : 1u)
      << agent.logged();
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_THAT(server.schema_errors, ::testing::IsEmpty());
  EXPECT_THAT(server.refusals, ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Versions, DraRunnerNicShares, ::testing::Values(34u, 35u, 36u, 37u),
                         [](const ::testing::TestParamInfo<unsigned>& p) {
                           return "Kubernetes1_" + std::to_string(p.param);
                         });

TEST(DraRunner, CountersDroppedOnWriteAreSeenInTheStoredSlices) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  // Dry runs are refused (a proxy that does not pass them, say): only the read-back is left.
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.partitionable_devices = false;
    server.refuse_dry_runs = true;
  }
  RunningAgent agent(server, dir, [&](DraRunnerOptions& o) { o.recheck = 1h; });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for([&] { return !agent.runner->status().server_keeps_counters; }, 30s))
      << agent.logged();
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto& s : stored_slices(server))
          for (const auto& d : s["spec"].value("devices", json::array()))
            if (d["attributes"]["type"]["string"] == "mig" && !d["attributes"].contains("uuid"))
              return false;
        return server.slices_of("node-1") > 0;
      },
      30s))
      << "the placements are withdrawn";
  EXPECT_THAT(agent.logged(), ::testing::HasSubstr("the slices it stored"));
}

// The published device of the GPU at `bus` (its resource.kubernetes.io/pciBusID), or null.
json published_gpu(FakeApiServer& server, const std::string& bus) {
  std::lock_guard<std::mutex> lock(server.mu);
  for (const auto& [name, s] : server.slices)
    for (const auto& d : s["spec"].value("devices", json::array()))
      if (d.contains("attributes") && d["attributes"].contains("resource.kubernetes.io/pciBusID") &&
          d["attributes"]["resource.kubernetes.io/pciBusID"].value("string", "") == bus &&
          d["attributes"]["type"]["string"] == "gpu")
        return d;
  return nullptr;
}

// A GPU that falls off the bus (XID 79, step 2 of the 8xH100 scenario) while the agent runs, on a
// server that keeps taints (1.36's default; the test server fills timeAdded as kube-apiserver
// does): the GPU is published tainted and never withdrawn, and the agent never concludes that the
// server drops taints from the slice it had stored before the XID, which has none.
TEST(DraRunner, AnXidTaintsTheGpuOnAServerThatKeepsTaints) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh100.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  RunningAgent agent(server, dir, [](DraRunnerOptions& o) { o.recheck = 1h; });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for(
      [&] {
        return agent.runner->status().syncs > 0 && agent.runner->status().server_fields_known;
      },
      30s));
  const std::string bus = "0000:9a:00.0";
  ASSERT_FALSE(published_gpu(server, bus).is_null()) << agent.logged();
  EXPECT_FALSE(published_gpu(server, bus).contains("taints"));
  polyaccel::testing::InjectSteps steps(NVML_INJECT_LIB);
  ASSERT_TRUE(steps.ok());
  const auto writes_before = agent.runner->api_writes();
  steps.go(2);
  ASSERT_TRUE(wait_for(
      [&] {
        json d = published_gpu(server, bus);
        return !d.is_null() && d.contains("taints");
      },
      30s))
      << agent.logged();
  // Stays published and tainted; the server's fields are still known to be kept.
  std::this_thread::sleep_for(1s);
  json d = published_gpu(server, bus);
  ASSERT_FALSE(d.is_null()) << "withdrawn: " << agent.logged();
  ASSERT_TRUE(d.contains("taints"));
  EXPECT_EQ(d["taints"][0]["key"], kUnhealthyTaint);
  EXPECT_TRUE(d["taints"][0].contains("timeAdded"));
  EXPECT_TRUE(agent.runner->status().server_keeps_taints);
  EXPECT_EQ(occurrences(agent.logged(), "drops device taints"), 0u) << agent.logged();
  // One pool write for the change (each slice of the pool once), not a taint, a withdrawal and
  // a taint again.
  EXPECT_LE(agent.runner->api_writes() - writes_before, server.slices_of("node-1"))
      << agent.logged();
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_TRUE(server.schema_errors.empty()) << server.schema_errors.front();
}

// The kubelet's health stream on the running agent (8xH100: GPU 0000:db:00.0 holds MIG
// instances): every GPU and MIG device Healthy at once; XID 79 (GPU 0000:9a:00.0 off the bus,
// step 2) makes it Unhealthy within seconds, with the reason, while the slice taints it; back on
// the bus (step 3) it is Healthy again once the recovery time (3 s here) has passed; XID 94 on a
// MIG instance (step 4) makes the whole GPU and each of its MIG devices Unhealthy. The agent's stop
// ends the stream cleanly.
TEST(DraRunner, TheKubeletsHealthStreamFollowsXidsAndRecovery) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh100.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  RunningAgent agent(
      server, dir,
      [](DraRunnerOptions& o) {
        o.recheck = 1h;
        o.plugin.health_resend = 1s;
      },
      [](MonitorOptions& mo) { mo.health.recovery = 3s; });
  ASSERT_TRUE(agent.runner->start(60s));
  // Device names by the bus id of their GPU, from the pool the runner built.
  auto snap = agent.monitor->snapshot();
  std::map<std::string, std::vector<std::string>> of_bus;
  for (const auto& s : agent.runner->pool().slices)
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::gpu || d.kind == DeviceKind::mig)
        of_bus[snap->host->accelerators[d.accelerator].pci.address.to_string()].push_back(d.name);
  const std::string lost = "0000:9a:00.0", mig_gpu = "0000:db:00.0";
  ASSERT_EQ(of_bus[lost].size(), 1u);
  ASSERT_GT(of_bus[mig_gpu].size(), 1u) << "the GPU and its MIG devices";
  const std::string lost_gpu = of_bus[lost].front();

  namespace h = polyaccel::testing::dra_health;
  using Message = polyaccel::testing::KubeletHealthWatch::Message;
  auto health = [](const Message& m, const std::string& d) {
    auto it = m.find(d);
    return it == m.end() ? h::UNKNOWN : it->second.health;
  };
  auto all = [&](const Message& m, const std::string& bus, h::HealthStatus want) {
    for (const auto& d : of_bus[bus])
      if (health(m, d) != want) return false;
    return true;
  };
  polyaccel::testing::KubeletHealthWatch watch(agent.runner->plugin().endpoint());
  ASSERT_TRUE(watch.wait_message(
      [&](const Message& m) {
        for (const auto& [bus, names] : of_bus)
          if (!all(m, bus, h::HEALTHY)) return false;
        return true;
      },
      10s))
      << agent.logged();
  EXPECT_FALSE(watch.messages().front().count("nic-0"));

  polyaccel::testing::InjectSteps steps(NVML_INJECT_LIB);
  ASSERT_TRUE(steps.ok());
  auto t0 = std::chrono::steady_clock::now();
  steps.go(2);
  ASSERT_TRUE(watch.wait_message(
      [&](const Message& m) {
        return health(m, lost_gpu) == h::UNHEALTHY &&
               m.at(lost_gpu).message.find(lost) != std::string::npos;
      },
      10s))
      << agent.logged();
  std::printf("[ measured ] Unhealthy in the health stream %lld ms after the XID\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - t0)
                                         .count()));
  EXPECT_TRUE(all(watch.messages().back(), mig_gpu, h::HEALTHY));
  ASSERT_TRUE(wait_for([&] { return published_gpu(server, lost).contains("taints"); }, 10s))
      << "the slice says the same";

  steps.go(3);
  ASSERT_TRUE(
      watch.wait_message([&](const Message& m) { return health(m, lost_gpu) == h::HEALTHY; }, 10s))
      << agent.logged();

  steps.go(4);
  ASSERT_TRUE(
      watch.wait_message([&](const Message& m) { return all(m, mig_gpu, h::UNHEALTHY); }, 10s))
      << agent.logged();

  t0 = std::chrono::steady_clock::now();
  agent.runner->stop();
  ASSERT_TRUE(watch.wait_ended(5s));
  EXPECT_TRUE(watch.status().ok()) << watch.status().error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// The kubelet deletes every slice of its node when it starts: the watch sees it and the pool is
// back within seconds (the aim: under 5 s), with the next generation.
TEST(DraRunner, SlicesTheKubeletWipesAreBackWithinSeconds) {
  polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
  TempDir dir;
  FakeApiServer server(dir.path());
  // A resync far away: only the watch can bring them back in time.
  RunningAgent agent(server, dir, [](DraRunnerOptions& o) { o.resync = 1h; });
  ASSERT_TRUE(agent.runner->start(60s));
  ASSERT_TRUE(wait_for([&] { return agent.runner->status().syncs > 0; }, 30s));
  const size_t count = server.slices_of("node-1");
  ASSERT_GT(count, 1u) << "every MIG placement needs more than one slice";
  ASSERT_TRUE(wait_for(
      [&] {
        std::lock_guard<std::mutex> lock(server.mu);
        return agent.runner->status().watching && server.watches > 0;
      },
      30s));
  std::this_thread::sleep_for(300ms);  // the watch's ADDED events are through
  std::int64_t generation = published(server, "").second;
  for (int wipe = 1; wipe <= 3; ++wipe) {
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(server.wipe_node("node-1"), count);
    ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") == count; }, 10s))
        << agent.logged();
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("[ measured ] slices back %lld ms after the kubelet's wipe %d\n",
                static_cast<long long>(ms), wipe);
    EXPECT_LT(ms, 10000);
    ASSERT_TRUE(wait_for([&] { return published(server, "").second > generation; }, 5s))
        << "a later generation each time";
    generation = published(server, "").second;
    EXPECT_TRUE(wait_for([&] { return agent.runner->status().restores == unsigned(wipe); }, 5s))
        << agent.runner->status().restores << "\n"
        << agent.logged();
  }
  // A failover to an API server whose watch cache lags: the open watch ends, every watch after it
  // ends with "Too large resource version", and the kubelet's wipe happens meanwhile. The pool is
  // listed again at each retry and is back within seconds (was: not within 60 s).
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.lagging_slice_watches = 1000;
  }
  server.close_watches();
  std::this_thread::sleep_for(20s);  // a doubling backoff would be at 16 s by now
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(server.wipe_node("node-1"), count);
  ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") == count; }, 15s)) << agent.logged();
  std::printf("[ measured ] slices back %lld ms after the wipe, every watch ending at once\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - t0)
                                         .count()));
  EXPECT_THAT(agent.logged(), ::testing::HasSubstr("Too large resource version"));
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.lagging_slice_watches = 0;
  }
  // The server goes away and comes back empty (etcd restored): the watch reconnects and the
  // follower lists again.
  server.stop();
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.slices.clear();
  }
  server.restart();
  ASSERT_TRUE(wait_for([&] { return server.slices_of("node-1") == count; }, 30s)) << agent.logged();
}

}  // namespace
}  // namespace polyaccel::dra
