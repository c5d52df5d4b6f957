// CPUs and memory as DRA devices (dra/cpu_devices.h) on a captured 2-socket, 224-thread machine
// (Dell XE8640: SNC4, 8 NUMA nodes, 4 H100, 4 ConnectX): the devices against the topology, the
// slices against the real resource.k8s.io/v1 schema and each version's validation, the overlay's
// claim templates as the structured allocator fills them, what a claim grants and how the NRI
// plugin reads it back from the claim's CDI spec.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dra/cdi.h"
#include "dra/cpu_devices.h"
#include "dra/slice_validation.h"
#include "dra/slices.h"
#include "dra/structured_allocator.h"
#include "kube/models.h"
#include "nri/cpu_policy.h"
#include "support/k8s_schema.h"
#include "support/test_support.h"

namespace polyaccel::dra {
namespace {

using nlohmann::json;
using polyaccel::testing::ClaimSpec;
using polyaccel::testing::device_attribute;

const std::string kNuma = "resource.kubernetes.io/numaNode";

const HostModel& xe8640() {
  static const HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  return m;
}

Pool pool_of(const HostModel& m, CpuGrain grain, bool memory, CpuSet reserved = {},
             CounterLayout layout = CounterLayout::own_slices) {
  SliceOptions o;
  o.node = "node-1";
  o.cpu.grain = grain;
  o.cpu.memory = memory;
  o.cpu.reserved = std::move(reserved);
  o.layout = layout;
  auto p = build_pool(m, o);
  EXPECT_TRUE(p) << (p ? "" : p.error().message());
  return p ? *p : Pool{};
}

std::vector<json> slices_json(const Pool& p) {
  std::vector<json> out;
  for (size_t i = 0; i < p.slices.size(); ++i)
    out.push_back(slice_json(p, i, 1));
  return out;
}

std::vector<const Device*> of_kind(const Pool& p, DeviceKind kind) {
  std::vector<const Device*> out;
  for (const auto& s : p.slices)
    for (const auto& d : s.devices)
      if (d.kind == kind) out.push_back(&d);
  return out;
}

TEST(CpuDevices, ACoreWithItsSiblingsOnItsNumaNodeAndSocket) {
  const HostModel& m = xe8640();
  ASSERT_EQ(m.pus.count(), 224u);
  Pool p = pool_of(m, CpuGrain::core, false);
  auto cpus = of_kind(p, DeviceKind::cpu);
  ASSERT_EQ(cpus.size(), m.cores.size());  // 112: every core once
  CpuSet seen;
  for (const Device* d : cpus) {
    EXPECT_EQ(d->cpus.count(), 2u) << d->name << ": SMT on, two threads a core";
    EXPECT_FALSE(seen.intersects(d->cpus)) << d->name;
    seen |= d->cpus;
    EXPECT_EQ(d->name, "cpu-" + std::to_string(*d->cpus.first()));
    const unsigned node = static_cast<unsigned>(d->attributes.at(kNuma).integer);
    EXPECT_TRUE(m.numa_node(node)->cpus.contains(d->cpus)) << d->name;
    const auto pkg = d->attributes.at("package").integer;
    bool in_package = false;
    for (const auto& k : m.packages)
      in_package |= k.os_index == pkg && k.cpus.contains(d->cpus);
    EXPECT_TRUE(in_package) << d->name;
    EXPECT_EQ(d->attributes.at("type").text, "cpu");
    EXPECT_EQ(d->attributes.at("smtSiblings").integer, 2);
    EXPECT_EQ(d->capacity.at("cpus"), "2");
    EXPECT_EQ(d->attributes.count("resource.kubernetes.io/pcieRoot"), 0u) << "a CPU has no root";
  }
  EXPECT_EQ(seen, m.pus);
}

TEST(CpuDevices, ReservedCpusTakeTheirWholeCoreOut) {
  const HostModel& m = xe8640();
  // kubelet's reserved 0-1 (two cores' first threads) and an isolated 200.
  CpuSet reserved = *CpuSet::parse_list("0-1,200");
  for (CpuGrain grain : {CpuGrain::core, CpuGrain::numa}) {
    Pool p = pool_of(m, grain, false, reserved);
    CpuSet offered;
    for (const Device* d : of_kind(p, DeviceKind::cpu))
      offered |= d->cpus;
    EXPECT_FALSE(offered.intersects(reserved)) << to_string(grain);
    for (const auto& c : m.cores)
      EXPECT_EQ(offered.contains(c.pus), !c.pus.intersects(reserved)) << c.pus.to_list();
    EXPECT_EQ(offered.count(), 224u - 6) << "three cores, both threads each";
  }
}

TEST(CpuDevices, NumaGrainAndMemoryDevicesPerNode) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::numa, true);
  auto cpus = of_kind(p, DeviceKind::cpu);
  auto mem = of_kind(p, DeviceKind::memory);
  ASSERT_EQ(cpus.size(), 8u);
  ASSERT_EQ(mem.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const NumaNode& n = m.numa_nodes[i];
    EXPECT_EQ(cpus[i]->name, "cpu-numa-" + std::to_string(n.os_index));
    EXPECT_EQ(cpus[i]->cpus, n.cpus);
    EXPECT_EQ(cpus[i]->capacity.at("cpus"), std::to_string(n.cpus.count()));
    EXPECT_EQ(cpus[i]->attributes.at("type").text, "cpu-numa");
    EXPECT_EQ(mem[i]->name, "memory-numa-" + std::to_string(n.os_index));
    EXPECT_EQ(mem[i]->capacity.at("memory"), bytes_quantity(n.memory_bytes));
    EXPECT_EQ(mem[i]->attributes.at(kNuma).integer, n.os_index);
  }
}

