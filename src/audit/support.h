// Helpers the check families share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "audit/audit.h"

namespace polyaccel::audit {

// vfio-pci and the vendor variants built on it (mlx5_vfio_pci, nvgrace_gpu_vfio_pci).
bool is_vfio_driver(const std::string& driver);

// Where the host keeps its own work off CPUs.
struct CpuIsolation {
  CpuSet scheduler;        // isolcpus (sys/devices/system/cpu/isolated, else the command line)
  CpuSet nohz_full;        // no scheduler tick
  CpuSet rcu_nocbs;        // RCU callbacks offloaded
  CpuSet outside_systemd;  // not in systemd's CPUAffinity (host services never run there)
};
CpuIsolation cpu_isolation(const TuningFacts& facts, const CpuSet& all_cpus);

// A CPU list from a kernel argument: "managed_irq,domain,2-15" → 2-15; nullopt when absent or
// malformed.
std::optional<CpuSet> kernel_arg_cpus(const TuningFacts& facts, const std::string& key,
                                      const CpuSet& all_cpus);

// The CPUs the host keeps for itself when none are chosen: the first core (with its SMT
// siblings) of every NUMA node that has CPUs.
CpuSet default_housekeeping(const HostModel& model);

// "hugepages-2048kB"
std::string hugepage_dir(std::uint64_t size_bytes);

// "cpu 3" or "cpus 0-27"
std::string cpus_subject(const CpuSet& cpus);

}  // namespace polyaccel::audit
