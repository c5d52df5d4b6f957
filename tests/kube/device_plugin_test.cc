// The device plugin against a kubelet played by the test over the real gRPC protocol
// (fake_kubelet.h): registration, GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation
// and Allocate on the vendors' test libraries (8xH100 NVLink, MIG mixed, time-slicing with 4
// replicas, 8xMI300X, 8xGaudi2); kubelet restarts; a GPU unhealthy and healthy again; 50
// concurrent Allocate calls; a malformed sharing config that leaves the last good one in place.
#include "kube/device_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "kube/fake_kubelet.h"
#include "kube/models.h"

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const std::string kGpu4e = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";
using polyaccel::testing::kGpu5f;

DevicePluginOptions options_for(const TempDir& dir) {
  DevicePluginOptions o;
  o.kubelet_dir = dir.path().string();
  o.poll_interval = 50ms;
  o.root = "";
  o.log = [](const std::string&) {};
  return o;
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  auto p = dir.path() / name;
  std::ofstream(p) << text;
  return p.string();
}

std::map<std::string, std::string> health_of(const v1beta1::ListAndWatchResponse& r) {
  std::map<std::string, std::string> out;
  for (const auto& d : r.devices())
    out[d.id()] = d.health();
  return out;
}

std::vector<std::string> preferred(FakeKubelet::Endpoint& ep,
                                   const std::vector<std::string>& available,
                                   const std::vector<std::string>& must, int size) {
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : available)
    c->add_available_deviceids(id);
  for (const auto& id : must)
    c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = ep.stub->GetPreferredAllocation(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  if (!st.ok() || resp.container_responses_size() != 1) return {};
  return {resp.container_responses(0).deviceids().begin(),
          resp.container_responses(0).deviceids().end()};
}

std::vector<std::string> ids_of(const v1beta1::ListAndWatchResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices())
    out.push_back(d.id());
  return out;
}

// The 8xH100 node served to a kubelet played by the test, whole GPUs unless `adjust` says
// otherwise; `gpu` is kubelet's endpoint of nvidia.com/gpu once it listed `devices` devices.
struct HgxServed {
  HostModel model = hgx_8xh100();
  TempDir dir;
  FakeKubelet kubelet{dir.path().string()};
  std::unique_ptr<DevicePlugin> plugin;
  std::shared_ptr<FakeKubelet::Endpoint> gpu;
  std::optional<v1beta1::ListAndWatchResponse> list;

  bool start(int devices, const std::function<void(DevicePluginOptions&)>& adjust = {}) {
    auto o = options_for(dir);
    if (adjust) adjust(o);
    plugin = std::make_unique<DevicePlugin>(o);
    if (!plugin->start(model)) return false;
    gpu = kubelet.endpoint("nvidia.com/gpu");
    if (!gpu) return false;
    list = kubelet.wait_update(gpu, [&](const auto& r) { return r.devices_size() == devices; });
    return list.has_value();
  }
};

