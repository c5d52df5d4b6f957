// Which local rank this process is, as the launcher that started it says: torchrun, Open MPI,
// MPICH (Hydra), Slurm's srun, or the --local-rank flag. Pure: the environment is passed in.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/error.h"

namespace polyaccel {

struct LocalRank {
  unsigned rank = 0;
  std::optional<unsigned> world;  // ranks on this node, when the launcher says
  std::string source;             // the variable (or flag) the rank came from, for people
};

// A variable's value, or nothing when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The innermost launcher's word. Launchers nest (torchrun under srun, mpirun in an sbatch
// script, which leaves SLURM_LOCALID=0 in every rank's environment): LOCAL_RANK (torchrun) wins
// over Open MPI's and MPICH's, which win over Slurm's. Refused, naming the variables: a value
// that is not a whole number, a rank not below its own launcher's local size, and Open MPI's and
// MPICH's ranks both set and different (they do not nest). Nothing when no launcher is seen.
Result<std::optional<LocalRank>> local_rank_from_environment(const EnvLookup& env);

// Slurm's per-node task counts ("2(x3),1": 2, 2, 2, 1), the count of node `node`.
std::optional<unsigned> slurm_tasks_on_node(const std::string& text, unsigned node);

}  // namespace polyaccel
