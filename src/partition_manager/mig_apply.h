// Applying a MIG plan through MigControl, under the one lock every apply takes: shared by
// `polyaccel mig apply` (cli/mig_apply.cc) and the node-label workflow (mig_label_manager.h), so
// that the two never interleave on a GPU.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "discover/accel/partition.h"
#include "share/mig_planner.h"

namespace polyaccel {

// flock(2) on $POLYACCEL_LOCK_DIR/polyaccel-mig.lock (default /run/lock); released when the
// object goes or the process ends, however it ends.
class MigApplyLock {
 public:
  MigApplyLock() = default;
  MigApplyLock(const MigApplyLock&) = delete;
  MigApplyLock& operator=(const MigApplyLock&) = delete;
  ~MigApplyLock();
  // Error io naming the lock file when it cannot be opened or another apply holds it.
  Status acquire();

 private:
  int fd_ = -1;
};

// What applying one GPU's plan did.
struct MigGpuApplyReport {
  unsigned index = 0;
  std::string mode = "unchanged";  // unchanged, enabled, disabled, pending_reset
  std::vector<MigPlacedInstance> destroyed;
  std::vector<MigPlacedInstance> created;
  std::vector<MigPlacedInstance> instances;  // read back after the changes (by the caller)
};

// Applies one GPU's plan: the mode first when enabling, then destroys what goes, the mode when
// disabling, then creates what is new. The first failure ends it (what was done stays in
// `report`). An enable that waits for a GPU reset stops there (report.mode = "pending_reset").
Status apply_mig_gpu_plan(MigControl& control, const MigGpuPlan& plan, MigGpuApplyReport& report);

// Whether the plan changes anything on this GPU.
inline bool mig_gpu_plan_changes(const MigGpuPlan& plan) {
  return plan.mode_change || !plan.destroy.empty() || !plan.create.empty();
}

}  // namespace polyaccel
