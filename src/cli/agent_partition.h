// The partition managers inside `polyaccel agent` (docs/kubernetes.md, "Partitioning from node
// labels"): NVIDIA's GPU Operator label workflow (--mig-manager: nvidia.com/mig.config) and AMD's
// (--amd-partition-manager: dcm.amd.com/gpu-config-profile) on the agent's own Node, withdrawing
// the GPUs they change from the device plugin and the DRA driver of the same process.
#pragma once

#include <memory>
#include <vector>

#include "cli/commands.h"
#include "discover/accel/monitor.h"
#include "dra/runner.h"
#include "kube/pod_resources.h"
#include "kube/runner.h"
#include "partition_manager/label_manager.h"

namespace polyaccel::cli {

// Adds --mig-manager, --amd-partition-manager and their options to the agent command.
void add_partition_agent_options(CLI::App* agent, AgentOptions& options);

// The managers and what they need to live (their API-server client).
struct PartitionAgent {
  std::unique_ptr<kube_api::KubeClient> client;
  std::vector<std::unique_ptr<PartitionLabelManager>> managers;
  void stop() {
    for (auto& m : managers)
      m->stop();
  }
};

// Null when neither manager is asked for. Each reads its state file and withdraws the GPUs it
// names before its thread starts. An Error for a bad option or API access that cannot be set up.
Result<std::unique_ptr<PartitionAgent>> start_partition_agent(const AcceleratorMonitor& monitor,
                                                              const AgentOptions& options,
                                                              const DiscoverOptions& discover,
                                                              DevicePluginRunner* plugin,
                                                              dra::DraRunner* dra);

}  // namespace polyaccel::cli
