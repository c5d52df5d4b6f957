// The resources the device plugin advertises, and their devices: a pure function of the
// HostModel, the MIG strategy and the sharing config (NVIDIA's names, ../shared/reference/
// nvidia.md 1.2; AMD's and Habana's, amd-gaudi-sriov.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "share/time_slicing.h"

namespace polyaccel {

// How MIG devices are advertised, as NVIDIA's plugin has it.
enum class MigStrategy {
  none,    // whole GPUs only, MIG devices ignored
  single,  // every MIG device as nvidia.com/gpu; all of one profile
  mixed,   // nvidia.com/mig-<profile> per profile, whole GPUs as nvidia.com/gpu
};
const char* to_string(MigStrategy strategy);
Result<MigStrategy> parse_mig_strategy(const std::string& text, const std::string& input);

// One device of a resource, as kubelet sees it.
struct PluginDevice {
  std::string id;             // Device.ID: a UUID, PCI bus id or serial, "::<n>" for a replica
  size_t accelerator = 0;     // index into HostModel::accelerators of the physical device
  std::optional<size_t> mig;  // index into its inventory's mig_instances
  unsigned replica = 0;       // which replica of a shared device, 0 when not shared
  std::string visible_id;     // what the container is told: GPU or MIG UUID, bus id, serial
  std::vector<unsigned> numa_nodes;  // empty when unknown (no TopologyInfo is sent then)
  // A GPU the host's PCI topology holds that its vendor library did not answer for when the
  // model was made (lost before the agent started): advertised Unhealthy under its PCI bus id,
  // so that the node's capacity stays true; it returns under its UUID once the library lists it.
  bool lost = false;
  // NIC resources (nic_resources.h): the NIC (index into HostModel::nics), and the VF (index into
  // its pci.sriov->vfs) for an SR-IOV pool; unset for accelerators.
  std::optional<size_t> nic;
  std::optional<size_t> vf;
};

// What a resource's devices are.
enum class ResourceKind {
  accelerator,  // GPUs, MIG devices, replicas, Gaudi HPUs
  shared_hca,   // replicas of whole RDMA HCAs (PFs) that many pods share
  sriov_vf,     // SR-IOV virtual functions, one pod each
};

struct PluginResource {
  std::string name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", ...
  ResourceKind kind = ResourceKind::accelerator;
  Vendor vendor = Vendor::other;
  SharingStrategy sharing = SharingStrategy::none;
  unsigned max_replicas = 1;  // the most replicas of one physical device
  bool renamed = false;       // a shared resource under its own name (rename, renameByDefault)
  bool fail_requests_greater_than_one = false;
  ReplicaPolicy policy = ReplicaPolicy::spread;
  std::vector<PluginDevice> devices;

  const PluginDevice* device(const std::string& id) const;
  // The unix socket's file name under the kubelet directory: "polyaccel-nvidia.com_gpu.sock".
  std::string socket_name() const;
};

// The id the device plugin advertises an accelerator (or one of its MIG instances) under, which
// is also what the container is told and the name of its alias in polyaccel's CDI specs
// (`polyaccel cdi generate`): the GPU or MIG UUID for NVIDIA (the PCI bus id of a GPU that NVML
// did not answer for), the PCI bus id for AMD, the board serial (else the bus id) for Gaudi.
std::string device_plugin_id(const Accelerator& accelerator, std::optional<size_t> mig = {});

// The fully qualified CDI device of a device plugin device in polyaccel's node specs:
// "polyaccel.io/gpu=<device_plugin_id>" ("polyaccel.io/hpu=..." for Gaudi).
std::string cdi_device_name(const HostModel& model, const PluginDevice& device);

struct ResourceOptions {
  MigStrategy mig_strategy = MigStrategy::none;
  const SharingConfig* sharing = nullptr;  // none: no device is shared
};

// Every resource of the host, sorted by name. NVIDIA GPUs need their vendor library (a UUID):
// where NVML answered for others but not for a GPU of the topology, that one is `lost`;
// AMD GPUs and Gaudi devices are advertised from the topology alone when it is absent. Errors:
// the single strategy on a node it cannot describe, an MPS sharing config (not run here), a
// device that two sharing entries select.
Result<std::vector<PluginResource>> plan_resources(const HostModel& model,
                                                   const ResourceOptions& options);

}  // namespace polyaccel
