// The HostModel of a captured machine in ../shared/fixtures/topologies (an hwloc XML), for tests
// that decide on real topologies. Test binaries using it link polyaccel_discover.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel::testing {

inline HostModel fixture_model(const std::string& xml_file) {
  DiscoverOptions o;
  o.topology_xml = topology_fixture(xml_file).string();
  auto m = discover_host(o);
  EXPECT_TRUE(m.ok()) << (m ? "" : m.error().message());
  return m ? *m : HostModel{};
}

}  // namespace polyaccel::testing
