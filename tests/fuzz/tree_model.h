// The HostModel the sysfs/procfs reader targets complete: the PCI functions, NUMA nodes and
// NVIDIA GPUs that the fuzzed tree itself lists, as discovery would have found them in hwloc.
#pragma once

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/host_model.h"
#include "core/pci_address.h"

namespace polyaccel::fuzz {

inline constexpr int kMaxTreeDevices = 16;

// Every parsable PCI address among the entries of `dir` (at most kMaxTreeDevices).
inline std::vector<PciAddress> addresses_in(const std::filesystem::path& dir) {
  std::vector<PciAddress> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (out.size() >= kMaxTreeDevices) break;
    if (auto a = PciAddress::parse(e.path().filename().string())) out.push_back(*a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// NUMA nodes 0-1 with CPUs and 2-3 without (where a coherent GPU's memory shows up), the PCI
// functions under sys/bus/pci/devices as NICs, those under proc/driver/nvidia/gpus as NVIDIA GPUs.
inline HostModel tree_model(const std::filesystem::path& root) {
  HostModel m;
  for (unsigned n = 0; n < 4; ++n) {
    NumaNode node;
    node.os_index = n;
    if (n < 2) node.cpus = CpuSet{2 * n, 2 * n + 1};
    m.numa_nodes.push_back(node);
  }
  for (const auto& a : addresses_in(root / "proc/driver/nvidia/gpus")) {
    Accelerator acc;
    acc.id = "gpu" + std::to_string(m.accelerators.size());
    acc.vendor = Vendor::nvidia;
    acc.pci.address = a;
    m.accelerators.push_back(acc);
  }
  for (const auto& a : addresses_in(root / "sys/bus/pci/devices")) {
    Nic nic;
    nic.id = "nic" + std::to_string(m.nics.size());
    nic.pci.address = a;
    m.nics.push_back(nic);
  }
  return m;
}

}  // namespace polyaccel::fuzz
