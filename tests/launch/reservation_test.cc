// Run reservations through the placement engine and the allocation store, on the XE8640 model:
// concurrent processes never get the same GPU, a dead owner's reservation is reclaimed.
#include "launch/reservation.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "discover/discover.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

HostModel xe8640() {
  return polyaccel::testing::fixture_model(
      "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml");
}

RunReservationRequest one_gpu(const HostModel& m, const std::string& name) {
  RunReservationRequest r;
  r.name = name;
  r.gpus = 1;
  r.pus_per_gpu = pus_per_gpu(m, m.pus);
  r.gpu_vendor_id = 0x10de;
  return r;
}

struct Child {
  pid_t pid;
  int read_fd;
};

// A process that reserves one GPU as itself, reports "gpuN cpus" or "nofit" on a pipe, then
// stays alive (holding the reservation) until killed.
Child reserving_child(const HostModel& m, const std::filesystem::path& state,
                      const std::string& name) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto me = process_identity(::getpid());
    auto r =
        me ? reserve_for_run(m, state, one_gpu(m, name), *me) : Result<RunReservation>(Error{});
    std::string msg =
        r ? r->gpu_ids.at(0) + " " + r->cpus.to_list() : "nofit " + r.error().message();
    msg += "\n";
    (void)!::write(fds[1], msg.data(), msg.size());
    ::close(fds[1]);
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

std::string read_line(int fd) {
  std::string s;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n')
    s += c;
  ::close(fd);
  return s;
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(RunReservation, ConcurrentRunsNeverShareAGpuAndADeadOwnerIsReclaimed) {
  HostModel m = xe8640();
  TempDir tmp;
  const auto state = tmp.path() / "allocations.json";
  std::vector<Child> children;
  for (int i = 0; i < 6; ++i)
    children.push_back(reserving_child(m, state, "run" + std::to_string(i)));
  std::set<std::string> gpus;
  CpuSet cpus;
  int nofit = 0;
  std::map<std::string, pid_t> holder;
  for (auto& c : children) {
    std::string line = read_line(c.read_fd);
    if (line.rfind("nofit", 0) == 0) {
      ++nofit;
      EXPECT_NE(line.find("no 1 free GPUs"), std::string::npos) << line;
      continue;
    }
    std::string gpu = line.substr(0, line.find(' '));
    EXPECT_TRUE(gpus.insert(gpu).second) << gpu << " given twice";
    auto set = CpuSet::parse_list(line.substr(line.find(' ') + 1));
    ASSERT_TRUE(set.has_value());
    EXPECT_FALSE(cpus.intersects(*set)) << line;
    // The PUs are the reserved GPU's NUMA node's.
    const Accelerator* a = m.accelerator(gpu);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(m.numa_node(a->pci.numa_nodes.at(0))->cpus.contains(*set)) << line;
    cpus |= *set;
    holder[gpu] = c.pid;
  }
  EXPECT_EQ(gpus.size(), 4u);
  EXPECT_EQ(nofit, 2);

  // Kill the holder of gpu1 as `kill -9` would: its GPU comes back, the others stay held.
  kill_and_reap(holder.at("gpu1"));
  auto me = process_identity(::getpid());
  ASSERT_TRUE(me.has_value());
  auto again = reserve_for_run(m, state, one_gpu(m, "after"), *me);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->gpu_ids, std::vector<std::string>{"gpu1"});
  EXPECT_EQ(again->reclaimed.size(), 1u);
  // The name is taken while held; the owner alone releases it.
  auto taken = reserve_for_run(m, state, one_gpu(m, "after"), *me);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.error().code, ErrorCode::bad_input);
  ProcessIdentity stranger = *me;
  stranger.start_time += 1;
  ASSERT_TRUE(release_run(state, "after", stranger).ok());
  EXPECT_FALSE(reserve_for_run(m, state, one_gpu(m, "more"), *me).ok());  // still held
  ASSERT_TRUE(release_run(state, "after", *me).ok());
  auto freed = reserve_for_run(m, state, one_gpu(m, "more"), *me);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(freed->gpu_ids, std::vector<std::string>{"gpu1"});
  for (auto& c : children)
    kill_and_reap(c.pid);
}

TEST(RunReservation, ExtraSpecsReachTheEngine) {
  HostModel m = xe8640();
  TempDir tmp;
  const auto state = tmp.path() / "allocations.json";
  auto me = process_identity(::getpid());
  ASSERT_TRUE(me.has_value());
  // Two GPUs forced into two NUMA cells, and the NIC under each GPU's switch reserved too.
  RunReservationRequest r = one_gpu(m, "two");
  r.gpus = 2;
  r.extra_specs = {{"hw:numa_nodes", "2"}, {"polyaccel:nic_affinity", "pix"}};
  auto two = reserve_for_run(m, state, r, *me);
  ASSERT_TRUE(two.ok()) << two.error().message();
  EXPECT_EQ(two->gpu_ids.size(), 2u);
  EXPECT_EQ(two->placement.cells.size(), 2u);
  size_t nics = 0;
  for (const auto& d : two->placement.devices)
    nics += d.kind == "nic";
  EXPECT_EQ(nics, 2u);
  EXPECT_EQ(std::find(two->gpu_ids.begin(), two->gpu_ids.end(), "gpu2"), two->gpu_ids.end());
  // A spec the engine refuses is bad input, and nothing is recorded.
  r.name = "bad";
  r.extra_specs = {{"hw:cpu_thread_policy", "sometimes"}};
  auto bad = reserve_for_run(m, state, r, *me);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::bad_input);
  EXPECT_NE(bad.error().message().find("hw:cpu_thread_policy"), std::string::npos);
}

TEST(RunReservation, ProcessIdentityTellsARecycledPidApart) {
  auto me = process_identity(::getpid());
  ASSERT_TRUE(me.has_value());
  EXPECT_TRUE(is_alive(*me));
  EXPECT_GT(me->start_time, 0u);
  EXPECT_FALSE(me->boot_id.empty());
  ProcessIdentity earlier = *me;
  earlier.start_time -= 1;  // same pid, another process
  EXPECT_FALSE(is_alive(earlier));
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_identity(child).has_value());
}

TEST(RunReservation, BrokenOwnerFileIsRefusedAndNotOverwritten) {
  HostModel m = xe8640();
  TempDir tmp;
  const auto state = tmp.path() / "allocations.json";
  { std::ofstream(state.string() + ".runs") << "{not json"; }
  auto me = process_identity(::getpid());
  auto r = reserve_for_run(m, state, one_gpu(m, "x"), *me);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::bad_input);
  std::ifstream in(state.string() + ".runs");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{not json");
  EXPECT_FALSE(std::filesystem::exists(state));
}

}  // namespace
}  // namespace polyaccel
