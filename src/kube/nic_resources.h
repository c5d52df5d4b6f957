// RDMA NICs as Kubernetes resources, from one config file with two lists that keep the schemas of
// the plugins they stand in for, so that their users can bring their config:
//
//   resourceList  SR-IOV VF pools, as the sriov-network-device-plugin's (netDevice): each VF is an
//                 exclusive device, its ID the VF's PCI address, its TopologyInfo its NUMA node.
//   configList    shared HCAs, as the RDMA shared device plugin's: rdmaHcaMax pods share each
//                 selected HCA (PF), its devices "<hca>::<n>"; unlike that plugin, each carries
//                 the HCA's NUMA node, so the Topology Manager can align it with a GPU.
//
//   resourceList:
//   - resourceName: cx7_vfs            # resourcePrefix defaults to intel.com, as upstream
//     resourcePrefix: example.com
//     selectors: {vendors: ["15b3"], devices: ["101e"], drivers: [mlx5_core],
//                 pfNames: ["ens1f0#0-3"], rootDevices: ["0000:60:00.0"],
//                 linkTypes: [ether], isRdma: true}
//   configList:
//   - resourceName: hca_shared         # resourcePrefix defaults to rdma, as upstream
//     rdmaHcaMax: 100
//     selectors: {vendors: ["15b3"], deviceIDs: ["1021"], ifNames: [ib0], linkTypes: [infiniband]}
//
// Unknown keys, and keys of those schemas that polyaccel does not implement, are refused with
// file:line. Pure: the config text and the HostModel in, resources out.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "kube/device_nodes.h"
#include "kube/resources.h"

namespace polyaccel {

// One selector object: every list given must match (an empty list matches anything), any entry
// of a list may.
struct NicSelector {
  std::vector<std::uint16_t> vendors;      // vendors
  std::vector<std::uint16_t> devices;      // devices (VF pools) / deviceIDs (shared HCAs)
  std::vector<std::string> drivers;        // the function's bound driver
  std::vector<std::string> pci_addresses;  // pciAddresses (VF pools)
  std::vector<std::string> pf_names;       // pfNames, "ens1f0" or "ens1f0#0-3,6" (VF pools)
  std::vector<std::string> root_devices;   // rootDevices: PF PCI addresses (VF pools)
  std::vector<std::string> if_names;       // ifNames: PF netdevs (shared HCAs)
  std::vector<std::string> link_types;     // linkTypes: "ether", "infiniband"
  std::optional<bool> is_rdma;             // isRdma (VF pools)
};

struct NicPool {
  std::string resource;  // "<resourcePrefix>/<resourceName>"
  ResourceKind kind = ResourceKind::sriov_vf;
  unsigned max_pods = 1;               // rdmaHcaMax (shared HCAs)
  bool exclude_topology = false;       // excludeTopology (VF pools): no TopologyInfo
  std::vector<NicSelector> selectors;  // any of them
  unsigned line = 0;                   // where it is in the file, for messages
};

struct NicConfig {
  std::string source;
  std::vector<NicPool> pools;
};

Result<NicConfig> parse_nic_config(const std::string& text, const std::string& source);
// The file (--nic-config) read as every input file is, then parsed.
Result<NicConfig> read_nic_config(const std::string& path);

// The resources of the pools, in config order, with what sysfs says beyond the HostModel (bound
// drivers, VF PCI ids: device_nodes.h). A VF or HCA that two pools select is an Error.
Result<std::vector<PluginResource>> plan_nic_resources(const HostModel& model,
                                                       const NicConfig& config,
                                                       const NicNodes& sysfs);

// The RDMA devices and netdevs a NIC device stands for: the HCA of a shared replica, the VF's own.
std::vector<std::string> nic_device_hcas(const HostModel& model, const PluginDevice& device);
std::vector<std::string> nic_device_netdevs(const HostModel& model, const PluginDevice& device);

// GetPreferredAllocation for a NIC resource: `size` of `available`, must_include first; then the
// devices nearest to `pod_gpus` (indexes into HostModel::accelerators: the GPUs the same pod got,
// where the plugin knows them) by the link level in the HostModel (PIX/PXB: the same PCIe switch,
// PHB, NODE: the same NUMA node), the NICs in those GPUs' closest_nics first; then, for shared
// HCAs, the least used HCA (fewest of its replicas already taken); then the lowest index.
// Errors as choose_preferred_allocation's.
Result<std::vector<std::string>> choose_nic_allocation(const HostModel& model,
                                                       const PluginResource& resource,
                                                       const std::vector<size_t>& pod_gpus,
                                                       const std::vector<std::string>& available,
                                                       const std::vector<std::string>& must_include,
                                                       size_t size);

}  // namespace polyaccel
