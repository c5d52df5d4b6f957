// The DRA devices and ResourceSlices of real captured machines (../shared/fixtures/topologies)
// and of the vendor libraries' test builds, checked against the topology and against the real
// OpenAPI schema of resource.k8s.io/v1 (k8s_schema.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "dra/slice_validation.h"
#include "dra/slices.h"
#include "kube/models.h"
#include "share/mig_profiles.h"
#include "support/k8s_schema.h"

namespace polyaccel::dra {
namespace {

using nlohmann::json;
using polyaccel::testing::K8sSchema;

const K8sSchema& schema() {
  static const K8sSchema s;
  return s;
}

const std::string kTioga = polyaccel::testing::kMi250x;

Pool pool_of(const HostModel& m, SliceOptions o = {}) {
  if (o.node.empty()) o.node = "node-1";
  auto p = build_pool(m, o);
  EXPECT_TRUE(p) << (p ? "" : p.error().message());
  return p ? *p : Pool{};
}

// Valid by the schema and by the validation of every Kubernetes version that takes the layout
// (1.35 to 1.37 for own_slices, 1.34 for with_devices).
void expect_valid(const Pool& p, CounterLayout layout = CounterLayout::own_slices) {
  const std::vector<unsigned> minors = layout == CounterLayout::own_slices
                                           ? std::vector<unsigned>{35, 36, 37}
                                           : std::vector<unsigned>{34};
  for (size_t i = 0; i < p.slices.size(); ++i) {
    json s = slice_json(p, i, 1);
    auto errors = schema().validate(s);
    EXPECT_TRUE(errors.empty()) << slice_name(p, i) << ": " << errors.front();
    for (unsigned minor : minors) {
      auto refused = polyaccel::testing::resource_slice_errors(s, minor);
      EXPECT_TRUE(refused.empty())
          << "1." << minor << " refuses " << slice_name(p, i) << ": " << refused.front();
    }
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], p.slices.size());
  }
}

std::optional<std::int64_t> int_attr(const Device& d, const std::string& k) {
  auto it = d.attributes.find(k);
  if (it == d.attributes.end()) return std::nullopt;
  EXPECT_EQ(it->second.kind, Attribute::Kind::integer) << k;
  return it->second.integer;
}
std::optional<std::string> str_attr(const Device& d, const std::string& k) {
  auto it = d.attributes.find(k);
  if (it == d.attributes.end()) return std::nullopt;
  return it->second.text;
}

const PciDevice& pci_of(const HostModel& m, const Device& d) {
  if (d.kind == DeviceKind::nic || d.kind == DeviceKind::vf) return m.nics[d.nic].pci;
  return m.accelerators[d.accelerator].pci;
}

// Which GPUs a claim "one GPU and one RDMA NIC, matchAttribute <attr>" can be satisfied on: the
// scheduler's rule (both devices have the attribute, with equal values).
std::set<std::string> gpus_with_matching_nic(const Pool& p, const std::string& attr) {
  std::set<std::string> out;
  for (const auto& s : p.slices)
    for (const auto& g : s.devices) {
      bool gpu = g.kind == DeviceKind::gpu || g.kind == DeviceKind::mig ||
                 g.kind == DeviceKind::gpu_partition;
      if (!gpu || !g.attributes.count(attr)) continue;
      for (const auto& s2 : p.slices)
        for (const auto& n : s2.devices)
          if (n.kind == DeviceKind::nic && n.attributes.count(attr) &&
              n.attributes.at(attr) == g.attributes.at(attr))
            out.insert("gpu-" + std::to_string(g.accelerator));
    }
  return out;
}

// What the topology says: GPUs with an RDMA NIC on their NUMA node / below their root complex.
std::set<std::string> gpus_with_same_node_nic(const HostModel& m, bool by_root) {
  std::set<std::string> out;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    const auto& a = m.accelerators[i];
    for (const auto& n : m.nics) {
      if (!n.rdma_capable()) continue;
      bool same = by_root ? (a.pci.host_bridge >= 0 && a.pci.host_bridge == n.pci.host_bridge)
                          : (a.pci.numa_nodes.size() == 1 && n.pci.numa_nodes == a.pci.numa_nodes);
      if (same) out.insert("gpu-" + std::to_string(i));
    }
  }
  return out;
}

class CapturedMachine : public ::testing::TestWithParam<std::string> {};

