// AMD GPU Operator's Device Config Manager (DCM) profiles of compute and memory partitions, as
// its ConfigMap `config-manager-config` holds them under `config.json`
// (github.com/ROCm/device-config-manager, docs/configuration/configmap.md):
//
//   {"gpu-config-profiles": {"<name>": {"skippedGPUs": {"ids": [3]},
//       "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS4", "numGPUsAssigned":
//       7}]}},
//    "gpuClientSystemdServices": {"names": [...]}}
//
// DCM's checks are kept: the sets' numGPUsAssigned plus the skipped GPUs count every GPU of the
// node, skipped ids are in range and distinct, one memory mode per profile. The GPUs not skipped
// take the sets in order, by their place in PCI order. Pure: no I/O.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel {

struct AmdPartitionSet {
  std::string compute;  // "SPX", "DPX", "QPX", "CPX"
  std::string memory;   // "NPS1", "NPS2", "NPS4", "NPS8"
  unsigned gpus = 0;    // numGPUsAssigned
};

struct AmdPartitionProfile {
  std::vector<unsigned> skipped;  // GPU ids (places in PCI order)
  std::vector<AmdPartitionSet> sets;
};

struct AmdPartitionConfig {
  std::map<std::string, AmdPartitionProfile> profiles;
};

// bad_input naming `source` and the profile or field for anything DCM would refuse to read.
Result<AmdPartitionConfig> parse_amd_partition_config(const std::string& text,
                                                      const std::string& source);

struct AmdPartitionTarget {
  std::string compute, memory;
};

// Profile `name` for a node of `gpu_count` GPUs: each GPU's target, nullopt when skipped.
// bad_input for an unknown profile or one that does not count the node's GPUs.
Result<std::vector<std::optional<AmdPartitionTarget>>> select_amd_partition_profile(
    const AmdPartitionConfig& config, const std::string& name, std::size_t gpu_count);

}  // namespace polyaccel
