// SR-IOV inventory: the NEC tarball's real PFs as captured, and the same tree with VFs enabled
// the way the kernel shows them.
#include "discover/sriov.h"

#include <gtest/gtest.h>

#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/sriov_tree.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::discover_capture;
using polyaccel::testing::kNecTarball;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

const Nic* nic_at(const HostModel& m, const std::string& address) {
  for (const auto& n : m.nics) {
    if (n.pci.address.to_string() == address) return &n;
  }
  return nullptr;
}

TEST(Sriov, CapturedPfsShowTheirCapabilityAndNoVfs) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  HostModel model = discover_capture(root);
  const HostModel* m = &model;
  for (const char* pf : {"0000:60:00.0", "0000:60:00.1"}) {
    const Nic* n = nic_at(*m, pf);
    ASSERT_NE(n, nullptr) << pf;
    ASSERT_TRUE(n->pci.sriov.has_value()) << pf;
    EXPECT_EQ(n->pci.sriov->total_vfs, 64u);
    EXPECT_EQ(n->pci.sriov->num_vfs, 0u);
    EXPECT_TRUE(n->pci.sriov->vfs.empty());
    EXPECT_FALSE(n->pci.physical_function.has_value());
  }
  // The ConnectX-4 HCAs of that machine have SR-IOV off in firmware: no sriov_totalvfs.
  const Nic* hca = nic_at(*m, "0000:1a:00.0");
  ASSERT_NE(hca, nullptr);
  EXPECT_FALSE(hca->pci.sriov.has_value());
  for (const auto& a : m->accelerators)
    EXPECT_FALSE(a.pci.sriov.has_value()) << a.id;
}

TEST(Sriov, EnabledVfsAreListedWithNumaNetdevRdmaAndDriver) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  polyaccel::testing::add_x722_vfs(root, 3);
  auto s = read_sriov(root, *PciAddress::parse("0000:60:00.0"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->num_vfs, 3u);
  ASSERT_EQ(s->vfs.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    const auto& vf = s->vfs[i];
    EXPECT_EQ(vf.index, i);
    EXPECT_EQ(vf.address.to_string(), "0000:60:02." + std::to_string(i));
    ASSERT_TRUE(vf.numa_node.has_value());
    EXPECT_EQ(*vf.numa_node, 0u);
    EXPECT_EQ(vf.netdevs, std::vector<std::string>{"enp96s0f0v" + std::to_string(i)});
    EXPECT_EQ(vf.rdma_devices.size(), i % 2);
    EXPECT_EQ(vf.driver, "iavf");
  }
  EXPECT_EQ(s->vfs[1].rdma_devices, std::vector<std::string>{"iwp96s0f0v1"});
  auto pf = read_physical_function(root, *PciAddress::parse("0000:60:02.1"));
  ASSERT_TRUE(pf.has_value());
  EXPECT_EQ(pf->to_string(), "0000:60:00.0");
  EXPECT_FALSE(read_physical_function(root, *PciAddress::parse("0000:60:00.0")).has_value());
  EXPECT_FALSE(read_sriov(root, *PciAddress::parse("0000:1a:00.0")).has_value());
}

TEST(Sriov, DiscoveryCarriesVfsIntoTheModel) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  polyaccel::testing::add_x722_vfs(root, 2);
  HostModel model = discover_capture(root);
  const HostModel* m = &model;
  const Nic* pf = nic_at(*m, "0000:60:00.0");
  ASSERT_NE(pf, nullptr);
  ASSERT_TRUE(pf->pci.sriov.has_value());
  EXPECT_EQ(pf->pci.sriov->num_vfs, 2u);
  ASSERT_EQ(pf->pci.sriov->vfs.size(), 2u);
  EXPECT_EQ(pf->pci.sriov->vfs[1].address.to_string(), "0000:60:02.1");
  // hwloc sees the VFs as PCI functions of their own; they know their PF.
  const Nic* vf = nic_at(*m, "0000:60:02.1");
  ASSERT_NE(vf, nullptr);
  ASSERT_TRUE(vf->pci.physical_function.has_value());
  EXPECT_EQ(vf->pci.physical_function->to_string(), "0000:60:00.0");
  EXPECT_EQ(vf->netdevs.size() + vf->rdma_devices.size(), 0u);  // hwloc does not follow them
}

}  // namespace
}  // namespace polyaccel
