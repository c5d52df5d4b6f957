// Runs a bound command as a child and waits for it: what `run --reserve` needs to release its
// reservation however the command ends.
#pragma once

#include "core/error.h"
#include "launch/plan.h"

namespace polyaccel {

// Forks; the child applies the plan and execs plan.argv. The parent forwards SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH to it and returns its status as a shell reports
// it (the exit code, or 128 + the signal). The child is killed (PR_SET_PDEATHSIG) if the parent
// dies, so a killed supervisor never leaves a command running on reclaimed GPUs.
Result<int> run_supervised(const LaunchPlan& plan);

}  // namespace polyaccel
