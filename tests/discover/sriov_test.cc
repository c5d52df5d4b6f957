// SR-IOV inventory: the NEC tarball's real PFs as captured, and the same tree with VFs enabled
// the way the kernel shows them.
#include "discover/sriov.h"

#include <gtest/gtest.h>

#include "core/file_io.h"
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

// sriov_totalvfs and sriov_numvfs hold what the kernel writes (decimal, 16 bits, no more VFs
// enabled than supported); anything else is an error naming the file, never a count wrapped to
// 32 bits (4294967304 read as 8). Discovery drops such a function's SR-IOV facts.
TEST(Sriov, CountsTheKernelNeverWritesAreRefusedByFile) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  polyaccel::testing::add_x722_vfs(root, 2);
  const PciAddress pf = *PciAddress::parse("0000:60:00.0");
  const auto dir = root / polyaccel::testing::kX722PfDir;
  struct Case {
    const char* file;
    const char* value;
    const char* problem;
  };
  for (const Case& c : {
           Case{"sriov_totalvfs", "4294967304", "out of range (0..65535)"},
           Case{"sriov_totalvfs", "4294967297", "out of range (0..65535)"},
           Case{"sriov_totalvfs", "18446744073709551617", "out of range (0..65535)"},
           Case{"sriov_totalvfs", "65536", "out of range (0..65535)"},
           Case{"sriov_totalvfs", "-1", "not a whole number"},
           Case{"sriov_totalvfs", "0x40", "not a whole number"},
           Case{"sriov_totalvfs", "64 VFs", "not a whole number"},
           Case{"sriov_numvfs", "4294967297", "out of range (0..64)"},
           Case{"sriov_numvfs", "65", "out of range (0..64)"},
           Case{"sriov_numvfs", "-2", "not a whole number"},
       }) {
    SCOPED_TRACE(std::string(c.file) + " = " + c.value);
    const std::string before = *read_text_file(dir / c.file);
    polyaccel::testing::write_text(dir / c.file, std::string(c.value) + "\n");
    auto facts = read_sriov_facts(root, pf);
    ASSERT_FALSE(facts);
    EXPECT_EQ(facts.error().message(),
              (pci_device_dir(root, pf) / c.file).string() + ": '" + c.value + "' is " + c.problem);
    EXPECT_FALSE(read_sriov(root, pf).has_value());
    const HostModel model = discover_capture(root);
    const Nic* n = nic_at(model, pf.to_string());
    ASSERT_NE(n, nullptr);
    EXPECT_FALSE(n->pci.sriov.has_value());
    polyaccel::testing::write_text(dir / c.file, before);
  }
  // As the kernel writes them: read, and absent means no SR-IOV.
  auto facts = read_sriov_facts(root, pf);
  ASSERT_TRUE(facts) << facts.error().message();
  ASSERT_TRUE(facts->has_value());
  EXPECT_EQ((*facts)->total_vfs, 64u);
  EXPECT_EQ((*facts)->num_vfs, 2u);
  auto none = read_sriov_facts(root, *PciAddress::parse("0000:1a:00.0"));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  // A VF's numa_node beyond any node is no locality, not node 1.
  polyaccel::testing::write_text(dir.parent_path() / "0000:60:02.1/numa_node", "4294967297\n");
  auto s = read_sriov(root, pf);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->vfs[1].numa_node.has_value());
  EXPECT_EQ(s->vfs[0].numa_node, 0u);
}

}  // namespace
}  // namespace polyaccel
