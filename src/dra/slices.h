// The DRA devices of a node and the ResourceSlice objects (resource.k8s.io/v1) that publish them:
// a pure function of the HostModel (../shared/reference/kubernetes/dra-kubelet-api.md 4, the
// OpenAPI schema next to it).
//
//   gpu-<i>                 a whole GPU (NVIDIA, AMD) or HPU (hpu-<i>, Gaudi)
//   gpu-<i>-mig-<profile>-s<start>  a MIG instance that exists (consumes nothing: it is a device
//                           of its own), or with MigDevices::all a placement that fits what the
//                           existing instances leave free: it consumes memory slices, compute
//                           slices and the media extension of its GPU's counter set, which holds
//                           only what is free, so no two allocated placements overlap each other
//                           or an existing instance
//   gpu-<i>-part-<k>        an AMD compute partition (CPX, QPX ...): consumes its GPU's counters
//   nic-<k>, nic-<k>-vf-<n> an RDMA NIC and its SR-IOV virtual functions; with
//                           SliceOptions::nic_shares a NIC (not a VF) is shared: it allows
//                           multiple allocations and has a capacity "shares" of that many, one
//                           consumed by each allocation unless its request asks for more
//                           (DRAConsumableCapacity, docs/dra.md)
//   cpu-<n>, cpu-numa-<n>,  CPUs (a core with its SMT siblings, or a NUMA node's cores) and a
//   memory-numa-<n>         NUMA node's memory and hugepages, opt-in (CpuDeviceOptions,
//                           cpu_devices.h)
//
// Every device carries resource.kubernetes.io/{pciBusID, pcieRoot, numaNode} where the model
// knows them (numaNode is left out, never guessed, when the device has no single NUMA node) and
// polyaccel.io attributes (docs/dra.md). The pool is split into as many slices as the API's
// per-slice limits need; where its counter sets go depends on the Kubernetes version
// (CounterLayout).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel::dra {

inline constexpr const char* kDriverName = "polyaccel.io";
inline constexpr const char* kStandardPrefix = "resource.kubernetes.io/";
inline constexpr const char* kUnhealthyTaint = "polyaccel.io/unhealthy";
// --json schema of `polyaccel dra slices` (docs/dra.md).
inline constexpr int kSlicesSchemaVersion = 1;

// The limits of resource.k8s.io/v1 (ResourceSliceSpec, Device, CounterSet; k8s.io/api
// resource/v1 types.go and kube-apiserver's validation of each version).
inline constexpr size_t kMaxDevicesPerSlice = 128;
// Kubernetes 1.35 and later allow only 64 devices in a slice where one has taints or consumes
// counters; kept for 1.34 too (which allows 128).
inline constexpr size_t kMaxDevicesPerSliceWithCountersOrTaints = 64;
// 1.34 (counter sets beside their devices):
inline constexpr size_t kMaxSharedCountersPerSlice = 32;      // all counters of all sets
inline constexpr size_t kMaxConsumedCountersPerSlice = 1024;  // all counters of all devices
inline constexpr size_t kMaxConsumedCountersPerDevice = 32;   // all sets a device consumes
// 1.35 and later (counter sets in slices of their own):
inline constexpr size_t kMaxCounterSetsPerSlice = 8;
inline constexpr size_t kMaxCountersPerCounterSet = 32;
inline constexpr size_t kMaxCounterSetsPerDevice = 2;      // consumesCounters entries
inline constexpr size_t kMaxCountersPerConsumption = 32;   // counters of one of them
inline constexpr size_t kMaxAttributesAndCapacities = 32;  // per device
inline constexpr size_t kMaxTaintsPerDevice = 4;
inline constexpr size_t kMaxAttributeValueLength = 64;
inline constexpr size_t kMaxDnsLabelLength = 63;

struct Attribute {
  enum class Kind { integer, boolean, string, version };
  Kind kind = Kind::string;
  std::int64_t integer = 0;
  bool boolean = false;
  std::string text;  // string and version

