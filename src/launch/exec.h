// The action half of `polyaccel run`: apply a LaunchPlan to this process and exec the command.
#pragma once

#include <vector>

#include "core/cpuset.h"
#include "core/error.h"
#include "launch/plan.h"

namespace polyaccel {

// The CPUs this process may run on (sched_getaffinity): a container's cpuset shows here.
CpuSet current_affinity();

// The NUMA nodes this process may bind memory to (libnuma's Mems_allowed: a container's or a
// launcher's cpuset.mems); empty when libnuma is unavailable.
std::vector<unsigned> current_memory_nodes();

// CPU affinity (sched_setaffinity), memory policy MPOL_BIND on plan.mems (libnuma's
// set_mempolicy; both survive execve), and the environment.
Status apply_binding(const LaunchPlan& plan);

// apply_binding, then execvp(plan.argv). Returns only on failure.
Error exec_bound(const LaunchPlan& plan);

}  // namespace polyaccel