TEST(DevicePlugin, HgxEightH100WithNvlinkOverTheKubeletProtocol) {
  HgxServed s;
  ASSERT_TRUE(s.start(8));
  auto& ep = s.gpu;
  auto& list = s.list;
  EXPECT_EQ(ep->request.endpoint(), "polyaccel-nvidia.com_gpu.sock");
  EXPECT_TRUE(ep->options.get_preferred_allocation_available());
  EXPECT_FALSE(ep->options.pre_start_required());
  int with_topology = 0;
  for (const auto& d : list->devices()) {
    EXPECT_EQ(d.health(), "Healthy");
    if (d.has_topology() && d.topology().nodes_size() > 0) {
      ++with_topology;
      EXPECT_GE(d.topology().nodes(0).id(), 0);  // never -1
    }
  }
  EXPECT_EQ(with_topology, 4);  // the capture's four; the other four have no known NUMA node
  // The pair on one socket (NUMA 1 and 3): 5f:00.0 and 4e:00.0.
  EXPECT_THAT(preferred(*ep, ids_of(*list), {}, 2), UnorderedElementsAre(kGpu4e, kGpu5f));
  v1beta1::AllocateResponse resp;
  auto st = allocate(*ep, {kGpu4e, kGpu5f}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& envs = resp.container_responses(0).envs();
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu4e + "," + kGpu5f);
  EXPECT_EQ(envs.at("NCCL_IB_HCA"), "=mlx5_0,mlx5_1,mlx5_2");
  EXPECT_EQ(resp.container_responses(0).cdi_devices_size(), 0) << "envvar is the default";
  // An id kubelet never got: a clear error, not an empty container.
  st = allocate(*ep, {"GPU-not-here"}, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("GPU-not-here"));
  s.plugin->stop();
  EXPECT_FALSE(std::filesystem::exists(s.dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  EXPECT_TRUE(std::filesystem::exists(s.dir.path() / "kubelet.sock"));  // kubelet's own: untouched
}

TEST(DevicePlugin, MigMixedServesOneResourcePerProfile) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  auto o = options_for(dir);
  o.mig_strategy = MigStrategy::mixed;
  DevicePlugin plugin(o);
  ASSERT_TRUE(plugin.start(m));
  EXPECT_THAT(plugin.resources(), ElementsAre("nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
                                              "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"));
  auto gpu = kubelet.endpoint("nvidia.com/gpu");
  auto big = kubelet.endpoint("nvidia.com/mig-3g.40gb");
  ASSERT_TRUE(gpu && big);
  EXPECT_TRUE(kubelet.wait_update(gpu, [](const auto& r) { return r.devices_size() == 7; }));
  auto list = kubelet.wait_update(big, [](const auto& r) { return r.devices_size() == 1; });
  ASSERT_TRUE(list);
  EXPECT_EQ(list->devices(0).id(), "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58");
  EXPECT_EQ(list->devices(0).topology().nodes(0).id(), 5);
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(allocate(*big, {list->devices(0).id()}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"),
            "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58");
}

// --device-list-strategy cdi-cri: Allocate names the CDI devices of the specs `polyaccel cdi
// generate` writes for the same node (the binary, on the same test NVML), and leaves the vendor's
// variables to the spec; the default (envvar) sends no CDI devices.
TEST(DevicePlugin, CdiCriNamesTheDevicesOfTheSpecsCdiGenerateWrites) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  auto o = options_for(dir);
  o.mig_strategy = MigStrategy::mixed;
  o.allocate.device_list = {false, true};
  DevicePlugin plugin(o);
  ASSERT_TRUE(plugin.start(m));
  auto gpu = kubelet.endpoint("nvidia.com/gpu");
  auto big = kubelet.endpoint("nvidia.com/mig-3g.40gb");
  ASSERT_TRUE(gpu && big);
  ASSERT_TRUE(kubelet.wait_update(gpu, [](const auto& r) { return r.devices_size() == 7; }));
  auto mig = kubelet.wait_update(big, [](const auto& r) { return r.devices_size() == 1; });
  ASSERT_TRUE(mig);
  auto cdi_of = [](const v1beta1::ContainerAllocateResponse& c) {
    std::vector<std::string> out;
    for (const auto& d : c.cdi_devices())
      out.push_back(d.name());
    return out;
  };
  v1beta1::AllocateResponse two, one;
  ASSERT_TRUE(allocate(*gpu, {kGpu4e, kGpu5f}, &two).ok());
  ASSERT_TRUE(allocate(*big, {mig->devices(0).id()}, &one).ok());
  const auto& c = two.container_responses(0);
  EXPECT_THAT(cdi_of(c), ElementsAre("polyaccel.io/gpu=" + kGpu4e, "polyaccel.io/gpu=" + kGpu5f));
  EXPECT_EQ(c.envs().count("NVIDIA_VISIBLE_DEVICES"), 0u) << "the CDI spec sets it";
  EXPECT_EQ(c.devices_size(), 0);
  EXPECT_EQ(c.envs().at("NCCL_IB_HCA"), "=mlx5_0,mlx5_1,mlx5_2") << "not in a node spec";
  EXPECT_THAT(cdi_of(one.container_responses(0)),
              ElementsAre("polyaccel.io/gpu=MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58"));

  // The node's specs as `polyaccel cdi generate` writes them: every name Allocate gave is a
  // device there, with the same edits as the device's pool name.
  const char* bus[] = {"18", "2a", "4e", "5f", "9a", "ab", "cb", "db"};
  for (int i = 0; i < 8; ++i) {
    auto info = dir.path() / "root/proc/driver/nvidia/gpus" /
                ("0000:" + std::string(bus[i]) + ":00.0") / "information";
    std::filesystem::create_directories(info.parent_path());
    std::ofstream(info) << "Device Minor: " << i << "\n";
  }
  // db:00.0's (minor 7) 3g.40gb instance: GPU instance 2, compute instance 0.
  std::filesystem::create_directories(dir.path() / "root/proc/driver/nvidia-caps");
  std::ofstream(dir.path() / "root/proc/driver/nvidia-caps/mig-minors")
      << "config 1\nmonitor 2\ngpu7/gi2/access 66\ngpu7/gi2/ci0/access 67\n";
  auto g = run_command(polyaccel_binary() + " cdi generate --topology '" +
                       topology_fixture(kXe8640).string() + "' --accel-backends on --root '" +
                       (dir.path() / "root").string() + "' --cdi-dir '" +
                       (dir.path() / "cdi").string() + "' --json");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  auto spec = nlohmann::json::parse(std::ifstream(dir.path() / "cdi/polyaccel.io-gpu.json"));
  ASSERT_EQ(spec["kind"], "polyaccel.io/gpu");
  std::map<std::string, nlohmann::json> edits;
  for (const auto& d : spec["devices"])
    edits[d["name"]] = d["containerEdits"];
  std::vector<std::string> names = cdi_of(c);
  names.push_back(cdi_of(one.container_responses(0))[0]);
  for (const auto& n : names) {
    std::string device = n.substr(n.find('=') + 1);
    ASSERT_EQ(edits.count(device), 1u) << n << " is not in the spec";
  }
  EXPECT_EQ(edits[kGpu4e]["deviceNodes"][0]["path"], "/dev/nvidia2");
  EXPECT_EQ(edits[kGpu4e]["env"][0], "NVIDIA_VISIBLE_DEVICES=" + kGpu4e);
  bool same_as_pool_name = false;
  for (const auto& [name, e] : edits)
    same_as_pool_name = same_as_pool_name || (name.rfind("gpu-", 0) == 0 && e == edits[kGpu4e]);
  EXPECT_TRUE(same_as_pool_name);

  // envvar and cdi-cri together: both.
  auto both = parse_device_list_strategy("envvar,cdi-cri", "--device-list-strategy");
  ASSERT_TRUE(both);
  EXPECT_TRUE(both->envvar && both->cdi_cri);
  auto bad = parse_device_list_strategy("envvar,volume-mounts", "--device-list-strategy");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("'volume-mounts' is not a device list strategy"));
}