  static Attribute of_int(std::int64_t v) { return {Kind::integer, v, false, {}}; }
  static Attribute of_bool(bool v) { return {Kind::boolean, 0, v, {}}; }
  static Attribute of_string(std::string v);  // cut to kMaxAttributeValueLength
  bool operator==(const Attribute&) const = default;
};

struct CounterConsumption {
  std::string counter_set;
  std::map<std::string, std::string> counters;  // name → Quantity
  bool operator==(const CounterConsumption&) const = default;
};

// A capacity's requestPolicy (DRAConsumableCapacity): what one allocation of a device that allows
// multiple allocations consumes by default, and the range a request may ask for.
struct CapacityRequestPolicy {
  std::string default_value, min, max, step;  // Quantities
  bool operator==(const CapacityRequestPolicy&) const = default;
};

// A NIC's capacity of shares (SliceOptions::nic_shares).
inline constexpr const char* kSharesCapacity = "shares";
// The most shares a NIC offers: the RDMA shared device plugin's default rdmaHcaMax is 1000.
inline constexpr unsigned kMaxNicShares = 1000;

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule or NoExecute
  bool operator==(const Taint&) const = default;
};

enum class DeviceKind { gpu, mig, gpu_partition, hpu, nic, vf, cpu, memory };
const char* to_string(DeviceKind kind);

struct Device {
  std::string name;  // a DNS label, unique in the pool
  std::map<std::string, Attribute> attributes;
  std::map<std::string, std::string> capacity;  // name → Quantity
  std::vector<CounterConsumption> consumes;
  std::vector<Taint> taints;
  // allowMultipleAllocations, and the requestPolicy of capacities (by capacity name).
  bool allow_multiple_allocations = false;
  std::map<std::string, CapacityRequestPolicy> request_policy;

  // What prepare and CDI need; not published.
  DeviceKind kind = DeviceKind::gpu;
  size_t accelerator = 0;              // index into HostModel::accelerators (gpu, mig, partition)
  size_t nic = 0;                      // index into HostModel::nics (nic, vf)
  std::optional<size_t> mig_instance;  // index into the inventory's mig_instances, if it exists
  std::string mig_profile;             // "3g.40gb"
  unsigned mig_start = 0, mig_size = 0;
  unsigned partition = 0;    // AMD partition index
  std::optional<size_t> vf;  // index into the NIC's sriov->vfs
  CpuSet cpus;               // cpu: the CPUs it grants
  unsigned numa_node = 0;    // cpu, memory: its NUMA node

  bool published_equal(const Device& o) const {
    return name == o.name && attributes == o.attributes && capacity == o.capacity &&
           consumes == o.consumes && taints == o.taints &&
           allow_multiple_allocations == o.allow_multiple_allocations &&
           request_policy == o.request_policy;
  }
};

struct CounterSet {
  std::string name;                             // a DNS label
  std::map<std::string, std::string> counters;  // name (DNS label) → Quantity
  bool operator==(const CounterSet&) const = default;
};

struct Slice {
  std::vector<CounterSet> shared_counters;
  std::vector<Device> devices;
};

// Which MIG devices a MIG-enabled GPU publishes.
enum class MigDevices {
  existing,  // the instances that exist now (made by `polyaccel mig apply`), default
  all,       // the existing instances and every placement that fits beside them, for a scheduler
             // that may pick any (the counters keep overlapping ones apart); prepare makes the
             // instance (docs/dra.md)
};

// Where a pool's counter sets go. kube-apiserver refuses the other layout (422), so the publisher
// asks the server which one it takes (publisher.h).
enum class CounterLayout {
  // Kubernetes 1.35 and later: counter sets in slices of their own ("only one of
  // `sharedCounters` or `devices` is allowed"), the devices in the others; a device consumes
  // counter sets of any slice of its pool. Those slices count in resourceSliceCount.
  own_slices,
  // Kubernetes 1.34: a counter set in the slice of the devices that consume it (a device "must
  // reference a counterSet defined in the ResourceSlice sharedCounters"); a GPU's counter set
  // and its devices are never split.
  with_devices,
};
const char* to_string(CounterLayout layout);

