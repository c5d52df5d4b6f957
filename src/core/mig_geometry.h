// GPU partition geometry as plain values: NVIDIA MIG profiles, geometries and the instances on
// a GPU, and AMD's compute/memory partition state. discover/accel/ fills them (NVML, sysfs); the
// planner in share/, the DRA driver and the partition manager read them without including the
// vendor room (DESIGN.md, rule 4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel {

// One GPU instance profile of a MIG-capable GPU. Placements count memory slices, as NVML's
// possible placements (nvidia-smi mig -lgipp) do.
struct MigProfile {
  std::string name;              // "1g.10gb", "1g.10gb+me"
  unsigned profile_id = 0;       // the id the library creates instances with (nvidia-smi's ID)
  unsigned profile_kind = 0;     // NVML's GPU instance profile enum (0 = 1 slice, 9 = 1 slice rev2)
  unsigned compute_slices = 0;   // the N in "Ng"
  unsigned memory_slices = 0;    // placement size
  unsigned max_instances = 0;    // per GPU
  std::uint64_t memory_mib = 0;  // as the library reports it; 0 from the built-in tables
  unsigned memory_gb = 0;        // the nominal GB in the name
  std::vector<unsigned> starts;  // valid first memory slices
};

// The MIG geometry of one GPU model: slices and profiles.
struct MigGeometry {
  std::string model;                   // "H200-SXM5-141GB", or the library's name when unknown
  std::vector<std::string> aliases;    // names operators and NVML use: "H200", "NVIDIA H200"
  std::vector<std::uint32_t> pci_ids;  // 0x<device><vendor>, as mig-parted's device-filter
  unsigned compute_slices = 7;
  unsigned memory_slices = 8;
  unsigned max_instances = 7;
  std::vector<MigProfile> profiles;

  // By name ("1g.10gb"); mig-parted's ".me" spelling of "+me" is accepted too.
  const MigProfile* profile(std::string_view name) const;
  const MigProfile* profile_by_id(unsigned profile_id) const;
};

// A GPU instance (with its one full-size compute instance) that exists on a GPU.
struct MigPlacedInstance {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned profile_id = 0;
  std::string profile;  // "3g.40gb"
  unsigned start = 0;   // memory slices
  unsigned size = 0;
  std::string uuid;            // "MIG-..." when a compute instance exists
  std::vector<unsigned> pids;  // processes running on it: the instance is busy
  bool has_compute_instance = true;
};

// One MIG-capable GPU as the library sees it now.
struct MigGpu {
  unsigned index = 0;  // the library's device index
  std::string pci_bus_id;
  std::string name;          // "NVIDIA H200"
  std::uint32_t pci_id = 0;  // 0x<device><vendor>
  bool mig_enabled = false;
  bool mig_pending = false;  // the mode after the next reset
  std::vector<MigPlacedInstance> instances;
  // The profiles the library reports for this GPU (its own geometry), used for models the
  // built-in tables do not know. Empty when the library cannot list them.
  std::optional<MigGeometry> library_geometry;
};

// What setting the MIG mode did.
enum class MigModeChange { unchanged, applied, pending_reset };

// ---- AMD compute and memory partitions ------------------------------------------------------

struct AmdPartitionState {
  std::string pci_bus_id;
  std::string compute;  // "SPX", "DPX", "TPX", "QPX", "CPX"
  std::string memory;   // "NPS1", "NPS2", "NPS4", "NPS8"
  std::vector<std::string> available_compute;
  std::vector<std::string> available_memory;
};

}  // namespace polyaccel
