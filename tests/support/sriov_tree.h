// Adds SR-IOV virtual functions to a gathered sysfs tree the way the kernel shows them: a VF
// directory beside its PF, virtfnN links in the PF, physfn/driver links and net/infiniband
// children in the VF, /sys/bus/pci/devices links. Header-only, used by discovery and CLI tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace polyaccel::testing {

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The NEC tarball's Intel X722 PF 0000:60:00.0 (sriov_totalvfs 64) below its real parent bridge.
inline const char* kX722PfDir =
    "sys/devices/pci0000:5d/0000:5d:02.0/0000:5e:00.0/0000:5f:03.0/0000:60:00.0";

// Enables `count` VFs 0000:60:02.<i> on the X722 PF of the NEC tree at `root`; VF i gets netdev
// enp96s0f0v<i> and, for odd i, an RDMA device iwp96s0f0v<i> (irdma); NUMA node 0.
inline void add_x722_vfs(const std::filesystem::path& root, unsigned count) {
  namespace fs = std::filesystem;
  const fs::path pf = root / kX722PfDir;
  write_text(pf / "sriov_numvfs", std::to_string(count) + "\n");
  for (unsigned i = 0; i < count; ++i) {
    const std::string name = "0000:60:02." + std::to_string(i);
    const fs::path vf = pf.parent_path() / name;
    fs::create_directories(vf);
    for (const char* f : {"class", "vendor", "subsystem_vendor", "subsystem_device", "config",
                          "local_cpus", "local_cpulist", "numa_node"}) {
      fs::copy_file(pf / f, vf / f, fs::copy_options::overwrite_existing);
    }
    write_text(vf / "device", "0x37cd\n");  // X722 Virtual Function
    fs::create_directory_symlink("../0000:60:00.0", vf / "physfn");
    fs::create_directory_symlink("../../../../../../bus/pci/drivers/iavf", vf / "driver");
    fs::create_directories(vf / "net" / ("enp96s0f0v" + std::to_string(i)));
    if (i % 2 == 1) fs::create_directories(vf / "infiniband" / ("iwp96s0f0v" + std::to_string(i)));
    fs::create_directory_symlink("../" + name, pf / ("virtfn" + std::to_string(i)));
    fs::create_directory_symlink(
        "../../../devices/pci0000:5d/0000:5d:02.0/0000:5e:00.0/0000:5f:03.0/" + name,
        root / "sys/bus/pci/devices" / name);
  }
}

}  // namespace polyaccel::testing
