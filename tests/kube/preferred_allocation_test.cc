// GetPreferredAllocation's choice on real machines' link matrices: the XE8640 (NV6 between
// four H100s on four SNC NUMA nodes), AWS g4dn.metal (eight T4s, PCIe only, two NUMA nodes), the
// 8xH100 NVSwitch node of the NVML test library, and time-slicing replicas on it.
#include "kube/preferred_allocation.h"

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/models.h"

namespace polyaccel {
namespace {

using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using namespace polyaccel::testing;

// One device per accelerator, named by its model id ("gpu3").
std::vector<DeviceSlot> whole(const HostModel& m) {
  std::vector<DeviceSlot> slots;
  for (size_t i = 0; i < m.accelerators.size(); ++i)
    slots.push_back({m.accelerators[i].id, i});
  return slots;
}

// `count` replicas of each accelerator: "gpu3::0" ... "gpu3::<count-1>".
std::vector<DeviceSlot> replicas(const HostModel& m, int count) {
  std::vector<DeviceSlot> slots;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    for (int r = 0; r < count; ++r)
      slots.push_back({m.accelerators[i].id + "::" + std::to_string(r), i});
  }
  return slots;
}

std::vector<std::string> ids(const std::vector<DeviceSlot>& slots) {
  std::vector<std::string> out;
  for (const auto& s : slots)
    out.push_back(s.id);
  return out;
}

std::vector<std::string> choose(const HostModel& m, std::vector<std::string> available,
                                std::vector<std::string> must, size_t size) {
  auto topo = AllocationTopology::from_model(m);
  auto r = choose_preferred_allocation(topo, whole(m), {available, must, size});
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  return r ? *r : std::vector<std::string>{};
}

std::string gpu_on_numa(const HostModel& m, unsigned node) {
  for (const auto& a : m.accelerators) {
    if (a.pci.numa_nodes == std::vector<unsigned>{node}) return a.id;
  }
  return "none on " + std::to_string(node);
}

TEST(PreferredAllocation, Xe8640PairStaysOnOneSocket) {
  HostModel m = load_fixture(kXe8640);
  ASSERT_EQ(m.accelerators.size(), 4u);
  auto all = ids(whole(m));
  // Every pair is NV6 and SYS over PCIe; the SNC distance (12 within a socket, 21 across)
  // decides. Socket 0 holds NUMA 1 and 3, socket 1 NUMA 5 and 7.
  EXPECT_THAT(choose(m, all, {}, 2), UnorderedElementsAre(gpu_on_numa(m, 1), gpu_on_numa(m, 3)));
  EXPECT_THAT(choose(m, all, {gpu_on_numa(m, 7)}, 2),
              UnorderedElementsAre(gpu_on_numa(m, 5), gpu_on_numa(m, 7)));
  // One GPU of socket 1 is taken: a single GPU comes from socket 1 too, so that socket 0's
  // pair stays whole.
  std::vector<std::string> three = {gpu_on_numa(m, 1), gpu_on_numa(m, 3), gpu_on_numa(m, 7)};
  EXPECT_THAT(choose(m, three, {}, 1), UnorderedElementsAre(gpu_on_numa(m, 7)));
  EXPECT_THAT(choose(m, all, {}, 4), UnorderedElementsAreArray(all));
}

TEST(PreferredAllocation, G4dnPrefersTheSharedHostBridgeAndOneNumaNode) {
  HostModel m = load_fixture(kG4dn);
  ASSERT_EQ(m.accelerators.size(), 8u);
  auto all = ids(whole(m));
  // gpu0-gpu1 are PHB, gpu0-gpu2 NODE, gpu0-gpu4 SYS.
  EXPECT_THAT(choose(m, all, {}, 2), UnorderedElementsAre("gpu0", "gpu1"));
  EXPECT_THAT(choose(m, all, {}, 4), UnorderedElementsAre("gpu0", "gpu1", "gpu2", "gpu3"));
  EXPECT_THAT(choose(m, all, {"gpu4"}, 2), UnorderedElementsAre("gpu4", "gpu5"));
  // gpu0 is in use: the pair comes from NUMA 0's remaining GPUs, leaving NUMA 1 whole for a
  // later 4-GPU request; a single GPU is gpu0's PHB partner, leaving gpu2-gpu3 together.
  std::vector<std::string> seven(all.begin() + 1, all.end());
  EXPECT_THAT(choose(m, seven, {}, 2), UnorderedElementsAre("gpu2", "gpu3"));
  EXPECT_THAT(choose(m, seven, {}, 1), UnorderedElementsAre("gpu1"));
  EXPECT_THAT(choose(m, seven, {}, 4), UnorderedElementsAre("gpu4", "gpu5", "gpu6", "gpu7"));
  // Six GPUs: all of NUMA 1 and the PHB pair of NUMA 0 that stays linked.
  auto six = choose(m, seven, {}, 6);
  EXPECT_EQ(std::set<std::string>(six.begin(), six.end()).count("gpu1"), 0u);
}

TEST(PreferredAllocation, NvSwitchNodeGoesByNumaWhenEveryPairIsNv18) {
  HostModel m = hgx_8xh100();
  ASSERT_EQ(m.accelerators.size(), 8u);
  auto topo = AllocationTopology::from_model(m);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      if (i != j) {
        EXPECT_GE(topo.link_score(i, j), 1800) << i << "," << j;
      }
    }
  }
  auto all = ids(whole(m));
  // Of the eight, four carry the capture's NUMA nodes; a pair is one socket's two.
  EXPECT_THAT(choose(m, all, {}, 2), UnorderedElementsAre(gpu_on_numa(m, 1), gpu_on_numa(m, 3)));
  auto eight = choose(m, all, {}, 8);
  EXPECT_THAT(eight, UnorderedElementsAreArray(all));
}

