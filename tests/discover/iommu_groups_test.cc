// IOMMU groups read from sysfs: the NEC tarball's real tree with groups laid out as the kernel
// shows them (tests/support/iommu_tree.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/host_model_json.h"
#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/iommu_tree.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::discover_capture;
using polyaccel::testing::kNecTarball;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

TEST(IommuGroups, CapturedTreeWithoutGroupsHasNone) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  HostModel m = discover_capture(root, BackendMode::off);
  EXPECT_TRUE(m.iommu_groups.empty());
  for (const auto& n : m.nics)
    EXPECT_FALSE(n.pci.iommu_group.has_value()) << n.id;
}

TEST(IommuGroups, MembersBridgesAndEachDevicesGroup) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp.path());
  polyaccel::testing::add_nec_iommu_groups(root);
  HostModel m = discover_capture(root, BackendMode::off);
  ASSERT_EQ(m.iommu_groups.size(), 10u);
  const IommuGroup* x722 = m.iommu_group(40);
  ASSERT_NE(x722, nullptr);
  ASSERT_EQ(x722->members.size(), 3u);
  // The switch port is absent from the tree's bus/pci/devices: read through the group's link.
  EXPECT_EQ(x722->members[0].address.to_string(), "0000:5f:03.0");
  EXPECT_EQ(x722->members[0].class_code, 0x060400u);
  EXPECT_TRUE(x722->members[0].is_bridge());
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(x722->members[i].class_code, 0x020000u);
    EXPECT_EQ(x722->members[i].vendor_id, 0x8086);
    EXPECT_EQ(x722->members[i].device_id, 0x37d2);
    EXPECT_FALSE(x722->members[i].is_bridge());
  }
  for (const char* addr : {"0000:60:00.0", "0000:60:00.1"}) {
    const Nic* n = m.nic(addr);
    ASSERT_NE(n, nullptr) << addr;
    EXPECT_EQ(n->pci.iommu_group, std::optional<unsigned>(40u)) << addr;
  }
  const Accelerator* ve = m.accelerator("0000:3d:00.0");
  ASSERT_NE(ve, nullptr);
  EXPECT_EQ(ve->pci.iommu_group, std::optional<unsigned>(21u));
  EXPECT_EQ(m.nic("0000:3e:00.0")->pci.iommu_group, std::optional<unsigned>(21u));
  EXPECT_EQ(m.nic("0000:1a:00.0")->pci.iommu_group, std::optional<unsigned>(10u));
  const IommuGroup* shared = m.iommu_group(21);
  ASSERT_NE(shared, nullptr);
  unsigned bridges = 0;
  for (const auto& member : shared->members)
    bridges += member.is_bridge() ? 1 : 0;
  EXPECT_EQ(shared->members.size(), 4u);
  EXPECT_EQ(bridges, 2u);

  auto j = to_json(m);
  ASSERT_TRUE(j.contains("iommu_groups"));
  EXPECT_EQ(j["iommu_groups"].size(), 10u);
  bool seen = false;
  for (const auto& g : j["iommu_groups"]) {
    if (g["id"] != 40) continue;
    seen = true;
    EXPECT_EQ(g["members"][0]["pci_bus_id"], "0000:5f:03.0");
    EXPECT_EQ(g["members"][0]["class"], "0x060400");
    EXPECT_EQ(g["members"][0]["bridge"], true);
    EXPECT_EQ(g["members"][1]["bridge"], false);
  }
  EXPECT_TRUE(seen);
  for (const auto& n : j["nics"]) {
    if (n["pci_bus_id"] == "0000:60:00.1") {
      EXPECT_EQ(n["pci"]["iommu_group"], 40);
    }
  }
}

}  // namespace
}  // namespace polyaccel