TEST_P(CapturedMachine, NumaNodeAndPcieRootEqualTheTopologys) {
  HostModel m = GetParam() == "hgx" ? polyaccel::testing::hgx_8xh100()
                                    : polyaccel::testing::load_fixture(GetParam());
  Pool p = pool_of(m);
  ASSERT_GT(p.device_count(), 0u);
  expect_valid(p);
  size_t with_numa = 0;
  for (const auto& s : p.slices) {
    for (const auto& d : s.devices) {
      const PciDevice& pci = pci_of(m, d);
      EXPECT_EQ(str_attr(d, "resource.kubernetes.io/pciBusID"), pci.address.to_string()) << d.name;
      auto numa = int_attr(d, "resource.kubernetes.io/numaNode");
      if (pci.numa_nodes.size() == 1) {
        ASSERT_TRUE(numa) << d.name;
        EXPECT_EQ(*numa, pci.numa_nodes[0]) << d.name;
        ++with_numa;
      } else {
        EXPECT_FALSE(numa) << d.name << ": no single node, so none is published";
      }
      auto root = str_attr(d, "resource.kubernetes.io/pcieRoot");
      if (pci.host_bridge < 0) {
        EXPECT_FALSE(root) << d.name;
        continue;
      }
      ASSERT_TRUE(root) << d.name;
      const HostBridge& hb = m.host_bridges[static_cast<size_t>(pci.host_bridge)];
      // pci<domain>:<root bus>, and the device's bus is one the root complex serves.
      ASSERT_EQ(root->size(), 10u) << *root;
      EXPECT_EQ(root->substr(0, 3), "pci");
      EXPECT_EQ(std::stoul(root->substr(3, 4), nullptr, 16), pci.address.domain);
      unsigned bus = static_cast<unsigned>(std::stoul(root->substr(8, 2), nullptr, 16));
      EXPECT_EQ(bus, hb.bus_first);
      EXPECT_GE(pci.address.bus, hb.bus_first) << d.name;
      EXPECT_LE(pci.address.bus, hb.bus_last) << d.name;
    }
  }
  EXPECT_GT(with_numa, 0u);
  EXPECT_EQ(gpus_with_matching_nic(p, "resource.kubernetes.io/numaNode"),
            gpus_with_same_node_nic(m, false));
  EXPECT_EQ(gpus_with_matching_nic(p, "resource.kubernetes.io/pcieRoot"),
            gpus_with_same_node_nic(m, true));
}

