// Which local rank a process is, from the variables real launchers set (values as torchrun 1.13,
// Open MPI 4.1, MPICH 4.0 and Slurm 22.05 set them; the launchers themselves run in
// tests/launch/launchers_test.sh).
#include "launch/local_rank.h"

#include <gtest/gtest.h>

#include <map>

namespace polyaccel {
namespace {

Result<std::optional<LocalRank>> from(std::map<std::string, std::string> env) {
  return local_rank_from_environment([env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  });
}

TEST(LocalRank, EachLauncherAlone) {
  auto r = from({{"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "8"}});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->rank, 3u);
  EXPECT_EQ((*r)->world, 8u);
  EXPECT_EQ((*r)->source, "LOCAL_RANK");
  r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ((*r)->source, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ((*r)->world, 2u);
  r = from({{"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "4"}});
  EXPECT_EQ((*r)->source, "MPI_LOCALRANKID");
  EXPECT_EQ((*r)->world, 4u);
  // srun: the step's tasks per node, by this node's id.
  r = from({{"SLURM_LOCALID", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "2,4"}});
  EXPECT_EQ((*r)->rank, 2u);
  EXPECT_EQ((*r)->world, 4u);
  r = from({{"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "4"}});
  EXPECT_EQ((*r)->world, 4u);
  r = from({});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

// Launchers nest: torchrun under srun, mpirun in an sbatch script (SLURM_LOCALID=0 inherited by
// every rank). The innermost one speaks.
TEST(LocalRank, TheInnermostLauncherWins) {
  auto r = from({{"LOCAL_RANK", "5"},
                 {"LOCAL_WORLD_SIZE", "8"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "1"}});
  EXPECT_EQ((*r)->rank, 5u);
  r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
            {"SLURM_LOCALID", "0"},
            {"SLURM_TASKS_PER_NODE", "1"}});
  EXPECT_EQ((*r)->rank, 3u);
  EXPECT_EQ((*r)->source, "OMPI_COMM_WORLD_LOCAL_RANK");
}

TEST(LocalRank, VariablesThatDisagreeOrAreNotNumbersAreRefusedByName) {
  auto r = from({{"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "LOCAL_RANK=4 with LOCAL_WORLD_SIZE=4: the torchrun local rank is not below its local "
            "size");
  r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MPI_LOCALRANKID", "0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("OMPI_COMM_WORLD_LOCAL_RANK=1 and MPI_LOCALRANKID=0"),
            std::string::npos);
  r = from({{"SLURM_LOCALID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("SLURM_LOCALID=3 with SLURM_STEP_TASKS_PER_NODE=2"),
            std::string::npos);
  for (const char* bad : {"-1", "x", "", "4294967297", " 1", "1e3"}) {
    r = from({{"LOCAL_RANK", bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_NE(r.error().message().find("LOCAL_RANK"), std::string::npos) << bad;
  }
  r = from({{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "0"}});
  ASSERT_FALSE(r.ok());
  r = from({{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "5"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no task count for node 5"), std::string::npos);
}

TEST(LocalRank, SlurmTaskCountsPerNode) {
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2u);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2u);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1u);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("8", 0), 8u);
  for (const char* bad : {"", "(x2)", "2(x", "2(y3)", "2(x3", "a", "2(x99999999)"})
    EXPECT_EQ(slurm_tasks_on_node(bad, 0), std::nullopt) << bad;
}

// 4,296 items of 999,999 nodes pass 2^32 nodes (a 47 KB value, under Linux's 128 KiB limit for
// one environment string): the count must not wrap round to an early item's.
TEST(LocalRank, SlurmTaskCountsDoNotWrap) {
  std::string text;
  for (int i = 0; i < 4296; ++i)
    text += (i == 0 ? "7(x999999)" : ",1(x999999)");
  EXPECT_EQ(slurm_tasks_on_node(text, 4'294'967'295u), 1u);
  EXPECT_EQ(slurm_tasks_on_node(text, 999'998u), 7u);
  EXPECT_EQ(slurm_tasks_on_node("7(x999999)", 4'294'967'295u), std::nullopt);
}

}  // namespace
}  // namespace polyaccel
