#include "partition_manager/mig_apply.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>

namespace polyaccel {

MigApplyLock::~MigApplyLock() {
  if (fd_ >= 0) ::close(fd_);
}

Status MigApplyLock::acquire() {
  const char* dir = std::getenv("POLYACCEL_LOCK_DIR");
  std::string path = std::string(dir && *dir ? dir : "/run/lock") + "/polyaccel-mig.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    return Error{ErrorCode::io, path, "cannot open the lock file",
                 "run as root or set POLYACCEL_LOCK_DIR"};
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    return Error{ErrorCode::io, path, "another polyaccel mig apply is running", "retry later"};
  }
  return Ok{};
}

Status apply_mig_gpu_plan(MigControl& control, const MigGpuPlan& plan, MigGpuApplyReport& report) {
  if (plan.mode_change && plan.mig_enabled) {
    auto mode = control.set_mig_mode(plan.index, true);
    if (!mode) return mode.error();
    if (*mode == MigModeChange::pending_reset) {
      report.mode = "pending_reset";  // instances can be made after the GPU reset
      return Ok{};
    }
    report.mode = "enabled";
  }
  for (const auto& d : plan.destroy) {
    if (auto st = control.destroy(plan.index, d.gpu_instance_id); !st) return st.error();
    report.destroyed.push_back(d);
  }
  if (plan.mode_change && !plan.mig_enabled) {
    auto mode = control.set_mig_mode(plan.index, false);
    if (!mode) return mode.error();
    report.mode = *mode == MigModeChange::pending_reset ? "pending_reset" : "disabled";
  }
  for (const auto& c : plan.create) {
    auto made = control.create(plan.index, c.profile_id, c.start);
    if (!made) return made.error();
    made->profile = c.profile;
    report.created.push_back(*made);
  }
  return Ok{};
}

}  // namespace polyaccel
