// Flavors that tile real GPU hosts.
#include <gtest/gtest.h>

#include "place/place_test_support.h"
#include "render/openstack.h"

namespace polyaccel::render {
namespace {

using namespace polyaccel::place::testing;

TEST(Flavors, TileTheXe8640) {
  auto plan = plan_flavors(fixture(kXe8640), {});
  ASSERT_TRUE(plan) << plan.error().message();
  EXPECT_EQ(plan->accelerator_count, 4u);
  ASSERT_EQ(plan->flavors.size(), 3u);  // 1, 2 and 4 GPUs
  for (const auto& f : plan->flavors) {
    EXPECT_EQ(f.guests_per_host * f.accelerators, 4u) << f.name;
    EXPECT_EQ(f.free_pus_after, 0u) << f.name << ": nothing stranded";
    EXPECT_EQ(f.vcpus % 2, 0u) << "whole cores";
  }
  EXPECT_EQ(plan->flavors[0].numa_nodes, 2u);  // 8 nodes, 4 guests
  // 14 cores per node less one reserved, both threads.
  EXPECT_EQ(plan->flavors[0].vcpus, 2u * 26u);
  std::string commands = openstack_commands(*plan);
  EXPECT_NE(commands.find("openstack flavor create --vcpus 52"), std::string::npos) << commands;
  EXPECT_NE(commands.find("--property pci_passthrough:alias=h100-80gb-hbm3:1"), std::string::npos);
  EXPECT_NE(commands.find("cpu_dedicated_set = "), std::string::npos);
  auto j = to_json(*plan);
  EXPECT_EQ(j["schema_version"], kFlavorsSchemaVersion);
  EXPECT_EQ(j["flavors"][0]["extra_specs"]["hw:mem_page_size"], "1GB");
}

TEST(Flavors, UseTheHugepagesTheHostHas) {
  auto plan = plan_flavors(fixture(kG4dn), {});
  ASSERT_TRUE(plan) << plan.error().message();
  EXPECT_EQ(plan->page_size_bytes, 2u << 20);
  ASSERT_EQ(plan->flavors.size(), 4u);  // 1, 2, 4, 8 T4s
  for (const auto& f : plan->flavors) {
    EXPECT_EQ(f.guests_per_host * f.accelerators, 8u) << f.name;
    // 23 free cores per node do not split evenly into 4 guests: less than a core each is left.
    EXPECT_LT(f.free_pus_after, 2u * f.guests_per_host) << f.name;
  }
  // The JURECA has an HCA under each GPU's switch: the flavors ask for it.
  auto jureca = plan_flavors(fixture(kJureca), {});
  ASSERT_TRUE(jureca);
  bool nic = false;
  for (const auto& [k, v] : jureca->flavors[0].extra_specs)
    nic = nic || (k == "polyaccel:nic_affinity" && v == "pix");
  EXPECT_TRUE(nic);
}

TEST(Flavors, AcceleratorsOnOneSocketUseThatSocketsNodes) {
  // 8 NEC Vector Engines, all on NUMA node 0, 2048 x 2 MiB pages per node (gathered sysfs).
  polyaccel::testing::TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(
      polyaccel::testing::topology_fixture(
          "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      tmp.path());
  DiscoverOptions o;
  o.fsroot = root.string();
  o.backends = BackendMode::off;
  auto model = discover_host(o);
  ASSERT_TRUE(model) << model.error().message();
  auto plan = plan_flavors(*model, {});
  ASSERT_TRUE(plan) << plan.error().message();
  EXPECT_EQ(plan->accelerator_count, 8u);
  EXPECT_EQ(plan->page_size_bytes, 2u << 20);
  const Flavor* x4 = nullptr;
  for (const auto& f : plan->flavors) {
    if (f.accelerators == 4) x4 = &f;
  }
  ASSERT_NE(x4, nullptr);
  // Two guests share node 0 (7 free cores: 3 whole cores each) and its 4 GiB of huge pages.
  EXPECT_EQ(x4->guests_per_host, 2u);
  EXPECT_EQ(x4->numa_nodes, 1u);
  EXPECT_EQ(x4->vcpus, 6u);
  EXPECT_EQ(x4->memory_bytes, std::uint64_t{2} << 30);
}

TEST(Flavors, NoneWithoutAccelerators) {
  EXPECT_FALSE(plan_flavors(fixture(kSgi), {}));
}

}  // namespace
}  // namespace polyaccel::render
