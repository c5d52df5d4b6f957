// The device plugin fed by the accelerator monitor, end to end: the NVML test library's 8xH100
// scenario steps through a GPU that falls off the bus with XID 79 and comes back, and kubelet
// (played over the real protocol) sees it Unhealthy, then Healthy again, without a restart.
#include "kube/runner.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace polyaccel
