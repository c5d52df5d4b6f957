// The DRA devices and ResourceSlices of real captured machines (../shared/fixtures/topologies)
// and of the vendor libraries' test builds, checked against the topology and against the real
// OpenAPI schema of resource.k8s.io/v1 (k8s_schema.h).
#include <gtest/gtest.h>

#include <regex>
#include <set>

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

void expect_valid(const Pool& p) {
  for (size_t i = 0; i < p.slices.size(); ++i) {
    json s = slice_json(p, i, 1);
    auto errors = schema().validate(s);
    EXPECT_TRUE(errors.empty()) << slice_name(p, i) << ": " << errors.front();
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

TEST(DraSlices, MigInstancesConsumeTheirGpusCounters) {
  HostModel m = h200_mig();
  ASSERT_EQ(m.accelerators.size(), 8u);
  Pool p = pool_of(m);
  expect_valid(p);
  // GPU 0: 7×1g.18gb, one per memory slice 0..6; GPU 4 and 5: MIG off, whole GPUs.
  unsigned gpu0 = 0;
  for (const auto& s : p.slices)
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::mig && d.accelerator == 0) {
        ++gpu0;
        EXPECT_EQ(str_attr(d, "migProfile"), "1g.18gb");
        auto c = consumption(d);
        EXPECT_EQ(c.at("gpu-0-mig/memory-slice-" + std::to_string(d.mig_start)), 1u);
        EXPECT_EQ(c.at("gpu-0-mig/compute-slices"), 1u);
        EXPECT_TRUE(str_attr(d, "uuid")->rfind("MIG-", 0) == 0);
        EXPECT_EQ(str_attr(d, "parentUUID"), m.accelerators[0].inventory->uuid);
      }
  EXPECT_EQ(gpu0, 7u);
  ASSERT_NE(p.device("gpu-4"), nullptr);
  EXPECT_EQ(p.device("gpu-4")->capacity.at("memory"), "143771Mi");
  EXPECT_EQ(p.device("gpu-0"), nullptr) << "a MIG-enabled GPU is used through its instances";
  const Device* g1 = p.device("gpu-1-mig-3g-71gb-s4");
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(consumption(*g1).size(), 5u);  // memory slices 4..7 and compute
}

// With every placement published, two devices of one GPU fit the counters together exactly when
// their placements do not overlap and their compute slices and media extensions add up: the
// scheduler can never over-commit a GPU.
TEST(DraSlices, AllPlacementsNeverOverCommitAGpu) {
  HostModel m = h200_mig();
  SliceOptions o;
  o.node = "node-1";
  o.mig = MigDevices::all;
  Pool p = pool_of(m, o);
  expect_valid(p);
  EXPECT_GT(p.slices.size(), 1u) << "6 MIG GPUs with 10 counters each need more than one slice";
  const MigGeometry* g = find_mig_geometry(0x233510DE);
  ASSERT_NE(g, nullptr);
  for (const auto& s : p.slices) {
    std::map<std::string, std::uint64_t> capacity;
    for (const auto& cs : s.shared_counters)
      for (const auto& [k, v] : cs.counters)
        capacity[cs.name + "/" + k] = std::stoull(v);
    std::vector<const Device*> mig;
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::mig && d.accelerator == s.devices.front().accelerator)
        mig.push_back(&d);
    ASSERT_FALSE(mig.empty());
    size_t checked = 0;
    for (size_t i = 0; i < mig.size(); ++i) {
      for (size_t j = i + 1; j < mig.size(); ++j) {
        auto a = consumption(*mig[i]), b = consumption(*mig[j]);
        bool fits = true;
        for (const auto& [k, v] : b)
          if (a[k] + v > capacity.at(k)) fits = false;
        const MigProfile* pa = g->profile(mig[i]->mig_profile);
        const MigProfile* pb = g->profile(mig[j]->mig_profile);
        bool overlap = mig[i]->mig_start < mig[j]->mig_start + mig[j]->mig_size &&
                       mig[j]->mig_start < mig[i]->mig_start + mig[i]->mig_size;
        bool both_me = mig[i]->mig_profile.find("+me") != std::string::npos &&
                       mig[j]->mig_profile.find("+me") != std::string::npos;
        bool geometry_allows =
            !overlap && !both_me && pa->compute_slices + pb->compute_slices <= g->compute_slices;
        EXPECT_EQ(fits, geometry_allows) << mig[i]->name << " + " << mig[j]->name;
        ++checked;
      }
    }
    EXPECT_GT(checked, 100u);
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
  SliceOptions o;
  o.node = "node-1";
  o.mig = MigDevices::all;
  Pool p = pool_of(m, o);
  std::set<std::string> names;
  for (const auto& s : p.slices) {
    size_t shared = 0;
    for (const auto& cs : s.shared_counters)
      shared += cs.counters.size();
    EXPECT_LE(shared, kMaxSharedCountersPerSlice);
    EXPECT_LE(s.devices.size(), kMaxDevicesPerSliceWithCountersOrTaints);
    for (const auto& d : s.devices)
      EXPECT_TRUE(names.insert(d.name).second) << d.name;
  }
  EXPECT_EQ(names.size(), p.device_count());
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
