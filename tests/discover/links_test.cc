// The link legend (../shared/reference/link-legend.md) on real machines and on PCI paths the
// test builds itself.
#include "discover/links.h"

#include <gtest/gtest.h>

#include <map>

#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

std::string label(const HostModel& m, const std::string& a, const std::string& b) {
  auto i = m.links.index_of(a);
  auto j = m.links.index_of(b);
  if (!i || !j) return "missing " + a + " or " + b;
  return m.links.at(*i, *j).label();
}

const Accelerator& by_bus(const HostModel& m, const std::string& bus) {
  const Accelerator* a = m.accelerator(bus);
  EXPECT_TRUE(a) << bus;
  static Accelerator none;
  return a ? *a : none;
}

TEST(Links, Xe8640ThreeGpusShareASwitchWithAnHcaAndTheFourthDoesNot) {
  HostModel m = polyaccel::testing::fixture_model(
      "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml");
  ASSERT_EQ(m.accelerators.size(), 4u);
  // 5f:00.0 and the ConnectX-7 at 5e:00.0 sit below switch 5a:00.0.
  const Accelerator& g5f = by_bus(m, "0000:5f:00.0");
  EXPECT_EQ(label(m, g5f.id, m.nic("0000:5e:00.0")->id), "PIX");
  ASSERT_FALSE(g5f.pci.switches.empty());
  EXPECT_EQ(g5f.pci.switches.front().upstream_port.to_string(), "0000:5a:00.0");
  int with_pix_nic = 0;
  for (const auto& a : m.accelerators) {
    auto i = *m.links.index_of(a.id);
    bool pix = false;
    for (const auto& n : m.nics)
      pix |= m.links.at(i, *m.links.index_of(n.id)).level == LinkLevel::pix;
    with_pix_nic += pix;
  }
  EXPECT_EQ(with_pix_nic, 3);
  // The GPU at cb:00.0 has no NIC in its NUMA node: every NIC is SYS.
  const Accelerator& gcb = by_bus(m, "0000:cb:00.0");
  for (const auto& n : m.nics)
    EXPECT_EQ(label(m, gcb.id, n.id), "SYS") << n.id;
  // Every RDMA NIC is SYS; the tie goes to the NUMA distance: mlx5_3 on node 5 (12, the same
  // socket) beats the HCAs of nodes 1 and 3 (21, across the socket link).
  ASSERT_EQ(gcb.closest_nics.size(), 1u);
  const Nic* nearest = m.nic(gcb.closest_nics[0]);
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->rdma_devices, std::vector<std::string>{"mlx5_3"});
  EXPECT_EQ(nearest->pci.numa_nodes, std::vector<unsigned>{5});
  ASSERT_EQ(nccl_nics(m, gcb).size(), 1u);  // on its socket: run and Allocate use it
  // The two ports of one ConnectX-6 are PIX to each other.
  EXPECT_EQ(label(m, m.nic("0000:4d:00.0")->id, m.nic("0000:4d:00.1")->id), "PIX");
  // NVLink: 150 GB/s between each pair, 6 links of 25 GB/s.
  for (const auto& a : m.accelerators) {
    for (const auto& b : m.accelerators) {
      if (a.id != b.id) {
        EXPECT_EQ(label(m, a.id, b.id), "NV6");
      }
    }
  }
  // Under the NVLinks, GPUs on different sockets are SYS over PCIe.
  EXPECT_EQ(pcie_level(m, g5f.pci, gcb.pci), LinkLevel::sys);
}

TEST(Links, JurecaA100sWithoutOsDevicesEachHaveTheirHcaAtPix) {
  HostModel m = polyaccel::testing::fixture_model(
      "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml");
  ASSERT_EQ(m.accelerators.size(), 4u);
  for (const auto& a : m.accelerators) {
    EXPECT_TRUE(a.pci.os_devices.empty());
    EXPECT_EQ(a.pci.device_id, 0x20b0);
    ASSERT_EQ(a.closest_nics.size(), 1u) << a.id;
    EXPECT_EQ(label(m, a.id, a.closest_nics[0]), "PIX");
    EXPECT_EQ(m.nic(a.closest_nics[0])->pci.numa_nodes, a.pci.numa_nodes);
  }
  // GPUs on different sockets: SYS; no NVLink matrix in this capture.
  EXPECT_EQ(label(m, "gpu0", "gpu2"), "SYS");
}

TEST(Links, TiogaGcdsAreXgmiAndReachTheirSlingshotNicThroughTheHostBridge) {
  HostModel m = polyaccel::testing::fixture_model(
      "1socket-nps4-4numa-8xMI250X-gcd-4xslingshot_hpe-ex235a.xml");
  ASSERT_EQ(m.accelerators.size(), 8u);
  for (const auto& a : m.accelerators) {
    ASSERT_EQ(a.pci.numa_nodes.size(), 1u) << a.id;  // found through an L3 cache ancestor
    for (const auto& b : m.accelerators) {
      if (a.id != b.id) {
        EXPECT_EQ(label(m, a.id, b.id), "XGMI");
      }
    }
    ASSERT_EQ(a.closest_nics.size(), 1u) << a.id;
    const Nic* nic = m.nic(a.closest_nics[0]);
    EXPECT_EQ(nic->fabric, "slingshot");
    EXPECT_EQ(nic->pci.numa_nodes, a.pci.numa_nodes);
    std::string l = label(m, a.id, nic->id);
    EXPECT_TRUE(l == "PHB" || l == "NODE") << l;
  }
}

