// RDMA NIC resources against a kubelet played by the test over the real gRPC protocol: shared
// HCAs of the XE8640 capture with TopologyInfo, a GPU and an HCA requested together (the HCA
// nearest the pod's GPU, and the same NCCL_IB_HCA as the GPU's own Allocate and `polyaccel run`),
// the GPU plugin's --gpu-rdma-devices, SR-IOV VFs of a ConnectX-4 built from the NEC capture,
// and a bad edit of the NIC config that keeps the last good one.
#include <fstream>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/device_plugin.h"
#include "kube/fake_kubelet.h"
#include "kube/models.h"
#include "support/sriov_tree.h"

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using polyaccel::testing::kGpu5f;

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The verbs and MAD nodes of the XE8640's four HCAs, as mlx5_ib shows them in sysfs.
void add_xe8640_verbs(const std::filesystem::path& root) {
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i), dev = "mlx5_" + n;
    write_file(root / "sys/class/infiniband_verbs" / ("uverbs" + n) / "ibdev", dev + "\n");
    write_file(root / "sys/class/infiniband_mad" / ("umad" + n) / "ibdev", dev + "\n");
    write_file(root / "sys/class/infiniband_mad" / ("issm" + n) / "ibdev", dev + "\n");
  }
}

v1beta1::ContainerAllocateResponse allocate(FakeKubelet::Endpoint& ep,
                                            const std::vector<std::string>& ids) {
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : ids)
    c->add_devices_ids(id);
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = ep.stub->Allocate(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.container_responses_size() == 1 ? resp.container_responses(0)
                                              : v1beta1::ContainerAllocateResponse{};
}

std::vector<std::string> preferred(FakeKubelet::Endpoint& ep,
                                   const v1beta1::ListAndWatchResponse& list, int size) {
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& d : list.devices())
    c->add_available_deviceids(d.id());
  c->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = ep.stub->GetPreferredAllocation(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  if (resp.container_responses_size() != 1) return {};
  return {resp.container_responses(0).deviceids().begin(),
          resp.container_responses(0).deviceids().end()};
}

std::vector<std::string> paths(const v1beta1::ContainerAllocateResponse& c) {
  std::vector<std::string> out;
  for (const auto& d : c.devices())
    out.push_back(d.container_path());
  return out;
}

struct Served {
  TempDir dir;
  std::mutex lines_mutex;  // before the plugin: it logs until it is destroyed
  std::vector<std::string> lines;
  FakeKubelet kubelet{dir.path().string()};
  std::unique_ptr<DevicePlugin> plugin;

  DevicePluginOptions options() {
    DevicePluginOptions o;
    o.kubelet_dir = dir.path().string();
    o.root = dir.path().string();
    o.log = [this](const std::string& l) {
      std::lock_guard lock(lines_mutex);
      lines.push_back(l);
    };
    return o;
  }
  std::string config(const std::string& text) {
    auto p = dir.path() / "nics.yaml";
    std::ofstream(p) << text;
    return p.string();
  }
};

TEST(NicPlugin, AGpuAndItsNearestSharedHcaTogether) {
  Served s;
  add_xe8640_verbs(s.dir.path());
  auto o = s.options();
  o.nic_config = s.config(
      "configList:\n- resourceName: hca\n  rdmaHcaMax: 4\n  selectors: {vendors: [\"15b3\"]}\n");
  s.plugin = std::make_unique<DevicePlugin>(o);
  ASSERT_TRUE(s.plugin->start(hgx_8xh100()));
  EXPECT_THAT(s.plugin->resources(), ElementsAre("nvidia.com/gpu", "rdma/hca"));
  auto gpu = s.kubelet.endpoint("nvidia.com/gpu");
  auto hca = s.kubelet.endpoint("rdma/hca");
  ASSERT_TRUE(gpu && hca);
  auto list = s.kubelet.wait_update(hca, [](const auto& r) { return r.devices_size() == 16; });
  ASSERT_TRUE(list);
  for (const auto& d : list->devices()) {
    EXPECT_EQ(d.health(), "Healthy") << d.id();
    ASSERT_TRUE(d.has_topology() && d.topology().nodes_size() == 1) << d.id();
    EXPECT_GE(d.topology().nodes(0).id(), 0);
  }
  // kubelet allocates the pod's GPU first, then asks the NIC plugin: the HCA next to that GPU.
  auto g = allocate(*gpu, {kGpu5f});
  EXPECT_EQ(g.envs().at("NCCL_IB_HCA"), "=mlx5_2");
  EXPECT_EQ(g.devices_size(), 0);  // no --gpu-rdma-devices
  auto chosen = preferred(*hca, *list, 1);
  ASSERT_THAT(chosen, ElementsAre("mlx5_2::0"));
  auto n = allocate(*hca, chosen);
  EXPECT_THAT(paths(n), ElementsAre("/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs2",
                                    "/dev/infiniband/umad2", "/dev/infiniband/issm2"));
  for (const auto& d : n.devices()) {
    EXPECT_EQ(d.host_path(), d.container_path());
    EXPECT_EQ(d.permissions(), "rw");
  }
  EXPECT_EQ(n.envs().at("NCCL_IB_HCA"), g.envs().at("NCCL_IB_HCA"));
  EXPECT_EQ(n.envs().at("UCX_NET_DEVICES"), "mlx5_2:1");
  EXPECT_EQ(g.envs().at("UCX_NET_DEVICES"), "mlx5_2:1");
}

