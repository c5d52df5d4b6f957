// GPU partitioning: the control interface that creates and destroys NVIDIA MIG instances
// (nvml_mig.cc), and AMD's compute/memory partition modes read and set through sysfs
// (partition.cc). The values they work on (MIG geometry, profiles, instances, AMD partition
// state) are in core/mig_geometry.h. Nothing here names a vendor API.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/mig_geometry.h"

namespace polyaccel {

// MIG control through a vendor library. Methods never throw; failures carry the library's text.
class MigControl {
 public:
  virtual ~MigControl() = default;
  virtual Result<std::vector<MigGpu>> gpus() = 0;
  virtual Result<MigModeChange> set_mig_mode(unsigned index, bool enabled) = 0;
  // Creates a GPU instance of `profile_id` at `start` and its full-size compute instance.
  virtual Result<MigPlacedInstance> create(unsigned index, unsigned profile_id, unsigned start) = 0;
  // Destroys the compute instances of the GPU instance, then the GPU instance.
  virtual Status destroy(unsigned index, unsigned gpu_instance_id) = 0;
};

// NVML (libnvidia-ml.so.1, or POLYACCEL_NVML_LIB). Error not_found when the library is absent.
Result<std::unique_ptr<MigControl>> open_nvml_mig_control();

// ---- AMD compute and memory partitions (sysfs) ----------------------------------------------

// Every AMD GPU under `sysfs_root`/bus/pci/devices that has current_compute_partition.
Result<std::vector<AmdPartitionState>> read_amd_partitions(const std::filesystem::path& sysfs_root);

// Partitions a compute mode makes and memory partitions (NUMA nodes) a memory mode makes;
// 0 for an unknown name.
unsigned amd_compute_partitions(std::string_view mode);
unsigned amd_memory_partitions(std::string_view mode);

// Whether the pair is valid on the device: both listed in its available_* files, and every
// compute partition within one memory partition (compute partitions a multiple of memory ones).
Status check_amd_partition_pair(const AmdPartitionState& gpu, std::string_view compute,
                                std::string_view memory);

// Writes the modes that differ (memory first: changing it reloads the driver's partitions),
// then reads them back. Empty compute or memory keeps that mode.
Result<AmdPartitionState> set_amd_partition(const std::filesystem::path& sysfs_root,
                                            const std::string& pci_bus_id,
                                            const std::string& compute, const std::string& memory);

}  // namespace polyaccel