// CPUs as DRA devices (cpu_devices.h), at one grain: what a pinned container wants is whole
// cores (the SMT siblings together: no other pod's thread shares its core's caches and ports);
// a large pod takes a NUMA node's cores at once.
enum class CpuGrain {
  off,   // no CPU devices (default)
  core,  // cpu-<first CPU>: one core with its SMT siblings
  numa,  // cpu-numa-<n>: every offered core of NUMA node n
};
const char* to_string(CpuGrain grain);

struct CpuDeviceOptions {
  CpuGrain grain = CpuGrain::off;
  bool memory = false;  // memory-numa-<n>: a NUMA node's memory and hugepages
  // Never offered: kubelet's reserved set (--reserved-cpus), isolcpus/nohz_full and the agent's
  // own CPUs; a core with any of them is left out whole.
  CpuSet reserved;
};

struct SliceOptions {
  std::string node;  // the Node's name: the pool name and spec.nodeName
  std::string driver = kDriverName;
  MigDevices mig = MigDevices::existing;
  // false: the API server drops sharedCounters and consumesCounters (DRAPartitionableDevices
  // off): no counters, and only devices that cannot be over-committed without them (whole GPUs,
  // existing MIG instances, AMD partitions), whatever `mig` says.
  bool counters = true;
  CounterLayout layout = CounterLayout::own_slices;
  // Devices by PCI bus id that are unhealthy now: tainted NoSchedule (or left out, withdraw).
  std::set<std::string> unhealthy;
  bool withdraw_unhealthy = false;
  // 0: every RDMA NIC is allocated whole to one claim. 2 to kMaxNicShares: each RDMA NIC (its
  // physical function) allows that many allocations at once (capacity "shares", one per
  // allocation by default), as the RDMA shared device plugin's rdmaHcaMax; a server without
  // DRAConsumableCapacity drops the fields (publisher.h, ServerFields::shares) and then the NICs
  // are published whole.
  unsigned nic_shares = 0;
  CpuDeviceOptions cpu;
};

struct Pool {
  std::string driver, node;
  std::vector<Slice> slices;
  // Every device in slice order, for lookups by name.
  const Device* device(const std::string& name) const;
  size_t device_count() const;
};

// The ids the exporter knows each GPU, HPU and MIG instance of the pool by (core/dra_status.h:
// a bus id, a MIG UUID), by device name, appended to `out`. Devices no monitored series stands
// for (partitions, NICs, CPUs, memory, placements of MIG instances not made yet) have none.
void monitored_ids(const HostModel& model, const Pool& pool,
                   std::map<std::string, std::vector<std::string>>& out);

// The node's pool. Errors: an empty or invalid node name, a GPU whose counter set (with its
// devices, for with_devices) alone breaks a per-slice limit (cannot be published at all).
Result<Pool> build_pool(const HostModel& model, const SliceOptions& options);

// The name of slice `index` of the pool: "<node>-polyaccel-<index>" (a DNS subdomain).
std::string slice_name(const Pool& pool, size_t index);

// The ResourceSlice object of slice `index`, as the API server takes it (apiVersion, kind,
// metadata.name, spec). `generation` is the pool generation. A slice of counter sets only has no
// `devices` field at all (1.35's server takes even an empty list for devices set).
nlohmann::json slice_json(const Pool& pool, size_t index, std::int64_t generation);

// A Kubernetes Quantity for a byte count: "80Gi", "40192Mi", or the plain number.
std::string bytes_quantity(std::uint64_t bytes);

// Whether text is a DNS label (RFC 1123: a-z, 0-9, '-', at most 63, alphanumeric ends).
bool is_dns_label(const std::string& text);
bool is_dns_subdomain(const std::string& text);

}  // namespace polyaccel::dra
