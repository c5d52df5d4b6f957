// The fit on real machines: thread policies on SMT siblings, page sizes, the four PCI NUMA
// policies, multi-cell guests, emulator threads, polyaccel:nic_affinity, partly used hosts.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "place/devices.h"
#include "place_test_support.h"

namespace polyaccel::place {
namespace {

// Sum of the SLIT distances between the host nodes of a placement's cells (0 for one cell).
unsigned node_distance(const HostView& v, const Placement& p) {
  unsigned d = 0;
  for (size_t i = 0; i < p.cells.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      size_t a = 0, b = 0;
      for (size_t k = 0; k < v.cells.size(); ++k) {
        if (v.cells[k].node == p.cells[i].host_numa_node) a = k;
        if (v.cells[k].node == p.cells[j].host_numa_node) b = k;
      }
      d += v.distance(a, b);
    }
  }
  return d;
}

using namespace polyaccel::place::testing;

const std::vector<PciAlias>& gpu_aliases() {
  static const std::vector<PciAlias> a = {*parse_pci_alias_option("h100=10de:2330"),
                                          *parse_pci_alias_option("a100=10de:20b0"),
                                          *parse_pci_alias_option("t4=10de:1eb8")};
  return a;
}

// Rules every placement must keep, whatever the strategy.
void expect_valid(const HostView& view, const Request& r, const Placement& p,
                  const std::vector<Placement>& others = {}) {
  CpuSet held_by_others;
  for (const auto& o : others)
    held_by_others |= o.held_pus;
  EXPECT_FALSE(p.held_pus.intersects(held_by_others));
  std::set<unsigned> nodes, pus;
  for (const auto& c : p.cells) {
    const HostCell* hc = view.cell(c.host_numa_node);
    ASSERT_NE(hc, nullptr);
    EXPECT_TRUE(nodes.insert(c.host_numa_node).second) << "two guest cells on one node";
    EXPECT_EQ(c.vcpus, r.cells[c.guest_cell].vcpus);
    for (const auto& [vcpu, pu] : c.pinning) {
      EXPECT_TRUE(hc->pcpus.test(pu));
      EXPECT_TRUE(p.held_pus.test(pu));
      EXPECT_TRUE(pus.insert(pu).second) << "PU " << pu << " pinned twice";
    }
    if (c.page_size_bytes) {
      EXPECT_EQ(c.memory_bytes % c.page_size_bytes, 0u);
    }
  }
  if (r.numa_topology) {
    EXPECT_EQ(p.cells.size(), r.cells.size());
  }
  for (const auto& d : p.devices) {
    if (r.numa_topology && r.pci_numa_policy == PciNumaPolicy::required &&
        d.kind == "accelerator") {
      ASSERT_TRUE(d.numa_node);
      EXPECT_TRUE(nodes.count(*d.numa_node));
    }
  }
}

TEST(Fit, PreferPairsSiblingsOnSmt) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  auto r = request(8, 16, {{"hw:cpu_policy", "dedicated"}});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  expect_valid(v, r, f.placement);
  const auto& pin = f.placement.cells[0].pinning;
  ASSERT_EQ(pin.size(), 8u);
  for (size_t k = 0; k < 8; k += 2)
    EXPECT_EQ(core_of(m, pin[k].second), core_of(m, pin[k + 1].second))
        << "vCPUs " << k << "," << k + 1;
  // A CPU-only guest stays off the GPU nodes (1, 3, 5, 7) when others have room.
  EXPECT_EQ(f.placement.cells[0].host_numa_node % 2, 0u);
}

TEST(Fit, PreferTakesSinglesFromDifferentCoresWhenPairsAreGone) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  // Another guest holds one thread of every core: only single threads are left.
  Placement busy;
  busy.name = "busy";
  for (const auto& core : m.cores)
    busy.held_pus.set(*core.pus.first());
  auto r = request(4, 16, {{"hw:cpu_policy", "dedicated"}});
  auto f = fit_on(v, r, {busy});
  ASSERT_TRUE(f.fit) << f.reason;
  expect_valid(v, r, f.placement, {busy});
  std::set<unsigned> first_pus;
  for (const auto& [vcpu, pu] : f.placement.cells[0].pinning)
    first_pus.insert(*core_of(m, pu).first());
  EXPECT_EQ(first_pus.size(), 4u) << "one thread per core";
  auto require =
      request(4, 16, {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "require"}});
  auto refused = fit_on(v, require, {busy});
  EXPECT_FALSE(refused.fit);
  EXPECT_NE(refused.reason.find("require"), std::string::npos) << refused.reason;
}

