// Which CPUs and memory nodes each container may use, decided at container creation (NRI,
// plugin.h) from the DRA claims its pod holds: a container whose claims hold CPU devices is
// pinned to exactly their CPUs (cpuset.cpus) and NUMA nodes (cpuset.mems); every other container
// shares the pool of the node's CPUs that no such container holds, and is moved when that pool
// shrinks or grows, as kubernetes-sigs/dra-driver-cpu does. Pure: the plugin feeds it the
// runtime's containers and sends what it answers.
//
// A claim's CPUs reach the container in its environment, set by the claim's CDI spec
// (dra/cdi.cc): POLYACCEL_CPUS_<claim>=<list> and POLYACCEL_MEMS_<claim>=<list>, in the kernel's
// list format; a container with several claims holds their union. The environment is the
// runtime's own record of the container, so after an agent restart the assignment is learnt back
// from the containers themselves (Synchronize) and nobody is moved.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/claim_cpus_env.h"
#include "core/cpuset.h"
#include "core/error.h"

namespace polyaccel::nri {


// What the policy knows of a container.
struct ContainerView {
  std::string id;
  std::string name;              // "namespace/pod/container", for logs and metrics
  std::vector<std::string> env;  // "KEY=value"
  std::string cpus;              // its cpuset.cpus now, as the runtime reports it ("" unknown)
};

// A container's claimed CPUs and memory nodes from its environment; nullopt when it holds none.
// An Error names the variable whose value is not a CPU list or lies outside `online`: such a
// container is left as the runtime made it.
struct ClaimedCpus {
  CpuSet cpus, mems;
};
Result<std::optional<ClaimedCpus>> claimed_cpus(const std::vector<std::string>& env,
                                                const CpuSet& online, const CpuSet& nodes);

struct CpuUpdate {
  std::string id;
  std::string cpus;  // cpuset.cpus
  std::string mems;  // cpuset.mems; empty: unchanged
};

class CpuPolicy {
 public:
  // `online`: the node's CPUs; `nodes`: its NUMA nodes (memory).
  CpuPolicy(CpuSet online, CpuSet nodes) : online_(std::move(online)), nodes_(std::move(nodes)) {}

  // The runtime's containers when the plugin (re)connects: the claimed ones are learnt back, and
  // the shared ones whose CPUs are not the pool are moved onto it (none after a restart).
  std::vector<CpuUpdate> synchronize(const std::vector<ContainerView>& containers,
                                     std::vector<std::string>& problems);
  // A container being created: its own cpuset (`adjust`), and the updates of the shared
  // containers when its claim shrinks the pool.
  struct Created {
    std::optional<CpuUpdate> adjust;
    std::vector<CpuUpdate> updates;
  };
  Created create(const ContainerView& container, std::vector<std::string>& problems);
  // A container that stopped or was removed: its CPUs return to the pool, and the shared
  // containers grow onto them.
  std::vector<CpuUpdate> remove(const std::string& id);

  // The CPUs no claimed container holds.
  CpuSet shared_pool() const;
  const std::map<std::string, ClaimedCpus>& claimed() const { return claimed_; }
  std::size_t shared_count() const { return shared_.size(); }

 private:
  std::vector<CpuUpdate> move_shared();
  CpuSet online_, nodes_;
  std::map<std::string, ClaimedCpus> claimed_;  // by container id
  std::map<std::string, std::string> shared_;   // container id -> the cpus it was last given
};

}  // namespace polyaccel::nri
