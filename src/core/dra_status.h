// What the DRA driver (src/dra) knows of the API server and the slices it publishes, as a plain
// value: the runner fills it, the exporter turns it into polyaccel_dra_* metrics (the exporter
// does not depend on dra/, as it does not on kube/ for pod assignments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace polyaccel {

struct DraStatus {
  // What the API server keeps of the fields feature gates guard, as last seen (a dry-run create
  // or the stored slices): sharedCounters/consumesCounters (DRAPartitionableDevices) and device
  // taints (DRADeviceTaints). Without counters only devices that cannot be over-committed are
  // published; without taints unhealthy devices are withdrawn.
  bool server_keeps_counters = true;
  bool server_keeps_taints = true;
  bool server_fields_known = false;  // asked or read back at least once
  std::uint64_t syncs = 0;           // successful syncs of the pool's slices
  std::uint64_t sync_errors = 0;     // failed ones
  std::uint64_t api_writes = 0;      // writes the syncs made
  std::uint64_t restores = 0;        // syncs that put back slices someone else deleted (a wipe)
  std::size_t devices = 0;           // devices in the published pool
  bool watching = false;             // a watch on the pool's slices is open

  // With CPU or memory devices (--dra-cpus, --dra-memory): what each prepared claim holds on each
  // NUMA node, and the offered CPUs no claim holds, by node.
  struct ClaimHolding {
    std::string ns, name;  // the ResourceClaim
    unsigned numa_node = 0;
    unsigned cpus = 0;
    std::uint64_t memory_bytes = 0;
    bool operator==(const ClaimHolding&) const = default;
  };
  std::vector<ClaimHolding> claim_holdings;
  std::map<unsigned, unsigned> free_cpus;  // NUMA node → CPUs; empty without CPU devices

  // Which monitored device each of the pool's devices is, for the pods of DRA claims
  // (PodAssignments::by_claim_device): device name → the ids the exporter knows it by (a GPU's
  // bus id, a MIG instance's UUID, one the driver created for a claim included).
  std::string driver, pool;
  std::map<std::string, std::vector<std::string>> device_ids;

  // The exporter serves a cached scrape body until a source changes (exporter.h).
  bool operator==(const DraStatus&) const = default;
};

}  // namespace polyaccel
