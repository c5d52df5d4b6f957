// Discovery over every captured real machine in ../shared/fixtures/topologies: each row states
// what the fixture README says of that machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

struct Expect {
  std::string file;
  bool tarball = false;
  std::string architecture;
  size_t packages, numa_nodes, cores, pus;
  std::map<std::string, size_t> accelerators_by_vendor;
  size_t nics;
  std::set<std::string> rdma_devices;
  std::map<std::string, size_t> numa_kinds;
};

const std::vector<Expect>& expectations() {
  static const std::vector<Expect> rows = {
      {"2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml",
       false,
       "x86_64",
       2,
       8,
       112,
       224,
       {{"nvidia", 4}},
       6,
       {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"},
       {{"dram", 8}}},
      {"2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml",
       false,
       "x86_64",
       2,
       8,
       128,
       256,
       {{"nvidia", 4}},
       6,
       {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"},
       {{"dram", 8}}},
      {"1socket-nps4-4numa-8xMI250X-gcd-4xslingshot_hpe-ex235a.xml",
       false,
       "x86_64",
       1,
       4,
       64,
       128,
       {{"amd", 8}},
       5,
       {},
       {{"dram", 4}}},
      {"4apu-4numa-4xMI300A-spx-4xslingshot_hpe-ex255a.xml",
       false,
       "x86_64",
       4,
       4,
       96,
       192,
       {{"amd", 4}},
       5,
       {},
       {{"dram", 4}}},
      {"4apu-4numa-4xMI300A-cpx-24gpu-partitions-4xslingshot_hpe-ex255a.xml",
       false,
       "x86_64",
       4,
       4,
       96,
       192,
       {{"amd", 4}},
       5,
       {},
       {{"dram", 4}}},
      {"2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml",
       false,
       "x86_64",
       2,
       2,
       48,
       96,
       {{"nvidia", 8}},
       2,
       {"rdmap197s0"},
       {{"dram", 2}}},
      {"power9-2socket-2numa+4gpumem-numa-4xV100-4xmlx5_llnl-sierra.v1.xml",
       false,
       "ppc64le",
       2,
       6,
       44,
       176,
       {{"nvidia", 4}},
       6,
       {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"},
       {{"dram", 2}, {"cpuless", 4}}},
      {"2socket-snc4-8ddr+8hbm-numa-1xmlx5-cpuonly_xeon-max-9462-flat.xml",
       false,
       "x86_64",
       2,
       16,
       64,
       128,
       {},
       3,
       {"mlx5_0"},
       {{"dram", 8}, {"hbm", 8}}},
      {"24socket-24numa-384pu-cpuonly-1xmlx4_sgi.xml",
       false,
       "x86_64",
       24,
       24,
       192,
       384,
       {},
       7,
       {"mlx4_0"},
       {{"dram", 24}}},
      {"2socket-2numa-36core-cpuonly-omnipath_xeon-e5-2695v4.xml",
       false,
       "x86_64",
       2,
       2,
       36,
       36,
       {},
       5,
       {"hfi1_0"},
       {{"dram", 2}}},
      {"sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2",
       true,
       "x86_64",
       2,
       2,
       16,
       32,
       {{"other", 8}},
       4,
       {},
       {{"dram", 2}}},
      {"sysfs_power9-2socket-6xV100-gpumem-numa.tar.bz2",
       true,
       "ppc64le",
       2,
       8,
       8,
       32,
       {{"nvidia", 6}},
       0,
       {},
       {{"dram", 2}, {"gpu_memory", 6}}},
  };
  return rows;
}

void PrintTo(const Expect& e, std::ostream* os) {
  *os << e.file;
}

class FixtureTest : public ::testing::TestWithParam<Expect> {
 protected:
  HostModel load() {
    const Expect& e = GetParam();
    DiscoverOptions opts;
    if (e.tarball) {
      opts.fsroot =
          polyaccel::testing::extract_tarball(topology_fixture(e.file), tmp_.path()).string();
    } else {
      opts.topology_xml = topology_fixture(e.file).string();
    }
    auto m = discover_host(opts);
    if (!m) ADD_FAILURE() << m.error().message();
    return m ? *m : HostModel{};
  }
  TempDir tmp_;
};

TEST_P(FixtureTest, MatchesTheMachineTheReadmeDescribes) {
  const Expect& e = GetParam();
  HostModel m = load();
  EXPECT_EQ(m.architecture, e.architecture);
  EXPECT_EQ(m.packages.size(), e.packages);
  EXPECT_EQ(m.numa_nodes.size(), e.numa_nodes);
  EXPECT_EQ(m.cores.size(), e.cores);
  EXPECT_EQ(m.pus.count(), e.pus);
  std::map<std::string, size_t> by_vendor;
  for (const auto& a : m.accelerators)
    by_vendor[to_string(a.vendor)]++;
  EXPECT_EQ(by_vendor, e.accelerators_by_vendor);
  EXPECT_EQ(m.nics.size(), e.nics);
  std::set<std::string> rdma;
  for (const auto& n : m.nics)
    rdma.insert(n.rdma_devices.begin(), n.rdma_devices.end());
  EXPECT_EQ(rdma, e.rdma_devices);
  std::map<std::string, size_t> kinds;
  for (const auto& n : m.numa_nodes)
    kinds[to_string(n.kind)]++;
  EXPECT_EQ(kinds, e.numa_kinds);
}

TEST_P(FixtureTest, ModelIsConsistent) {
  HostModel m = load();
  // Every PU belongs to exactly one core, and to exactly one CPU-bearing NUMA node.
  CpuSet seen;
  for (const auto& c : m.cores) {
    EXPECT_FALSE(seen.intersects(c.pus));
    seen |= c.pus;
  }
  EXPECT_EQ(seen, m.pus);
  CpuSet numa_cpus;
  for (const auto& n : m.numa_nodes) {
    EXPECT_FALSE(numa_cpus.intersects(n.cpus)) << "node " << n.os_index;
    numa_cpus |= n.cpus;
    EXPECT_TRUE(n.local_cpus.contains(n.cpus));
    EXPECT_GT(n.memory_bytes, 0u);
  }
  EXPECT_EQ(numa_cpus, m.pus);
  // Ids follow PCI order; every accelerator and NIC has a locality on a known node.
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    EXPECT_EQ(m.accelerators[i].id, "gpu" + std::to_string(i));
    if (i > 0) {
      EXPECT_LT(m.accelerators[i - 1].pci.address, m.accelerators[i].pci.address);
    }
    ASSERT_FALSE(m.accelerators[i].pci.numa_nodes.empty());
    for (unsigned n : m.accelerators[i].pci.numa_nodes)
      EXPECT_TRUE(m.numa_node(n)) << n;
    EXPECT_FALSE(m.accelerators[i].name.empty());
  }
  // The matrix: accelerators then NICs, symmetric, X on the diagonal and only there.
  ASSERT_EQ(m.links.devices.size(), m.accelerators.size() + m.nics.size());
  for (size_t i = 0; i < m.links.devices.size(); ++i) {
    for (size_t j = 0; j < m.links.devices.size(); ++j) {
      EXPECT_EQ(m.links.at(i, j), m.links.at(j, i));
      EXPECT_EQ(m.links.at(i, j).level == LinkLevel::self, i == j);
    }
  }
  // Every accelerator has nearest NICs when the host has NICs.
  for (const auto& a : m.accelerators)
    EXPECT_EQ(a.closest_nics.empty(), m.nics.empty()) << a.id;
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, FixtureTest, ::testing::ValuesIn(expectations()),
                         [](const auto& param_info) {
                           std::string n =
                               param_info.param.file.substr(0, param_info.param.file.find('.'));
                           for (auto& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(Fixtures, EveryFixtureFileIsCovered) {
  std::set<std::string> covered;
  for (const auto& e : expectations())
    covered.insert(e.file);
  for (const auto& f : std::filesystem::directory_iterator(topology_fixture(""))) {
    std::string name = f.path().filename().string();
    if (name.ends_with(".xml") || name.ends_with(".tar.bz2")) {
      EXPECT_TRUE(covered.count(name)) << name;
    }
  }
}

TEST(Fixtures, G4dnHasTwoMebibyteHugepagesPerNodeWithUnknownFree) {
  HostModel m =
      polyaccel::testing::fixture_model("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml");
  ASSERT_EQ(m.numa_nodes.size(), 2u);
  auto two_mib = [](const NumaNode& n) {
    for (const auto& h : n.hugepages) {
      if (h.size_bytes == (2u << 20)) return h;
    }
    return Hugepages{};
  };
  EXPECT_EQ(two_mib(m.numa_nodes[0]).total, 5281u);
  EXPECT_EQ(two_mib(m.numa_nodes[1]).total, 5280u);
  EXPECT_FALSE(two_mib(m.numa_nodes[0]).free);  // an XML capture does not record free pages
  EXPECT_EQ(m.page_size, 4096u);
  const Nic* efa = m.nic("rdmap197s0");
  ASSERT_TRUE(efa);
  EXPECT_EQ(efa->fabric, "efa");
}

TEST(Fixtures, SierraIsPowerWithSixtyFourKibPagesAndCpulessGpuMemory) {
  HostModel m = polyaccel::testing::fixture_model(
      "power9-2socket-2numa+4gpumem-numa-4xV100-4xmlx5_llnl-sierra.v1.xml");
  EXPECT_EQ(m.page_size, 64u * 1024);
  for (unsigned n : {252u, 253u, 254u, 255u}) {
    ASSERT_TRUE(m.numa_node(n));
    EXPECT_EQ(m.numa_node(n)->kind, NumaKind::cpuless);
    EXPECT_TRUE(m.numa_node(n)->cpus.empty());
  }
}

TEST(Fixtures, XeonMaxNicLocalitySpansDdrAndHbmNodes) {
  HostModel m = polyaccel::testing::fixture_model(
      "2socket-snc4-8ddr+8hbm-numa-1xmlx5-cpuonly_xeon-max-9462-flat.xml");
  const Nic* nic = m.nic("mlx5_0");
  ASSERT_TRUE(nic);
  EXPECT_EQ(nic->pci.numa_nodes, (std::vector<unsigned>{2, 10}));
  EXPECT_EQ(m.numa_node(10)->kind, NumaKind::hbm);
  EXPECT_EQ(m.numa_node(10)->memory_bytes, 16ull << 30);
  EXPECT_EQ(m.numa_node(2)->kind, NumaKind::dram);
  EXPECT_TRUE(m.numa_node(10)->cpus.empty());
  EXPECT_EQ(m.numa_node(10)->local_cpus, m.numa_node(2)->cpus);
  ASSERT_TRUE(m.numa_distances);
  EXPECT_EQ(m.numa_distances->os_index.size(), 16u);
}

TEST(Fixtures, Mi300aCpxShowsSixPartitionsPerApu) {
  HostModel cpx = polyaccel::testing::fixture_model(
      "4apu-4numa-4xMI300A-cpx-24gpu-partitions-4xslingshot_hpe-ex255a.xml");
  HostModel spx =
      polyaccel::testing::fixture_model("4apu-4numa-4xMI300A-spx-4xslingshot_hpe-ex255a.xml");
  unsigned logical = 0;
  for (const auto& a : cpx.accelerators) {
    EXPECT_EQ(a.partitions, 6u);
    EXPECT_EQ(a.pci.class_id, 0x1200);
    logical += a.partitions;
  }
  EXPECT_EQ(logical, 24u);
  for (const auto& a : spx.accelerators)
    EXPECT_EQ(a.partitions, 1u);
  // Each APU's GPU and CPU share its one NUMA node; its Slingshot NIC is the nearest.
  for (const auto& a : spx.accelerators) {
    ASSERT_EQ(a.pci.numa_nodes.size(), 1u);
    ASSERT_EQ(a.closest_nics.size(), 1u);
    const Nic* nic = spx.nic(a.closest_nics[0]);
    EXPECT_EQ(nic->fabric, "slingshot");
    EXPECT_EQ(nic->pci.numa_nodes, a.pci.numa_nodes);
  }
}

// Hugepage counts as the kernel never writes them (negative, past 64 bits, more pages than bytes
// can count): that pool is no reading, never 2^64-1 pages.
TEST(Fixtures, HugepageCountsOutOfRangeAreNoReading) {
  TempDir tmp;
  auto root = polyaccel::testing::extract_tarball(
      topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      tmp.path());
  const auto pool = [&](unsigned node) {
    return root / ("sys/devices/system/node/node" + std::to_string(node)) /
           "hugepages/hugepages-2048kB";
  };
  for (const char* total : {"-1", "18446744073709551616", "9007199254740992"}) {
    SCOPED_TRACE(total);
    polyaccel::testing::write_text(pool(0) / "nr_hugepages", std::string(total) + "\n");
    polyaccel::testing::write_text(pool(1) / "free_hugepages", std::string(total) + "\n");
    DiscoverOptions o;
    o.fsroot = root.string();
    auto m = discover_host(o);
    ASSERT_TRUE(m) << m.error().message();
    for (const auto& h : m->numa_node(0)->hugepages)
      EXPECT_NE(h.size_bytes, 2u << 20) << h.total;
    bool found = false;
    for (const auto& h : m->numa_node(1)->hugepages) {
      if (h.size_bytes != (2u << 20)) continue;
      found = true;
      EXPECT_EQ(h.total, 2048u);
      EXPECT_EQ(h.free, std::nullopt);
    }
    EXPECT_TRUE(found);
  }
}

TEST(Fixtures, NecTarballReadsHugepagesAndLinksFromSysfs) {
  TempDir tmp;
  DiscoverOptions o;
  o.fsroot = polyaccel::testing::extract_tarball(
                 topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
                 tmp.path())
                 .string();
  auto m = discover_host(o);
  ASSERT_TRUE(m) << m.error().message();
  for (const auto& n : m->numa_nodes) {
    bool found = false;
    for (const auto& h : n.hugepages) {
      if (h.size_bytes != (2u << 20)) continue;
      found = true;
      EXPECT_EQ(h.total, 2048u);
      EXPECT_EQ(h.free, 2048u);
    }
    EXPECT_TRUE(found) << "node " << n.os_index;
  }
  for (const auto& a : m->accelerators) {
    EXPECT_EQ(a.pci.class_id, 0x0b40);
    EXPECT_EQ(a.pci.link.width, 16u);
    EXPECT_DOUBLE_EQ(a.pci.link.speed_gts, 8.0);
    EXPECT_EQ(a.pci.numa_nodes, (std::vector<unsigned>{0}));
  }
  // 4 VEs and 1 HCA behind each of two switches: each VE's nearest RDMA NIC is the HCA of its
  // switch, at PIX.
  for (const auto& a : m->accelerators) {
    ASSERT_EQ(a.closest_nics.size(), 1u) << a.id;
    auto i = *m->links.index_of(a.id);
    auto j = *m->links.index_of(a.closest_nics[0]);
    EXPECT_EQ(m->links.at(i, j).label(), "PIX");
    EXPECT_EQ(m->nic(a.closest_nics[0])->fabric, "infiniband");
  }
  // The two halves meet only in the CPU of socket 0.
  EXPECT_EQ(m->links.at(0, 4).label(), "NODE");
}

TEST(Fixtures, Power9TarballMapsGpuMemoryNodesToTheirGpus) {
  TempDir tmp;
  DiscoverOptions o;
  o.fsroot = polyaccel::testing::extract_tarball(
                 topology_fixture("sysfs_power9-2socket-6xV100-gpumem-numa.tar.bz2"), tmp.path())
                 .string();
  auto m = discover_host(o);
  ASSERT_TRUE(m) << m.error().message();
  std::set<unsigned> gpu_nodes;
  for (const auto& a : m->accelerators) {
    ASSERT_EQ(a.memory_numa_nodes.size(), 1u) << a.id;
    gpu_nodes.insert(a.memory_numa_nodes[0]);
    // A GPU's locality is its socket's DRAM node, not other GPUs' memory.
    ASSERT_EQ(a.pci.numa_nodes.size(), 1u);
    EXPECT_TRUE(a.pci.numa_nodes[0] == 0 || a.pci.numa_nodes[0] == 8);
  }
  EXPECT_EQ(gpu_nodes, (std::set<unsigned>{250, 251, 252, 253, 254, 255}));
  EXPECT_EQ(m->page_size, 64u * 1024);
}

}  // namespace
}  // namespace polyaccel

namespace polyaccel {
namespace {

// hwloc 2.9 with one core per die can give Package objects numbered 0,0,1,1: two sockets. The
// test builds such an XML from hwloc's own synthetic 4-package machine, renumbered.
TEST(Packages, DuplicateOsIndexesAreOneSocket) {
  polyaccel::testing::TempDir tmp;
  auto xml = tmp.path() / "dies.xml";
  auto r = polyaccel::testing::run_command(
      "lstopo-no-graphics --input 'pack:4 core:1 pu:2' --of xml - | sed "
      "-e 's/type=\"Package\" os_index=\"1\"/type=\"Package\" os_index=\"0\"/' "
      "-e 's/type=\"Package\" os_index=\"2\"/type=\"Package\" os_index=\"1\"/' "
      "-e 's/type=\"Package\" os_index=\"3\"/type=\"Package\" os_index=\"1\"/' > '" +
      xml.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  DiscoverOptions o;
  o.topology_xml = xml.string();
  o.backends = BackendMode::off;
  auto m = discover_host(o);
  ASSERT_TRUE(m) << m.error().message();
  ASSERT_EQ(m->packages.size(), 2u);
  EXPECT_EQ(m->packages[0].os_index, 0u);
  EXPECT_EQ(m->packages[0].cpus.to_list(), "0-3");
  EXPECT_EQ(m->packages[1].os_index, 1u);
  EXPECT_EQ(m->packages[1].cpus.to_list(), "4-7");
}

}  // namespace
}  // namespace polyaccel