TEST(Fit, RequireNeedsSmt) {
  auto v = view_of(fixture(kQuartz));
  auto r = request(4, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "require"}});
  auto f = fit_on(v, r);
  EXPECT_FALSE(f.fit);
  EXPECT_NE(f.reason.find("one thread per core"), std::string::npos) << f.reason;
  auto smt = view_of(fixture(kXe8640));
  EXPECT_TRUE(fit_on(smt, r).fit);
}

TEST(Fit, IsolateHoldsWholeCoresOnALegacyHost) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  auto r = request(4, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "isolate"}});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  EXPECT_EQ(f.placement.held_pus.count(), 8u);  // the siblings are marked used too
  for (const auto& [vcpu, pu] : f.placement.cells[0].pinning)
    EXPECT_TRUE(f.placement.held_pus.contains(core_of(m, pu)));
}

TEST(Fit, IsolateNeverFitsSmtWithADedicatedSet) {
  const auto& m = fixture(kXe8640);
  HostPolicy policy;
  policy.cpu_dedicated_set = m.pus;
  auto f =
      fit_on(view_of(m, policy),
             request(4, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "isolate"}}));
  EXPECT_FALSE(f.fit);
  EXPECT_NE(f.reason.find("1889633"), std::string::npos) << f.reason;
  // One thread per core in the set: the cell looks non-SMT and isolate is plain pinning.
  HostPolicy one_thread;
  one_thread.cpu_dedicated_set = CpuSet{};
  for (const auto& core : m.cores)
    one_thread.cpu_dedicated_set->set(*core.pus.first());
  EXPECT_TRUE(
      fit_on(view_of(m, one_thread),
             request(4, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "isolate"}}))
          .fit);
}

TEST(Fit, EmulatorIsolateReservesOneMorePuOnCellZero) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  auto r =
      request(7, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:emulator_threads_policy", "isolate"}});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  ASSERT_EQ(f.placement.emulator_pus.count(), 1u);
  unsigned emulator = *f.placement.emulator_pus.first();
  const auto& pin = f.placement.cells[0].pinning;
  for (const auto& [vcpu, pu] : pin)
    EXPECT_NE(pu, emulator);
  // 7 vCPUs + 1 on pairs: the reserved PU is the free sibling of vCPU 6.
  EXPECT_EQ(core_of(m, emulator), core_of(m, pin[6].second));
  EXPECT_EQ(f.placement.held_pus.count(), 8u);
  EXPECT_TRUE(node_pus(m, f.placement.cells[0].host_numa_node).test(emulator));
}

TEST(Fit, PageSizesOnTheHugepageHost) {
  const auto& m = fixture(kG4dn);
  auto v = view_of(m);
  for (const char* spec : {"2MiB", "large", "any", "2048"}) {
    auto f = fit_on(v, request(4, 8, {{"hw:mem_page_size", spec}}));
    ASSERT_TRUE(f.fit) << spec << ": " << f.reason;
    EXPECT_EQ(f.placement.cells[0].page_size_bytes, 2u << 20) << spec;
  }
  auto small = fit_on(v, request(4, 8, {{"hw:mem_page_size", "small"}}));
  ASSERT_TRUE(small.fit);
  EXPECT_EQ(small.placement.cells[0].page_size_bytes, 4096u);
  auto gig = fit_on(v, request(4, 8, {{"hw:mem_page_size", "1GB"}}));
  EXPECT_FALSE(gig.fit);
  EXPECT_NE(gig.reason.find("1 GiB pages"), std::string::npos) << gig.reason;
  // More huge-page memory than node 0's pool holds.
  const std::uint64_t pool_gib = m.numa_nodes[0].hugepages[0].total * 2 / 1024;
  auto too_big = fit_on(v, request(4, pool_gib + 1, {{"hw:mem_page_size", "2MB"}}));
  EXPECT_FALSE(too_big.fit);
  EXPECT_NE(too_big.reason.find("guest cell 0"), std::string::npos);
}