TEST(NicPlugin, TheGpuPluginPassesTheNearestHcaWhenAsked) {
  Served s;
  add_xe8640_verbs(s.dir.path());
  auto o = s.options();
  o.allocate.gpu_rdma_devices = true;
  s.plugin = std::make_unique<DevicePlugin>(o);
  ASSERT_TRUE(s.plugin->start(hgx_8xh100()));
  auto gpu = s.kubelet.endpoint("nvidia.com/gpu");
  ASSERT_TRUE(gpu);
  auto g = allocate(*gpu, {kGpu5f});
  EXPECT_THAT(paths(g), ElementsAre("/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs2",
                                    "/dev/infiniband/umad2", "/dev/infiniband/issm2"));
  EXPECT_EQ(g.envs().at("NVIDIA_VISIBLE_DEVICES"), kGpu5f);
}

TEST(NicPlugin, ConnectX4VfsAsAPoolAndABadEditKeepsTheLastGoodConfig) {
  Served s;
  std::filesystem::create_directories(s.dir.path() / "host");
  auto root = extract_tarball(
      topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      s.dir.path() / "host");
  add_connectx4_rdma(root, 4);
  DiscoverOptions d;
  d.fsroot = root.string();
  auto model = discover_host(d);
  ASSERT_TRUE(model) << model.error().message();
  auto o = s.options();
  o.root = root.string();
  o.nic_config = s.config(
      "resourceList:\n- resourceName: cx4\n  resourcePrefix: example.com\n"
      "  selectors: {vendors: [\"15b3\"], devices: [\"1014\"], isRdma: true}\n");
  s.plugin = std::make_unique<DevicePlugin>(o);
  ASSERT_TRUE(s.plugin->start(*model));
  auto vfs = s.kubelet.endpoint("example.com/cx4");
  ASSERT_TRUE(vfs);
  auto list = s.kubelet.wait_update(vfs, [](const auto& r) { return r.devices_size() == 4; });
  ASSERT_TRUE(list);
  EXPECT_EQ(list->devices(0).id(), "0000:1a:00.1");
  EXPECT_EQ(list->devices(0).topology().nodes(0).id(), 0);
  auto a = allocate(*vfs, {"0000:1a:00.1"});
  EXPECT_THAT(paths(a), ElementsAre("/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs2",
                                    "/dev/infiniband/umad2", "/dev/infiniband/issm2"));
  EXPECT_EQ(a.envs().at("PCIDEVICE_EXAMPLE_COM_CX4"), "0000:1a:00.1");
  EXPECT_EQ(a.envs().at("POLYACCEL_VF_NETDEVS"), "ib0v0");
  EXPECT_EQ(a.envs().at("NCCL_IB_HCA"), "=mlx5_2");

  // A bad edit: refused with file:line, logged, the four VFs still served.
  s.config(
      "resourceList:\n- resourceName: cx4\n  resourcePrefix: example.com\n"
      "  selectors: {vendors: [\"15b3\"], devicez: [\"1014\"]}\n");
  for (int i = 0; i < 500 && !s.plugin->nic_config_error(); ++i)
    std::this_thread::sleep_for(10ms);
  auto err = s.plugin->nic_config_error();
  ASSERT_TRUE(err);
  EXPECT_THAT(err->message(), HasSubstr("nics.yaml:4"));
  EXPECT_THAT(err->message(), HasSubstr("devicez"));
  {
    std::lock_guard lock(s.lines_mutex);
    ASSERT_FALSE(s.lines.empty());
    EXPECT_THAT(s.lines.back(), HasSubstr("keeping the last good NIC config"));
  }
  EXPECT_EQ(allocate(*vfs, {"0000:1a:00.3"}).envs().at("PCIDEVICE_EXAMPLE_COM_CX4"),
            "0000:1a:00.3");
  // Fixed, and narrowed to two VFs: through ListAndWatch, without a restart or a new registration.
  s.config(
      "resourceList:\n- resourceName: cx4\n  resourcePrefix: example.com\n"
      "  selectors: {pfNames: [\"ib0#2-3\"]}\n");
  EXPECT_TRUE(s.kubelet.wait_update(vfs, [](const auto& r) { return r.devices_size() == 2; }));
  EXPECT_FALSE(s.plugin->nic_config_error());
  EXPECT_EQ(s.kubelet.registrations("example.com/cx4"), 1u);
}

}  // namespace
}  // namespace polyaccel
