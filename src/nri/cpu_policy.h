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
//
// Hugepages: kubelet sets each container's hugetlb limit to its pod's hugepages-<size> request
// (0 without one), and the pod's cgroup caps it the same way, so a claim cannot raise it. What
// the claim's nodes decide is where the pages come from (cpuset.mems) and how many there are: a
// claimed container's limit is lowered to what its NUMA nodes hold, so a request the nodes cannot
// meet is said at creation rather than found as a failed mmap.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/claim_cpus_env.h"
#include "core/cpuset.h"
#include "core/error.h"

namespace polyaccel::nri {

// A hugetlb limit as the runtime names it: page size as the kernel's controller does ("2MB",
// "1GB"), bytes.
struct HugepageLimit {
  std::string page_size;
  std::uint64_t limit = 0;
  bool operator==(const HugepageLimit&) const = default;
};

// Bytes of the page size the controller names ("2MB" = 2 MiB, "1GB", "64KB"); nullopt otherwise.
std::optional<std::uint64_t> page_size_bytes(std::string_view name);

// Each NUMA node's hugepages: node -> page size in bytes -> bytes of such pages.
using NodeHugepages = std::map<unsigned, std::map<std::uint64_t, std::uint64_t>>;

// What the policy knows of a container.
struct ContainerView {
  std::string id;
  std::string name;              // "namespace/pod/container", for logs and metrics
  std::vector<std::string> env;  // "KEY=value"
  std::string cpus;              // its cpuset.cpus now, as the runtime reports it ("" unknown)
  std::vector<HugepageLimit> hugepage_limits = {};  // the runtime's, at creation
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
  std::string cpus;                           // cpuset.cpus
  std::string mems;                           // cpuset.mems; empty: unchanged
  std::vector<HugepageLimit> hugepages = {};  // lowered limits; empty: unchanged
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
  // containers when its claim shrinks the pool. `hugepages`: the node's now, for a claimed
  // container's hugetlb limits.
  struct Created {
    std::optional<CpuUpdate> adjust;
    std::vector<CpuUpdate> updates;
  };
  Created create(const ContainerView& container, std::vector<std::string>& problems,
                 const NodeHugepages& hugepages = {});
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