TEST(Fit, UnpinnedMemoryIsCheckedAgainstBasePagesOnly) {
  // A node mostly carved into huge pages refuses a guest with no page size that would fit its
  // total memory, as Nova does; small pages are checked against what is free.
  HostModel m = fixture(kQuartz);
  for (auto& n : m.numa_nodes)
    n.hugepages = {
        {std::uint64_t{1} << 30, n.memory_bytes / (std::uint64_t{1} << 30) - 4, std::nullopt}};
  auto v = view_of(m);
  auto none = fit_on(v, request(2, 8, {{"hw:numa_nodes", "1"}}));
  EXPECT_FALSE(none.fit);
  EXPECT_NE(none.reason.find("huge pages"), std::string::npos) << none.reason;
  auto large = fit_on(v, request(2, 8, {{"hw:mem_page_size", "large"}}));
  ASSERT_TRUE(large.fit) << large.reason;
  EXPECT_EQ(large.placement.cells[0].page_size_bytes, std::uint64_t{1} << 30);
}

TEST(Fit, HugepagesOnOneNodeOnly) {
  HostModel m = fixture(kXe8640);
  for (auto& n : m.numa_nodes) {
    for (auto& h : n.hugepages)
      h.total = (n.os_index == 6 && h.size_bytes == (std::uint64_t{1} << 30)) ? 64 : 0;
  }
  auto v = view_of(m);
  auto f = fit_on(v, request(8, 32, {{"hw:cpu_policy", "dedicated"}, {"hw:mem_page_size", "1GB"}}));
  ASSERT_TRUE(f.fit) << f.reason;
  EXPECT_EQ(f.placement.cells[0].host_numa_node, 6u);
  // The pool is then half used; a second 48 GiB guest does not fit anywhere.
  auto second =
      fit_on(v, request(8, 48, {{"hw:cpu_policy", "dedicated"}, {"hw:mem_page_size", "1GB"}}),
             {f.placement});
  EXPECT_FALSE(second.fit);
  EXPECT_NE(second.reason.find("node 6: needs 48 GiB in 1 GiB pages, has 32 GiB free"),
            std::string::npos)
      << second.reason;
}

// A guest confined to NUMA node 0 (no GPU there) by the dedicated set asks for one H100.
FitResult gpu_on_node0(PciNumaPolicy policy, const HostModel& m) {
  HostPolicy p;
  p.cpu_dedicated_set = node_pus(m, 0);
  auto r = request(4, 8,
                   {{"hw:cpu_policy", "dedicated"},
                    {"pci_passthrough:alias", "h100:1"},
                    {"hw:pci_numa_affinity_policy", to_string(policy)}},
                   gpu_aliases());
  return fit_on(view_of(m, p), r);
}

TEST(Fit, PciNumaPolicies) {
  const auto& m = fixture(kXe8640);
  auto required = gpu_on_node0(PciNumaPolicy::required, m);
  EXPECT_FALSE(required.fit);
  EXPECT_NE(required.reason.find("policy required"), std::string::npos) << required.reason;
  EXPECT_FALSE(gpu_on_node0(PciNumaPolicy::legacy, m).fit);  // the GPUs report a NUMA node
  auto preferred = gpu_on_node0(PciNumaPolicy::preferred, m);
  ASSERT_TRUE(preferred.fit) << preferred.reason;
  auto socket = gpu_on_node0(PciNumaPolicy::socket, m);
  ASSERT_TRUE(socket.fit) << socket.reason;
  ASSERT_EQ(socket.placement.devices.size(), 1u);
  // Node 0 is on package 0 with nodes 1-3: the GPU of node 1 or 3.
  unsigned node = *socket.placement.devices[0].numa_node;
  EXPECT_TRUE(node == 1 || node == 3) << node;
  // Legacy lets a device without NUMA information go anywhere.
  HostModel no_numa = m;
  no_numa.accelerators[2].pci.numa_nodes.clear();
  auto legacy = gpu_on_node0(PciNumaPolicy::legacy, no_numa);
  ASSERT_TRUE(legacy.fit) << legacy.reason;
  EXPECT_EQ(legacy.placement.devices[0].pci_bus_id,
            no_numa.accelerators[2].pci.address.to_string());
}