// 224 threads as 112 core devices, 8 memory devices, GPUs and NICs, split at 128 devices a
// slice, valid on every version in both counter layouts.
TEST(CpuDevices, The224ThreadHostsSlicesStayWithinTheApisLimits) {
  const HostModel& m = xe8640();
  static const polyaccel::testing::K8sSchema schema;
  for (CounterLayout layout : {CounterLayout::own_slices, CounterLayout::with_devices}) {
    SCOPED_TRACE(to_string(layout));
    Pool p = pool_of(m, CpuGrain::core, true, {}, layout);
    EXPECT_EQ(of_kind(p, DeviceKind::cpu).size(), 112u);
    // 112 cores, 8 nodes' memory, 4 GPUs and 4 NICs: 128, one full slice (with the test
    // NVML's 8 GPUs, bench/dra_bench, two).
    EXPECT_EQ(p.device_count(), 128u);
    EXPECT_EQ(p.slices.size(), 1u);
    std::set<std::string> names;
    const std::vector<unsigned> minors = layout == CounterLayout::own_slices
                                             ? std::vector<unsigned>{35, 36, 37}
                                             : std::vector<unsigned>{34};
    for (size_t i = 0; i < p.slices.size(); ++i) {
      EXPECT_LE(p.slices[i].devices.size(), kMaxDevicesPerSlice);
      for (const auto& d : p.slices[i].devices)
        EXPECT_TRUE(names.insert(d.name).second) << d.name;
      json s = slice_json(p, i, 1);
      auto errors = schema.validate(s);
      EXPECT_TRUE(errors.empty()) << errors.front();
      for (unsigned minor : minors) {
        auto refused = polyaccel::testing::resource_slice_errors(s, minor);
        EXPECT_TRUE(refused.empty()) << "1." << minor << ": " << refused.front();
      }
    }
    EXPECT_EQ(names.size(), p.device_count());
  }
}

TEST(CpuDevices, AClaimGrantsItsCoresAndTheirNodesMemory) {
  const HostModel& m = xe8640();
  CpuDeviceOptions o;
  o.grain = CpuGrain::core;
  o.memory = true;
  const NumaNode& n1 = *m.numa_node(1);
  const unsigned a = n1.cpus.to_vector()[0], b = n1.cpus.to_vector()[1];
  auto g = claim_grant(m, o, {"cpu-" + std::to_string(a), "cpu-" + std::to_string(b)});
  ASSERT_TRUE(g) << g.error().message();
  CpuSet want;
  for (const auto& c : m.cores)
    if (c.pus.test(a) || c.pus.test(b)) want |= c.pus;
  EXPECT_EQ(g->cpus, want);
  EXPECT_EQ(g->mems, CpuSet({1})) << "without a memory device: the CPUs' node";
  auto with_memory = claim_grant(m, o, {"cpu-" + std::to_string(a), "memory-numa-1"});
  ASSERT_TRUE(with_memory);
  EXPECT_EQ(with_memory->mems, CpuSet({1}));
  // A name that is not a CPU or memory device of this node, a GPU's included, is refused.
  for (const char* bad : {"cpu-1000", "gpu-0", "memory-numa-99", "cpu-numa-1", ""}) {
    auto r = claim_grant(m, o, {bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_NE(r.error().message().find("not a CPU or memory device"), std::string::npos);
  }
}

TEST(CpuDevices, ReservedCpusFlagIsCheckedAgainstTheNode) {
  const HostModel& m = xe8640();
  auto ok = parse_reserved_cpus(m, "0-1,112-113");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->count(), 4u);
  for (const char* bad : {"0-", "a", "3-1", "0-224", "99999999", "1,\x1b[2J"}) {
    auto r = parse_reserved_cpus(m, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_NE(r.error().message().find("--reserved-cpus"), std::string::npos);
    EXPECT_EQ(r.error().message().find('\x1b'), std::string::npos) << "escaped";
  }
}

// The claim's CDI spec names its CPUs and nodes as the NRI plugin reads them.
TEST(CpuDevices, TheClaimsCdiSpecTellsTheNriPluginItsCpus) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::core, true);
  const std::string uid = "0b8e1c2a-1111-2222-3333-444455556666";
  std::vector<const Device*> devices = {p.device("cpu-2"), p.device("cpu-3"),
                                        p.device("memory-numa-0")};
  ASSERT_TRUE(devices[0] && devices[1] && devices[2]);
  auto spec = claim_spec(m, devices, CdiHost{}, uid, CdiOptions{});
  ASSERT_TRUE(spec) << spec.error().message();
  ASSERT_EQ(spec->devices.size(), 3u);
  const CpuGrant g = grant_of(m, devices);
  for (const auto& d : spec->devices) {
    auto claimed = nri::claimed_cpus(d.edits.env, m.pus, CpuSet({0, 1, 2, 3, 4, 5, 6, 7}));
    ASSERT_TRUE(claimed) << claimed.error().message();
    ASSERT_TRUE(claimed->has_value()) << d.name;
    EXPECT_EQ((*claimed)->cpus, g.cpus);
    EXPECT_EQ((*claimed)->mems, CpuSet({0}));
  }
}