TEST(DevicePlugin, TimeSlicingFourReplicasSpreadsOverDistinctGpus) {
  HgxServed s;
  ASSERT_TRUE(s.start(32, [&](DevicePluginOptions& o) {
    o.sharing_config = write(s.dir, "sharing.yaml",
                             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                             "    - name: nvidia.com/gpu\n      replicas: 4\n");
    o.nfd_features_dir = s.dir.path().string();
  }));
  auto& ep = s.gpu;
  auto& list = s.list;
  auto chosen = preferred(*ep, ids_of(*list), {}, 4);
  std::set<std::string> gpus;
  for (const auto& id : chosen)
    gpus.insert(id.substr(0, id.find("::")));
  EXPECT_EQ(gpus.size(), 4u);
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(allocate(*ep, {kGpu4e + "::1", kGpu4e + "::2"}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), kGpu4e);
  // GFD's labels in the feature file.
  auto labels = read_text_file(s.dir.path() / "polyaccel");
  ASSERT_TRUE(labels);
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/gpu.replicas=4\n"));
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/gpu.sharing-strategy=time-slicing\n"));
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/gpu.count=8\n"));
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-SHARED\n"));
}

TEST(DevicePlugin, AmdAndGaudiNodes) {
  for (bool amd : {true, false}) {
    HostModel m = injected_only(amd);
    ASSERT_EQ(m.accelerators.size(), 8u);
    TempDir dir;
    for (unsigned i = 0; i < 8; ++i) {
      auto pci = dir.path() / "sys/bus/pci/devices" / m.accelerators[i].pci.address.to_string();
      std::filesystem::create_directories(pci / "drm" / ("renderD" + std::to_string(128 + i)));
      std::filesystem::create_directories(pci / "accel" / ("accel" + std::to_string(i)));
    }
    FakeKubelet kubelet(dir.path().string());
    auto o = options_for(dir);
    o.root = dir.path().string();
    DevicePlugin plugin(o);
    ASSERT_TRUE(plugin.start(m));
    const std::string name = amd ? "amd.com/gpu" : "habana.ai/gaudi";
    auto ep = kubelet.endpoint(name);
    ASSERT_TRUE(ep) << name;
    auto list = kubelet.wait_update(ep, [](const auto& r) { return r.devices_size() == 8; });
    ASSERT_TRUE(list) << name;
    EXPECT_FALSE(list->devices(0).has_topology());  // no NUMA node known: no TopologyInfo
    auto two = preferred(*ep, ids_of(*list), {}, 2);
    ASSERT_EQ(two.size(), 2u);
    v1beta1::AllocateResponse resp;
    auto st = allocate(*ep, two, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const auto& c = resp.container_responses(0);
    if (amd) {
      ASSERT_EQ(c.devices_size(), 3);
      EXPECT_EQ(c.devices(0).container_path(), "/dev/kfd");
      EXPECT_THAT(c.devices(1).container_path(), HasSubstr("/dev/dri/renderD"));
    } else {
      ASSERT_EQ(c.devices_size(), 4);
      EXPECT_EQ(c.envs().at("HL_VISIBLE_DEVICES_UUID"), two[0] + "," + two[1]);
      EXPECT_THAT(c.devices(0).container_path(), HasSubstr("/dev/accel/accel"));
    }
  }
}

TEST(DevicePlugin, RegistersAgainWhenKubeletRestarts) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  auto o = options_for(dir);
  DevicePlugin plugin(o);
  write(dir, "kubelet_internal_checkpoint", "{}");
  // The plugin starts first: it serves, and registers once kubelet.sock appears.
  ASSERT_TRUE(plugin.start(m));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  auto kubelet = std::make_unique<FakeKubelet>(dir.path().string());
  ASSERT_TRUE(kubelet->endpoint("nvidia.com/gpu"));
  // kubelet restarts: it goes away, deletes every socket in its directory, comes back.
  kubelet->stop();
  kubelet.reset();
  std::filesystem::remove(dir.path() / "polyaccel-nvidia.com_gpu.sock");
  kubelet = std::make_unique<FakeKubelet>(dir.path().string());
  auto ep = kubelet->endpoint("nvidia.com/gpu", 10s);
  ASSERT_TRUE(ep);
  EXPECT_TRUE(kubelet->wait_update(ep, [](const auto& r) { return r.devices_size() == 8; }));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  v1beta1::AllocateResponse resp;
  EXPECT_TRUE(allocate(*ep, {kGpu4e}, &resp).ok());
  EXPECT_EQ(plugin.registrations(), 2u);
  plugin.stop();
  // kubelet's own files stay: its socket and its checkpoint.
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "kubelet.sock"));
  EXPECT_EQ(*read_text_file(dir.path() / "kubelet_internal_checkpoint"), "{}");
}