TEST(Fit, PciPoliciesDoNothingWithoutANumaTopology) {
  const auto& m = fixture(kXe8640);
  HostPolicy p;
  p.cpu_shared_set = node_pus(m, 0);
  auto r = request(
      4, 8, {{"pci_passthrough:alias", "h100:4"}, {"hw:pci_numa_affinity_policy", "required"}},
      gpu_aliases());
  auto f = fit_on(view_of(m, p), r);
  ASSERT_TRUE(f.fit) << f.reason;
  EXPECT_TRUE(f.placement.cells.empty());
  EXPECT_EQ(f.placement.devices.size(), 4u);
}

TEST(Fit, MultiCellGuestsTakeDistinctNodesAndLocalGpus) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  auto r = request(16, 64,
                   {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", "2"},
                    {"pci_passthrough:alias", "h100:2"},
                    {"hw:pci_numa_affinity_policy", "required"}},
                   gpu_aliases());
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  expect_valid(v, r, f.placement);
  ASSERT_EQ(f.placement.devices.size(), 2u);
  EXPECT_NE(f.placement.devices[0].guest_cell, f.placement.devices[1].guest_cell);
  auto nine = fit_on(v, request(18, 18, {{"hw:numa_nodes", "9"}}));
  EXPECT_FALSE(nine.fit);
  EXPECT_NE(nine.reason.find("8 NUMA nodes"), std::string::npos);
}

TEST(Fit, LargePinnedGuestNeedsNumaNodesEvenWithRoom) {
  auto v = view_of(fixture(kQuartz));  // 2 x 18 PUs
  auto one = fit_on(v, request(20, 16, {{"hw:cpu_policy", "dedicated"}}));
  EXPECT_FALSE(one.fit);
  EXPECT_NE(one.reason.find("needs 20 dedicated PUs, has 18 in all"), std::string::npos)
      << one.reason;
  EXPECT_TRUE(
      fit_on(v, request(20, 16, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}})).fit);
}

TEST(Fit, AsymmetricCellsAndResourcesPcpu) {
  const auto& m = fixture(kQuartz);
  auto v = view_of(m);
  auto r = parse_request({8,
                          std::uint64_t{24} << 30,
                          {{"resources:PCPU", "8"},
                           {"hw:numa_nodes", "2"},
                           {"hw:numa_cpus.0", "0-1"},
                           {"hw:numa_cpus.1", "2-7"},
                           {"hw:numa_mem.0", "4096"},
                           {"hw:numa_mem.1", "20480"}}},
                         {});
  ASSERT_TRUE(r) << r.error().message();
  auto f = fit_on(v, *r);
  ASSERT_TRUE(f.fit) << f.reason;
  expect_valid(v, *r, f.placement);
  EXPECT_EQ(f.placement.cells[0].pinning.size(), 2u);
  EXPECT_EQ(f.placement.cells[1].pinning.size(), 6u);
  EXPECT_EQ(f.placement.cells[1].memory_bytes, std::uint64_t{20} << 30);
  EXPECT_NE(f.placement.cells[0].host_numa_node, f.placement.cells[1].host_numa_node);
  // A cell bigger than a node (18 PUs) cannot fit, whatever the other cell.
  auto big = parse_request({20,
                            std::uint64_t{4} << 30,
                            {{"hw:cpu_policy", "dedicated"},
                             {"hw:numa_nodes", "2"},
                             {"hw:numa_cpus.0", "0"},
                             {"hw:numa_cpus.1", "1-19"},
                             {"hw:numa_mem.0", "1024"},
                             {"hw:numa_mem.1", "3072"}}},
                           {});
  ASSERT_TRUE(big);
  auto refused = fit_on(v, *big);
  EXPECT_FALSE(refused.fit);
  EXPECT_NE(refused.reason.find("guest cell 1 (19 vCPUs, 3 GiB) fits no host NUMA node"),
            std::string::npos)
      << refused.reason;
}

