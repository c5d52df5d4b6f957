// NVIDIA MIG for the label manager (label_manager.h), as the GPU Operator's mig-manager:
// `nvidia.com/mig.config` names a config of a mig-parted ConfigMap (`config.yaml`), planned with
// polyaccel's MIG planner against the instances that exist, applied through MigControl.
#pragma once

#include <functional>
#include <memory>

#include "discover/accel/partition.h"
#include "partition_manager/label_manager.h"

namespace polyaccel {

inline constexpr const char* kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr const char* kMigConfigStateLabel = "nvidia.com/mig.config.state";

// nvidia.com/mig.config and .state, with mig-manager's values.
PartitionLabels mig_labels();

// The manager's options for MIG: mig_labels(), the GPU Operator's ConfigMap name
// (default-mig-parted-config) and key (config.yaml), the state file under /var/lib/polyaccel.
PartitionManagerOptions mig_manager_options();

// A fresh MIG workflow per apply, opening MIG control with `open` (NVML by default).
std::function<std::unique_ptr<PartitionWorkflow>()> mig_workflow(
    std::function<Result<std::unique_ptr<MigControl>>()> open = open_nvml_mig_control);

}  // namespace polyaccel
