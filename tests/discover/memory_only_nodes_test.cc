// CPU-less memory nodes: on-package HBM (Xeon Max flat mode) against CXL and other memory-only
// nodes, on the real Xeon Max capture and on copies of it that hwloc-annotate changes the way
// another machine would show them (a processor without HBM; nodes hwloc 2.9 labels as onlined
// from a CXL DAX region).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/host_model_json.h"
#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::discover_capture;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

const char* kXeonMax = "2socket-snc4-8ddr+8hbm-numa-1xmlx5-cpuonly_xeon-max-9462-flat.xml";
// hwloc's logical indexes of the 16 GiB nodes P#8-15: each follows its SNC domain's DDR node.
const char* kSmallNodes = "numa:1 numa:3 numa:5 numa:7 numa:9 numa:11 numa:13 numa:15";

// hwloc-annotate IN OUT -- LOCATIONS -- ANNOTATION (options before IN).
std::filesystem::path annotate(const std::filesystem::path& in, const std::filesystem::path& out,
                               const std::string& options, const std::string& locations,
                               const std::string& annotation) {
  auto r = run_command("hwloc-annotate " + options + " '" + in.string() + "' '" + out.string() +
                       "' -- " + locations + " -- " + annotation + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

TEST(MemoryOnlyNodes, XeonMaxHbmStaysHbmAndLocalToTheNic) {
  HostModel m = discover_capture(topology_fixture(kXeonMax), BackendMode::off);
  for (unsigned n = 8; n < 16; ++n)
    EXPECT_EQ(m.numa_node(n)->kind, NumaKind::hbm) << n;
  EXPECT_EQ(m.nic("mlx5_0")->pci.numa_nodes, (std::vector<unsigned>{2, 10}));
}

TEST(MemoryOnlyNodes, ASmallMemoryOnlyNodeOnAProcessorWithoutHbmIsNotHbm) {
  TempDir tmp;
  auto xml = annotate(topology_fixture(kXeonMax), tmp.path() / "no-hbm.xml", "--ri", "package:all",
                      "info CPUModel 'Intel(R) Xeon(R) Platinum 8480+'");
  HostModel m = discover_capture(xml, BackendMode::off);
  for (unsigned n = 8; n < 16; ++n) {
    EXPECT_EQ(m.numa_node(n)->kind, NumaKind::cpuless) << n;
    EXPECT_TRUE(m.numa_node(n)->cpus.empty()) << n;
  }
  for (unsigned n = 0; n < 8; ++n)
    EXPECT_EQ(m.numa_node(n)->kind, NumaKind::dram) << n;
  // The device is local to its DRAM node only; the memory-only node keeps its locality.
  EXPECT_EQ(m.nic("mlx5_0")->pci.numa_nodes, (std::vector<unsigned>{2}));
  EXPECT_EQ(m.numa_node(10)->local_cpus, m.numa_node(2)->cpus);
}

TEST(MemoryOnlyNodes, CxlDaxNodesAreCxlOutOfDeviceSetsAndShownSo) {
  TempDir tmp;
  auto xml = annotate(topology_fixture(kXeonMax), tmp.path() / "cxl.xml", "", kSmallNodes,
                      "info DAXType CXLMem");
  HostModel m = discover_capture(xml, BackendMode::off);
  for (unsigned n = 8; n < 16; ++n) {
    EXPECT_EQ(m.numa_node(n)->kind, NumaKind::cxl) << n;
    EXPECT_TRUE(m.numa_node(n)->cpus.empty()) << n;
  }
  EXPECT_EQ(m.nic("mlx5_0")->pci.numa_nodes, (std::vector<unsigned>{2}));
  for (const auto& hb : m.host_bridges) {
    for (unsigned n : hb.numa_nodes)
      EXPECT_LT(n, 8u) << "a host bridge local to CXL memory";
  }
  auto j = to_json(m);
  EXPECT_EQ(j["numa_nodes"][10]["kind"], "cxl");
  for (const auto& n : j["nics"]) {
    if (n["pci_bus_id"] == m.nic("mlx5_0")->pci.address.to_string()) {
      EXPECT_EQ(n["numa_nodes"], nlohmann::json::array({2}));
    }
  }

  auto topo = run_command(polyaccel::testing::polyaccel_binary() + " topo --topology '" +
                          xml.string() + "' 2>&1");
  EXPECT_EQ(topo.exit_code, 0) << topo.output;
  EXPECT_NE(topo.output.find("cxl"), std::string::npos) << topo.output;
  EXPECT_EQ(topo.output.find("hbm"), std::string::npos) << topo.output;

  // hwloc 2.10+ names the kind in the subtype instead.
  auto labelled = annotate(topology_fixture(kXeonMax), tmp.path() / "cxl-subtype.xml", "",
                           kSmallNodes, "subtype CXL-DRAM");
  HostModel l = discover_capture(labelled, BackendMode::off);
  EXPECT_EQ(l.numa_node(12)->kind, NumaKind::cxl);
  EXPECT_EQ(l.nic("mlx5_0")->pci.numa_nodes, (std::vector<unsigned>{2}));
}

}  // namespace
}  // namespace polyaccel