TEST(Fit, PartlyUsedHostFillsUpThenRefusesNamingTheCell) {
  auto v = view_of(fixture(kQuartz));  // 2 nodes x 18 PUs, no SMT
  auto r = request(6, 8, {{"hw:cpu_policy", "dedicated"}});
  std::vector<Placement> placed;
  for (int i = 0; i < 6; ++i) {
    auto f = fit_on(v, r, placed);
    ASSERT_TRUE(f.fit) << i << ": " << f.reason;
    expect_valid(v, r, f.placement, placed);
    f.placement.name = "g" + std::to_string(i);
    placed.push_back(f.placement);
  }
  // Best fit: the first node is filled before the second is touched.
  EXPECT_EQ(placed[0].cells[0].host_numa_node, placed[1].cells[0].host_numa_node);
  EXPECT_EQ(placed[1].cells[0].host_numa_node, placed[2].cells[0].host_numa_node);
  auto full = fit_on(v, r, placed);
  EXPECT_FALSE(full.fit);
  EXPECT_NE(full.reason.find("node 0: needs 6 free dedicated PUs, has 0"), std::string::npos)
      << full.reason;
}

TEST(Fit, SharedGuestsNeedTheCellsSharedSet) {
  const auto& m = fixture(kXe8640);
  HostPolicy p;
  p.cpu_dedicated_set = m.pus - CpuSet{0, 1, 2, 3};
  p.cpu_shared_set = CpuSet{0, 1, 2, 3};
  auto v = view_of(m, p);
  auto f = fit_on(v, request(6, 8, {{"hw:numa_nodes", "1"}}));
  EXPECT_FALSE(f.fit);
  EXPECT_NE(f.reason.find("node 0: needs 6 shared PUs, has 4 in all"), std::string::npos)
      << f.reason;
  auto ok = fit_on(v, request(4, 8, {{"hw:numa_nodes", "1"}}));
  ASSERT_TRUE(ok.fit);
  EXPECT_EQ(ok.placement.cells[0].shared_pus.to_list(), "0-3");
  // Mixed needs shared PUs in the same cell as its pinned ones.
  auto mixed =
      fit_on(v, request(4, 8, {{"hw:cpu_policy", "mixed"}, {"hw:cpu_dedicated_mask", "2-3"}}));
  ASSERT_TRUE(mixed.fit) << mixed.reason;
  EXPECT_EQ(mixed.placement.cells[0].host_numa_node, 0u);
  EXPECT_EQ(mixed.placement.cells[0].pinning.size(), 2u);
}

TEST(Fit, NicAffinityPutsAnRdmaNicUnderTheGpusSwitch) {
  const auto& m = fixture(kJureca);
  auto v = view_of(m);
  auto r = request(16, 32,
                   {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", "2"},
                    {"pci_passthrough:alias", "a100:2"},
                    {"hw:pci_numa_affinity_policy", "required"},
                    {"polyaccel:nic_affinity", "pix"}},
                   gpu_aliases());
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  ASSERT_EQ(f.placement.devices.size(), 4u);
  for (size_t k = 0; k < 2; ++k) {
    const auto& gpu = f.placement.devices[k];
    const auto& nic = f.placement.devices[2 + k];
    EXPECT_EQ(nic.kind, "nic");
    auto gi = *m.links.index_of(gpu.id);
    auto ni = *m.links.index_of(nic.id);
    EXPECT_EQ(m.links.at(gi, ni).level, LinkLevel::pix) << gpu.id << " " << nic.id;
  }
}

