// CPUs and memory as DRA devices of the same pool as the GPUs and NICs (issue 39), so that one
// claim can ask for a GPU, its NIC, cores and memory on one NUMA node (matchAttribute on
// resource.kubernetes.io/numaNode):
//
//   cpu-<n>           CpuGrain::core: the core whose first CPU is n, with its SMT siblings
//   cpu-numa-<n>      CpuGrain::numa: every offered core of NUMA node n
//   memory-numa-<n>   with `memory`: NUMA node n's memory and hugepages (cpuset.mems is what
//                     can be enforced: a node's memory is granted whole)
//
// Only DRAM nodes with CPUs give CPU devices; a core with a reserved CPU (CpuDeviceOptions) is
// never offered. Pure: the same model and options give the same devices, so that what a claim
// grants is known from the names of its devices alone (the NRI side, nri/cpu_policy.h, pins the
// containers to it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cpuset.h"
#include "core/dra_status.h"
#include "core/error.h"
#include "core/host_model.h"
#include "core/claim_cpus_env.h"
#include "dra/slices.h"

namespace polyaccel::dra {

// A prepared claim's CDI spec sets core/claim_cpus_env.h's variables on each of its CPU and
// memory devices, for the NRI plugin.

// The CPU and memory devices of the model, in NUMA node order. None with CpuGrain::off and no
// memory.
std::vector<Device> cpu_devices(const HostModel& model, const CpuDeviceOptions& options);

// What a claim's CPU and memory devices grant: cpuset.cpus, cpuset.mems and hugepages.
struct CpuGrant {
  CpuSet cpus;
  CpuSet mems;  // the memory devices' nodes; without any, the NUMA nodes of the CPUs
  std::map<std::uint64_t, std::uint64_t> hugepage_bytes;  // page size → bytes, memory devices'
  bool empty() const { return cpus.empty() && mems.empty(); }
};

// The grant of the CPU and memory devices among `devices` (others are ignored).
CpuGrant grant_of(const HostModel& model, const std::vector<const Device*>& devices);

// The grant of a claim's allocated CPU/memory devices by name. An Error names a device that is
// not a CPU or memory device of this model with these options.
Result<CpuGrant> claim_grant(const HostModel& model, const CpuDeviceOptions& options,
                             const std::vector<std::string>& device_names);

// What claims hold, for the exporter: per claim (namespace, name) and NUMA node, the CPUs and
// memory of its CPU and memory devices in `pool`; and per node the offered CPUs none holds.
struct HeldDevices {
  std::string ns, name;
  std::vector<std::string> devices;  // names in the pool
};
void cpu_holdings(const HostModel& model, const Pool& pool, const std::vector<HeldDevices>& claims,
                  std::vector<DraStatus::ClaimHolding>& holdings,
                  std::map<unsigned, unsigned>& free_cpus);

// --reserved-cpus as kubelet writes it ("0-1,64-65"): an Error names the flag when the list is
// malformed or names a CPU the model does not have.
Result<CpuSet> parse_reserved_cpus(const HostModel& model, const std::string& text);

}  // namespace polyaccel::dra
