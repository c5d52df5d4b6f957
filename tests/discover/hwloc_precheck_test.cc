// The hwloc XML pre-check against the whole class of files libhwloc 2.9 crashes on: a capture
// with any one attribute of any one object kind removed is either loaded or refused with an
// error naming the file, never a crash of libhwloc (fuzzing found two such shapes; this covers
// every attribute the real captures carry, in both XML formats).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <tuple>

#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::read_text;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

// Each start tag's element, its `type` attribute (objects) and its attribute names, with the
// byte range of each attribute (` name="value"`, leading space included).
struct Attribute {
  std::string element, type, name;
  size_t begin, end;
};

std::vector<Attribute> attributes(const std::string& xml) {
  std::vector<Attribute> out;
  for (size_t at = xml.find('<'); at != std::string::npos; at = xml.find('<', at + 1)) {
    if (at + 1 >= xml.size() || !std::isalpha(static_cast<unsigned char>(xml[at + 1]))) continue;
    size_t end = xml.find('>', at);
    size_t name_end = xml.find_first_of(" />", at + 1);
    std::string element = xml.substr(at + 1, name_end - at - 1);
    std::vector<Attribute> tag;
    std::string type;
    for (size_t i = name_end; i < end;) {
      size_t eq = xml.find("=\"", i);
      if (eq == std::string::npos || eq > end) break;
      size_t close = xml.find('"', eq + 2);
      std::string name = xml.substr(i + 1, eq - i - 1);
      if (name == "type") type = xml.substr(eq + 2, close - eq - 2);
      tag.push_back({element, "", name, i, close + 1});
      i = close + 1;
    }
    for (auto& a : tag) {
      a.type = type;
      out.push_back(a);
    }
  }
  return out;
}

class HwlocPrecheck : public ::testing::TestWithParam<std::string> {};

TEST_P(HwlocPrecheck, AnyAttributeRemovedIsLoadedOrRefusedNeverACrash) {
  const std::string xml = read_text(topology_fixture(GetParam()));
  ASSERT_FALSE(xml.empty());
  TempDir tmp;
  const auto path = (tmp.path() / "edited.xml").string();
  std::set<std::tuple<std::string, std::string, std::string>> tried;
  size_t refused = 0;
  for (const auto& a : attributes(xml)) {
    if (!tried.insert({a.element, a.type, a.name}).second) continue;
    SCOPED_TRACE(a.element + " " + a.type + " without " + a.name);
    std::ofstream(path, std::ios::trunc) << xml.substr(0, a.begin) << xml.substr(a.end);
    DiscoverOptions o;
    o.topology_xml = path;
    o.backends = BackendMode::off;
    o.pci_ids_path = "/nonexistent";
    auto m = discover_host(o);  // a crash of libhwloc ends the test here
    if (!m) {
      ++refused;
      EXPECT_NE(m.error().message().find(path), std::string::npos) << m.error().message();
    }
  }
  // The shapes known to crash hwloc are among those tried, and refused.
  EXPECT_TRUE(tried.count({"object", "PU", "cpuset"}));
  EXPECT_TRUE(tried.count({"object", "Machine", "complete_nodeset"}));
  EXPECT_GT(tried.size(), 40u);
  EXPECT_GT(refused, 0u);
}

INSTANTIATE_TEST_SUITE_P(Captures, HwlocPrecheck,
                         ::testing::Values("2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml",
                                           "power9-2socket-2numa+4gpumem-numa-4xV100-4xmlx5_llnl-"
                                           "sierra.v1.xml"),
                         [](const auto& param) { return param.index == 0 ? "G4dn" : "SierraV1"; });

}  // namespace
}  // namespace polyaccel