TEST(Fit, NicAffinityRefusesTheGpuWithoutANic) {
  const auto& m = fixture(kXe8640);  // the GPU on node 7 has no NIC on its switch
  HostPolicy p;
  p.cpu_dedicated_set = node_pus(m, 7);
  auto r = request(4, 8,
                   {{"hw:cpu_policy", "dedicated"},
                    {"pci_passthrough:alias", "h100:1"},
                    {"hw:pci_numa_affinity_policy", "required"},
                    {"polyaccel:nic_affinity", "pix"}},
                   gpu_aliases());
  auto f = fit_on(view_of(m, p), r);
  EXPECT_FALSE(f.fit);
  EXPECT_NE(f.reason.find("within PIX"), std::string::npos) << f.reason;
  // On the whole host the fit picks a GPU that has one.
  auto whole = fit_on(view_of(m), r);
  ASSERT_TRUE(whole.fit) << whole.reason;
  EXPECT_NE(whole.placement.devices[0].numa_node, 7u);
}

TEST(Fit, ProcessRequestForTheLauncher) {
  const auto& m = fixture(kJureca);
  auto v = view_of(m);
  auto r = process_request(8, std::uint64_t{16} << 30, {{gpu_aliases()[1], 1}});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  EXPECT_EQ(f.placement.devices[0].numa_node, f.placement.cells[0].host_numa_node);
  EXPECT_EQ(f.placement.held_pus.count(), 8u);
}

// Nova spreads CPU-only pinned guests over the nodes (most free pCPUs first, then most free
// memory) and so into the GPU nodes; polyaccel packs them on one node without a GPU.
TEST(Fit, NovaSpreadsCpuGuestsWherePolyaccelPacksThem) {
  const auto& m = fixture(kXe8640);
  auto v = view_of(m);
  auto r = request(8, 16, {{"hw:cpu_policy", "dedicated"}});
  std::vector<Placement> nova, ours;
  std::set<unsigned> nova_nodes, our_nodes;
  for (int i = 0; i < 3; ++i) {
    auto n = fit_on(v, r, nova, Strategy::first_fit);
    auto o = fit_on(v, r, ours, Strategy::polyaccel);
    ASSERT_TRUE(n.fit && o.fit);
    // Nova's pick: the most free pCPUs, ties to the most free memory, then the lowest id.
    auto usage = *usage_of(v, nova);
    size_t want = 0;
    for (size_t h = 1; h < v.cells.size(); ++h) {
      auto key = [&](size_t k) {
        return std::make_pair((v.cells[k].pcpus - usage.cells[k].held).count(),
                              v.cells[k].memory_bytes - usage.cells[k].memory_used);
      };
      if (key(h) > key(want)) want = h;
    }
    EXPECT_EQ(n.placement.cells[0].host_numa_node, v.cells[want].node) << "guest " << i;
    nova_nodes.insert(n.placement.cells[0].host_numa_node);
    our_nodes.insert(o.placement.cells[0].host_numa_node);
    n.placement.name = o.placement.name = "g" + std::to_string(i);
    nova.push_back(n.placement);
    ours.push_back(o.placement);
  }
  EXPECT_EQ(nova_nodes.size(), 3u);
  bool nova_on_gpu_node = false;
  for (unsigned node : nova_nodes)
    nova_on_gpu_node = nova_on_gpu_node || node % 2 == 1;
  EXPECT_TRUE(nova_on_gpu_node);
  ASSERT_EQ(our_nodes.size(), 1u);  // 3 x 8 of a node's 28 PUs
  EXPECT_EQ(*our_nodes.begin() % 2, 0u);
}

TEST(Fit, ForeignAllocationsAreRefused) {
  auto v = view_of(fixture(kQuartz));
  Placement foreign;
  foreign.name = "elsewhere";
  CellPlacement c;
  c.host_numa_node = 7;
  foreign.cells.push_back(c);
  auto f = fit(v, {foreign}, request(2, 2, {}));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("another host"), std::string::npos);
}