TEST(Links, G4dnT4sAreNeverPixToTheEfa) {
  HostModel m =
      polyaccel::testing::fixture_model("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml");
  const Nic* efa = m.nic("rdmap197s0");
  ASSERT_TRUE(efa);
  for (const auto& a : m.accelerators) {
    std::string l = label(m, a.id, efa->id);
    EXPECT_TRUE(l == "SYS" || l == "NODE" || l == "PHB") << a.id << " " << l;
    EXPECT_EQ(l == "SYS", a.pci.numa_nodes != efa->pci.numa_nodes) << a.id;
  }
}

// FI_EFA_USE_DEVICE_RDMA=1 only where every EFA has RDMA read: gen 2 (p4d) and gen 3 (p5), not
// gen 1 (g4dn's, in the capture) nor an id we do not know.
TEST(Links, EfaDeviceRdmaOnlyWithRdmaRead) {
  HostModel m =
      polyaccel::testing::fixture_model("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml");
  const Nic* g4dn = m.nic("rdmap197s0");
  ASSERT_TRUE(g4dn);
  EXPECT_EQ(g4dn->pci.device_id, 0xefa0);
  auto env_of = [](std::vector<const Nic*> nics) {
    std::map<std::string, std::string> env;
    for (auto& [k, v] : nccl_network_env(nics, {}))
      env[k] = v;
    return env;
  };
  auto env = env_of({g4dn});
  EXPECT_EQ(env["FI_PROVIDER"], "efa");
  EXPECT_EQ(env.count("FI_EFA_USE_DEVICE_RDMA"), 0u);
  Nic p4d = *g4dn, p5 = *g4dn, unknown = *g4dn;
  p4d.pci.device_id = 0xefa1;
  p5.pci.device_id = 0xefa2;
  unknown.pci.device_id = 0xefaf;
  EXPECT_EQ(env_of({&p4d})["FI_EFA_USE_DEVICE_RDMA"], "1");
  EXPECT_EQ(env_of({&p4d, &p5})["FI_EFA_USE_DEVICE_RDMA"], "1");
  EXPECT_EQ(env_of({&p4d, g4dn}).count("FI_EFA_USE_DEVICE_RDMA"), 0u);
  EXPECT_EQ(env_of({&unknown}).count("FI_EFA_USE_DEVICE_RDMA"), 0u);
}

// Paths built by hand: one host bridge, root ports, a two-level switch tree.
PciDevice device(const std::string& addr, int host_bridge, std::vector<std::string> switches,
                 std::vector<unsigned> numa) {
  PciDevice d;
  d.address = *PciAddress::parse(addr);
  d.host_bridge = host_bridge;
  for (const auto& s : switches)
    d.switches.push_back(PciSwitch{*PciAddress::parse(s), 0x1000, 0xc030, 0, 0});
  d.numa_nodes = std::move(numa);
  return d;
}

TEST(Links, SwitchCountingRule) {
  HostModel m;
  auto a = device("0000:10:00.0", 0, {"0000:02:00.0", "0000:04:00.0"}, {0});
  auto b = device("0000:11:00.0", 0, {"0000:02:00.0", "0000:04:00.0"}, {0});  // same leaf
  auto c = device("0000:20:00.0", 0, {"0000:02:00.0", "0000:08:00.0"}, {0});  // other leaf
  auto d = device("0000:30:00.0", 0, {"0000:02:00.0"}, {0});                  // on the top switch
  auto e = device("0000:40:00.0", 0, {}, {0});                                // on a root port
  auto f = device("0000:80:00.0", 1, {"0000:82:00.0"}, {0});                  // other host bridge
  auto g = device("0000:c0:00.0", 2, {}, {1});                                // other NUMA node
  EXPECT_EQ(pcie_level(m, a, a), LinkLevel::self);
  EXPECT_EQ(pcie_level(m, a, b), LinkLevel::pix);
  EXPECT_EQ(pcie_level(m, a, c), LinkLevel::pxb);  // three switches crossed
  EXPECT_EQ(pcie_level(m, a, d), LinkLevel::pxb);  // two switches crossed
  EXPECT_EQ(pcie_level(m, a, e), LinkLevel::phb);
  EXPECT_EQ(pcie_level(m, a, f), LinkLevel::node);
  EXPECT_EQ(pcie_level(m, a, g), LinkLevel::sys);
  EXPECT_EQ(pcie_level(m, g, a), LinkLevel::sys);
  auto a1 = device("0000:10:00.1", 0, {"0000:02:00.0", "0000:04:00.0"}, {0});
  EXPECT_EQ(pcie_level(m, a, a1), LinkLevel::pix);  // two functions of one device
}

TEST(Links, VendorPeerLinksReplaceThePcieLevel) {
  HostModel m;
  for (int i = 0; i < 2; ++i) {
    Accelerator a;
    a.id = "gpu" + std::to_string(i);
    a.pci = device(i == 0 ? "0000:10:00.0" : "0000:c0:00.0", i, {}, {static_cast<unsigned>(i)});
    m.accelerators.push_back(a);
  }
  EXPECT_EQ(compute_link_matrix(m).at(0, 1).label(), "SYS");
  m.accelerators[1].peer_links.push_back(
      PeerLink{m.accelerators[0].pci.address, Link{LinkLevel::nvlink, 18}});
  auto matrix = compute_link_matrix(m);
  EXPECT_EQ(matrix.at(0, 1).label(), "NV18");
  EXPECT_EQ(matrix.at(1, 0).label(), "NV18");
}

}  // namespace
}  // namespace polyaccel
