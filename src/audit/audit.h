// The tuning audit (docs/audit.md): pure functions of the HostModel, the tuning facts and the
// accelerator samples. No I/O: the command reads, the checks judge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audit/finding.h"
#include "core/accel_sample.h"
#include "core/host_model.h"
#include "discover/tuning.h"

namespace polyaccel {

// What the host is for; the checks that depend on intent ("meant for pinned VMs") read it.
enum class HostRole {
  automatic,   // a hypervisor when vfio-pci holds or is told to hold a device, else compute
  hypervisor,  // runs pinned VMs with passed-through devices
  compute,     // runs accelerator workloads on the host (bare metal, containers)
};
const char* to_string(HostRole role);

struct AuditIntent {
  HostRole role = HostRole::automatic;
  // CPUs meant for pinned workloads; unset: the ones the host already sets apart (isolcpus,
  // nohz_full, rcu_nocbs, outside systemd's CPUAffinity).
  std::optional<CpuSet> pinned_cpus;
  // Devices meant for passthrough beyond those vfio-pci.ids and driver_override name.
  std::vector<PciAddress> passthrough;
  // Hugepages wanted on every NUMA node with memory, in bytes of pages of `hugepage_size`.
  std::uint64_t hugepages_per_node_bytes = 0;
  std::uint64_t hugepage_size = 2ull << 20;
};

struct AuditInput {
  const HostModel& model;
  const TuningFacts& facts;
  const std::vector<AcceleratorSample>& samples;  // one per accelerator a backend answers for
  AuditIntent intent;
};

// What every check is given: the input and what follows from it, worked out once.
struct AuditContext {
  const HostModel& model;
  const TuningFacts& facts;
  const std::vector<AcceleratorSample>& samples;
  AuditIntent intent;
  bool hypervisor = false;
  CpuSet pinned;                        // CPUs meant for pinned workloads (may be empty)
  std::vector<PciAddress> passthrough;  // devices meant for a guest, sorted

  bool is_passthrough(const PciAddress& a) const;
  const AcceleratorSample* sample(const PciAddress& a) const;
  // "0000:3b:00.0 (gpu0)" for an accelerator or NIC of the model, the address otherwise.
  std::string device_name(const PciAddress& a) const;
};

AuditContext make_context(const AuditInput& input);

// Every finding, most severe first, then by id and subject. `only` keeps the checks whose
// ids are listed (empty: all).
std::vector<Finding> run_audit(const AuditInput& input, const std::vector<std::string>& only = {});

// The same for callers that hold the pieces (the exporter publishes a gauge per finding id):
// default intent unless given, no samples unless given.
std::vector<Finding> audit_host(const HostModel& model, const TuningFacts& facts,
                                const std::vector<AcceleratorSample>& samples = {},
                                const AuditIntent& intent = {});

// Every finding id the checks can give, in checks.cc order.
std::vector<std::string> all_finding_ids();

// A check that could not judge the host for lack of a fact: a capture without proc/sys, a root
// that is no host tree. A check whose facts are there runs, whatever it finds.
struct UncheckedCheck {
  std::string id;            // "numa.balancing"
  std::string missing_fact;  // "proc/sys/kernel/numa_balancing"
};

// How much of the audit could run: `checks` ids asked for (all, or `only`), of which `unchecked`
// could not run. So that half a capture never reads as a clean host.
struct AuditCoverage {
  std::size_t checks = 0;
  std::vector<UncheckedCheck> unchecked;  // in checks.cc order
  std::size_t ran() const { return checks - unchecked.size(); }
};
AuditCoverage audit_coverage(const AuditInput& input, const std::vector<std::string>& only = {});

}  // namespace polyaccel
