// `polyaccel topo` and `report` as a user runs them: the real binary, real fixtures, bad files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;

TEST(TopoCli, JsonHasTheStableKeys) {
  auto r = run_command(polyaccel_binary() + " topo --json --topology " +
                       topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["cores"], 112);
  EXPECT_EQ(j["pus"], 224);
  ASSERT_EQ(j["numa_nodes"].size(), 8u);
  EXPECT_EQ(j["numa_nodes"][1]["os_index"], 1);
  EXPECT_EQ(j["numa_nodes"][1]["kind"], "dram");
  EXPECT_GT(j["numa_nodes"][1]["memory_bytes"].get<std::uint64_t>(), 500ull << 30);
  EXPECT_EQ(j["numa_nodes"][1]["cpus"].size(), 28u);
  ASSERT_TRUE(j["numa_nodes"][0]["hugepages"].is_array());
  ASSERT_EQ(j["accelerators"].size(), 4u);
  const auto& g = j["accelerators"][1];
  EXPECT_EQ(g["id"], "gpu1");
  EXPECT_EQ(g["vendor"], "nvidia");
  EXPECT_EQ(g["pci_bus_id"], "0000:5f:00.0");
  EXPECT_EQ(g["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g["numa_nodes"], nlohmann::json::array({1}));
  ASSERT_EQ(j["nics"].size(), 6u);
  EXPECT_EQ(j["nics"][4]["rdma_devices"], nlohmann::json::array({"mlx5_2"}));
  EXPECT_EQ(j["nics"][4]["netdevs"], nlohmann::json::array({"ibp94s0"}));
  EXPECT_EQ(j["links"]["devices"].size(), 10u);
  EXPECT_EQ(j["links"]["devices"][8], "nic4");
  EXPECT_EQ(j["links"]["matrix"][1][8], "PIX");  // gpu1 row, nic4 column
  EXPECT_EQ(j["links"]["matrix"][0][0], "X");
}

TEST(TopoCli, PeopleSeeSummaryAndMatrixWithAffinityColumns) {
  auto r =
      run_command(polyaccel_binary() + " topo --topology " + topology_fixture(kXe8640).string());
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("2 packages, 112 cores, 224 PUs, 8 NUMA nodes"), std::string::npos);
  EXPECT_NE(r.output.find("CPU Affinity"), std::string::npos);
  EXPECT_NE(r.output.find("NUMA Affinity"), std::string::npos);
  EXPECT_NE(r.output.find("NV6"), std::string::npos);
  EXPECT_NE(r.output.find("nic4: mlx5_2"), std::string::npos);
}

TEST(TopoCli, ReportRunsOnTheLiveHostAndAsJson) {
  auto r = run_command(polyaccel_binary() + " report");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("== Topology =="), std::string::npos);
  auto j = run_command(polyaccel_binary() + " report --json");
  ASSERT_EQ(j.exit_code, 0);
  auto doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["topology"]["source"], "live");
}

struct BadInput {
  std::string name;
  std::string
      content;  // written to a file in a temp dir; "<dir>" makes a directory, "<none>" nothing
  std::string expected;  // part of the one error line
};

void PrintTo(const BadInput& b, std::ostream* os) {
  *os << b.name;
}

class BadTopologyFile : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadTopologyFile, OneLineNamingTheFileAndExitCodeTwo) {
  const BadInput& b = GetParam();
  TempDir dir;
  auto path = dir.path() / "input.xml";
  if (b.content == "<dir>") {
    std::filesystem::create_directory(path);
  } else if (b.content != "<none>") {
    std::ofstream(path) << b.content;
  }
  auto r = run_command(polyaccel_binary() + " topo --topology '" + path.string() + "' 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(path.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(b.expected), std::string::npos) << r.output;
}

std::string truncated_fixture() {
  std::ifstream in(topology_fixture(kXe8640));
  std::string all((std::istreambuf_iterator<char>(in)), {});
  return all.substr(0, all.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadTopologyFile,
    ::testing::Values(
        BadInput{"missing", "<none>", "no such file"},
        BadInput{"directory", "<dir>", "is a directory"}, BadInput{"empty", "", "is empty"},
        BadInput{"blank", "  \n\n", "is empty"},
        BadInput{"foreign", "{\"not\": \"xml\"}", "not an hwloc XML topology"},
        BadInput{"html", "<html><body>hi</body></html>", "not an hwloc XML topology"},
        BadInput{"truncated", truncated_fixture(), "truncated"},
        BadInput{"format3", "<?xml version=\"1.0\"?><topology version=\"3.0\"></topology>",
                 "format 3.0"},
        BadInput{"no_pu", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n</topology>\n",
                 "input.xml"},
        BadInput{"broken_xml",
                 "<?xml version=\"1.0\"?><topology version=\"2.0\"><object type=\"Machine\" "
                 "os_index=</topology>",
                 "input.xml"}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(TopoCli, BadFsrootAndConflictingSources) {
  TempDir dir;
  auto r = run_command(polyaccel_binary() + " topo --fsroot '" + dir.path().string() + "' 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("not a gathered sysfs/procfs tree"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " topo --fsroot /nonexistent/tree 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/tree: no such directory"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " topo --fsroot /tmp --topology " +
                  topology_fixture(kXe8640).string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("give one source"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " topo --no-such-option 2>&1");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace polyaccel
