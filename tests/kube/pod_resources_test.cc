// The pod-resources client against a fake kubelet (real gRPC on a unix socket): the device → pod
// map, time-slicing replicas, a shared device, the cache and its rate limit, an absent socket.
#include "kube/pod_resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "support/fake_pod_resources.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PodResources : public ::testing::Test {
 protected:
  PodResourcesOptions options() const {
    PodResourcesOptions o;
    o.socket = (tmp_.path() / "kubelet.sock").string();
    o.timeout = 5s;
    return o;
  }
  polyaccel::testing::TempDir tmp_;
};

TEST_F(PodResources, MapsDevicesToContainers) {
  polyaccel::testing::FakePodResources kubelet(options().socket);
  kubelet.set({{"train-0", "ml", "main", "nvidia.com/gpu", {"GPU-aaa", "GPU-bbb"}},
               {"infer-1", "serve", "server", "nvidia.com/gpu", {"GPU-ccc::0"}},
               {"infer-2", "serve", "server", "nvidia.com/gpu", {"GPU-ccc::1"}},
               {"mig-job", "ml", "worker", "nvidia.com/mig-1g.10gb", {"MIG-123"}}});
  PodAssignments a = list_pod_resources(options());
  ASSERT_TRUE(a.reachable) << a.error;
  EXPECT_THAT(a.by_device.at("GPU-aaa"),
              ElementsAre(PodRef{"train-0", "ml", "main", "nvidia.com/gpu"}));
  EXPECT_EQ(a.by_device.at("GPU-bbb").size(), 1u);
  // Two time-sliced replicas of one GPU: both pods on the GPU's own id.
  EXPECT_THAT(a.by_device.at("GPU-ccc"),
              ElementsAre(PodRef{"infer-1", "serve", "server", "nvidia.com/gpu"},
                          PodRef{"infer-2", "serve", "server", "nvidia.com/gpu"}));
  EXPECT_EQ(a.by_device.at("MIG-123")[0].resource, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(a.pods_of({"0000:4e:00.0", "GPU-ccc"}).size(), 2u);
}

// DRA claims' devices (kubelet 1.34's dynamic_resources): by driver/pool/device, the claim as
// the PodRef's resource; a container holding both kinds has both; kubelet 1.33 sends none.
TEST_F(PodResources, ClaimDevicesFromKubelet134) {
  polyaccel::testing::FakePodResources kubelet(options().socket);
  kubelet.set({{"train-0",
                "ml",
                "main",
                "",
                {},
                {{"ml",
                  "train",
                  {{"polyaccel.io", "node-1", "gpu-2"}, {"polyaccel.io", "node-1", "nic-0"}}}}},
               {"mixed",
                "ml",
                "side",
                "nvidia.com/gpu",
                {"GPU-aaa"},
                {{"ml", "shared", {{"gpu.nvidia.com", "node-1", "gpu-0"}}}}}});
  PodAssignments a = list_pod_resources(options());
  ASSERT_TRUE(a.reachable) << a.error;
  EXPECT_THAT(a.by_claim_device.at("polyaccel.io/node-1/gpu-2"),
              ElementsAre(PodRef{"train-0", "ml", "main", "ml/train"}));
  EXPECT_EQ(a.by_claim_device.count("polyaccel.io/node-1/nic-0"), 1u);
  EXPECT_THAT(a.by_claim_device.at("gpu.nvidia.com/node-1/gpu-0"),
              ElementsAre(PodRef{"mixed", "ml", "side", "ml/shared"}));
  EXPECT_EQ(a.by_device.at("GPU-aaa")[0].pod, "mixed");
  EXPECT_EQ(a.by_device.size(), 1u) << "a container with claims alone has no device plugin's";
  kubelet.set_kubelet_minor(33);
  PodAssignments old = list_pod_resources(options());
  ASSERT_TRUE(old.reachable);
  EXPECT_TRUE(old.by_claim_device.empty());
  EXPECT_EQ(old.by_device.size(), 1u);
}

TEST_F(PodResources, AbsentSocketIsNoPodsAndNoError) {
  PodAssignments a = list_pod_resources(options());
  EXPECT_FALSE(a.reachable);
  EXPECT_TRUE(a.by_device.empty());
  EXPECT_THAT(a.error, HasSubstr("no such socket"));
}

TEST_F(PodResources, SocketThatDoesNotAnswerIsAnError) {
  auto o = options();
  { polyaccel::testing::FakePodResources gone(o.socket); }  // leaves no server behind
  std::ofstream(o.socket).put('x');                         // a file where the socket was
  o.timeout = 500ms;
  PodAssignments a = list_pod_resources(o);
  EXPECT_FALSE(a.reachable);
  EXPECT_THAT(a.error, HasSubstr("List failed"));
}

TEST_F(PodResources, ClientCachesAndRateLimits) {
  polyaccel::testing::FakePodResources kubelet(options().socket);
  kubelet.set({{"train-0", "ml", "main", "nvidia.com/gpu", {"GPU-aaa"}}});
  auto o = options();
  o.interval = 1h;    // only refresh_soon() makes it List again
  o.min_gap = 300ms;  // and never sooner than this after the last List
  PodResourcesClient client(o);
  client.start();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!client.snapshot()->reachable && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(client.snapshot()->reachable);
  EXPECT_EQ(client.snapshot()->by_device.count("GPU-aaa"), 1u);

  // Many readers and refresh requests: reads come from the cache, Lists stay few.
  kubelet.set({{"train-1", "ml", "main", "nvidia.com/gpu", {"GPU-bbb"}}});
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    client.refresh_soon();
    (void)client.snapshot();
    std::this_thread::sleep_for(1ms);
  }
  while (!client.snapshot()->by_device.count("GPU-bbb") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(client.snapshot()->by_device.count("GPU-bbb"), 1u);
  auto elapsed = std::chrono::steady_clock::now() - start;
  // At most one List per min_gap, plus the first.
  EXPECT_LE(kubelet.lists(), 2 + static_cast<int>(elapsed / o.min_gap));
  EXPECT_EQ(client.lists(), static_cast<std::uint64_t>(kubelet.lists()));
  client.stop();
}

}  // namespace
}  // namespace polyaccel
