// RDMA NICs as resources, on real data: the NEC capture's two ConnectX-4 HCAs made whole by the
// test (mlx5_ib's sysfs, and VFs on the first PF: tests/support/sriov_tree.h) for VF pools, and
// the XE8640 capture merged with the 8xH100 scenario for shared HCAs near GPUs. The config file
// in the sriov-network-device-plugin's and the RDMA shared device plugin's schemas.
#include "kube/nic_resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/allocate.h"
#include "kube/models.h"
#include "support/sriov_tree.h"

namespace polyaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace polyaccel::testing;

const char* kNecTarball = "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2";

// The NEC tree with both HCAs' RDMA devices and `vfs` VFs on 0000:1a:00.0, discovered.
struct NecTree {
  TempDir tmp;
  std::filesystem::path root;
  HostModel model;
  NicNodes sysfs;

  explicit NecTree(unsigned vfs) {
    root = extract_tarball(topology_fixture(kNecTarball), tmp.path());
    add_connectx4_rdma(root, vfs);
    DiscoverOptions o;
    o.fsroot = root.string();
    auto m = discover_host(o);
    EXPECT_TRUE(m) << (m ? "" : m.error().message());
    if (m) model = *m;
    sysfs = read_nic_nodes(model, root.string());
  }
};

Result<std::vector<PluginResource>> plan(const NecTree& t, const std::string& config) {
  auto c = parse_nic_config(config, "nics.yaml");
  if (!c) return c.error();
  return plan_nic_resources(t.model, *c, t.sysfs);
}

std::vector<std::string> ids(const PluginResource& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices)
    out.push_back(d.id);
  return out;
}

TEST(NicConfig, UnknownKeysAreRefusedWithFileAndLine) {
  auto bad = parse_nic_config(
      "resourceList:\n- resourceName: vfs\n  selectors:\n    vendors: [\"15b3\"]\n"
      "    pfNamez: [ib0]\n",
      "nics.yaml");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("nics.yaml:5"));
  EXPECT_THAT(bad.error().message(), HasSubstr("pfNamez"));
  auto top = parse_nic_config("resourceLists: []\n", "nics.yaml");
  ASSERT_FALSE(top);
  EXPECT_THAT(top.error().message(), HasSubstr("nics.yaml:1"));
  // A key of the upstream schema that polyaccel does not implement is said so, not ignored.
  auto vhost = parse_nic_config(
      "resourceList:\n- resourceName: vfs\n  selectors: {needVhostNet: true}\n", "nics.yaml");
  ASSERT_FALSE(vhost);
  EXPECT_THAT(vhost.error().message(), HasSubstr("does not implement"));
  // An empty list of selectors (found by the fuzzer) would make a pool that never has a device.
  auto none = parse_nic_config("configList:\n- resourceName: a\n  selectors: []\n", "nics.yaml");
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message(), HasSubstr("nics.yaml:3"));
  EXPECT_THAT(none.error().message(), HasSubstr("selects no device"));
}

TEST(NicConfig, NumbersAndNamesAreRangeChecked) {
  for (const char* n : {"0", "-1", "100001", "99999999999999999999", "many"}) {
    auto c = parse_nic_config(std::string("configList:\n- resourceName: hca\n  rdmaHcaMax: ") + n +
                                  "\n  selectors: {vendors: [\"15b3\"]}\n",
                              "nics.yaml");
    ASSERT_FALSE(c) << n;
    EXPECT_THAT(c.error().message(), HasSubstr("nics.yaml:3")) << n;
  }
  auto id = parse_nic_config(
      "resourceList:\n- resourceName: v\n  selectors: {vendors: [\"15b3f\"]}\n", "nics.yaml");
  ASSERT_FALSE(id);
  EXPECT_THAT(id.error().message(), HasSubstr("16-bit"));
  EXPECT_FALSE(parse_nic_config("resourceList:\n- resourceName: a/b\n  selectors: {}\n", "x"));
  EXPECT_FALSE(parse_nic_config(
      "resourceList:\n- {resourceName: v, selectors: {}}\n- {resourceName: v, selectors: {}}\n",
      "x"));
  // The RDMA shared device plugin's JSON, as its users have it.
  auto json = parse_nic_config(
      R"({"periodicUpdateInterval": 300, "configList": [{"resourceName": "hca_shared_devices_a",
         "rdmaHcaMax": 1000, "selectors": {"vendors": ["15b3"], "deviceIDs": ["1013"]}}]})",
      "config.json");
  ASSERT_TRUE(json) << json.error().message();
  ASSERT_EQ(json->pools.size(), 1u);
  EXPECT_EQ(json->pools[0].resource, "rdma/hca_shared_devices_a");
  EXPECT_EQ(json->pools[0].max_pods, 1000u);
}

