// `polyaccel sriov set` on the NEC tarball's real X722 PF: the kernel's 0-first rule, bad input
// that writes nothing, the JSON schema, and `topo` showing the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "support/sriov_tree.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

const char* kNecTarball = "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2";

std::string numvfs(const std::filesystem::path& root) {
  std::ifstream in(root / polyaccel::testing::kX722PfDir / "sriov_numvfs");
  std::string s;
  std::getline(in, s);
  return s;
}

class SriovSet : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = polyaccel::testing::extract_tarball(topology_fixture(kNecTarball), tmp_.path());
  }
  polyaccel::testing::CommandResult set(const std::string& args) {
    return run_command(polyaccel_binary() + " sriov set --fsroot '" + root_.string() + "' " + args +
                       " 2>&1");
  }
  TempDir tmp_;
  std::filesystem::path root_;
};

TEST_F(SriovSet, EnablesThenChangesThroughZero) {
  auto r = set("--json 0000:60:00.0 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["physical_function"], "0000:60:00.0");
  EXPECT_EQ(j["total_vfs"], 64);
  EXPECT_EQ(j["previous_vfs"], 0);
  EXPECT_EQ(j["num_vfs"], 4);
  EXPECT_EQ(j["writes"], nlohmann::json::array({4}));
  EXPECT_EQ(numvfs(root_), "4");

  r = set("--json enp96s0f0 8");  // by netdev name; 4 → 8 must pass through 0
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["previous_vfs"], 4);
  EXPECT_EQ(j["writes"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(numvfs(root_), "8");

  r = set("--json 60:00.0 8");  // already there: nothing written
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["changed"], false);

  r = set("0000:60:00.0 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 -> 0 of 64 VFs"), std::string::npos) << r.output;
  EXPECT_EQ(numvfs(root_), "0");
}

TEST_F(SriovSet, BadInputExitsTwoAndWritesNothing) {
  polyaccel::testing::add_x722_vfs(root_, 2);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0000:60:00.0 65", "at most 64"},
      {"0000:60:00.0 -1", "not a non-negative"},
      {"0000:60:00.0 four", "not a non-negative"},
      {"0000:1a:00.0 2", "not an SR-IOV physical function"},
      {"0000:99:00.0 2", "no such PCI function"},
      {"eth9 2", "no PCI function, netdev or RDMA device"},
      {"../../etc 2", "not a PCI address"},
  };
  for (const auto& [args, message] : cases) {
    auto r = set(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(numvfs(root_), "2") << args;
  }
  auto r = run_command(
      polyaccel_binary() + " sriov set --topology " +
      topology_fixture("2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml").string() +
      " 0000:60:00.0 2 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// sriov_totalvfs and sriov_numvfs as the kernel never writes them (past 16 bits, past the
// total, not decimal): refused naming the file, exit 2, nothing written; never wrapped to 32
// bits (4294967304 was taken for 8 and 3 VFs were written). topo drops the PF's SR-IOV facts.
TEST_F(SriovSet, SysfsCountsOutOfRangeAreRefusedByFile) {
  // A tree as small as the kernel's view of one PF, and the NEC machine's real X722.
  const auto small = tmp_.path() / "small";
  const auto small_pf = small / "sys/bus/pci/devices/0000:01:00.0";
  std::filesystem::create_directories(small / "sys/devices/system/cpu");
  std::filesystem::create_directories(small_pf);
  const auto nec_pf = root_ / "sys/bus/pci/devices/0000:60:00.0";  // a link to kX722PfDir
  struct Case {
    std::string total, num, bad_file;
  };
  const std::vector<Case> cases = {
      {"4294967304", "0", "sriov_totalvfs"},
      {"4294967297", "0", "sriov_totalvfs"},
      {"65536", "0", "sriov_totalvfs"},
      {"-8", "0", "sriov_totalvfs"},
      {"0x8", "0", "sriov_totalvfs"},
      {"8", "4294967297", "sriov_numvfs"},
      {"8", "9", "sriov_numvfs"},
      {"8", "-1", "sriov_numvfs"},
  };
  for (const auto& [root, pf, address] :
       {std::tuple{small, small_pf, "0000:01:00.0"}, std::tuple{root_, nec_pf, "0000:60:00.0"}}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(root.string() + ": " + c.total + " " + c.num);
      polyaccel::testing::write_text(pf / "sriov_totalvfs", c.total + "\n");
      polyaccel::testing::write_text(pf / "sriov_numvfs", c.num + "\n");
      for (const char* json : {"", "--json "}) {
        auto r = run_command(polyaccel_binary() + " sriov set " + json + "--fsroot '" +
                             root.string() + "' " + address + " 3 2>&1");
        EXPECT_EQ(r.exit_code, 2) << r.output;
        EXPECT_EQ(r.output.rfind("polyaccel: " + (pf / c.bad_file).string() + ": '", 0), 0u)
            << r.output;
        EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
        EXPECT_EQ(polyaccel::testing::read_text(pf / "sriov_numvfs"), c.num + "\n");
      }
    }
  }
  // topo reads the real tree on: that PF without SR-IOV facts, the other one with them.
  auto r = run_command(polyaccel_binary() + " topo --json --fsroot '" + root_.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  int seen = 0;
  for (const auto& n : j["nics"]) {
    if (n["pci_bus_id"] == "0000:60:00.0") {
      ++seen;
      EXPECT_TRUE(!n["pci"].contains("sriov") || n["pci"]["sriov"].is_null()) << n.dump();
    } else if (n["pci_bus_id"] == "0000:60:00.1") {
      ++seen;
      EXPECT_EQ(n["pci"]["sriov"]["total_vfs"], 64);
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST_F(SriovSet, TopoShowsTheVfs) {
  polyaccel::testing::add_x722_vfs(root_, 2);
  auto r = run_command(polyaccel_binary() + " topo --fsroot '" + root_.string() + "'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("SR-IOV: 2 of 64 VFs enabled"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vf1  0000:60:02.1  NUMA 0  [enp96s0f0v1,iwp96s0f0v1]  driver iavf"),
            std::string::npos)
      << r.output;
  auto j = nlohmann::json::parse(
      run_command(polyaccel_binary() + " topo --json --fsroot '" + root_.string() + "'").output);
  bool found = false;
  for (const auto& n : j["nics"]) {
    if (n["pci_bus_id"] != "0000:60:00.0") continue;
    found = true;
    EXPECT_EQ(n["pci"]["sriov"]["total_vfs"], 64);
    EXPECT_EQ(n["pci"]["sriov"]["vfs"][0]["pci_bus_id"], "0000:60:02.0");
    EXPECT_EQ(n["pci"]["sriov"]["vfs"][0]["numa_node"], 0);
    EXPECT_EQ(n["pci"]["sriov"]["vfs"][0]["driver"], "iavf");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace polyaccel
