// AMD compute and memory partitions for the label manager (label_manager.h), with the
// conventions of AMD's GPU Operator and its Device Config Manager
// (github.com/ROCm/device-config-manager: pkg/config_manager/globals/constants.go,
// docs/configuration/configmap.md): the label `dcm.amd.com/gpu-config-profile` names a profile
// of the ConfigMap `config-manager-config` (key `config.json`, share/amd_partition_config.h);
// the outcome goes to `dcm.amd.com/gpu-config-profile-state` (`success`, `failure`; polyaccel
// adds `pending` while it works and `rebooting`, never set by a sysfs write). The modes are set
// through amdgpu's sysfs attributes (discover/accel/partition.h), memory first.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>

#include "partition_manager/label_manager.h"

namespace polyaccel {

inline constexpr const char* kAmdConfigProfileLabel = "dcm.amd.com/gpu-config-profile";
inline constexpr const char* kAmdConfigProfileStateLabel = "dcm.amd.com/gpu-config-profile-state";

PartitionLabels amd_partition_labels();

// The manager's options for AMD: the DCM labels, ConfigMap config-manager-config / config.json,
// the state file under /var/lib/polyaccel.
PartitionManagerOptions amd_partition_manager_options();

// A fresh AMD workflow per apply, on the sysfs under `sysfs_root` ("/sys").
std::function<std::unique_ptr<PartitionWorkflow>()> amd_partition_workflow(
    std::filesystem::path sysfs_root);

}  // namespace polyaccel
