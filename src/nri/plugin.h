// polyaccel as an NRI plugin (github.com/containerd/nri; containerd >= 1.7 with NRI enabled,
// CRI-O >= 1.26): it connects to the runtime's socket, registers, and is asked at every
// container's creation, stop and removal; it answers with the container's cpuset (cpu_policy.h)
// and the updates of the other containers. Reconnects when the runtime restarts. Its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cpuset.h"
#include "core/error.h"
#include "nri/cpu_policy.h"

namespace polyaccel::nri {

struct NriOptions {
  std::string socket = "/var/run/nri/nri.sock";
  std::string name = "polyaccel";
  std::string index = "40";  // two digits: the plugins' order at each event
  CpuSet online, nodes;      // the node's CPUs and NUMA nodes
  // Each node's hugepages now, read when a container asks for some (unset: none known).
  std::function<NodeHugepages()> read_hugepages;
  std::chrono::milliseconds retry{2000};
};

struct NriStatus {
  bool connected = false;
  std::string runtime;                         // "containerd v1.7.24"
  std::uint64_t events = 0;                    // requests answered
  std::uint64_t adjusted = 0, updated = 0;     // containers given a cpuset at creation; moved later
  std::map<std::string, ClaimedCpus> claimed;  // container id -> CPUs and nodes it holds
  CpuSet shared_pool;
  std::size_t shared_containers = 0;
  std::string last_problem;
};

class NriPlugin {
 public:
  explicit NriPlugin(NriOptions options);
  ~NriPlugin();
  NriPlugin(const NriPlugin&) = delete;
  NriPlugin& operator=(const NriPlugin&) = delete;

  void start();  // connects in the background, and again after each loss
  void stop();
  NriStatus status() const;

 private:
  void run();
  Status serve(int fd);
  // The answer to one call of the plugin service (a serialised response), or an Error that
  // goes back as the call's status.
  Result<std::string> handle(const std::string& method, const std::string& payload);
  void say(const std::string& problem);

  NriOptions options_;
  CpuPolicy policy_;                        // under mu_
  std::vector<ContainerView> sync_;         // a Synchronize in parts (`more`), on the thread
  std::vector<CpuUpdate> pending_updates_;  // under mu_: sent by UpdateContainers
  mutable std::mutex mu_;
  NriStatus status_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> fd_{-1};
  std::thread thread_;
};

}  // namespace polyaccel::nri
