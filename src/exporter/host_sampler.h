// The host half of the agent's background sampling: per NUMA node memory and numastat,
// hugepages per node and size, PCIe link state of accelerators and NICs. Read every interval
// through a root (node_exporter's --path.sysfs habit) and published as an immutable snapshot.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/host_model.h"

namespace polyaccel::exporter {

struct NumaNodeSample {
  unsigned node = 0;
  std::optional<std::uint64_t> memory_total_bytes;  // nodeN/meminfo MemTotal
  std::optional<std::uint64_t> memory_free_bytes;   // nodeN/meminfo MemFree
  std::map<std::string, std::uint64_t> numastat;    // numa_hit, numa_miss, other_node, ...
};

struct HostSample {
  std::chrono::system_clock::time_point time{};  // epoch: not read yet
  // The model with hugepages and PCIe links as read at `time`; never null.
  std::shared_ptr<const HostModel> host;
  std::vector<NumaNodeSample> numa;
};

// Reads one HostSample now (the sampler's step; also for tests and bench).
HostSample read_host_sample(const HostModel& host, const std::string& root);

class HostSampler {
 public:
  // `root`: "/" for the live host, a captured tree in tests; empty reads nothing but the model.
  HostSampler(HostModel host, std::string root, std::chrono::milliseconds interval);
  ~HostSampler();
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  void start();
  void stop();
  std::shared_ptr<const HostSample> snapshot() const;

 private:
  void run();

  const HostModel host_;
  const std::string root_;
  const std::chrono::milliseconds interval_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const HostSample> snapshot_;
};

}  // namespace polyaccel::exporter