// Where Nova's own choice (first fit) finds a place, ours does too and vice versa, on streams
// of mixed requests filling real hosts; every placement keeps the rules.
TEST(Fit, SameVerdictAsNovasFirstFitOnRandomStreams) {
  std::mt19937 rng(7);
  const std::vector<std::vector<std::pair<std::string, std::string>>> shapes = {
      {{"hw:cpu_policy", "dedicated"}},
      {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}},
      {{"hw:cpu_policy", "dedicated"}, {"hw:cpu_thread_policy", "require"}},
      {{"hw:cpu_policy", "dedicated"}, {"hw:emulator_threads_policy", "isolate"}},
      {{"hw:numa_nodes", "1"}},
      {{"hw:cpu_policy", "dedicated"},
       {"pci_passthrough:alias", "a100:1"},
       {"hw:pci_numa_affinity_policy", "required"}},
      {{"hw:cpu_policy", "dedicated"},
       {"pci_passthrough:alias", "a100:1"},
       {"hw:pci_numa_affinity_policy", "socket"}},
  };
  for (const std::string& host : {std::string(kJureca), kXe8640, std::string(kQuartz)}) {
    auto v = view_of(fixture(host));
    std::vector<Placement> ours;
    for (int i = 0; i < 60; ++i) {
      const auto& shape = shapes[rng() % shapes.size()];
      unsigned vcpus = 2u * (1u + rng() % 8u);
      auto r = request(vcpus, 4u * (1u + rng() % 8u), shape, gpu_aliases());
      auto a = fit_on(v, r, ours, Strategy::polyaccel);
      auto b = fit_on(v, r, ours, Strategy::first_fit);
      ASSERT_EQ(a.fit, b.fit) << host << " request " << i << ": " << a.reason << " / " << b.reason;
      if (!a.fit) continue;
      expect_valid(v, r, a.placement, ours);
      expect_valid(v, r, b.placement, ours);
      EXPECT_LE(node_distance(v, a.placement), node_distance(v, b.placement))
          << host << " request " << i << ": farther apart than Nova's first fit";
      a.placement.name = "g" + std::to_string(i);
      ours.push_back(a.placement);
    }
  }
}

// The XE8640 is two sockets of four SNC nodes (SLIT 10/12/21); JURECA two of four NPS nodes.
TEST(Fit, MultiCellGuestsTakeTheNearestNodesOnOneSocket) {
  const auto& xe = fixture(kXe8640);
  auto v = view_of(xe);
  auto two = request(16, 64, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}});
  auto f = fit_on(v, two);
  ASSERT_TRUE(f.fit) << f.reason;
  EXPECT_EQ(node_distance(v, f.placement), 12u);
  EXPECT_EQ(node_distance(v, f.placement),
            node_distance(v, fit_on(v, two, {}, Strategy::first_fit).placement));
  auto gpu = request(
      16, 64,
      {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}, {"pci_passthrough:alias", "h100:1"}},
      gpu_aliases());
  auto g = fit_on(v, gpu);
  ASSERT_TRUE(g.fit) << g.reason;
  EXPECT_EQ(node_distance(v, g.placement), 12u);
  auto j = view_of(fixture(kJureca));
  auto jr = fit_on(j, request(16, 64, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}}));
  ASSERT_TRUE(jr.fit) << jr.reason;
  EXPECT_LE(
      node_distance(j, jr.placement),
      node_distance(
          j, fit_on(j, request(16, 64, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "2"}}),
                    {}, Strategy::first_fit)
                 .placement));
  std::set<unsigned> sockets;
  for (const auto& c : jr.placement.cells)
    sockets.insert(*j.cell(c.host_numa_node)->socket);
  EXPECT_EQ(sockets.size(), 1u);
  // Four cells of the XE8640 fit one socket: they never take the other.
  auto four = fit_on(v, request(16, 64, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "4"}}));
  ASSERT_TRUE(four.fit) << four.reason;
  sockets.clear();
  for (const auto& c : four.placement.cells)
    sockets.insert(*v.cell(c.host_numa_node)->socket);
  EXPECT_EQ(sockets.size(), 1u);
}