TEST(DevicePlugin, AGpuUnhealthyAndHealthyAgainIsTwoUpdates) {
  HgxServed s;
  ASSERT_TRUE(s.start(8));
  auto& ep = s.gpu;
  auto& kubelet = s.kubelet;
  auto& plugin = *s.plugin;
  size_t before = kubelet.update_count(ep);
  plugin.set_health({{"0000:9a:00.0", false}});
  const std::string lost = "GPU-4f92b1e6-8a3c-d057-19e4-b6d2f0a7c385";  // 9a:00.0
  auto down =
      kubelet.wait_update(ep, [&](const auto& r) { return health_of(r)[lost] == "Unhealthy"; });
  ASSERT_TRUE(down);
  for (const auto& [id, h] : health_of(*down)) {
    if (id != lost) {
      EXPECT_EQ(h, "Healthy") << id;
    }
  }
  plugin.set_health({{"0000:9a:00.0", false}});  // no change: no update
  plugin.set_health({{"0000:9a:00.0", true}});
  auto up = kubelet.wait_update(ep, [&](const auto& r) { return health_of(r)[lost] == "Healthy"; });
  ASSERT_TRUE(up);
  EXPECT_EQ(kubelet.update_count(ep), before + 2);
}

TEST(DevicePlugin, FiftyConcurrentAllocateCalls) {
  HgxServed s;
  ASSERT_TRUE(s.start(64, [&](DevicePluginOptions& o) {
    o.sharing_config = write(s.dir, "sharing.yaml",
                             "sharing:\n  timeSlicing:\n    resources:\n"
                             "    - {name: nvidia.com/gpu, replicas: 8}\n");
  }));
  auto& ep = s.gpu;
  auto& list = s.list;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 50; ++t) {
    threads.emplace_back([&, t] {
      const std::string id = list->devices(t).id();
      v1beta1::AllocateResponse resp;
      auto st = allocate(*ep, {id}, &resp);
      if (st.ok() && resp.container_responses_size() == 1 &&
          resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES") ==
              id.substr(0, id.find("::")))
        ++good;
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(good.load(), 50);
}

TEST(DevicePlugin, AMalformedSharingConfigKeepsTheLastGoodOne) {
  std::vector<std::string> lines;
  std::mutex lines_mutex;
  HgxServed s;
  auto& dir = s.dir;
  ASSERT_TRUE(s.start(32, [&](DevicePluginOptions& o) {
    o.log = [&](const std::string& l) {
      std::lock_guard lock(lines_mutex);
      lines.push_back(l);
    };
    o.sharing_config = write(dir, "sharing.yaml",
                             "sharing:\n  timeSlicing:\n    resources:\n"
                             "    - {name: nvidia.com/gpu, replicas: 4}\n");
  }));
  auto& ep = s.gpu;
  auto& kubelet = s.kubelet;
  auto& plugin = *s.plugin;
  write(dir, "sharing.yaml",
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: two}\n");
  for (int i = 0; i < 200 && !plugin.sharing_config_error(); ++i)
    std::this_thread::sleep_for(10ms);
  auto err = plugin.sharing_config_error();
  ASSERT_TRUE(err);
  EXPECT_THAT(err->message(), HasSubstr("is not a whole number"));
  {
    std::lock_guard lock(lines_mutex);
    ASSERT_FALSE(lines.empty());
    EXPECT_THAT(lines.back(), HasSubstr("keeping the last good sharing config"));
  }
  v1beta1::AllocateResponse resp;
  EXPECT_TRUE(allocate(*ep, {kGpu4e + "::3"}, &resp).ok());  // still 4 replicas
  // Fixed: 2 replicas each, through ListAndWatch, without a restart.
  write(dir, "sharing.yaml",
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n");
  EXPECT_TRUE(kubelet.wait_update(ep, [](const auto& r) { return r.devices_size() == 16; }));
  EXPECT_FALSE(plugin.sharing_config_error());
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
}

TEST(DevicePlugin, ABadSharingConfigAtStartIsAnError) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  auto o = options_for(dir);
  o.sharing_config = write(dir, "sharing.yaml", "version: v2\n");
  DevicePlugin plugin(o);
  auto st = plugin.start(m);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);
  EXPECT_THAT(st.error().message(), HasSubstr("unknown version 'v2'"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()) ||
              !std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
}

// Kubernetes' kubelet deletes every socket of its directory when it starts again. The plugin
// sees that through inotify (the fallback look is a minute away here) and registers again at
// once; the latency from the new kubelet's start to its Register call is printed, over 100
// restarts (a figure, not an assertion on time). Each registration is logged, not only the first.
TEST(DevicePlugin, ReRegistersWithinMillisecondsOfEachOfAHundredKubeletRestarts) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  std::mutex lines_mutex;
  std::vector<std::string> lines;
  auto o = options_for(dir);
  o.poll_interval = 60s;
  o.log = [&](const std::string& l) {
    std::lock_guard lock(lines_mutex);
    lines.push_back(l);
  };
  auto kubelet = std::make_unique<FakeKubelet>(dir.path().string());
  DevicePlugin plugin(o);
  ASSERT_TRUE(plugin.start(m));
  ASSERT_TRUE(kubelet->endpoint("nvidia.com/gpu"));
  std::vector<double> latency_ms;
  const int kRestarts = 100;
  for (int i = 0; i < kRestarts; ++i) {
    kubelet->stop();
    kubelet.reset();
    std::filesystem::remove(dir.path() / "polyaccel-nvidia.com_gpu.sock");  // as kubelet does
    kubelet = std::make_unique<FakeKubelet>(dir.path().string());
    // Far below the fallback look: only inotify explains a registration inside this wait.
    auto ep = kubelet->endpoint("nvidia.com/gpu", 20s);
    ASSERT_TRUE(ep) << "restart " << i;
    latency_ms.push_back(
        std::chrono::duration<double, std::milli>(ep->received - kubelet->listening_since())
            .count());
    ASSERT_TRUE(kubelet->wait_update(ep, [](const auto& r) { return r.devices_size() == 8; }));
  }
  EXPECT_EQ(plugin.registrations(), static_cast<unsigned>(kRestarts + 1));
  std::sort(latency_ms.begin(), latency_ms.end());
  std::printf(
      "re-registration after a kubelet restart, %d restarts: p50 %.2f ms, p90 %.2f ms, "
      "max %.2f ms\n",
      kRestarts, latency_ms[latency_ms.size() / 2], latency_ms[latency_ms.size() * 9 / 10],
      latency_ms.back());
  plugin.stop();
  std::lock_guard lock(lines_mutex);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) {
                            return l.rfind("registered nvidia.com/gpu with kubelet", 0) == 0;
                          }),
            kRestarts + 1);
}

