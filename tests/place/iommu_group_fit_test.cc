// A device goes to a guest with the rest of its IOMMU group, or not at all: the NEC tarball's
// real tree with groups laid out as the kernel shows them (tests/support/iommu_tree.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "discover/discover.h"
#include "place/fit.h"
#include "place/request.h"
#include "support/iommu_tree.h"
#include "support/test_support.h"

namespace polyaccel::place {
namespace {

using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

const char* kNecTarball = "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2";

class IommuGroupFit : public ::testing::Test {
 protected:
  void SetUp() override {
    auto root = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp_.path());
    polyaccel::testing::add_nec_iommu_groups(root);
    DiscoverOptions o;
    o.fsroot = root.string();
    o.backends = BackendMode::off;
    auto m = discover_host(o);
    ASSERT_TRUE(m) << m.error().message();
    auto v = build_host_view(*m, {});
    ASSERT_TRUE(v) << v.error().message();
    view_ = std::move(*v);
  }

  FitResult fit_request(const std::string& alias_option, const std::string& alias_count,
                        const std::vector<Placement>& allocations = {}) {
    auto alias = parse_pci_alias_option(alias_option);
    EXPECT_TRUE(alias) << alias.error().message();
    auto r =
        parse_request({4,
                       std::uint64_t{4} << 30,
                       {{"hw:cpu_policy", "dedicated"}, {"pci_passthrough:alias", alias_count}}},
                      {*alias});
    EXPECT_TRUE(r) << r.error().message();
    auto f = fit(view_, allocations, *r);
    EXPECT_TRUE(f) << f.error().message();
    return *f;
  }

  static const DevicePlacement* device(const Placement& p, const std::string& bus_id) {
    for (const auto& d : p.devices) {
      if (d.pci_bus_id == bus_id) return &d;
    }
    return nullptr;
  }

  TempDir tmp_;
  HostView view_;
};

TEST_F(IommuGroupFit, OnePortOfADualPortNicBringsTheOtherNotTheBridge) {
  FitResult f = fit_request("x722=8086:37d2", "x722:1");
  ASSERT_TRUE(f.fit) << f.reason;
  ASSERT_EQ(f.placement.devices.size(), 2u);
  const DevicePlacement* first = device(f.placement, "0000:60:00.0");
  const DevicePlacement* second = device(f.placement, "0000:60:00.1");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->alias, "x722");
  EXPECT_EQ(second->alias, "iommu_group:40");
  EXPECT_EQ(second->kind, "nic");
  EXPECT_EQ(second->id, "nic3");
  EXPECT_EQ(second->guest_cell, first->guest_cell);
  EXPECT_EQ(device(f.placement, "0000:5f:03.0"), nullptr) << "a switch port is never passed";

  // Recorded, the companion is in use: no second x722 guest, and the state reads back.
  f.placement.name = "vm1";
  auto again = fit_request("x722=8086:37d2", "x722:1", {f.placement});
  EXPECT_FALSE(again.fit);
}

TEST_F(IommuGroupFit, AGroupWithAFunctionInUseIsRefusedNamingGroupAndMember) {
  Placement other;
  other.name = "older";
  DevicePlacement d;
  d.pci_bus_id = "0000:60:00.1";
  d.kind = "nic";
  d.id = "nic3";
  d.alias = "x722";
  other.devices.push_back(d);
  FitResult f = fit_request("x722=8086:37d2", "x722:1", {other});
  ASSERT_FALSE(f.fit);
  EXPECT_NE(f.reason.find("nic2 (0000:60:00.0) shares IOMMU group 40 with 0000:60:00.1"),
            std::string::npos)
      << f.reason;
  EXPECT_NE(f.reason.find("in use by another guest"), std::string::npos) << f.reason;
}

TEST_F(IommuGroupFit, DevicesWithoutCompanionsArePreferredAndAllComeWhenNeeded) {
  // Five of the eight Vector Engines: the one that shares group 21 with a ConnectX-4 is left.
  FitResult five = fit_request("ve=1bcf:001c", "ve:5");
  ASSERT_TRUE(five.fit) << five.reason;
  EXPECT_EQ(five.placement.devices.size(), 5u);
  EXPECT_EQ(device(five.placement, "0000:3d:00.0"), nullptr);
  EXPECT_EQ(device(five.placement, "0000:3e:00.0"), nullptr);

  FitResult eight = fit_request("ve=1bcf:001c", "ve:8");
  ASSERT_TRUE(eight.fit) << eight.reason;
  ASSERT_EQ(eight.placement.devices.size(), 9u);
  const DevicePlacement* hca = device(eight.placement, "0000:3e:00.0");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->alias, "iommu_group:21");
  EXPECT_EQ(hca->id, "nic1");
  EXPECT_EQ(std::count_if(eight.placement.devices.begin(), eight.placement.devices.end(),
                          [](const DevicePlacement& x) { return x.alias == "ve"; }),
            8);
  EXPECT_EQ(device(eight.placement, "0000:3c:04.0"), nullptr);
  EXPECT_EQ(device(eight.placement, "0000:3c:08.0"), nullptr);
}

}  // namespace
}  // namespace polyaccel::place
