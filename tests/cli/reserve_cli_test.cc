// `polyaccel run --reserve` for real on this machine (its CPUs, no GPU needed): the placement is
// in the state while CMD runs and gone after, however CMD ends; signals reach CMD; a killed
// supervisor's reservation is reclaimed; two concurrent runs hold disjoint CPUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/cpuset.h"
#include "support/test_support.h"

extern char** environ;

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;

class Reserve : public ::testing::Test {
 protected:
  std::string state() const { return (tmp_.path() / "allocations.json").string(); }
  std::string file(const std::string& name) const { return (tmp_.path() / name).string(); }
  std::string run(const std::string& name, const std::string& env = "") const {
    return env + "exec " + polyaccel_binary() + " run --reserve " + name + " --state " + state() +
           " -- ";
  }
  // The names of the placements recorded now.
  std::vector<std::string> recorded() const {
    std::ifstream in(state());
    if (!in) return {};
    std::vector<std::string> names;
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& p : j["placements"])
      names.push_back(p["name"]);
    return names;
  }
  // Starts a shell command line in the background (its own process: `sh -c`), returns its pid.
  pid_t spawn(const std::string& command) const {
    pid_t pid = 0;
    std::string line = command;
    const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
    EXPECT_EQ(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ),
              0);
    return pid;
  }
  // Polls for a condition the processes under test bring about (no timing assertion: the limit
  // is only there so that a broken build fails instead of hanging).
  template <class F>
  bool eventually(F condition) const {
    for (int i = 0; i < 600; ++i) {
      if (condition()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  static bool exists(const std::string& path) { return std::filesystem::exists(path); }
  int wait_exit(pid_t pid) const {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  TempDir tmp_;
};

TEST_F(Reserve, HeldWhileRunningReleasedAfterAndExitCodeKept) {
  auto r = run_command(run("job") + "sh -c 'cat " + state() + "; exit 3'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("\"name\": \"job\""), std::string::npos) << r.output;
  EXPECT_TRUE(recorded().empty());
}

TEST_F(Reserve, KilledChildIsReleased) {
  auto r = run_command(run("job") + "sh -c 'kill -9 $$'");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(recorded().empty());
}

TEST_F(Reserve, SignalsAreForwardedAndTheReservationReleased) {
  const std::string started = file("started"), out = file("out");
  pid_t supervisor = spawn(run("job") + "sh -c 'trap \"echo got-TERM > " + out +
                           "; exit 5\" TERM; touch " + started + "; while :; do sleep 0.05; done'");
  ASSERT_TRUE(eventually([&] { return exists(started); }));
  EXPECT_EQ(recorded(), std::vector<std::string>{"job"});
  ::kill(supervisor, SIGTERM);
  EXPECT_EQ(wait_exit(supervisor), 5);
  std::ifstream in(out);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "got-TERM");
  EXPECT_TRUE(recorded().empty());
}

TEST_F(Reserve, KilledSupervisorTakesItsCommandAlongAndIsReclaimed) {
  const std::string pidfile = file("child.pid");
  pid_t supervisor = spawn(run("lost") + "sh -c 'echo $$ > " + pidfile + "; exec sleep 300'");
  ASSERT_TRUE(
      eventually([&] { return exists(pidfile) && std::filesystem::file_size(pidfile) > 0; }));
  pid_t command = 0;
  std::ifstream(pidfile) >> command;
  ASSERT_GT(command, 0);
  EXPECT_EQ(recorded(), std::vector<std::string>{"lost"});
  ::kill(supervisor, SIGKILL);
  wait_exit(supervisor);
  // PR_SET_PDEATHSIG: the command does not outlive its supervisor.
  EXPECT_TRUE(eventually([&] { return ::kill(command, 0) != 0; }));
  EXPECT_EQ(recorded(), std::vector<std::string>{"lost"});  // nobody released it ...
  auto r = run_command(run("next") + "true 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reclaimed lost"), std::string::npos) << r.output;  // ... until now
  EXPECT_TRUE(recorded().empty());
}

TEST_F(Reserve, TwoConcurrentRunsHoldDisjointCpusAndAThirdFindsNoRoom) {
  const std::string a = file("a"), b = file("b"), done = file("done");
  auto command = [&](const std::string& mine) {
    return "sh -c 'grep Cpus_allowed_list /proc/self/status > " + mine + ".tmp; mv " + mine +
           ".tmp " + mine + "; while [ ! -f " + done + " ]; do sleep 0.05; done'";
  };
  pid_t first = spawn(run("a", "LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 ") + command(a));
  pid_t second = spawn(run("b", "LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 ") + command(b));
  ASSERT_TRUE(eventually([&] { return exists(a) && exists(b); }));
  auto held = recorded();
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, (std::vector<std::string>{"a.rank0", "b.rank1"}));
  // Both halves of the machine are held: a third half does not fit (exit 1, nothing recorded).
  auto third = run_command(run("c", "LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 ") + "true 2>&1");
  EXPECT_EQ(third.exit_code, 1) << third.output;
  { std::ofstream(done) << "1"; }
  EXPECT_EQ(wait_exit(first), 0);
  EXPECT_EQ(wait_exit(second), 0);
  auto cpus_of = [](const std::string& path) {
    std::ifstream in(path);
    std::string key, list;
    in >> key >> list;
    return list;
  };
  auto set_of = [&](const std::string& path) {
    return CpuSet::parse_list(cpus_of(path)).value_or(CpuSet{});
  };
  auto sa = set_of(a), sb = set_of(b);
  EXPECT_FALSE(sa.empty());
  EXPECT_FALSE(sb.empty());
  EXPECT_FALSE(sa.intersects(sb)) << sa.to_list() << " and " << sb.to_list();
  EXPECT_TRUE(recorded().empty());
}

TEST_F(Reserve, BadCombinationsExitTwo) {
  auto r = run_command(polyaccel_binary() + " run --reserve x --gpu gpu0 --state " + state() +
                       " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_command(polyaccel_binary() + " run --spec hw:numa_nodes=1 --dry-run -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("add --reserve"), std::string::npos) << r.output;
  r = run_command(polyaccel_binary() + " run --reserve x --spec hw:cpu_policy=sometimes --state " +
                  state() + " -- true 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(recorded().empty());
}

}  // namespace
}  // namespace polyaccel
