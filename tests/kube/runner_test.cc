// The device plugin fed by the accelerator monitor, end to end: the NVML test library's 8xH100
// scenario steps through a GPU that falls off the bus with XID 79 and comes back, and kubelet
// (played over the real protocol) sees it Unhealthy, then Healthy again, without a restart; on the
// 8xH200 MIG scenario a MIG instance made, destroyed and a GPU's MIG mode turned off while the
// agent runs (through MigControl, the path of `polyaccel mig apply`) reach ListAndWatch.
#include "kube/runner.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "discover/accel/partition.h"
#include "kube/fake_kubelet.h"
#include "kube/models.h"

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using namespace std::chrono_literals;

TEST(DevicePluginRunner, HealthFollowsTheMonitorBothWays) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  DiscoverOptions d;
  d.topology_xml = topology_fixture(kXe8640).string();
  d.backends = BackendMode::off;
  auto host = discover_host(d);
  ASSERT_TRUE(host);
  MonitorOptions mo;
  mo.interval = 20ms;
  mo.health.recovery = 0s;  // healthy as soon as the library answers again
  AcceleratorMonitor monitor(*host, make_all_backends(), mo);
  monitor.start();

  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  DevicePluginOptions o;
  o.kubelet_dir = dir.path().string();
  o.poll_interval = 50ms;
  o.root = "";
  o.log = [](const std::string&) {};
  DevicePluginRunner runner(monitor, o);
  ASSERT_TRUE(runner.start(30s));
  auto ep = kubelet.endpoint("nvidia.com/gpu");
  ASSERT_TRUE(ep);
  const std::string lost = "GPU-4f92b1e6-8a3c-d057-19e4-b6d2f0a7c385";  // 9a:00.0
  auto health = [&](const std::string& want) {
    return [&, want](const v1beta1::ListAndWatchResponse& r) {
      for (const auto& dev : r.devices()) {
        if (dev.id() == lost) return dev.health() == want && r.devices_size() == 8;
      }
      return false;
    };
  };
  ASSERT_TRUE(kubelet.wait_update(ep, health("Healthy"), 30s));
  inject_step(NVML_INJECT_LIB, 2);  // 9a:00.0 falls off the bus, with XID 79
  EXPECT_TRUE(kubelet.wait_update(ep, health("Unhealthy"), 30s));
  inject_step(NVML_INJECT_LIB, 3);  // it is back
  EXPECT_TRUE(kubelet.wait_update(ep, health("Healthy"), 30s));
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
  runner.stop();
  monitor.stop();
}

// A GPU already lost when the agent starts (NVML answers GPU_IS_LOST for 4e:00.0 at step 0 of a
// copy of the 8xH100 scenario) is advertised Unhealthy under its PCI bus id, so that kubelet's
// capacity stays 8; once NVML lists it again (step 1, found by the monitor's rescan) it is there
// under its UUID, Healthy, without a restart or a new registration.
TEST(DevicePluginRunner, AGpuLostAtStartIsUnhealthyThenReturns) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  TempDir dir;
  nlohmann::json scenario;
  std::ifstream(std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json") >> scenario;
  scenario["steps"][0]["devices"]["0000:4e:00.0"]["lost"] = true;
  const auto scenario_file = dir.path() / "lost-at-start.json";
  std::ofstream(scenario_file) << scenario.dump();
  ::setenv("NVML_INJECT_SCENARIO", scenario_file.c_str(), 1);

  DiscoverOptions d;
  d.topology_xml = topology_fixture(kXe8640).string();
  d.backends = BackendMode::off;
  auto host = discover_host(d);
  ASSERT_TRUE(host);
  MonitorOptions mo;
  mo.interval = 20ms;
  mo.rescan = 50ms;
  mo.health.recovery = 0s;
  AcceleratorMonitor monitor(*host, make_all_backends(), mo);
  monitor.start();
  FakeKubelet kubelet(dir.path().string());
  DevicePluginOptions o;
  o.kubelet_dir = dir.path().string();
  o.root = "";
  o.log = [](const std::string&) {};
  DevicePluginRunner runner(monitor, o);
  ASSERT_TRUE(runner.start(30s));
  auto ep = kubelet.endpoint("nvidia.com/gpu");
  ASSERT_TRUE(ep);
  auto health_of = [](const v1beta1::ListAndWatchResponse& r, const std::string& id) {
    for (const auto& dev : r.devices()) {
      if (dev.id() == id) return dev.health();
    }
    return std::string("absent");
  };
  const std::string gpu4e = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";
  auto lost = kubelet.wait_update(ep, [&](const auto& r) {
    return r.devices_size() == 8 && health_of(r, "0000:4e:00.0") == "Unhealthy";
  });
  ASSERT_TRUE(lost);
  EXPECT_EQ(health_of(*lost, gpu4e), "absent");
  EXPECT_EQ(lost->devices_size(), 8);
  inject_step(NVML_INJECT_LIB, 1);  // 4e:00.0 answers again
  auto back = kubelet.wait_update(
      ep, [&](const auto& r) { return r.devices_size() == 8 && health_of(r, gpu4e) == "Healthy"; },
      30s);
  ASSERT_TRUE(back);
  EXPECT_EQ(health_of(*back, "0000:4e:00.0"), "absent");
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
  runner.stop();
  monitor.stop();
  use_vendor_libraries(NVML_INJECT_LIB, "", "");  // the scenario of the other tests
}

