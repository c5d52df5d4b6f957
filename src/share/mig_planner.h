// The MIG planner: pure functions from GPU geometries, the instances that exist and a request to
// explicit placements (start, size in memory slices). No I/O.
//
// The hardware's rules (NVIDIA MIG user guide, nvidia-smi mig -lgipp): an instance starts at one
// of its profile's valid starts and takes `memory_slices` consecutive memory slices; instances
// never overlap; a GPU has 7 compute slices, 8 memory slices and at most 7 instances; each
// profile has its own maximum (1 for the +me profiles). Every valid layout of a geometry is
// enumerated once (a few thousand at most); a request is then a lookup, and the smallest change
// is the layout with the requested counts that keeps most of the current instances in place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mig_geometry.h"

namespace polyaccel {

// Profile name → number of instances ("1g.18gb" → 6), in the user's order.
using MigRequest = std::vector<std::pair<std::string, unsigned>>;

// One GPU the plan may use.
struct MigGpuInput {
  unsigned index = 0;
  const MigGeometry* geometry = nullptr;
  bool mig_enabled = false;
  std::uint32_t pci_id = 0;  // 0x<device><vendor>, for mig-parted's device-filter; 0 unknown
  std::vector<MigPlacedInstance> current;  // empty for a GPU that is not on this host
};

// A GPU's own target, as a mig-parted config entry gives it.
struct MigGpuTarget {
  bool mig_enabled = true;
  MigRequest devices;
};

struct MigPlannedInstance {
  std::string profile;
  unsigned profile_id = 0;
  unsigned start = 0;
  unsigned size = 0;
  bool kept = false;             // exists already at this place
  unsigned gpu_instance_id = 0;  // of the kept instance
};

struct MigGpuPlan {
  unsigned index = 0;
  std::string model;
  bool mig_enabled = false;                   // wanted mode
  bool mode_change = false;                   // the GPU's MIG mode must change
  std::vector<MigPlannedInstance> instances;  // the wanted layout, by start
  std::vector<MigPlacedInstance> destroy;     // current instances that go
  std::vector<MigPlannedInstance> create;     // new instances, largest first
};

struct MigPlan {
  bool fit = false;
  std::string reason;  // why not, when !fit
  // The request asks for more than these GPUs can ever hold (a profile's count, slices or
  // instances), whatever exists on them: bad input rather than a layout that does not fit.
  bool exceeds_hardware = false;
  std::vector<MigGpuPlan> gpus;
  unsigned changes() const;  // instances destroyed + created
};

// Spreads `request` over `gpus` (each may hold any share), using as few GPUs as possible and,
// with current instances, changing as few as possible. Busy instances (with processes) are kept
// unless `force`. Error (bad input) for a profile that no GPU's model has or a zero count.
Result<MigPlan> plan_mig_spread(const std::vector<MigGpuInput>& gpus, const MigRequest& request,
                                bool force);

// Gives each GPU its own target (targets[i] for gpus[i]), keeping as many current instances as
// possible. Error (bad input) for a profile the GPU's model does not have.
Result<MigPlan> plan_mig_per_gpu(const std::vector<MigGpuInput>& gpus,
                                 const std::vector<MigGpuTarget>& targets, bool force);

// Whether these counts of a geometry's profiles (indexed as geometry.profiles) fit on one empty
// GPU. Used by tests and the benchmark.
bool mig_counts_fit(const MigGeometry& geometry, const std::vector<unsigned>& counts);

}  // namespace polyaccel
