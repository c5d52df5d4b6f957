// The HostModel of a captured machine in ../shared/fixtures/topologies (an hwloc XML), for tests
// that decide on real topologies. Test binaries using it link polyaccel_discover.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel::testing {

// The NEC SX-Aurora host's gathered sysfs tree (hwloc-gather-topology): real PFs, switches and
// hugepages, the base the SR-IOV and IOMMU-group trees are laid out on.
inline constexpr const char* kNecTarball =
    "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2";

inline HostModel fixture_model(const std::string& xml_file) {
  DiscoverOptions o;
  o.topology_xml = topology_fixture(xml_file).string();
  auto m = discover_host(o);
  EXPECT_TRUE(m.ok()) << (m ? "" : m.error().message());
  return m ? *m : HostModel{};
}

// Discovery of a capture a test made or unpacked: a gathered sysfs tree (a directory, --fsroot)
// or an hwloc XML (a file, --topology). `backends` says whether the vendor libraries are asked.
inline HostModel discover_capture(const std::filesystem::path& capture,
                                  BackendMode backends = BackendMode::automatic) {
  DiscoverOptions o;
  if (std::filesystem::is_directory(capture))
    o.fsroot = capture.string();
  else
    o.topology_xml = capture.string();
  o.backends = backends;
  auto m = discover_host(o);
  if (!m) ADD_FAILURE() << capture << ": " << m.error().message();
  return m ? *m : HostModel{};
}

}  // namespace polyaccel::testing
