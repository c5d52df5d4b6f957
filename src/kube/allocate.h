// Allocate: what a container gets for the devices kubelet assigned it. Pure: the HostModel,
// the resource, the device nodes read at start and the ids in; environment, device nodes and
// annotations out.
//
//   NVIDIA  NVIDIA_VISIBLE_DEVICES=<GPU or MIG UUIDs>; with device specs also
//           CUDA_VISIBLE_DEVICES=<UUIDs> and /dev/nvidia<N>, /dev/nvidiactl, /dev/nvidia-uvm*
//   AMD     /dev/kfd and each GPU's /dev/dri/card<N> and /dev/dri/renderD<N>
//   Gaudi   /dev/accel/accel<N> and accel_controlD<N>; HABANA_VISIBLE_DEVICES=<minors>,
//           HL_VISIBLE_DEVICES=</dev/accel/accel<N>>, HL_VISIBLE_DEVICES_UUID=<serials>
//   all     the NICs NCCL should use for the allocated devices (discover/links nccl_nics):
//           NCCL_IB_HCA/UCX_NET_DEVICES for InfiniBand and RoCE, FI_PROVIDER (efa, cxi) for EFA
//           and Slingshot
//           with gpu_rdma_devices also those NICs' /dev/infiniband nodes (below)
//   CDI     with the cdi-cri device list strategy (auto's choice where the runtime has CDI on):
//           polyaccel.io/gpu=<id> (hpu for Gaudi), the id the device is advertised under, as
//           named in `polyaccel cdi generate`'s specs
//   NICs    shared HCAs and SR-IOV VFs (nic_resources.h): /dev/infiniband/rdma_cm and each chosen
//           HCA's uverbsN, umadN and issmN; NCCL_IB_HCA and UCX_NET_DEVICES naming the chosen
//           HCAs; for VFs PCIDEVICE_<RESOURCE>=<VF addresses> (the sriov-network-device-plugin's
//           variable, read by SR-IOV CNI users) and POLYACCEL_VF_NETDEVS=<their netdevs>
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "discover/container_runtime.h"
#include "kube/device_nodes.h"
#include "kube/resources.h"

namespace polyaccel {

struct DeviceNodeSpec {
  std::string container_path;
  std::string host_path;
  std::string permissions = "rw";
  bool operator==(const DeviceNodeSpec&) const = default;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<DeviceNodeSpec> devices;
  std::vector<std::string> cdi_devices;  // fully qualified: "polyaccel.io/gpu=GPU-..."
  std::map<std::string, std::string> annotations;
};

// How a container is told its accelerators, as NVIDIA's device plugin's --device-list-strategy:
// the vendor's variables and device nodes (envvar, the default), and/or the CDI devices of
// polyaccel's node specs in ContainerAllocateResponse.cdi_devices (cdi-cri: containerd 1.7+ and
// CRI-O apply them when CDI is enabled). With cdi-cri alone the spec gives the device nodes and
// variables; the NIC variables (NCCL_IB_HCA ...) are set either way.
struct DeviceListStrategy {
  bool envvar = true;
  bool cdi_cri = false;
};
// "envvar", "cdi-cri" or both, comma-separated.
Result<DeviceListStrategy> parse_device_list_strategy(const std::string& text,
                                                      const std::string& input);
// "envvar", "cdi-cri", "envvar,cdi-cri".
std::string to_string(const DeviceListStrategy& strategy);

// The strategy Allocate uses, and why: said once in the agent's log.
struct DeviceListChoice {
  DeviceListStrategy strategy;
  std::string reason;
};
// `auto` (the agent's default) decides from the container runtime's configuration, by the rules
// of the audit's runtime family (cdi_enabled): envvar,cdi-cri where every runtime installed
// (containerd, CRI-O) has CDI on and a polyaccel.io spec of `polyaccel cdi generate` is in a
// directory it reads (a CDI device without its spec fails the container's start), else envvar.
// Anything else is parse_device_list_strategy's, as the operator set it.
Result<DeviceListChoice> choose_device_list_strategy(const std::string& text,
                                                     const std::string& input,
                                                     const ContainerRuntimeFacts& runtime);

struct AllocateOptions {
  DeviceListStrategy device_list;
  // NVIDIA: pass /dev/nvidia* device specs too, as NVIDIA's passDeviceSpecs (for containers
  // that do not go through the NVIDIA container runtime). AMD and Gaudi always get them.
  bool nvidia_device_specs = false;
  // Where device nodes are on the host ("/dev"); the container always sees /dev.
  std::string dev_root = "/dev";
  bool nccl_ib_hca = true;
  // GPUs: also the /dev/infiniband nodes of the HCAs NCCL_IB_HCA names, for clusters that run no
  // NIC plugin (agent --gpu-rdma-devices).
  bool gpu_rdma_devices = false;
};

// One container's response. An id that is not a device of the resource, more than one device
// where failRequestsGreaterThanOne is set, or a device whose nodes are unknown where the vendor
// needs them (AMD, Gaudi) is an Error.
Result<ContainerAllocation> compute_allocation(const HostModel& model,
                                               const PluginResource& resource,
                                               const std::vector<DeviceNodes>& nodes,
                                               const std::vector<std::string>& device_ids,
                                               const AllocateOptions& options,
                                               const NicNodes& nic_nodes = NicNodes{});

// The RDMA devices ("mlx5_0") of the NICs NCCL should use for these accelerators (nccl_nics:
// within their node or socket), in the model's NIC order; NICs that NCCL's IB transport does not
// drive (EFA, Slingshot) are left out: their plugins read FI_PROVIDER instead.
std::vector<std::string> closest_rdma_devices(const HostModel& model,
                                              const std::vector<size_t>& accelerators);

}  // namespace polyaccel
