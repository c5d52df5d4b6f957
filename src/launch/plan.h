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

// The network devices NCCL and UCX should use for these GPUs: the RDMA devices and netdevs of
// each GPU's closest NICs (HostModel's closest_nics) within the GPU's NUMA node; a NIC across
// sockets is no better than NCCL's own pick. NICs that NCCL's IB transport does not drive (EFA,
// Slingshot) give no HCA. The device plugin's Allocate uses the same rule (src/kube).
struct NearestNetwork {
  std::vector<std::string> hcas;      // "mlx5_0", in GPU order, then closest-NIC order
  std::vector<std::string> ifnames;   // their netdevs
  std::vector<std::string> far_gpus;  // GPU ids with no NIC within their NUMA node
};
NearestNetwork nearest_network(const HostModel& model, const std::vector<const Accelerator*>& gpus);

// NCCL_IB_HCA ("=" and the names: exact matches), UCX_NET_DEVICES (<hca>:1) and
// NCCL_SOCKET_IFNAME for a set of HCAs and netdevs; a variable with nothing to name is left out.
std::vector<std::pair<std::string, std::string>> network_variables(
    const std::vector<std::string>& hcas, const std::vector<std::string>& ifnames);

Result<LaunchPlan> plan_launch(const HostModel& model, const LaunchRequest& request);

// The GPUs --gpus N takes: the set with the fewest NUMA nodes, then the best links among them,
// then the best NIC links, then the lowest ids; only from `available`. Pure.
std::vector<const Accelerator*> choose_gpus(const HostModel& model,
                                            const std::vector<const Accelerator*>& available,
                                            unsigned count);

}  // namespace polyaccel