// deploy/kubernetes/examples/dra-claims/claim-templates.yaml, as the scheduler's structured
// allocator fills them on this machine's slices.
bool same_numa_node(const Pool& p, const std::vector<std::string>& names) {
  std::set<std::int64_t> nodes;
  for (const auto& n : names) {
    const Device* d = p.device(n);
    if (!d || !d->attributes.count(kNuma)) return false;
    nodes.insert(d->attributes.at(kNuma).integer);
  }
  return nodes.size() == 1;
}

unsigned fill(const Pool& p, const ClaimSpec& claim, std::vector<std::vector<std::string>>* got) {
  polyaccel::testing::StructuredAllocator scheduler;
  scheduler.set_slices(slices_json(p));
  unsigned n = 0;
  while (auto a = scheduler.allocate(claim)) {
    if (got) got->push_back(*a);
    if (++n == 64) break;
  }
  return n;
}

TEST(CpuDevices, TemplatesGpuNicCoresAndMemoryOnOneNumaNode) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::core, true);
  // gpu-nic-cores-same-numa: a GPU, an RDMA NIC, 8 cores and the memory of one NUMA node.
  ClaimSpec claim{{{"gpu", "gpu", {}, 1},
                   {"nic", "nic", {}, 1},
                   {"cpus", "cpu", {}, 8},
                   {"memory", "memory", {}, 1}},
                  {{{}, kNuma}}};
  std::vector<std::vector<std::string>> got;
  // As many as the board has GPUs with a NIC on their node (gpu-with-nic-same-numa).
  ClaimSpec gpu_nic{{{"gpu", "gpu", {}, 1}, {"nic", "nic", {}, 1}}, {{{}, kNuma}}};
  const unsigned expected = fill(p, gpu_nic, nullptr);
  ASSERT_GT(expected, 0u);
  EXPECT_EQ(fill(p, claim, &got), expected);
  for (const auto& a : got) {
    EXPECT_EQ(a.size(), 11u);
    EXPECT_TRUE(same_numa_node(p, a));
  }
  // The same with AMD's and Gaudi's classes differs by the GPU's class only: its type "gpu" or
  // "hpu" and the numaNode the GPU carries whatever its vendor (CpuDevices tests of the
  // slices_test machines).
}

