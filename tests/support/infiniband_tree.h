// Adds RDMA devices to a gathered sysfs tree the way the kernel shows them: the device directory
// below its PCI function (infiniband/<name>, with ports/<n>/state, phys_state, rate, counters/
// and hw_counters/) and a /sys/class/infiniband/<name> link to it, which hwloc follows to the
// PCI function (an OpenFabrics OS device). The topology fixtures have no IB counters; tests
// build them. Header-only, used by the exporter tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace polyaccel::testing {

// The NEC tarball's two InfiniBand HCAs (class 0x0207), below their real parent bridges.
inline const char* kNecIbHca0Dir =
    "sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0";
inline const char* kNecIbHca1Dir =
    "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/0000:3c:08.0/0000:3e:00.0";

// Port `port` of RDMA device `name` in `device_dir` (the infiniband/<name> directory): ACTIVE,
// LinkUp at `rate` ("200 Gb/sec (4X HDR)"), port_rcv_data `words` and port_xmit_data 2x that,
// the other counters small known values.
inline void write_infiniband_port(const std::filesystem::path& device_dir, unsigned port,
                                  const std::string& rate, std::uint64_t words) {
  const auto d = device_dir / "ports" / std::to_string(port);
  write_text(d / "state", "4: ACTIVE\n");
  write_text(d / "phys_state", "5: LinkUp\n");
  write_text(d / "rate", rate + "\n");
  write_text(d / "lid", "0x1\n");
  write_text(d / "counters/port_rcv_data", std::to_string(words) + "\n");
  write_text(d / "counters/port_xmit_data", std::to_string(2 * words) + "\n");
  write_text(d / "counters/port_rcv_packets", "1000\n");
  write_text(d / "counters/port_xmit_packets", "2000\n");
  write_text(d / "counters/link_downed", "0\n");
  write_text(d / "counters/symbol_error", "0\n");
  write_text(d / "counters/port_rcv_errors", "0\n");
  write_text(d / "hw_counters/out_of_sequence", "5\n");
  write_text(d / "hw_counters/rnr_nak_retry_err", "0\n");
  write_text(d / "hw_counters/np_cnp_sent", "7\n");
}

// RDMA device `name` of the PCI function at `pci_dir` (relative to `root`) with one port.
inline void add_infiniband_device(const std::filesystem::path& root, const std::string& pci_dir,
                                  const std::string& name, const std::string& rate,
                                  std::uint64_t words) {
  namespace fs = std::filesystem;
  const fs::path dev = root / pci_dir / "infiniband" / name;
  write_text(dev / "node_guid", "a088:c203:0009:7050\n");
  write_infiniband_port(dev, 1, rate, words);
  fs::create_directories(root / "sys/class/infiniband");
  // Relative, as the kernel's: ../../devices/... (pci_dir starts with sys/).
  fs::create_symlink(
      fs::path("../..") / fs::path(pci_dir).lexically_relative("sys") / "infiniband" / name,
      root / "sys/class/infiniband" / name);
}

}  // namespace polyaccel::testing