TEST(NicResources, VfPoolsFromAConnectX4WithFourVfs) {
  NecTree t(4);
  // All four VFs by vendor/device/driver; RDMA ones only; two by pfNames range; by rootDevices.
  auto r = plan(t,
                "resourceList:\n"
                "- resourceName: cx4_vfs\n"
                "  resourcePrefix: example.com\n"
                "  selectors: {vendors: [\"15b3\"], devices: [\"1014\"], drivers: [mlx5_core],\n"
                "              isRdma: true, linkTypes: [infiniband]}\n");
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 1u);
  const PluginResource& pool = (*r)[0];
  EXPECT_EQ(pool.name, "example.com/cx4_vfs");
  EXPECT_EQ(pool.kind, ResourceKind::sriov_vf);
  EXPECT_THAT(ids(pool),
              ElementsAre("0000:1a:00.1", "0000:1a:00.2", "0000:1a:00.3", "0000:1a:00.4"));
  for (const auto& d : pool.devices)
    EXPECT_EQ(d.numa_nodes, std::vector<unsigned>{0}) << d.id;
  EXPECT_EQ(nic_device_hcas(t.model, pool.devices[1]), std::vector<std::string>{"mlx5_3"});
  EXPECT_EQ(nic_device_netdevs(t.model, pool.devices[1]), std::vector<std::string>{"ib0v1"});

  auto two = plan(t,
                  "resourceList:\n- resourceName: a\n  selectors: {pfNames: [\"ib0#1-2\"]}\n"
                  "- resourceName: b\n  selectors: {rootDevices: [\"0000:1a:00.0\"], "
                  "pciAddresses: [\"0000:1a:00.4\"]}\n");
  ASSERT_TRUE(two) << two.error().message();
  EXPECT_THAT(ids((*two)[0]), ElementsAre("0000:1a:00.2", "0000:1a:00.3"));
  EXPECT_THAT(ids((*two)[1]), ElementsAre("0000:1a:00.4"));
  // An Intel id, an ethernet link or another PF's name select nothing.
  auto none = plan(t,
                   "resourceList:\n- resourceName: a\n  selectors: [{vendors: [\"8086\"]}, "
                   "{linkTypes: [ether]}, {pfNames: [ib1]}]\n");
  ASSERT_TRUE(none);
  EXPECT_TRUE((*none)[0].devices.empty());
  // Two pools that both take a VF: refused, with the line of the second.
  auto both = plan(t,
                   "resourceList:\n- resourceName: a\n  selectors: {pfNames: [ib0]}\n"
                   "- resourceName: b\n  selectors: {devices: [\"1014\"]}\n");
  ASSERT_FALSE(both);
  EXPECT_THAT(both.error().message(), HasSubstr("nics.yaml:4"));
}

TEST(NicResources, VfAllocateGivesItsVerbsNodesAndVariables) {
  NecTree t(2);
  auto r = plan(t, "resourceList:\n- resourceName: vfs\n  selectors: {devices: [\"1014\"]}\n");
  ASSERT_TRUE(r) << r.error().message();
  auto a = compute_allocation(t.model, (*r)[0], {}, {"0000:1a:00.2"}, AllocateOptions{}, t.sysfs);
  ASSERT_TRUE(a) << a.error().message();
  std::vector<std::string> paths;
  for (const auto& d : a->devices)
    paths.push_back(d.container_path);
  EXPECT_THAT(paths, ElementsAre("/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs3",
                                 "/dev/infiniband/umad3", "/dev/infiniband/issm3"));
  EXPECT_EQ(a->envs["NCCL_IB_HCA"], "=mlx5_3");
  EXPECT_EQ(a->envs["UCX_NET_DEVICES"], "mlx5_3:1");
  EXPECT_EQ(a->envs["PCIDEVICE_INTEL_COM_VFS"], "0000:1a:00.2");
  EXPECT_EQ(a->envs["POLYACCEL_VF_NETDEVS"], "ib0v1");
  EXPECT_FALSE(compute_allocation(t.model, (*r)[0], {}, {"0000:1a:00.7"}, {}, t.sysfs));
}

