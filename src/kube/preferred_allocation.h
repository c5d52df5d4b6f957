// GetPreferredAllocation: which of the available devices a container should get. Pure: the
// host's link facts, the resource's devices and kubelet's request in, device ids out.
//
// A device of a resource is a whole accelerator, a MIG instance or a time-slicing replica; the
// choice is made among physical accelerators and then filled with their devices, so replicas of
// distinct accelerators are handed out first (spread) and MIG instances follow their parent.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

// Pairwise facts between the host's accelerators, computed once per HostModel.
class AllocationTopology {
 public:
  static AllocationTopology from_model(const HostModel& model);

  size_t size() const { return numa_.size(); }
  // Higher is better: 100 per NVLink (an XGMI link counts as one, its count when known), plus
  // the PCIe level below it: PIX 50, PXB 40, PHB 30, NODE 20, SYS 10.
  int link_score(size_t a, size_t b) const { return link_[a * size() + b]; }
  // The NUMA distance between the two accelerators' nodes (10 when they share one); the largest
  // distance of the host when either node is unknown.
  int numa_distance(size_t a, size_t b) const { return distance_[a * size() + b]; }
  // The accelerator's NUMA nodes, empty when unknown.
  const std::vector<unsigned>& numa_nodes(size_t a) const { return numa_[a]; }

 private:
  std::vector<int> link_;
  std::vector<int> distance_;
  std::vector<std::vector<unsigned>> numa_;
};

// One device a resource advertises.
struct DeviceSlot {
  std::string id;      // the Device.ID kubelet sees
  size_t accelerator;  // index into HostModel::accelerators of its physical device
};

struct PreferredAllocationRequest {
  std::vector<std::string> available;     // kubelet's available_deviceIDs
  std::vector<std::string> must_include;  // must_include_deviceIDs, a subset of available
  size_t size = 0;                        // allocation_size
  // Replicas: fill the most used accelerators first instead of spreading over distinct ones.
  bool packed = false;
};

// Chooses `size` ids among `available`, keeping every must_include id. Among the physical
// accelerators it takes as many distinct ones as it can and prefers, in this order: the best
// links between them (sum of link_score), fewest NUMA nodes, shortest NUMA distances, the least
// used accelerators (replicas already handed out), and then the choice that leaves the remaining
// accelerators best linked to each other (least fragmented). Ties go to the lowest indexes.
// An id that is not one of `devices`, a must_include id not in `available`, or a size that
// cannot be met is an Error (bad_input).
Result<std::vector<std::string>> choose_preferred_allocation(
    const AllocationTopology& topology, const std::vector<DeviceSlot>& devices,
    const PreferredAllocationRequest& request);

}  // namespace polyaccel