TEST(PreferredAllocation, ReplicasSpreadOverDistinctGpusFirstAndTheLeastUsed) {
  HostModel m = hgx_8xh100();
  std::vector<DeviceSlot> slots = replicas(m, 4);
  auto topo = AllocationTopology::from_model(m);
  auto available = ids(slots);
  auto got = choose_preferred_allocation(topo, slots, {available, {}, 3});
  ASSERT_TRUE(got);
  std::set<std::string> gpus;
  for (const auto& id : *got)
    gpus.insert(id.substr(0, id.find("::")));
  EXPECT_EQ(gpus.size(), 3u);
  // Ten replicas on eight GPUs: every GPU once, two of them twice.
  got = choose_preferred_allocation(topo, slots, {available, {}, 10});
  ASSERT_TRUE(got);
  std::map<std::string, int> per_gpu;
  for (const auto& id : *got)
    per_gpu[id.substr(0, id.find("::"))]++;
  EXPECT_EQ(per_gpu.size(), 8u);
  // gpu0..gpu6 have three of four replicas in use, gpu7 none: one replica comes from gpu7.
  std::vector<std::string> avail;
  for (const auto& s : slots) {
    if (s.accelerator == 7 || s.id.substr(s.id.size() - 3) == "::0") avail.push_back(s.id);
  }
  got = choose_preferred_allocation(topo, slots, {avail, {}, 1});
  ASSERT_TRUE(got);
  EXPECT_THAT(*got, UnorderedElementsAre("gpu7::0"));
  // must_include keeps its replica; the second comes from another GPU.
  got = choose_preferred_allocation(topo, slots, {available, {"gpu5::2"}, 2});
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0], "gpu5::2");
  EXPECT_NE((*got)[1].substr(0, 4), "gpu5");
}

TEST(PreferredAllocation, PackedFillsTheMostUsedGpuFirst) {
  HostModel m = hgx_8xh100();
  std::vector<DeviceSlot> slots = replicas(m, 4);
  auto topo = AllocationTopology::from_model(m);
  // gpu3 has one replica in use, the others none: packed takes gpu3's three free replicas.
  std::vector<std::string> avail;
  for (const auto& s : slots) {
    if (s.id != "gpu3::0") avail.push_back(s.id);
  }
  PreferredAllocationRequest req{avail, {}, 3};
  req.packed = true;
  auto got = choose_preferred_allocation(topo, slots, req);
  ASSERT_TRUE(got);
  EXPECT_THAT(*got, UnorderedElementsAre("gpu3::1", "gpu3::2", "gpu3::3"));
  // Spread: three distinct GPUs, none of them gpu3.
  req.packed = false;
  got = choose_preferred_allocation(topo, slots, req);
  ASSERT_TRUE(got);
  std::set<std::string> gpus;
  for (const auto& id : *got)
    gpus.insert(id.substr(0, id.find("::")));
  EXPECT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus.count("gpu3"), 0u);
}

TEST(PreferredAllocation, BadRequestsAreErrors) {
  HostModel m = load_fixture(kXe8640);
  auto topo = AllocationTopology::from_model(m);
  auto slots = whole(m);
  auto all = ids(slots);
  auto r = choose_preferred_allocation(topo, slots, {all, {}, 5});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::bad_input);
  r = choose_preferred_allocation(topo, slots, {{"gpu0", "gpu1"}, {"gpu2"}, 2});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("gpu2"), std::string::npos);
  r = choose_preferred_allocation(topo, slots, {{"GPU-unknown"}, {}, 1});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("GPU-unknown"), std::string::npos);
  r = choose_preferred_allocation(topo, slots, {all, {"gpu0", "gpu1"}, 1});
  ASSERT_FALSE(r);
  // Zero devices asked: an empty answer.
  r = choose_preferred_allocation(topo, slots, {all, {}, 0});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
}

TEST(PreferredAllocation, ManyAcceleratorsFallBackToGreedyAndStillHonourMustInclude) {
  // 24 accelerators (the MI300A CPX node has 4 functions; build a larger host by repeating the
  // g4dn's eight three times in one model): C(24,12) sets are too many to try one by one.
  HostModel g = load_fixture(kG4dn);
  HostModel m = g;
  for (int copy = 1; copy < 3; ++copy) {
    for (auto a : g.accelerators) {
      a.id = "gpu" + std::to_string(m.accelerators.size());
      m.accelerators.push_back(a);
    }
  }
  auto topo = AllocationTopology::from_model(m);
  auto slots = whole(m);
  auto r = choose_preferred_allocation(topo, slots, {ids(slots), {"gpu17"}, 12});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->size(), 12u);
  EXPECT_EQ((*r)[0], "gpu17");
  EXPECT_EQ(std::set<std::string>(r->begin(), r->end()).size(), 12u);
}

}  // namespace
}  // namespace polyaccel