TEST(NicResources, SharedHcasAreTheTwoPfsWithTheirNuma) {
  NecTree t(3);
  auto r =
      plan(t,
           "configList:\n- resourceName: hca\n  rdmaHcaMax: 3\n"
           "  selectors: {vendors: [\"15b3\"], deviceIDs: [\"1013\"], drivers: [mlx5_core]}\n");
  ASSERT_TRUE(r) << r.error().message();
  const PluginResource& shared = (*r)[0];
  EXPECT_EQ(shared.name, "rdma/hca");
  // The VFs are NICs of the model too, but never shared HCAs of their own.
  EXPECT_THAT(ids(shared), ElementsAre("mlx5_0::0", "mlx5_0::1", "mlx5_0::2", "mlx5_1::0",
                                       "mlx5_1::1", "mlx5_1::2"));
  for (const auto& d : shared.devices)
    EXPECT_EQ(d.numa_nodes, std::vector<unsigned>{0});
  // Least used HCA first: with mlx5_0::0 and ::1 taken, a new pod gets mlx5_1.
  auto chosen = choose_nic_allocation(t.model, shared, {},
                                      {"mlx5_0::2", "mlx5_1::0", "mlx5_1::1", "mlx5_1::2"}, {}, 1);
  ASSERT_TRUE(chosen);
  EXPECT_THAT(*chosen, ElementsAre("mlx5_1::0"));
  auto ifname = plan(t, "configList:\n- resourceName: hca\n  selectors: {ifNames: [ib1]}\n");
  ASSERT_TRUE(ifname);
  EXPECT_EQ((*ifname)[0].devices.size(), 1000u);  // the upstream default rdmaHcaMax
  EXPECT_EQ((*ifname)[0].devices.front().id, "mlx5_1::0");
}

TEST(NicResources, PreferredNicIsTheOneNearestThePodsGpus) {
  HostModel m = hgx_8xh100();
  auto c = parse_nic_config(
      "configList:\n- resourceName: hca\n  rdmaHcaMax: 2\n"
      "  selectors: {vendors: [\"15b3\"]}\n",
      "nics.yaml");
  ASSERT_TRUE(c);
  auto r = plan_nic_resources(m, *c, NicNodes{});
  ASSERT_TRUE(r) << r.error().message();
  const PluginResource& shared = (*r)[0];
  std::vector<std::string> all = ids(shared);
  ASSERT_EQ(all.size(), 8u);  // the XE8640's four ConnectX HCAs
  for (const auto& d : shared.devices)
    EXPECT_FALSE(d.numa_nodes.empty()) << d.id;
  auto index_of = [&](const std::string& bus) {
    for (size_t i = 0; i < m.accelerators.size(); ++i) {
      if (m.accelerators[i].pci.address.to_string() == bus) return i;
    }
    ADD_FAILURE() << bus;
    return size_t{0};
  };
  // 5f:00.0's HCA is mlx5_2 (polyaccel run's choice for it); 4e:00.0's mlx5_0 and mlx5_1.
  auto for5f = choose_nic_allocation(m, shared, {index_of("0000:5f:00.0")}, all, {}, 1);
  ASSERT_TRUE(for5f);
  EXPECT_THAT(*for5f, ElementsAre("mlx5_2::0"));
  auto for4e = choose_nic_allocation(m, shared, {index_of("0000:4e:00.0")}, all, {}, 2);
  ASSERT_TRUE(for4e);
  std::vector<std::string> hcas;
  for (const auto& id : *for4e)
    hcas.push_back(id.substr(0, id.find("::")));
  EXPECT_EQ(closest_rdma_devices(m, {index_of("0000:4e:00.0")}),
            std::vector<std::string>({"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(hcas, std::vector<std::string>({"mlx5_0", "mlx5_1"}));
  // must_include stays; a size past what is available is an error.
  auto must = choose_nic_allocation(m, shared, {index_of("0000:5f:00.0")}, all, {"mlx5_3::1"}, 2);
  ASSERT_TRUE(must);
  EXPECT_THAT(*must, ElementsAre("mlx5_3::1", "mlx5_2::0"));
  EXPECT_FALSE(choose_nic_allocation(m, shared, {}, {"mlx5_0::0"}, {}, 2));
}

}  // namespace
}  // namespace polyaccel
