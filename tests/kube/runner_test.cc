// The device plugin fed by the accelerator monitor, end to end: the NVML test library's 8xH100
// scenario steps through a GPU that falls off the bus with XID 79 and comes back, and kubelet
// (played over the real protocol) sees it Unhealthy, then Healthy again, without a restart.
#include "kube/runner.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace polyaccel