INSTANTIATE_TEST_SUITE_P(Dra, CapturedMachine,
                         ::testing::Values(polyaccel::testing::kXe8640, polyaccel::testing::kJureca,
                                           kTioga, "hgx"),
                         [](const auto& param_info) {
                           std::string n = param_info.param.substr(0, param_info.param.find('_'));
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// The facts of the XE8640 capture (KEP-6072's example board): the H100 at cb:00.0 (gpu-2) shares
// neither a NUMA node nor a root complex with an RDMA NIC; the other three do.
// Node names up to 253 characters: two that share their first 240 must not name the same
// slices (issue 29: the names were cut to the same 241 characters, and each node's publisher
// would have overwritten the other's). Every name is a DNS subdomain of at most 253 characters.
TEST(DraSlices, LongNodeNamesGiveDistinctValidSliceNames) {
  static const std::regex kDns1123Subdomain(
      "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  const std::string shared(240, 'n');
  std::set<std::string> names;
  for (const std::string& node : {shared + ".a2345678901", shared + ".b2345678901", shared + "-x",
                                  shared + "-y", std::string(253, 'q'), shared}) {
    Pool pool;
    pool.node = node;
    for (size_t index : {0u, 1u, 12u}) {
      std::string name = slice_name(pool, index);
      EXPECT_LE(name.size(), 253u) << name;
      // metadata.name as the API server checks it (IsDNS1123Subdomain: no per-label limit).
      EXPECT_TRUE(std::regex_match(name, kDns1123Subdomain)) << name;
      EXPECT_TRUE(names.insert(name).second) << "two slices named " << name;
    }
  }
  Pool short_node;
  short_node.node = "node-1";
  EXPECT_EQ(slice_name(short_node, 3), "node-1-polyaccel-3");  // short names are unchanged
}

TEST(DraSlices, Xe8640GpuNicClaimsWhereTheBoardAllowsThem) {
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  Pool p = pool_of(m);
  std::set<std::string> expected = {"gpu-0", "gpu-1", "gpu-3"};
  EXPECT_EQ(gpus_with_matching_nic(p, "resource.kubernetes.io/numaNode"), expected);
  EXPECT_EQ(gpus_with_matching_nic(p, "resource.kubernetes.io/pcieRoot"), expected);
  const Device* g2 = p.device("gpu-2");
  ASSERT_NE(g2, nullptr);
  EXPECT_EQ(str_attr(*g2, "resource.kubernetes.io/pciBusID"), "0000:cb:00.0");
  EXPECT_EQ(int_attr(*g2, "resource.kubernetes.io/numaNode"), 7);
  EXPECT_EQ(str_attr(*g2, "nicLinkLevel"), "SYS");
  EXPECT_EQ(str_attr(*p.device("gpu-0"), "nicLinkLevel"), "PIX");
  // Four H100s on one NVLink domain; the Broadcom 1GbE ports are not RDMA NICs.
  for (const char* g : {"gpu-0", "gpu-1", "gpu-2", "gpu-3"})
    EXPECT_EQ(int_attr(*p.device(g), "nvlinkDomain"), 0) << g;
  EXPECT_EQ(p.device("nic-0"), nullptr);
  EXPECT_NE(p.device("nic-2"), nullptr);
  EXPECT_EQ(str_attr(*p.device("nic-2"), "rdmaDevice"), "mlx5_0");
  EXPECT_EQ(int_attr(*p.device("gpu-0"), "package"), 0);
  EXPECT_EQ(int_attr(*p.device("gpu-2"), "package"), 1);
}

HostModel h200_mig() {
  polyaccel::testing::use_vendor_libraries(NVML_INJECT_LIB, "", "");
  ::setenv("NVML_INJECT_SCENARIO",
           (std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json").c_str(), 1);
  HostModel model;
  auto backends = make_all_backends();
  merge_accelerators(model, backends);
  return model;
}

std::map<std::string, std::uint64_t> consumption(const Device& d) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& c : d.consumes)
    for (const auto& [k, v] : c.counters)
      out[c.counter_set + "/" + k] += std::stoull(v);
  return out;
}

// Existing instances are devices of their own: nothing to share, no counters (so a server that
// drops counters changes nothing for them).
TEST(DraSlices, ExistingMigInstancesAreDevicesOfTheirOwn) {
  HostModel m = h200_mig();
  ASSERT_EQ(m.accelerators.size(), 8u);
  Pool p = pool_of(m);
  expect_valid(p);
  // GPU 0: 7×1g.18gb, one per memory slice 0..6; GPU 4 and 5: MIG off, whole GPUs.
  unsigned gpu0 = 0;
  for (const auto& s : p.slices) {
    EXPECT_TRUE(s.shared_counters.empty());
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::mig && d.accelerator == 0) {
        ++gpu0;
        EXPECT_EQ(str_attr(d, "migProfile"), "1g.18gb");
        EXPECT_TRUE(d.consumes.empty());
        EXPECT_TRUE(str_attr(d, "uuid")->rfind("MIG-", 0) == 0);
        EXPECT_EQ(str_attr(d, "parentUUID"), m.accelerators[0].inventory->uuid);
      }
  }
  EXPECT_EQ(gpu0, 7u);
  ASSERT_NE(p.device("gpu-4"), nullptr);
  EXPECT_EQ(p.device("gpu-4")->capacity.at("memory"), "143771Mi");
  EXPECT_EQ(p.device("gpu-0"), nullptr) << "a MIG-enabled GPU is used through its instances";
  const Device* g1 = p.device("gpu-1-mig-3g-71gb-s4");
  ASSERT_NE(g1, nullptr);
  EXPECT_TRUE(g1->mig_instance);
}

// With every placement published, the counter set of a GPU holds what its existing instances
// leave free, and two placements of one GPU fit the counters together exactly when they do not
// overlap each other and, with the existing instances, their compute slices and media extensions
// add up: the scheduler can never over-commit a GPU, and never hands out a placement an
// existing instance holds part of.
TEST(DraSlices, AllPlacementsNeverOverCommitAGpu) {
  HostModel m = h200_mig();
  SliceOptions o;
  o.node = "node-1";
  o.mig = MigDevices::all;
  Pool p = pool_of(m, o);
  expect_valid(p);
  EXPECT_GT(p.slices.size(), 1u) << "5 empty MIG GPUs with 10 counters each need two slices";
  const MigGeometry* g = find_mig_geometry(0x233510DE);
  ASSERT_NE(g, nullptr);
  size_t checked = 0;
  for (size_t gpu = 0; gpu < m.accelerators.size(); ++gpu) {
    // What the GPU's existing instances hold.
    std::vector<bool> held(g->memory_slices, false);
    unsigned compute_held = 0;
    for (const auto& mi : m.accelerators[gpu].inventory->mig_instances) {
      for (unsigned k = mi.placement_start; k < mi.placement_start + mi.placement_size; ++k)
        held[k] = true;
      compute_held += g->profile(mi.profile_name)->compute_slices;
    }
    std::map<std::string, std::uint64_t> capacity;
    std::vector<const Device*> placements;
    for (const auto& s : p.slices) {
      for (const auto& cs : s.shared_counters)
        if (cs.name == "gpu-" + std::to_string(gpu) + "-mig")
          for (const auto& [k, v] : cs.counters)
            capacity[cs.name + "/" + k] = std::stoull(v);
      for (const auto& d : s.devices)
        if (d.kind == DeviceKind::mig && d.accelerator == gpu && !d.mig_instance)
          placements.push_back(&d);
    }
    for (const Device* d : placements)
      for (unsigned k = d->mig_start; k < d->mig_start + d->mig_size; ++k)
        EXPECT_FALSE(held[k]) << d->name << " overlaps an existing instance";
    if (compute_held == g->compute_slices) {
      EXPECT_TRUE(placements.empty()) << "GPU " << gpu;
    }
    for (size_t i = 0; i < placements.size(); ++i) {
      for (size_t j = i + 1; j < placements.size(); ++j) {
        auto a = consumption(*placements[i]), b = consumption(*placements[j]);
        bool fits = true;
        for (const auto& [k, v] : b)
          if (a[k] + v > capacity.at(k)) fits = false;
        const MigProfile* pa = g->profile(placements[i]->mig_profile);
        const MigProfile* pb = g->profile(placements[j]->mig_profile);
        bool overlap =
            placements[i]->mig_start < placements[j]->mig_start + placements[j]->mig_size &&
            placements[j]->mig_start < placements[i]->mig_start + placements[i]->mig_size;
        bool both_me = placements[i]->mig_profile.find("+me") != std::string::npos &&
                       placements[j]->mig_profile.find("+me") != std::string::npos;
        bool geometry_allows =
            !overlap && !both_me &&
            compute_held + pa->compute_slices + pb->compute_slices <= g->compute_slices;
        EXPECT_EQ(fits, geometry_allows) << placements[i]->name << " + " << placements[j]->name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500u);
}

// A server that drops counters (DRAPartitionableDevices off): no counter anywhere, and only what
// cannot be over-committed without them: the existing instances, whatever `mig` says.
TEST(DraSlices, WithoutCountersOnlyExistingInstancesArePublished) {
  HostModel m = h200_mig();
  SliceOptions o;
  o.node = "node-1";
  o.mig = MigDevices::all;
  o.counters = false;
  Pool p = pool_of(m, o);
  expect_valid(p);
  SliceOptions existing;
  existing.node = "node-1";
  Pool e = pool_of(m, existing);
  ASSERT_EQ(p.device_count(), e.device_count());
  for (const auto& s : p.slices) {
    EXPECT_TRUE(s.shared_counters.empty());
    for (const auto& d : s.devices) {
      EXPECT_TRUE(d.consumes.empty()) << d.name;
      if (d.kind == DeviceKind::mig) {
        EXPECT_TRUE(d.mig_instance) << d.name;
      }
    }
  }
}

TEST(DraSlices, UnhealthyDevicesAreTaintedOrWithdrawn) {
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  SliceOptions o;
  o.node = "node-1";
  o.unhealthy = {"0000:4e:00.0"};
  Pool p = pool_of(m, o);
  expect_valid(p);
  ASSERT_EQ(p.device("gpu-0")->taints.size(), 1u);
  EXPECT_EQ(p.device("gpu-0")->taints[0].key, kUnhealthyTaint);
  EXPECT_EQ(p.device("gpu-0")->taints[0].effect, "NoSchedule");
  EXPECT_TRUE(p.device("gpu-1")->taints.empty());
  o.withdraw_unhealthy = true;
  Pool w = pool_of(m, o);
  EXPECT_EQ(w.device("gpu-0"), nullptr);
  EXPECT_NE(w.device("gpu-1"), nullptr);
}

TEST(DraSlices, AManyDeviceNodeIsSplitAtTheDeviceLimit) {
  // The NEC tree's X722 with 64 VFs would still fit; 8 GPUs with every MIG placement do not.
  HostModel m = h200_mig();
  for (CounterLayout layout : {CounterLayout::own_slices, CounterLayout::with_devices}) {
    SCOPED_TRACE(to_string(layout));
    SliceOptions o;
    o.node = "node-1";
    o.mig = MigDevices::all;
    o.layout = layout;
    Pool p = pool_of(m, o);
    expect_valid(p, layout);
    std::set<std::string> names;
    for (const auto& s : p.slices) {
      size_t shared = 0;
      for (const auto& cs : s.shared_counters) {
        shared += cs.counters.size();
        EXPECT_LE(cs.counters.size(), kMaxCountersPerCounterSet);
      }
      if (layout == CounterLayout::with_devices) {
        EXPECT_LE(shared, kMaxSharedCountersPerSlice);
      } else {
        EXPECT_LE(s.shared_counters.size(), kMaxCounterSetsPerSlice);
      }
      EXPECT_LE(s.devices.size(), kMaxDevicesPerSliceWithCountersOrTaints);
      for (const auto& d : s.devices)
        EXPECT_TRUE(names.insert(d.name).second) << d.name;
    }
    EXPECT_EQ(names.size(), p.device_count());
  }
}

// The same devices and counter sets in both layouts, each where its Kubernetes versions take
// them, for MIG placements (counter set gpu-<i>-mig) and AMD partitions (gpu-<i>-partitions):
// from 1.35 on in slices of their own (kube-apiserver refuses a slice with both: "only one of
// `sharedCounters` or `devices` is allowed"), on 1.34 beside the devices that consume them (a
// device "must reference a counterSet defined in the ResourceSlice sharedCounters"). Each
// layout is refused by the versions of the other.
TEST(DraSlices, CounterSetsGoWhereTheVersionTakesThem) {
  HostModel amd = polyaccel::testing::load_fixture(kTioga);
  size_t partitioned = 0;
  for (auto& a : amd.accelerators)
    if (a.vendor == Vendor::amd) {
      a.partitions = 4;  // CPX on an MI250X GCD is 1; 4 stands for any mode with counters
      ++partitioned;
    }
  ASSERT_GT(partitioned, 0u);
  struct Case {
    const char* what;
    HostModel model;
    MigDevices mig;
    const char* set_suffix;
  };
  for (const Case& c : {Case{"MIG placements", h200_mig(), MigDevices::all, "-mig"},
                        Case{"AMD partitions", amd, MigDevices::existing, "-partitions"}}) {
    SCOPED_TRACE(c.what);
    std::map<CounterLayout, Pool> pools;
    for (CounterLayout layout : {CounterLayout::own_slices, CounterLayout::with_devices}) {
      SliceOptions o;
      o.node = "node-1";
      o.mig = c.mig;
      o.layout = layout;
      pools[layout] = pool_of(c.model, o);
      expect_valid(pools[layout], layout);
    }
    const Pool& apart = pools[CounterLayout::own_slices];
    const Pool& beside = pools[CounterLayout::with_devices];
    EXPECT_EQ(apart.device_count(), beside.device_count());
    std::set<std::string> sets_apart, sets_beside;
    bool refused_by_34 = false, refused_by_35 = false;
    for (size_t i = 0; i < apart.slices.size(); ++i) {
      const Slice& s = apart.slices[i];
      EXPECT_TRUE(s.shared_counters.empty() || s.devices.empty()) << slice_name(apart, i);
      for (const auto& cs : s.shared_counters) {
        sets_apart.insert(cs.name);
        EXPECT_TRUE(cs.name.ends_with(c.set_suffix)) << cs.name;
      }
      json j = slice_json(apart, i, 1);
      if (s.devices.empty()) {
        EXPECT_FALSE(j["spec"].contains("devices")) << "an empty list is devices set, for 1.35";
      }
      refused_by_34 = refused_by_34 || !polyaccel::testing::resource_slice_errors(j, 34).empty();
    }
    for (size_t i = 0; i < beside.slices.size(); ++i) {
      const Slice& s = beside.slices[i];
      std::set<std::string> here;
      for (const auto& cs : s.shared_counters) {
        here.insert(cs.name);
        sets_beside.insert(cs.name);
      }
      for (const auto& d : s.devices)
        for (const auto& cc : d.consumes)
          EXPECT_TRUE(here.count(cc.counter_set)) << d.name << " in " << slice_name(beside, i);
      auto errors = polyaccel::testing::resource_slice_errors(slice_json(beside, i, 1), 35);
      if (!errors.empty()) {
        refused_by_35 = true;
        EXPECT_THAT(errors.front(), ::testing::HasSubstr("only one of `sharedCounters`"));
      }
    }
    EXPECT_FALSE(sets_apart.empty());
    EXPECT_EQ(sets_apart, sets_beside);
    EXPECT_TRUE(refused_by_34) << "1.34 takes no device apart from its counter set";
    EXPECT_TRUE(refused_by_35) << "1.35 takes no counter set beside devices";
  }
}

// --dra-nic-shares: each RDMA NIC (never a VF) allows that many allocations, one share each by
// default, valid by 1.36's schema and validation; off by default; 1 and past the maximum refused.
TEST(DraSlices, SharedNicsAllowMultipleAllocationsWithACapacityOfShares) {
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  SliceOptions o;
  o.nic_shares = 16;
  Pool p = pool_of(m, o);
  static const K8sSchema schema_136(
      std::vector<std::string>{"v1.36/resource.k8s.io-v1-openapi.json"});
  size_t shared = 0;
  for (size_t i = 0; i < p.slices.size(); ++i) {
    json s = slice_json(p, i, 1);
    auto errors = schema_136.validate(s);
    EXPECT_TRUE(errors.empty()) << errors.front();
    for (unsigned minor : {36u, 37u}) {
      auto refused = polyaccel::testing::resource_slice_errors(s, minor);
      EXPECT_TRUE(refused.empty()) << refused.front();
    }
    for (const auto& d : s["spec"]["devices"]) {
      const std::string type = d["attributes"]["type"]["string"];
      if (type != "nic") {
        EXPECT_FALSE(d.contains("allowMultipleAllocations")) << d["name"];
        continue;
      }
      ++shared;
      EXPECT_EQ(d["allowMultipleAllocations"], true);
      EXPECT_EQ(d["capacity"]["shares"]["value"], "16");
      EXPECT_EQ(
          d["capacity"]["shares"]["requestPolicy"],
          json::parse(R"({"default": "1", "validRange": {"min": "1", "max": "16", "step": "1"}})"));
    }
  }
  EXPECT_GT(shared, 0u);

  Pool whole = pool_of(m);
  for (size_t i = 0; i < whole.slices.size(); ++i) {
    const auto slice = slice_json(whole, i, 1);  // a temporary's member would dangle in the loop
    for (const auto& d : slice["spec"]["devices"]) {
      EXPECT_FALSE(d.contains("allowMultipleAllocations")) << d["name"];
      EXPECT_FALSE(d.value("capacity", json::object()).contains("shares")) << d["name"];
    }
  }

  for (unsigned bad : {1u, kMaxNicShares + 1}) {
    o.node = "node-1";
    o.nic_shares = bad;
    auto r = build_pool(m, o);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_THAT(r.error().message(), ::testing::HasSubstr("NIC shares " + std::to_string(bad)));
  }

  // The fake's validation of 1.36 refuses a policy outside the capacity or without
  // allowMultipleAllocations, so that the checks above can fail.
  json s = slice_json(p, 0, 1);
  for (auto& d : s["spec"]["devices"]) {
    if (!d.contains("allowMultipleAllocations")) continue;
    d["capacity"]["shares"]["requestPolicy"]["validRange"]["max"] = "17";
    EXPECT_FALSE(polyaccel::testing::resource_slice_errors(s, 36).empty());
    d.erase("allowMultipleAllocations");
    d["capacity"]["shares"]["requestPolicy"]["validRange"]["max"] = "16";
    EXPECT_FALSE(polyaccel::testing::resource_slice_errors(s, 36).empty());
    break;
  }
}

TEST(DraSlices, BadNodeNamesAreRefused) {
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  for (const char* bad : {"", "Node_1", "-a", "a..b", "x/y"}) {
    SliceOptions o;
    o.node = bad;
    auto p = build_pool(m, o);
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::bad_input);
  }
}

TEST(DraSlices, AttributeValuesAreCutAt64BytesOnACharacterBoundary) {
  std::string s(63, 'a');
  s += "\xc3\xa9";  // é across the limit
  EXPECT_EQ(Attribute::of_string(s).text, std::string(63, 'a'));
  EXPECT_EQ(bytes_quantity(80ull << 30), "80Gi");
  EXPECT_EQ(bytes_quantity(17432ull << 20), "17432Mi");
  EXPECT_EQ(bytes_quantity(1000), "1000");
}

}  // namespace
}  // namespace polyaccel::dra