bool lists(const v1beta1::ListAndWatchResponse& r, const std::string& id) {
  for (const auto& dev : r.devices()) {
    if (dev.id() == id) return dev.health() == "Healthy";
  }
  return false;
}

// The mixed strategy on hgx-8xh200-mig.json: ab:00.0 is a whole GPU whose MIG mode changes
// without a reset, 18:00.0 holds 7 x 1g.18gb. The monitor rescans every 100 ms, as the DRA
// runner's test.
TEST(DevicePluginRunner, MigChangesWhileRunningReachListAndWatch) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  ::setenv("NVML_INJECT_SCENARIO",
           (std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json").c_str(), 1);
  auto control = open_nvml_mig_control();  // first: it keeps the library's MIG state
  ASSERT_TRUE(control) << control.error().message();
  const std::string bdf = "0000:ab:00.0";
  const std::string whole = "GPU-3f0c0005-8a1e-4c2b-9d7f-0000005e0a05";  // ab:00.0
  unsigned index = 0;
  auto gpus = (*control)->gpus();
  ASSERT_TRUE(gpus);
  for (const auto& g : *gpus)
    if (g.pci_bus_id == bdf) index = g.index;

  MonitorOptions mo;
  mo.interval = 100ms;
  mo.rescan = 100ms;
  AcceleratorMonitor monitor(load_fixture(kXe8640), make_all_backends(), mo);
  monitor.start();
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  DevicePluginOptions o;
  o.kubelet_dir = dir.path().string();
  o.poll_interval = 50ms;
  o.root = "";
  o.mig_strategy = MigStrategy::mixed;
  std::mutex log_mu;
  std::string log;
  o.log = [&](const std::string& line) {
    std::lock_guard lock(log_mu);
    log += line + "\n";
  };
  DevicePluginRunner runner(monitor, o);
  ASSERT_TRUE(runner.start(60s));
  auto mig = kubelet.endpoint("nvidia.com/mig-1g.18gb");
  auto gpu = kubelet.endpoint("nvidia.com/gpu");
  ASSERT_TRUE(mig && gpu);
  auto before = kubelet.wait_update(mig, [](const auto& r) { return r.devices_size() > 0; });
  ASSERT_TRUE(before);
  const int count = before->devices_size();
  ASSERT_TRUE(kubelet.wait_update(gpu, [&](const auto& r) { return lists(r, whole); }));

  // MIG mode on: a MIG-enabled GPU without instances serves nothing (mixed strategy).
  auto on = (*control)->set_mig_mode(index, true);
  ASSERT_TRUE(on) << on.error().message();
  ASSERT_EQ(*on, MigModeChange::applied);
  ASSERT_TRUE(kubelet.wait_update(
      gpu, [&](const auto& r) { return !lists(r, whole); }, 30s));

  // A 1g.18gb instance made beside the agent: the next rescan shows it, kubelet gets it.
  auto made = (*control)->create(index, 19, 0);
  ASSERT_TRUE(made) << made.error().message();
  auto grown = kubelet.wait_update(
      mig, [&](const auto& r) { return r.devices_size() == count + 1 && lists(r, made->uuid); },
      30s);
  ASSERT_TRUE(grown);
  v1beta1::AllocateResponse ok;
  ASSERT_TRUE(allocate(*mig, {made->uuid}, &ok).ok());
  EXPECT_EQ(ok.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), made->uuid);

  // Destroyed again: withdrawn from the list, and an Allocate kubelet chose before is refused.
  ASSERT_TRUE((*control)->destroy(index, made->gpu_instance_id));
  ASSERT_TRUE(kubelet.wait_update(
      mig, [&](const auto& r) { return r.devices_size() == count && !lists(r, made->uuid); }, 30s));
  v1beta1::AllocateResponse refused;
  grpc::Status st = allocate(*mig, {made->uuid}, &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(), "device " + made->uuid +
                                    ": nvidia.com/mig-1g.18gb no longer advertises it (the node's "
                                    "devices changed: a MIG reconfiguration or a GPU gone); the "
                                    "pod must be scheduled again");

  // MIG mode off again: the whole GPU is back under nvidia.com/gpu.
  auto mode = (*control)->set_mig_mode(index, false);
  ASSERT_TRUE(mode) << mode.error().message();
  ASSERT_EQ(*mode, MigModeChange::applied);
  EXPECT_TRUE(kubelet.wait_update(
      gpu, [&](const auto& r) { return lists(r, whole); }, 30s));
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
  EXPECT_EQ(kubelet.registrations("nvidia.com/mig-1g.18gb"), 1u);
  runner.stop();
  monitor.stop();
  std::lock_guard lock(log_mu);
  EXPECT_NE(log.find("nvidia.com/mig-1g.18gb: " + std::to_string(count + 1) + " devices now, +" +
                     made->uuid),
            std::string::npos)
      << log;
  use_vendor_libraries(NVML_INJECT_LIB, "", "");  // the scenario of the other tests
}

}  // namespace
}  // namespace polyaccel
