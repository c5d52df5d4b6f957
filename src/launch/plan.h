// What `polyaccel run` will do, decided before anything is touched: a pure function of the
// HostModel, the CPUs this process may use and the request (DESIGN.md: decisions are pure).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

struct LaunchRequest {
  std::optional<unsigned> gpu_count;  // --gpus N
  std::vector<std::string> gpu_ids;   // --gpu ID... (gpu0 or a PCI address)
  // --local-rank R or LOCAL_RANK; the world is LOCAL_WORLD_SIZE, else one rank per GPU.
  std::optional<unsigned> local_rank;
  std::optional<unsigned> local_world_size;
  // --hugepages: "thp" (madvise), or a hugepage size in bytes (2 MiB, 1 GiB).
  std::optional<std::uint64_t> hugepage_bytes;
  bool transparent_hugepages = false;
  std::string existing_glibc_tunables;  // GLIBC_TUNABLES of the caller, kept
  std::vector<std::string> argv;
  CpuSet allowed_cpus;  // the caller's affinity (cgroup cpuset); empty means every PU
  // The CPUs to run on, decided elsewhere (a reservation's pinned PUs); within allowed_cpus.
  std::optional<CpuSet> fixed_cpus;
  // GPUs that other runs hold (--reserve): never chosen by --gpus N, refused by --gpu.
  std::vector<PciAddress> unavailable_gpus;
  // Network interfaces that are up with an address (the caller reads them on the live host);
  // NCCL_SOCKET_IFNAME names only these, and none when they are unknown.
  std::optional<std::vector<std::string>> usable_netdevs;
};

struct LaunchPlan {
  std::vector<std::string> gpu_ids;  // gpu0, ...
  std::vector<PciAddress> gpus;
  CpuSet cpus;
  std::vector<unsigned> mems;  // NUMA nodes memory is bound to (MPOL_BIND)
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;
  std::vector<std::string> warnings;
};

Result<LaunchPlan> plan_launch(const HostModel& model, const LaunchRequest& request);

// The GPUs --gpus N takes: the set with the fewest NUMA nodes, then the best links among them,
// then the best NIC links, then the lowest ids; only from `available`. Pure.
std::vector<const Accelerator*> choose_gpus(const HostModel& model,
                                            const std::vector<const Accelerator*>& available,
                                            unsigned count);

}  // namespace polyaccel
