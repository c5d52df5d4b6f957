// Discovery: builds the HostModel from hwloc (live host, an XML capture or a gathered
// sysfs/procfs tree), completed by direct sysfs reads where the source is a real file system.
#pragma once

#include <string>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

// When the vendor libraries (NVML, ROCm SMI, HLML) are asked about accelerators.
enum class BackendMode {
  automatic,  // on the live host only: a captured machine is not this host's GPUs
  on,         // always (a capture of this very host, or test builds of the libraries)
  off,        // never
};

struct DiscoverOptions {
  std::string topology_xml;  // --topology FILE: an hwloc XML export
  std::string fsroot;        // --fsroot DIR: a tree made by hwloc-gather-topology
  // Where pci.ids is looked for, for device names; empty means the usual system paths.
  std::string pci_ids_path;
  BackendMode backends = BackendMode::automatic;
};

// Never throws; a bad input is an Error naming the file and the reason.
Result<HostModel> discover_host(const DiscoverOptions& options);

// The hwloc XML of the topology discovery reads for these options (hwloc_topology_export_xml):
// what `topo --of xml` prints and `--topology` reads back.
Result<std::string> export_hwloc_xml(const DiscoverOptions& options);

// The one check of a --fsroot DIR, for every command that takes it: an existing directory
// (after links; a FIFO, a file or a loop of links is refused) that holds sys/devices/system/cpu,
// as every sysfs and every hwloc-gather-topology tree does.
Status check_fsroot(const std::string& dir);
// What every command checks first: one source, not both, and check_fsroot of a --fsroot.
Status check_sources(const DiscoverOptions& options);

// The sysfs/procfs root that discovery reads beside hwloc: "/" for the live host, the fsroot
// directory for a gathered tree, empty for an XML capture (nothing to read).
std::string filesystem_root(const DiscoverOptions& options);

// Reads again what changes while the host runs: free hugepages per node and size, and the
// current PCIe link speed and width of accelerators and NICs (sysfs.cc). Nothing for an empty root.
void refresh_from_sysfs(HostModel& model, const std::string& root);

}  // namespace polyaccel