// hw:emulator_threads_policy=share puts the emulator threads on cpu_shared_set, as Nova does;
// without the policy they stay on the guest's own PUs.
TEST(Fit, EmulatorThreadsShareUseTheSharedSet) {
  const auto& m = fixture(kXe8640);
  HostPolicy p;
  p.cpu_shared_set = CpuSet::parse_list("0-1,112-113").value();
  p.cpu_dedicated_set = m.pus - *p.cpu_shared_set;
  auto v = view_of(m, p);
  auto share = fit_on(
      v, request(4, 8, {{"hw:cpu_policy", "dedicated"}, {"hw:emulator_threads_policy", "share"}}));
  ASSERT_TRUE(share.fit) << share.reason;
  EXPECT_EQ(share.placement.emulator_pus, *p.cpu_shared_set);
  auto unset = fit_on(v, request(4, 8, {{"hw:cpu_policy", "dedicated"}}));
  ASSERT_TRUE(unset.fit);
  EXPECT_EQ(unset.placement.emulator_pus, unset.placement.held_pus);
}

TEST(Fit, BigHostsAnswerQuickly) {
  auto v = view_of(fixture(kSgi));
  auto r = request(32, 64, {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "4"}});
  auto f = fit_on(v, r);
  ASSERT_TRUE(f.fit) << f.reason;
  expect_valid(v, r, f.placement);
}

// Nova walks every permutation of host cells when the devices fit none: for 8 guest cells on
// the 24-node SGI, hours. Both strategies answer at once with the refusal Nova would give first.
TEST(Fit, ManyCellsWhoseDevicesTheHostLacksAreRefusedAtOnce) {
  auto v = view_of(fixture(kSgi));
  auto r = request(
      16, 16,
      {{"hw:cpu_policy", "dedicated"}, {"hw:numa_nodes", "8"}, {"pci_passthrough:alias", "h100:1"}},
      gpu_aliases());
  const HostUsage u = *usage_of(v, {});
  for (Strategy s : {Strategy::first_fit, Strategy::polyaccel}) {
    auto f = fit(v, u, r, s);
    EXPECT_FALSE(f.fit);
    EXPECT_EQ(f.reason,
              "pci_passthrough:alias h100:1 needs 1 free devices allowed by policy legacy for "
              "host NUMA nodes 0,1,2,3,4,5,6,7: 0 there, 0 free on the host");
  }
}

// The host has the device, but only on a node no guest cell fits: every set of nodes is refused.
// The first fit stops after its step budget and says so; polyaccel's search after its visits.
TEST(Fit, ManyCellsWhoseNicSitsOnAFullNodeStopWithinABudget) {
  auto v = view_of(fixture(kSgi));
  HostUsage u = *usage_of(v, {});
  std::optional<unsigned> nic_node;
  for (const auto& d : v.devices) {
    if (d.rdma && !d.accelerator) nic_node = d.numa_node;
  }
  ASSERT_TRUE(nic_node);
  for (size_t i = 0; i < v.cells.size(); ++i) {
    if (v.cells[i].node == *nic_node) u.cells[i].held = v.cells[i].pcpus;
  }
  const std::string nic_refusal =
      "polyaccel:rdma_nics=1: no free RDMA NIC allowed by policy required; 1 RDMA NICs free on "
      "the host";
  auto r = [](const char* cells) {
    return request(16, 16,
                   {{"hw:cpu_policy", "dedicated"},
                    {"hw:numa_nodes", cells},
                    {"polyaccel:rdma_nics", "1"},
                    {"hw:pci_numa_affinity_policy", "required"}});
  };
  // Four cells: the whole search runs (sets already refused are not walked again in another
  // order) and ends with the refusal.
  for (Strategy s : {Strategy::first_fit, Strategy::polyaccel}) {
    auto f = fit(v, u, r("4"), s);
    EXPECT_FALSE(f.fit);
    EXPECT_EQ(f.reason, nic_refusal);
  }
  auto first = fit(v, u, r("8"), Strategy::first_fit);
  EXPECT_FALSE(first.fit);
  EXPECT_EQ(first.reason,
            "gave up after 1048576 steps of the search for 8 host NUMA nodes; the "
            "first refusal: " +
                nic_refusal);
  auto ours = fit(v, u, r("8"), Strategy::polyaccel);
  EXPECT_FALSE(ours.fit);
  EXPECT_EQ(ours.reason, nic_refusal);
}

}  // namespace
}  // namespace polyaccel::place
