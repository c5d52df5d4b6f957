// Adds SR-IOV virtual functions to a gathered sysfs tree the way the kernel shows them: a VF
// directory beside its PF, virtfnN links in the PF, physfn/driver links and net/infiniband
// children in the VF, /sys/bus/pci/devices links. Header-only, used by discovery and CLI tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace polyaccel::testing {

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

// The NEC tarball's two ConnectX-4 HCAs (15b3:1013, NUMA node 0, mlx5_core), made whole the way
// the kernel shows a loaded mlx5_ib: PF 0000:1a:00.0 is mlx5_0 with netdev ib0, 0000:3e:00.0 is
// mlx5_1 with ib1, each with /sys/class/infiniband_verbs/uverbsN and infiniband_mad/umadN,
// issmN. With `vfs` > 0 the first PF also gets that many VFs (at most 7): 0000:1a:00.<1..vfs>,
// 15b3:1014 (ConnectX-4 Virtual Function), mlx5_core, netdev ib0v<i>, RDMA device mlx5_<2+i>
// with its own uverbs/umad/issm nodes.
inline const char* kConnectX4PfDirs[2] = {
    "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0",
    "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/0000:3c:08.0/0000:3e:00.0"};

inline void add_rdma_device(const std::filesystem::path& root, const std::string& function_dir,
                            const std::string& rdma, const std::string& netdev, unsigned n) {
  namespace fs = std::filesystem;
  const fs::path dir = root / function_dir;
  fs::create_directories(dir / "infiniband" / rdma);
  fs::create_directories(dir / "net" / netdev);
  fs::create_directories(root / "sys/class/infiniband");
  fs::create_directory_symlink("../../" + function_dir.substr(4) + "/infiniband/" + rdma,
                               root / "sys/class/infiniband" / rdma);
  fs::create_directory_symlink("../../" + function_dir.substr(4) + "/net/" + netdev,
                               root / "sys/class/net" / netdev);
  const std::string i = std::to_string(n);
  write_text(root / "sys/class/infiniband_verbs" / ("uverbs" + i) / "ibdev", rdma + "\n");
  write_text(root / "sys/class/infiniband_mad" / ("umad" + i) / "ibdev", rdma + "\n");
  write_text(root / "sys/class/infiniband_mad" / ("issm" + i) / "ibdev", rdma + "\n");
}

inline void add_connectx4_rdma(const std::filesystem::path& root, unsigned vfs) {
  namespace fs = std::filesystem;
  add_rdma_device(root, kConnectX4PfDirs[0], "mlx5_0", "ib0", 0);
  add_rdma_device(root, kConnectX4PfDirs[1], "mlx5_1", "ib1", 1);
  if (vfs == 0) return;
  const fs::path pf = root / kConnectX4PfDirs[0];
  write_text(pf / "sriov_totalvfs", "8\n");
  write_text(pf / "sriov_numvfs", std::to_string(vfs) + "\n");
  for (unsigned i = 0; i < vfs && i < 7; ++i) {
    const std::string name = "0000:1a:00." + std::to_string(i + 1);
    const std::string rel = std::string(kConnectX4PfDirs[0])
                                .substr(0, std::string(kConnectX4PfDirs[0]).rfind('/') + 1) +
                            name;
    const fs::path vf = root / rel;
    fs::create_directories(vf);
    for (const char* f : {"class", "vendor", "subsystem_vendor", "subsystem_device", "config",
                          "local_cpus", "local_cpulist", "numa_node"}) {
      fs::copy_file(pf / f, vf / f, fs::copy_options::overwrite_existing);
    }
    write_text(vf / "device", "0x1014\n");
    fs::create_directory_symlink("../0000:1a:00.0", vf / "physfn");
    fs::create_directory_symlink("../../../../../../bus/pci/drivers/mlx5_core", vf / "driver");
    add_rdma_device(root, rel, "mlx5_" + std::to_string(2 + i), "ib0v" + std::to_string(i), 2 + i);
    fs::create_directory_symlink("../" + name, pf / ("virtfn" + std::to_string(i)));
    fs::create_directory_symlink("../../../" + rel.substr(4), root / "sys/bus/pci/devices" / name);
  }
}

}  // namespace polyaccel::testing
