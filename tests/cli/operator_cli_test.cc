// What a new operator meets on a capture (issue 32): the hugepage what-if of place for the
// flavors `flavors` sizes, release and allocations wording, the lock files a release leaves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using testing::polyaccel_binary;
using testing::run_command;
using testing::TempDir;
using testing::xe8640_topology;

// flavors sizes 1 GiB-page flavors for a capture that reserves none; place checks one of them
// on the same capture as if the pages were reserved, with the what-if audit has.
TEST(OperatorCli, PlaceChecksAFlavorOfFlavorsWithTheHugepageWhatIf) {
  TempDir tmp;
  auto flavors =
      run_command(polyaccel_binary() + " flavors --json --topology " + xe8640_topology());
  ASSERT_EQ(flavors.exit_code, 0) << flavors.output;
  auto plan = nlohmann::json::parse(flavors.output);
  const auto& f = plan["flavors"][0];
  ASSERT_EQ(f["extra_specs"]["hw:mem_page_size"], "1GB");
  // The note names the what-if with the pages the plan wants, in options place and audit parse.
  std::string note = plan["notes"].dump();
  EXPECT_NE(note.find("--hugepages-per-node 495GiB --hugepage-size 1GiB"), std::string::npos)
      << note;
  EXPECT_EQ(note.find("below"), std::string::npos) << note;
  nlohmann::json flavor = {{"name", f["name"]},
                           {"vcpus", f["vcpus"]},
                           {"ram", f["ram_mib"]},
                           {"disk", 0},
                           {"properties", f["extra_specs"]}};
  std::ofstream(tmp.path() / "f.json") << flavor.dump();
  std::string place =
      polyaccel_binary() + " place --topology " + xe8640_topology() + " --state " +
      (tmp.path() / "state.json").string() + " --flavor " + (tmp.path() / "f.json").string() +
      " --pci-alias " +
      f["extra_specs"]["pci_passthrough:alias"].get<std::string>().substr(
          0, f["extra_specs"]["pci_passthrough:alias"].get<std::string>().find(':')) +
      "=10de:2330";
  auto without = run_command(place + " 2>&1");
  EXPECT_EQ(without.exit_code, 1) << without.output;
  EXPECT_NE(without.output.find("has 0 B free"), std::string::npos) << without.output;
  auto with = run_command(place + " --hugepages-per-node 495GiB --hugepage-size 1GiB --json");
  ASSERT_EQ(with.exit_code, 0) << with.output;
  auto fit = nlohmann::json::parse(with.output);
  EXPECT_EQ(fit["cells"].size(), 2u) << with.output;
  // One GiB short of the flavor's cell on every node: no fit, in the same words.
  auto short_by_one = run_command(place + " --hugepages-per-node 494GiB --hugepage-size 1GiB");
  EXPECT_EQ(short_by_one.exit_code, 1) << short_by_one.output;
  EXPECT_NE(short_by_one.output.find("has 494 GiB free"), std::string::npos) << short_by_one.output;
  // The same parser as audit's: bad sizes name the option; an assumption is not reserved.
  auto bad = run_command(place + " --hugepages-per-node 1MiB --hugepage-size 1GiB 2>&1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--hugepages-per-node"), std::string::npos) << bad.output;
  auto commit = run_command(place +
                            " --hugepages-per-node 495GiB --hugepage-size 1GiB --commit "
                            "--name vm1 2>&1");
  EXPECT_EQ(commit.exit_code, 2) << commit.output;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "state.json"));
}

TEST(OperatorCli, FlavorsOptionsAllHaveHelp) {
  auto r = run_command(polyaccel_binary() + " flavors --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* option : {"--reserve-cores-per-node", "--reserve-memory-per-node"}) {
    auto at = r.output.find(option);
    ASSERT_NE(at, std::string::npos) << option;
    auto line_end = r.output.find('\n', at);
    auto next_end = r.output.find('\n', line_end + 1);
    // Help text on the option's line or the next (CLI11 wraps after a long name).
    std::string text = r.output.substr(at, next_end - at);
    EXPECT_NE(text.find("kept for the host"), std::string::npos) << text;
  }
}

TEST(OperatorCli, ReleaseOfAMissingStateLeavesNoLock) {
  TempDir tmp;
  auto state = (tmp.path() / "absent.json").string();
  auto r = run_command(polyaccel_binary() + " release vm1 --topology " + xe8640_topology() +
                       " --state " + state + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()))
      << "left behind: " << std::filesystem::directory_iterator(tmp.path())->path();
}

TEST(OperatorCli, OneAllocationIsSingular) {
  TempDir tmp;
  auto state = (tmp.path() / "s.json").string();
  std::string common = " --topology " + xe8640_topology() + " --state " + state;
  ASSERT_EQ(
      run_command(polyaccel_binary() + " place --vcpus 2 --memory 1GiB --commit --name a" + common)
          .exit_code,
      0);
  ASSERT_EQ(
      run_command(polyaccel_binary() + " place --vcpus 2 --memory 1GiB --commit --name b" + common)
          .exit_code,
      0);
  auto r = run_command(polyaccel_binary() + " release b" + common);
  EXPECT_NE(r.output.find("(1 allocation left in"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " allocations" + common);
  EXPECT_EQ(r.output.rfind("1 allocation in ", 0), 0u) << r.output;
}

}  // namespace
}  // namespace polyaccel
