// The host half of the agent's background sampling: per NUMA node memory and numastat,
// hugepages per node and size, PCIe link state of accelerators and NICs, the placement state
// (src/place) every interval, and the tuning audit (src/audit) at a slower interval. Read through
// a root (node_exporter's --path.sysfs habit) and published as an immutable snapshot.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/finding.h"
#include "core/host_model.h"
#include "discover/accel/monitor.h"
#include "discover/rdma_ports.h"

namespace polyaccel::exporter {

struct NumaNodeSample {
  unsigned node = 0;
  std::optional<std::uint64_t> memory_total_bytes;  // nodeN/meminfo MemTotal
  std::optional<std::uint64_t> memory_free_bytes;   // nodeN/meminfo MemFree
  std::map<std::string, std::uint64_t> numastat;    // numa_hit, numa_miss, other_node, ...
};

// One port of an RDMA NIC of the model, with what the rest of the project knows of its NIC.
struct RdmaPortSample {
  std::string nic;  // "nic3"
  std::string pci_bus_id;
  std::optional<unsigned> numa_node;  // the NIC's DRAM node (discover/links.h dram_node)
  // The accelerators NCCL pairs with this NIC (discover/links.h nccl_nics: the pairing that
  // `polyaccel nccl`, `run` and Allocate use), comma-joined ids; empty: no GPU's NIC.
  std::string gpus;
  RdmaPortReading reading;
};

// What the committed placements hold on one NUMA node with CPUs.
struct PlacementNodeSample {
  unsigned node = 0;
  unsigned pinnable_pus = 0;       // PUs a placement may pin (all of the node's on a legacy host)
  unsigned pinned_pus = 0;         // PUs held alone by a placement
  std::uint64_t memory_bytes = 0;  // guest memory placed on the node
  struct Pages {
    std::uint64_t size_bytes = 0;
    std::uint64_t held = 0;  // pages held by placements
  };
  std::vector<Pages> hugepages;  // per huge page size of the node
};

struct PlacementDeviceSample {
  std::string id;  // "gpu0", "nic3"
  std::string pci_bus_id;
  std::optional<unsigned> node;
  bool held = false;
};

// The allocation state (place::AllocationStore) as it was at `time`.
struct PlacementSample {
  std::chrono::system_clock::time_point time{};  // epoch: not read (no state file configured)
  std::string error;  // the state is broken or does not fit this host: collector success 0
  std::size_t allocations = 0;
  std::vector<PlacementNodeSample> nodes;
  std::vector<PlacementDeviceSample> devices;  // every device a placement may hold
};

// One run of the tuning audit: how many findings of each id and severity.
struct AuditSample {
  std::chrono::system_clock::time_point time{};  // epoch: not run yet
  double duration_seconds = 0;
  std::vector<std::string> ids;  // every id the checks can give
  std::map<std::pair<std::string, Severity>, unsigned> counts;
  // The check ids that could not run for lack of a fact (audit_coverage): a clean count there
  // means "not checked", not "fine".
  std::set<std::string> unchecked;
};

struct HostSample {
  std::chrono::system_clock::time_point time{};  // epoch: not read yet
  // The model with hugepages and PCIe links as read at `time`; never null.
  std::shared_ptr<const HostModel> host;
  std::vector<NumaNodeSample> numa;
  std::vector<RdmaPortSample> rdma_ports;  // every port of every RDMA device of the model's NICs
  // Never null: "not read" until the sampler fills them.
  std::shared_ptr<const PlacementSample> placement = std::make_shared<const PlacementSample>();
  std::shared_ptr<const AuditSample> audit = std::make_shared<const AuditSample>();
};

// Reads one HostSample now (the sampler's step; also for tests and bench). The placement and
// audit parts are left empty: read_placement and run_host_audit fill them.
HostSample read_host_sample(const HostModel& host, const std::string& root);

// The allocation state at `state_path` against `host` (as just refreshed). An absent file is
// nothing allocated; a broken file, or one naming PUs or devices this host lacks, sets `error`.
// libvirt's running guests in `libvirt_status_dir` (place/libvirt_domains.h) count with it; empty:
// none.
PlacementSample read_placement(const HostModel& host, const std::string& state_path,
                               const std::string& libvirt_status_dir = {});

// The tuning audit of the host under `root` with the given accelerator samples.
AuditSample run_host_audit(const HostModel& host, const std::string& root,
                           const std::vector<AcceleratorSample>& samples);

// The last sample of every device of a monitor snapshot (what the audit judges).
std::vector<AcceleratorSample> last_samples(const AcceleratorSnapshot& snapshot);

// What the sampler reads beyond the host's own files; set before start().
struct HostSamplerExtras {
  std::string state_path;  // the allocation state; empty: no placement metrics
  // Between two audits; zero: no audit (also when the root is empty: nothing to read).
  std::chrono::milliseconds audit_interval{0};
  // The accelerator samples the audit judges (the monitor's last ones); may be empty.
  std::function<std::vector<AcceleratorSample>()> accelerator_samples;
  // The host with the vendor libraries' inventory merged in (the monitor's model): the audit
  // judges the accelerators' settings (persistence, MIG, ECC) as `polyaccel audit` does. Null
  // or absent: the sampler's own model.
  std::function<std::shared_ptr<const HostModel>()> accelerator_model;
};

class HostSampler {
 public:
  // `root`: "/" for the live host, a captured tree in tests; empty reads nothing but the model.
  HostSampler(HostModel host, std::string root, std::chrono::milliseconds interval);
  ~HostSampler();
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  void set_extras(HostSamplerExtras extras);  // before start()
  // Takes the first sample now (so the first scrape has it), then samples in the background.
  void start();
  void stop();
  std::shared_ptr<const HostSample> snapshot() const;

 private:
  void run();
  void sample_once();

  const HostModel host_;
  bool audited_accelerators_ = false;  // the last audit had the accelerators' inventory
  const std::string root_;
  const std::chrono::milliseconds interval_;
  HostSamplerExtras extras_;
  std::shared_ptr<const AuditSample> last_audit_;
  std::chrono::steady_clock::time_point last_audit_at_{};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const HostSample> snapshot_;
};

}  // namespace polyaccel::exporter
