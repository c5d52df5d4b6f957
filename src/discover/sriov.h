// SR-IOV and RDMA facts of PCI functions, read from sysfs under a root (the live "/" or a
// gathered tree): sriov_totalvfs/sriov_numvfs, the virtfnN links of a physical function, each
// VF's NUMA node, netdevs, RDMA devices and driver, and the physfn link of a VF.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

// The sysfs directory of a PCI function under `root`.
std::filesystem::path pci_device_dir(const std::filesystem::path& root, const PciAddress& address);

// SR-IOV capability of one function, nullopt when it has none (no sriov_totalvfs). A
// sriov_totalvfs or sriov_numvfs the kernel would never write (not decimal, beyond PCIe's 16 bits,
// more VFs enabled than supported) is an error naming the file.
Result<std::optional<Sriov>> read_sriov_facts(const std::filesystem::path& root,
                                              const PciAddress& address);
// The same for discovery: such a function's SR-IOV facts are dropped (nullopt).
std::optional<Sriov> read_sriov(const std::filesystem::path& root, const PciAddress& address);
// sriov_numvfs alone (0 when absent), held to the same rule: at most `total_vfs`.
Result<unsigned> read_sriov_num_vfs(const std::filesystem::path& root, const PciAddress& address,
                                    unsigned total_vfs);

// The physical function of a virtual function (its physfn link), nullopt for anything else.
std::optional<PciAddress> read_physical_function(const std::filesystem::path& root,
                                                 const PciAddress& address);

// Fills `sriov` and `physical_function` of every accelerator, NIC and NVMe drive of the model.
void complete_sriov(HostModel& model, const std::filesystem::path& root);

}  // namespace polyaccel
