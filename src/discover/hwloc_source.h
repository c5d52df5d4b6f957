// Internal to discover/: the steps that discover_host() runs in order.
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/host_model.h"
#include "discover/discover.h"

namespace polyaccel::detail {

// The largest CPU and NUMA node numbers Linux has (NR_CPUS is at most 8192, MAX_NUMNODES 1024),
// with room. A CPU numbered 4000000000 (or one without a number, which hwloc takes as -1) made
// every CPU set of the model half a gigabyte; sysfs readers hold their numbers to the same bounds.
inline constexpr unsigned kMaxCpuIndex = 16383;
inline constexpr unsigned kMaxNodeIndex = 4095;

// hwloc → CPUs, NUMA nodes, packages, PCI tree, OS devices, distance matrices. Accelerators and
// NICs are classified here; ids, names and links are filled in later steps.
Result<HostModel> load_from_hwloc(const DiscoverOptions& options);
// The same topology as hwloc XML (export_hwloc_xml in discover.h).
Result<std::string> export_hwloc_xml(const DiscoverOptions& options);

// Direct sysfs/procfs reads under `root` for what hwloc does not keep: free hugepages, PCIe
// link speed and width (current and maximum), GPU memory NUMA nodes of NVIDIA GPUs.
void complete_from_sysfs(HostModel& model, const std::string& root);
// Its two parts that change while a host runs (refresh_from_sysfs).
void read_hugepages(NumaNode& node, const std::filesystem::path& root);
void read_pci_link(PciDevice& device, const std::filesystem::path& root);
// A PCIe link attribute file of sysfs: current/max_link_speed ("16.0 GT/s PCIe" → 16 GT/s, at
// most 256) and current/max_link_width (1..32 lanes). 0 when the file says "Unknown" or a value
// out of range (a value we cannot trust is none), nullopt when there is no such file.
std::optional<double> read_link_speed(const std::filesystem::path& file);
std::optional<unsigned> read_link_width(const std::filesystem::path& file);

// Stable ids ("gpu0", "nic0", "nvme0") in PCI order, and names from pci.ids where hwloc had none.
void assign_ids_and_names(HostModel& model, const std::string& pci_ids_path);

// A GPU's memory node sits in its package's locality, but no device is "on" another GPU's
// memory: localities keep only CPU-bearing and HBM nodes (nvidia-smi's NUMA affinity).
void drop_gpu_memory_from_localities(HostModel& model);

}  // namespace polyaccel::detail
