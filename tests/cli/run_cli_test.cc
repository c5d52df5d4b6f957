// `polyaccel run` for real on this machine: the child reports its affinity, memory policy and
// environment, which must be what --dry-run announced. Plus dry runs on fixtures and bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/cpuset.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;

// "0-3,8" from a JSON array of indexes, as /proc/self/status prints lists.
std::string list_of(const nlohmann::json& indexes) {
  CpuSet s;
  for (unsigned i : indexes.get<std::vector<unsigned>>())
    s.set(i);
  return s.to_list();
}

std::string line_with(const std::string& text, const std::string& key) {
  size_t p = text.find(key);
  if (p == std::string::npos) return {};
  size_t e = text.find('\n', p);
  return text.substr(p, e - p);
}

const char* kReport =
    " -- sh -c 'grep -E \"^(Cpus|Mems)_allowed_list\" /proc/self/status; "
    "head -1 /proc/self/numa_maps; env'";

TEST(RunCli, TheChildRunsWhereTheDryRunSaid) {
  // Every local rank of a world as large as this machine's cores allows (at most 4 ranks).
  auto probe = nlohmann::json::parse(
      run_command(polyaccel_binary() + " run --dry-run --json -- true").output);
  const unsigned world =
      std::min<unsigned>(4, probe["env"]["OMP_NUM_THREADS"].get<std::string>().empty()
                                ? 1
                                : std::stoul(probe["env"]["OMP_NUM_THREADS"].get<std::string>()));
  for (unsigned rank = 0; rank < world; ++rank) {
    const std::string env =
        "LOCAL_RANK=" + std::to_string(rank) + " LOCAL_WORLD_SIZE=" + std::to_string(world) + " ";
    auto dry =
        run_command(env + polyaccel_binary() + " run --hugepages thp --dry-run --json -- true");
    ASSERT_EQ(dry.exit_code, 0) << dry.output;
    auto plan = nlohmann::json::parse(dry.output);
    auto real = run_command(env + polyaccel_binary() + " run --hugepages thp" + kReport);
    ASSERT_EQ(real.exit_code, 0) << real.output;
    EXPECT_EQ(line_with(real.output, "Cpus_allowed_list:"),
              "Cpus_allowed_list:\t" + list_of(plan["cpus"]))
        << real.output;
    EXPECT_EQ(line_with(real.output, "Mems_allowed_list:").empty(), false);
    // The memory policy the child runs under, as the kernel reports it for its mappings.
    EXPECT_NE(real.output.find(" bind:" + list_of(plan["mems"]) + " "), std::string::npos)
        << real.output;
    for (const auto& [key, value] : plan["env"].items())
      EXPECT_NE(real.output.find("\n" + key + "=" + value.get<std::string>() + "\n"),
                std::string::npos)
          << key;
    EXPECT_NE(real.output.find("GLIBC_TUNABLES=glibc.malloc.hugetlb=1"), std::string::npos);
  }
}

TEST(RunCli, ExitCodeIsTheChildsAndBadInputIsTwo) {
  EXPECT_EQ(run_command(polyaccel_binary() + " run -- sh -c 'exit 7'").exit_code, 7);
  auto r = run_command(polyaccel_binary() + " run -- /nonexistent/cmd 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/cmd"), std::string::npos);
  const std::string xe = " --topology " + topology_fixture(kXe8640).string();
  r = run_command(polyaccel_binary() + " run" + xe + " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("add --dry-run"), std::string::npos) << r.output;
  r = run_command("LOCAL_RANK=x " + polyaccel_binary() + " run --dry-run" + xe + " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("LOCAL_RANK: 'x'"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " run --dry-run --hugepages 3MiB" + xe + " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  r = run_command(polyaccel_binary() + " run --dry-run --gpus 9" + xe + " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(RunCli, DryRunJsonOnAFixture) {
  auto r = run_command("LOCAL_RANK=1 LOCAL_WORLD_SIZE=4 " + polyaccel_binary() +
                       " run --dry-run --json --topology " + topology_fixture(kXe8640).string() +
                       " -- python train.py --lr 3e-4");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["gpus"], nlohmann::json::array({"0000:5f:00.0"}));
  EXPECT_EQ(list_of(j["cpus"]), "14-27,126-139");
  EXPECT_EQ(j["mems"], nlohmann::json::array({1}));
  EXPECT_EQ(j["env"]["NCCL_IB_HCA"], "=mlx5_2");
  EXPECT_EQ(j["argv"], nlohmann::json::array({"python", "train.py", "--lr", "3e-4"}));
}

TEST(RunCli, GpusHeldByCommittedPlacementsAreLeftAlone) {
  polyaccel::testing::TempDir tmp;
  const std::string xe = " --topology " + topology_fixture(kXe8640).string();
  const std::string state = " --state " + (tmp.path() / "s.json").string();
  auto r = run_command(polyaccel_binary() + " place" + xe + state +
                       " --vcpus 8 --memory 8GiB --spec hw:cpu_policy=dedicated"
                       " --pci-alias gpu=10de:2330:required --spec pci_passthrough:alias=gpu:1"
                       " --commit --name vm --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string taken = nlohmann::json::parse(r.output)["devices"][0]["pci_bus_id"];
  auto j = nlohmann::json::parse(
      run_command(polyaccel_binary() + " run --dry-run --json" + xe + state + " -- true").output);
  EXPECT_EQ(j["gpus"].size(), 3u);
  for (const auto& g : j["gpus"])
    EXPECT_NE(g, taken);
}

}  // namespace
}  // namespace polyaccel
