// Flavors that tile real GPU hosts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "place/fit.h"
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

// Nova passes a NIC only through pci_passthrough:alias (polyaccel:* it ignores): the flavors
// name the HCA's alias beside the GPU's, nova.conf gets its device_spec and alias, and the fit
// of such a flavor gives one HCA per GPU, not an alias's HCA and another for the affinity.
TEST(Flavors, NicsComeThroughNovasAlias) {
  HostModel model = fixture(kJureca);
  auto plan = plan_flavors(model, {});
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_TRUE(plan->nic_alias);
  EXPECT_EQ(plan->nic_alias->vendor_id, 0x15b3);
  const std::string nic = plan->nic_alias->name;
  const Flavor& one = plan->flavors[0];
  std::map<std::string, std::string> specs(one.extra_specs.begin(), one.extra_specs.end());
  EXPECT_EQ(specs["pci_passthrough:alias"], plan->alias.name + ":1," + nic + ":1");
  EXPECT_EQ(specs["polyaccel:nic_affinity"], "pix");
  std::string commands = openstack_commands(*plan);
  EXPECT_NE(commands.find("alias = {\"name\": \"" + nic + "\", \"vendor_id\": \"15b3\""),
            std::string::npos)
      << commands;
  EXPECT_NE(commands.find("polyaccel:* are polyaccel's own,\n# ignored by Nova"), std::string::npos)
      << commands;
  auto j = to_json(*plan);
  EXPECT_EQ(j["nic_pci_alias"]["name"], nic);
  EXPECT_EQ(j["nic_pci_alias"]["device_type"], plan->nic_device_type);

  // The host once it reserves the pages the plan asks for.
  for (const auto& [node, pages] : plan->hugepages_per_node) {
    for (auto& n : model.numa_nodes) {
      if (n.os_index == node) n.hugepages = {{plan->page_size_bytes, pages, std::nullopt}};
    }
  }
  auto view = place::build_host_view(model, plan->policy);
  ASSERT_TRUE(view);
  auto request = place::parse_request({one.vcpus, one.memory_bytes, one.extra_specs},
                                      {plan->alias, *plan->nic_alias});
  ASSERT_TRUE(request) << request.error().message();
  auto fit = place::fit(*view, std::vector<place::Placement>{}, *request);
  ASSERT_TRUE(fit && fit->fit) << (fit ? fit->reason : fit.error().message());
  unsigned gpus = 0, nics = 0;
  for (const auto& d : fit->placement.devices)
    (d.kind == "nic" ? nics : gpus) += d.kind == "iommu_group" ? 0 : 1;
  EXPECT_EQ(gpus, 1u);
  EXPECT_EQ(nics, 1u);
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
  // Two guests share node 0 (7 free cores: 3 whole cores each) and its memory: the 4 GiB of
  // huge pages reserved today are not the limit, the node's memory after the reserve is.
  EXPECT_EQ(x4->guests_per_host, 2u);
  EXPECT_EQ(x4->numa_nodes, 1u);
  EXPECT_EQ(x4->vcpus, 6u);
  EXPECT_GT(x4->memory_bytes, std::uint64_t{16} << 30);
  EXPECT_LE(2 * x4->memory_bytes, model->numa_node(0)->memory_bytes);
}

// The g4dn has 10 GiB of 2 MiB pages per node today: the flavors are sized from the node's
// memory, and the pool they need is the remedy printed with them.
TEST(Flavors, ComeFromTheHostsCapacityNotItsCurrentPool) {
  const auto& m = fixture(kG4dn);
  auto plan = plan_flavors(m, {});
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_FALSE(plan->flavors.empty());
  const Flavor& one = plan->flavors[0];
  EXPECT_EQ(one.accelerators, 1u);
  // 4 T4 guests per node share what the node has after the 8 GiB reserve.
  const std::uint64_t node = m.numa_node(0)->memory_bytes;
  EXPECT_GT(one.memory_bytes, (node - (std::uint64_t{8} << 30)) / 4 - (std::uint64_t{1} << 30));
  EXPECT_LE(one.memory_bytes * 4, node);
  std::uint64_t pages = 0;
  for (const auto& [n, p] : plan->hugepages_per_node)
    pages += n == 0 ? p : 0;
  EXPECT_GE(pages * plan->page_size_bytes, 4 * one.memory_bytes);
  bool remedy = false;
  for (const auto& note : plan->notes)
    remedy = remedy || (note.find("polyaccel audit --hugepages-per-node") != std::string::npos &&
                        note.find("--emit DIR") != std::string::npos &&
                        note.find("place --flavor FILE --hugepages-per-node") != std::string::npos);
  EXPECT_TRUE(remedy);
  // --page-size 1GiB is honoured even though the host reserves 2 MiB pages.
  FlavorOptions gib;
  gib.page_size_bytes = std::uint64_t{1} << 30;
  auto big = plan_flavors(m, gib);
  ASSERT_TRUE(big) << big.error().message();
  EXPECT_EQ(big->page_size_bytes, std::uint64_t{1} << 30);
  EXPECT_EQ(big->flavors[0].memory_bytes % (std::uint64_t{1} << 30), 0u);
  EXPECT_NE(openstack_commands(*big).find("hw:mem_page_size=1GB"), std::string::npos);
}

TEST(Flavors, AnImpossibleReserveIsBadInput) {
  FlavorOptions o;
  o.reserve_cores_per_node = 20;  // the XE8640's nodes have 14 cores
  auto plan = plan_flavors(fixture(kXe8640), o);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::bad_input);
  EXPECT_NE(plan.error().message().find("has 14"), std::string::npos) << plan.error().message();
}

// One-GPU guests with two cells: each guest's cells on one socket, at SLIT distance 12.
TEST(Flavors, OneGpuGuestsNeverSpanSockets) {
  HostModel m = fixture(kXe8640);
  auto plan = plan_flavors(m, {});
  ASSERT_TRUE(plan);
  const Flavor& one = plan->flavors[0];
  // The host once the plan's huge pages are reserved.
  for (auto& n : m.numa_nodes) {
    for (const auto& [node, pages] : plan->hugepages_per_node) {
      if (node == n.os_index) n.hugepages = {{plan->page_size_bytes, pages, pages}};
    }
  }
  ASSERT_EQ(one.numa_nodes, 2u);
  auto view = place::build_host_view(m, plan->policy);
  ASSERT_TRUE(view);
  auto request =
      place::parse_request({one.vcpus, one.memory_bytes, one.extra_specs}, {plan->alias});
  ASSERT_TRUE(request) << request.error().message();
  std::vector<place::Placement> placed;
  for (unsigned g = 0; g < one.guests_per_host; ++g) {
    auto f = place::fit(*view, placed, *request);
    ASSERT_TRUE(f && f->fit) << g;
    std::set<unsigned> sockets;
    for (const auto& c : f->placement.cells)
      sockets.insert(*view->cell(c.host_numa_node)->socket);
    EXPECT_EQ(sockets.size(), 1u) << "guest " << g;
    f->placement.name = "g" + std::to_string(g);
    placed.push_back(f->placement);
  }
}

TEST(Flavors, AliasNamesKeepTheirHyphens) {
  Accelerator a;
  a.name = "Tesla V100-SXM2-16GB";
  EXPECT_EQ(alias_name(a), "tesla-v100-sxm2-16gb");
  a.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(alias_name(a), "h100-80gb-hbm3");
}

TEST(Flavors, NoneWithoutAccelerators) {
  EXPECT_FALSE(plan_flavors(fixture(kSgi), {}));
}

}  // namespace
}  // namespace polyaccel::render
