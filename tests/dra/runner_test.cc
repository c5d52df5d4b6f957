// The DRA runner on a running accelerator monitor (the 8xH200 MIG test NVML, rescans every
// 100 ms): a MIG instance made or destroyed while the agent runs (as `polyaccel mig apply` does,
// through MigControl) reaches the published ResourceSlices as a new pool generation, every
// object valid by the resource.k8s.io/v1 schema (the test API server).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "discover/accel/monitor.h"
#include "dra/dra_fixture.h"
#include "dra/fake_api_server.h"
#include "dra/runner.h"

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
    for (const auto& d : s["spec"]["devices"])
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
  KubeConfig kc;
  kc.server = server.url();
  kc.token = "test-token";
  DraRunner runner(monitor, ro, std::make_unique<KubeClient>(kc));
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

}  // namespace
}  // namespace polyaccel::dra