TEST(DevicePlugin, ASecondAgentOnTheSameDirectoryIsRefused) {
  HostModel m = hgx_8xh100();
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  DevicePlugin first(options_for(dir));
  ASSERT_TRUE(first.start(m));
  ASSERT_TRUE(kubelet.endpoint("nvidia.com/gpu"));
  DevicePlugin second(options_for(dir));
  auto st = second.start(m);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);  // the agent exits 2 with it
  EXPECT_THAT(st.error().message(), HasSubstr("polyaccel.lock"));
  EXPECT_THAT(st.error().message(),
              HasSubstr("held by another polyaccel agent (pid " + std::to_string(::getpid())));
  // The second one touched nothing: the first still serves, registered once.
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
  first.stop();
  DevicePlugin third(options_for(dir));  // the directory is free again
  EXPECT_TRUE(third.start(m));
}

// The four GPUs NVML reports that the XE8640 capture lacks take their NUMA node from sysfs
// where it gives a node of the host (18:00.0 → 1); -1 (firmware gives none) and a node the host
// does not have stay without TopologyInfo. The log says where each device's locality came from.
TEST(DevicePlugin, GpusTheTopologyLacksTakeTheirNumaNodeFromSysfs) {
  std::mutex lines_mutex;  // before the plugin: it logs until it is destroyed
  std::vector<std::string> lines;
  HgxServed s;
  auto pci = s.dir.path() / "sys/bus/pci/devices";
  std::filesystem::create_directories(pci / "0000:18:00.0");
  std::filesystem::create_directories(pci / "0000:2a:00.0");
  std::filesystem::create_directories(pci / "0000:9a:00.0");
  write(s.dir, "sys/bus/pci/devices/0000:18:00.0/numa_node", "1\n");
  write(s.dir, "sys/bus/pci/devices/0000:2a:00.0/numa_node", "-1\n");
  write(s.dir, "sys/bus/pci/devices/0000:9a:00.0/numa_node", "4096\n");
  ASSERT_TRUE(s.start(8, [&](DevicePluginOptions& o) {
    o.root = s.dir.path().string();
    o.log = [&](const std::string& l) {
      std::lock_guard lock(lines_mutex);
      lines.push_back(l);
    };
  }));
  std::map<std::string, int> numa;
  for (const auto& d : s.list->devices()) {
    if (d.has_topology() && d.topology().nodes_size() == 1)
      numa[d.id()] = d.topology().nodes(0).id();
  }
  EXPECT_EQ(numa.size(), 5u);
  std::lock_guard lock(lines_mutex);
  auto said = [&](const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(said("0000:18:00.0: NUMA node 1 from sysfs numa_node"));
  EXPECT_TRUE(said("0000:4e:00.0: NUMA node 3 from the host topology"));
  EXPECT_TRUE(said("0000:2a:00.0: unknown"));
  EXPECT_TRUE(said("0000:9a:00.0: unknown"));
  EXPECT_EQ(numa.at("GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"), 1);  // 18:00.0
}

}  // namespace
}  // namespace polyaccel
