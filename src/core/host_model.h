// HostModel: everything discovery learned about one host, as one immutable value (DESIGN.md).
// Built by discover/, read by every other module. Plain data: no pointers into hwloc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cpuset.h"
#include "core/pci_address.h"

namespace polyaccel {

inline constexpr int kHostModelSchemaVersion = 1;

enum class NumaKind {
  dram,        // ordinary memory with CPUs
  hbm,         // high-bandwidth memory (Xeon Max flat mode, MCDRAM)
  gpu_memory,  // accelerator memory exposed as a NUMA node (POWER9 + V100, Grace Hopper)
  cpuless,     // another node without CPUs (persistent memory, an unlabelled expander, unknown)
  cxl,         // CPU-less memory behind CXL (a memory expander), as hwloc labels it
};
const char* to_string(NumaKind kind);

struct Hugepages {
  std::uint64_t size_bytes = 0;
  std::uint64_t total = 0;
  std::optional<std::uint64_t> free;  // unknown for an hwloc XML capture
};

struct NumaNode {
  unsigned os_index = 0;
  std::uint64_t memory_bytes = 0;
  CpuSet cpus;        // PUs of this node, as its sysfs cpulist: empty for HBM/GPU/CPU-less nodes
  CpuSet local_cpus;  // PUs closest to it (its hwloc locality); equals cpus for DRAM nodes
  NumaKind kind = NumaKind::dram;
  std::string subtype;               // hwloc's subtype when it gave one ("HBM", "GPUMemory")
  std::vector<Hugepages> hugepages;  // one entry per size larger than the base page
};

struct Core {
  unsigned os_index = 0;  // as the kernel's core_id: unique within a package only
  unsigned package = 0;   // the package's OS index
  CpuSet pus;             // its SMT siblings
  // hwloc's logical index of the L3 cache it shares (an AMD CCX, an Intel socket or SNC
  // domain); none when hwloc reports no L3.
  std::optional<unsigned> l3_cache;
};

struct Package {
  unsigned os_index = 0;
  std::string model;  // CPUModel
  // x86 CPUID identity as hwloc reports it ("GenuineIntel", family 6, model 143); NCCL tunes by it.
  std::string vendor;
  std::optional<unsigned> family;
  std::optional<unsigned> model_number;
  CpuSet cpus;
  std::vector<unsigned> numa_nodes;
};

// A PCIe switch on a device's path, named by its upstream port.
struct PciSwitch {
  PciAddress upstream_port;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t subsystem_vendor_id = 0;  // NCCL tells Broadcom PEX generations apart by these
  std::uint16_t subsystem_device_id = 0;
};

struct PciLink {
  // Zero when unknown. hwloc records only the bandwidth (GB/s, both ways summed over the lanes);
  // sysfs gives speed (GT/s) and width, current and maximum.
  double bandwidth_gbps = 0;
  double speed_gts = 0;
  unsigned width = 0;
  double max_speed_gts = 0;
  unsigned max_width = 0;
};

struct OsDevice {
  std::string name;       // "nvml0", "mlx5_0", "ib0", "rsmi3", "renderD128"
  std::string type;       // "gpu", "network", "openfabrics", "coproc", "block", "dma"
  std::string subtype;    // "CUDA", "NVML", "RSMI", "Slingshot", ...
  std::string node_guid;  // an RDMA device's NodeGUID, "043f:7203:00ae:a282"; empty otherwise
};

// A virtual function of an SR-IOV physical function, as sysfs shows it (virtfnN links).
struct VirtualFunction {
  unsigned index = 0;  // N of virtfnN
  PciAddress address;
  std::optional<unsigned> numa_node;      // absent when the firmware gives none (-1)
  std::vector<std::string> netdevs;       // "enp96s0f0v0"
  std::vector<std::string> rdma_devices;  // "mlx5_4"
  std::string driver;                     // bound driver: "mlx5_core", "vfio-pci", or ""
};

// SR-IOV capability of a physical function: sriov_totalvfs, sriov_numvfs and the enabled VFs.
struct Sriov {
  unsigned total_vfs = 0;
  unsigned num_vfs = 0;
  std::vector<VirtualFunction> vfs;
};

struct PciDevice {
  PciAddress address;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t subsystem_vendor_id = 0;
  std::uint16_t subsystem_device_id = 0;
  std::uint16_t class_id = 0;  // class and subclass: 0x0302 is a 3D controller
  std::uint8_t revision = 0;
  std::string vendor_name;  // from pci.ids when it is installed, else empty
  std::string device_name;
  PciLink link;
  // Where it hangs: the host bridge (index into HostModel::host_bridges), the root port right
  // below it (absent for a device on the host bridge's own bus) and the PCIe switches between,
  // top down.
  int host_bridge = -1;
  std::optional<PciAddress> root_port;
  std::vector<PciSwitch> switches;
  // Locality, from the nearest non-I/O ancestor: may hold a DRAM and an HBM node.
  CpuSet local_cpus;
  std::vector<unsigned> numa_nodes;
  std::vector<OsDevice> os_devices;
  std::optional<Sriov> sriov;                   // set for an SR-IOV capable physical function
  std::optional<PciAddress> physical_function;  // set for a virtual function: its PF
  // Its IOMMU group (sys/bus/pci/devices/X/iommu_group), absent when the IOMMU is off or the
  // source is an hwloc capture; the group's members are in HostModel::iommu_groups.
  std::optional<unsigned> iommu_group;
};

// One PCI function of an IOMMU group, as sysfs shows it.
struct IommuGroupMember {
  PciAddress address;
  std::uint32_t class_code = 0;  // class, subclass, prog-if: 0x060400 is a PCI-to-PCI bridge
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  // Host bridges and PCI-to-PCI bridges (root ports, switch ports) share a group with the
  // devices below them but are never given to a guest.
  bool is_bridge() const;
};

// What the IOMMU isolates as one unit: vfio gives a guest all of a group's endpoints or none.
struct IommuGroup {
  unsigned id = 0;
  std::vector<IommuGroupMember> members;  // sorted by address
};

// nvidia-smi topo -m's legend, best first.
enum class LinkLevel { self, nvlink, xgmi, pix, pxb, phb, node, sys };
const char* to_string(LinkLevel level);

struct Link {
  LinkLevel level = LinkLevel::sys;
  unsigned count = 0;         // NVLinks for nvlink
  std::string label() const;  // "X", "NV6", "XGMI", "PIX", ...
  bool operator==(const Link&) const = default;
};

// A direct accelerator-to-accelerator link (NVLink, XGMI) from hwloc's distance matrices or a
// vendor library; it replaces the PCIe level in the link matrix.
struct PeerLink {
  PciAddress peer;
  Link link;
};

enum class Vendor { nvidia, amd, intel_gaudi, other };
const char* to_string(Vendor vendor);

// A MIG GPU instance with its compute instance, as the vendor library reports it.
struct MigInstance {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned profile_id = 0;       // NVML's GPU instance profile id
  std::string profile_name;      // "1g.10gb"
  unsigned placement_start = 0;  // in memory slices, as NVML's placements count them
  unsigned placement_size = 0;
  std::string uuid;  // "MIG-..."
  std::uint64_t memory_bytes = 0;
};

// An NVIDIA compute capability "9.0" as {major, minor}; nullopt unless two whole numbers of at
// most two digits each (what the driver reports, not what a library or capture could write).
std::optional<std::pair<unsigned, unsigned>> compute_capability_numbers(std::string_view text);

// What a vendor library (NVML, ROCm SMI, HLML) says of one device that does not change while it
// runs. Optional fields are absent when the library or device does not support them.
struct AcceleratorInventory {
  std::string backend;  // "nvml", "amd-smi", "rocm-smi", "hlml"
  unsigned index = 0;   // the library's own device index
  std::string uuid;
  std::string serial;
  std::optional<unsigned> device_minor;  // NVIDIA: /dev/nvidia<minor>, as NVML says
  std::string product_name;
  std::string board_part_number;  // AMD: the board's model number, "102-G30211-0C"
  std::uint64_t memory_total_bytes = 0;
  std::string driver_version;
  std::optional<double> pcie_max_speed_gts;  // the link's maximum as the library says (AMD SMI)
  std::string compute_capability;            // NVIDIA "9.0"
  std::string gfx_version;                   // AMD "gfx942"
  std::optional<bool> mig_enabled;           // current MIG mode
  std::optional<bool> mig_pending;           // mode after the next reset
  std::vector<MigInstance> mig_instances;
  std::string compute_partition;  // AMD SPX, DPX, QPX, CPX
  std::string memory_partition;   // AMD NPS1, NPS4
  std::optional<double> power_limit_watts;
  std::optional<bool> ecc_enabled;
  std::optional<bool> ecc_pending;
  std::optional<bool> persistence_mode;  // NVIDIA: the driver stays initialised without clients
};

struct Accelerator {
  std::string id;  // "gpu0", "gpu1", ... in PCI order
  Vendor vendor = Vendor::other;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  PciDevice pci;
  // Logical GPUs the OS shows on this function (an MI300A in CPX mode shows 6); at least 1.
  unsigned partitions = 1;
  // NUMA nodes that hold this accelerator's own memory (POWER9/Grace GPU memory nodes).
  std::vector<unsigned> memory_numa_nodes;
  std::vector<PeerLink> peer_links;
  std::vector<std::string> closest_nics;
  std::optional<AcceleratorInventory>
      inventory;  // set when a vendor backend knows the device  // NIC ids at the best link level
};

struct Nic {
  std::string id;  // "nic0", ... in PCI order
  std::string name;
  PciDevice pci;
  std::vector<std::string> netdevs;       // "ib0", "eth0"
  std::vector<std::string> rdma_devices;  // "mlx5_0", "efa0", "hfi1_0"
  // "infiniband", "ethernet", "omnipath", "slingshot", "efa", or "" when unknown.
  std::string fabric;
  bool rdma_capable() const;
};

struct NvmeDevice {
  std::string id;  // "nvme0", ...
  PciDevice pci;
  std::vector<std::string> block_devices;
};

struct HostBridge {
  unsigned domain = 0;
  unsigned bus_first = 0, bus_last = 0;  // the bus range it serves
  CpuSet local_cpus;
  std::vector<unsigned> numa_nodes;
};

struct LinkMatrix {
  std::vector<std::string> devices;  // accelerator ids, then NIC ids
  std::vector<std::vector<Link>> cells;
  const Link& at(size_t i, size_t j) const { return cells[i][j]; }
  std::optional<size_t> index_of(const std::string& id) const;
};

struct DistanceMatrix {
  std::string name;                // "NUMALatency"
  std::vector<unsigned> os_index;  // NUMA node OS indexes, in row order
  std::vector<std::vector<std::uint64_t>> values;
};

// What opening one vendor library gave ("nvml: absent", "nvml: 8 devices from ...").
struct AcceleratorBackendStatus {
  std::string name;  // "nvml", "amd-smi", "rocm-smi", "hlml"
  bool present = false;
  std::string detail;
};

struct HostModel {
  int schema_version = kHostModelSchemaVersion;
  std::string source;  // "live", "xml:PATH", "fsroot:DIR"
  std::string hostname;
  std::string architecture;  // "x86_64", "ppc64le", "aarch64"
  std::uint64_t page_size = 0;
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;  // sorted by OS index
  std::vector<Core> cores;
  CpuSet pus;
  std::optional<DistanceMatrix> numa_distances;
  std::vector<HostBridge> host_bridges;
  std::vector<Accelerator> accelerators;
  std::vector<Nic> nics;
  std::vector<NvmeDevice> nvme;
  LinkMatrix links;
  std::vector<IommuGroup> iommu_groups;  // by id; empty without an IOMMU or for a capture
  std::vector<AcceleratorBackendStatus> accelerator_backends;  // empty when none was consulted

  const NumaNode* numa_node(unsigned os_index) const;
  const Accelerator* accelerator(const std::string& id_or_bus_id) const;
  const Nic* nic(const std::string& id_or_name) const;
  const IommuGroup* iommu_group(unsigned id) const;
  // Accelerators of a vendor, in model order.
  std::vector<const Accelerator*> accelerators_of(Vendor vendor) const;
  // NUMA nodes whose PUs intersect `cpus`.
  std::vector<unsigned> numa_nodes_of(const CpuSet& cpus) const;
};

}  // namespace polyaccel