// Cores that share an L3 cache (issue 39): on JURECA's EPYC 7742 pair every fourth core starts a
// new CCX with its own L3 (32 in all, hwloc's L3Cache objects of the capture); the XE8640's
// Sapphire Rapids has one L3 per socket. A claim of 4 cores matching polyaccel.io/l3Cache gets
// one CCX each time, 32 times.
TEST(CpuDevices, CoresCarryTheirL3AndAClaimCanKeepItsCoresOnOne) {
  const HostModel jureca = polyaccel::testing::load_fixture(polyaccel::testing::kJureca);
  Pool p = pool_of(jureca, CpuGrain::core, false);
  std::map<std::int64_t, CpuSet> by_l3;
  for (const Device* d : of_kind(p, DeviceKind::cpu)) {
    ASSERT_TRUE(d->attributes.count("l3Cache")) << d->name;
    by_l3[d->attributes.at("l3Cache").integer] |= d->cpus;
  }
  ASSERT_EQ(by_l3.size(), 32u);
  for (const auto& [l3, cpus] : by_l3) {
    EXPECT_EQ(cpus.count(), 8u) << "L3 " << l3 << ": four cores, two threads each";
    std::set<std::int64_t> nodes;
    for (const Device* d : of_kind(p, DeviceKind::cpu))
      if (d->attributes.at("l3Cache").integer == l3) nodes.insert(d->attributes.at(kNuma).integer);
    EXPECT_EQ(nodes.size(), 1u) << "a CCX is within one NUMA node";
  }
  std::set<std::int64_t> xe_l3;
  const Pool xe = pool_of(xe8640(), CpuGrain::core, false);
  for (const Device* d : of_kind(xe, DeviceKind::cpu)) {
    ASSERT_TRUE(d->attributes.count("l3Cache")) << d->name;
    xe_l3.insert(d->attributes.at("l3Cache").integer);
  }
  EXPECT_EQ(xe_l3.size(), 2u);
  ClaimSpec ccx{{{"cpus", "cpu", {}, 4}}, {{{}, "polyaccel.io/l3Cache"}}};
  std::vector<std::vector<std::string>> got;
  EXPECT_EQ(fill(p, ccx, &got), 32u);
  for (const auto& a : got) {
    std::set<std::int64_t> l3s;
    for (const auto& n : a)
      l3s.insert(p.device(n)->attributes.at("l3Cache").integer);
    EXPECT_EQ(l3s.size(), 1u);
  }
}

TEST(CpuDevices, TemplatesAWholeNumaNodeWithItsGpu) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::numa, true);
  ClaimSpec claim{{{"gpu", "gpu", {}, 1}, {"cpus", "cpu-numa", {}, 1}, {"memory", "memory", {}, 1}},
                  {{{}, kNuma}}};
  std::vector<std::vector<std::string>> got;
  EXPECT_EQ(fill(p, claim, &got), m.accelerators.size()) << "one GPU per NUMA node here";
  for (const auto& a : got)
    EXPECT_TRUE(same_numa_node(p, a));
}

TEST(CpuDevices, TemplatesAnNvlinkPairWithBothNodesCpus) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::numa, true);
  // Both GPUs on one NVLink domain and one socket, with two NUMA nodes' cores and memory of
  // that socket (a constraint cannot tie a node to each GPU: matchAttribute holds for all).
  ClaimSpec claim{
      {{"gpus", "gpu",
        [](const json& d) { return !device_attribute(d, "polyaccel.io/nvlinkDomain").is_null(); },
        2},
       {"cpus", "cpu-numa", {}, 2},
       {"memory", "memory", {}, 2}},
      {{{"gpus"}, "polyaccel.io/nvlinkDomain"}, {{}, "polyaccel.io/package"}}};
  std::vector<std::vector<std::string>> got;
  EXPECT_EQ(fill(p, claim, &got), 2u) << "4 GPUs, two a socket";
  for (const auto& a : got) {
    std::set<std::int64_t> packages, nodes;
    for (const auto& n : a) {
      packages.insert(p.device(n)->attributes.at("package").integer);
      if (p.device(n)->kind == DeviceKind::cpu)
        nodes.insert(p.device(n)->attributes.at(kNuma).integer);
    }
    EXPECT_EQ(packages.size(), 1u);
    EXPECT_EQ(nodes.size(), 2u);
  }
}

TEST(CpuDevices, HoldingsPerClaimAndFreeCpusPerNode) {
  const HostModel& m = xe8640();
  Pool p = pool_of(m, CpuGrain::core, true);
  std::vector<DraStatus::ClaimHolding> held;
  std::map<unsigned, unsigned> free;
  cpu_holdings(m, p, {{"ns1", "a", {"gpu-0", "cpu-0", "cpu-1", "memory-numa-0"}}}, held, free);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].ns, "ns1");
  EXPECT_EQ(held[0].name, "a");
  EXPECT_EQ(held[0].numa_node, 0u);
  EXPECT_EQ(held[0].cpus, 4u);
  EXPECT_EQ(held[0].memory_bytes, m.numa_node(0)->memory_bytes);
  ASSERT_EQ(free.size(), 8u);
  EXPECT_EQ(free[0], m.numa_node(0)->cpus.count() - 4);
  EXPECT_EQ(free[1], m.numa_node(1)->cpus.count());
}

}  // namespace
}  // namespace polyaccel::dra
