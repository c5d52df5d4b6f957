// Adds IOMMU groups to a gathered sysfs tree the way the kernel shows them:
// sys/kernel/iommu_groups/N/devices/<bus id> links to the device directories and an iommu_group
// link in each device directory. Header-only, used by discovery, placement and CLI tests.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace polyaccel::testing {

// `devices` are the members' directories relative to the root ("sys/devices/pci0000:5d/...").
inline void add_iommu_group(const std::filesystem::path& root, unsigned id,
                            const std::vector<std::string>& devices) {
  namespace fs = std::filesystem;
  const fs::path group = root / "sys/kernel/iommu_groups" / std::to_string(id);
  fs::create_directories(group / "devices");
  for (const auto& dir : devices) {
    const fs::path device = root / dir;
    fs::create_directory_symlink(fs::path("../../../..") / fs::path(dir).lexically_relative("sys"),
                                 group / "devices" / device.filename());
    fs::create_directory_symlink(group.lexically_relative(device), device / "iommu_group");
  }
}

// The NEC tarball's groups as a host whose PCIe switch on bus 3b has no ACS on two of its
// downstream ports would show them: group 40 holds the dual-port Intel X722 (0000:60:00.0 and
// .1, nic2 and nic3) with the switch port above it (a bridge); group 21 holds Vector Engine
// 0000:3d:00.0 (gpu4) and ConnectX-4 0000:3e:00.0 (nic1) with their two switch ports; every
// other Vector Engine and the first ConnectX-4 (0000:1a:00.0, nic0) has a group of its own.
inline void add_nec_iommu_groups(const std::filesystem::path& root) {
  const std::string sw17 = "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/";
  const std::string sw3a = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/";
  const std::string x722 = "sys/devices/pci0000:5d/0000:5d:02.0/0000:5e:00.0/0000:5f:03.0";
  add_iommu_group(root, 40, {x722, x722 + "/0000:60:00.0", x722 + "/0000:60:00.1"});
  add_iommu_group(root, 21,
                  {sw3a + "0000:3c:04.0", sw3a + "0000:3c:04.0/0000:3d:00.0", sw3a + "0000:3c:08.0",
                   sw3a + "0000:3c:08.0/0000:3e:00.0"});
  add_iommu_group(root, 10, {sw17 + "0000:19:04.0/0000:1a:00.0"});
  add_iommu_group(root, 11, {sw17 + "0000:19:08.0/0000:1b:00.0"});
  add_iommu_group(root, 12, {sw17 + "0000:19:0c.0/0000:1c:00.0"});
  add_iommu_group(root, 13, {sw17 + "0000:19:10.0/0000:1d:00.0"});
  add_iommu_group(root, 14, {sw17 + "0000:19:14.0/0000:1e:00.0"});
  add_iommu_group(root, 22, {sw3a + "0000:3c:0c.0/0000:3f:00.0"});
  add_iommu_group(root, 23, {sw3a + "0000:3c:10.0/0000:40:00.0"});
  add_iommu_group(root, 24, {sw3a + "0000:3c:14.0/0000:41:00.0"});
}

}  // namespace polyaccel::testing
