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
  // --local-rank R or the launcher's (launch/local_rank.h); the world is the launcher's local
  // size, else one rank per GPU. local_rank_source names where they came from, for people.
  std::optional<unsigned> local_rank;
  std::optional<unsigned> local_world_size;
  std::string local_rank_source;
  // The rank whose GPU a reservation chose (--reserve of a local rank): the visibility variable
  // is then ordered for it as for a local rank.
  std::optional<unsigned> order_for_rank;
  // The GPUs this process was given, as the variables it inherited name them (a container's
  // device plugin or DRA claim, Slurm's gres, a launcher): variable -> its value. Only these are
  // chosen and made visible; empty: every GPU of the host.
  std::vector<std::pair<std::string, std::string>> inherited_visibility;
  // The NUMA nodes this process may bind memory to (a container's cpuset.mems, Mems_allowed);
  // empty: every node.
  std::vector<unsigned> allowed_mems;
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
  // A local rank's: its number, the local world, where they came from, and the index of its GPU
  // in the visibility variable (CUDA_VISIBLE_DEVICES, ...), which holds every GPU the process
  // may use, ordered so that this index is the rank's local rank: set_device(LOCAL_RANK) selects
  // the GPU chosen here, and the other ranks' GPUs stay visible for NCCL's peer-to-peer.
  std::optional<unsigned> local_rank;
  std::optional<unsigned> local_world_size;
  std::string local_rank_source;
  std::optional<unsigned> device_index;
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
