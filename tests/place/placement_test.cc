// A placement read back from the state file: every field that is out of range, of the wrong type
// or missing is the error reported, by placement, field path and value; never a later check that
// failed on the default the bad field left behind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "place/pci_alias.h"
#include "place/placement.h"
#include "place_test_support.h"

namespace polyaccel::place {
namespace {

using namespace polyaccel::place::testing;
using json = nlohmann::json;

// A committed VM with a cell of pinned vCPUs, a page size and an H100: every kind of field.
json committed_vm() {
  const auto& m = fixture(kXe8640);
  static const std::vector<PciAlias> aliases = {*parse_pci_alias_option("h100=10de:2330")};
  auto f = fit_on(view_of(m), request(4, 8,
                                      {{"hw:cpu_policy", "dedicated"},
                                       {"hw:mem_page_size", "small"},
                                       {"pci_passthrough:alias", "h100:1"}},
                                      aliases));
  if (!f.fit) throw std::runtime_error(f.reason);
  f.placement.name = "vm1";
  json j = to_json(f.placement);
  j["cells"][0]["shared_vcpus"] = json::array({0});  // empty for a dedicated guest
  return j;
}

// Sets `value` at `pointer` and expects the error to name the placement, `field` and the value.
void expect_refused(const json& good, const std::string& pointer, const json& value,
                    const std::string& field) {
  json bad = good;
  bad[json::json_pointer(pointer)] = value;
  auto p = placement_from_json(bad);
  ASSERT_FALSE(p) << pointer << " = " << value.dump();
  const std::string m = p.error().message();
  EXPECT_EQ(m.rfind("placement vm1: field '" + field + "'", 0), 0u) << m;
  const std::string text = value.is_string() ? value.get<std::string>() : json_text(value, -1);
  EXPECT_NE(m.find(text), std::string::npos) << m;
}

TEST(PlacementJson, CommittedVmReadsBack) {
  const json good = committed_vm();
  auto p = placement_from_json(good);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(to_json(*p), good);
}

TEST(PlacementJson, EveryNumberOutOfRangeIsReportedByFieldAndValue) {
  const json good = committed_vm();
  ASSERT_EQ(good["devices"].size(), 1u);
  ASSERT_FALSE(good["cells"][0]["page_size_bytes"].is_null());
  ASSERT_FALSE(good["devices"][0]["numa_node"].is_null());
  // 32-bit fields: 2^32 would wrap to 0, -1 to 2^32-1.
  const std::vector<std::pair<std::string, std::string>> narrow = {
      {"/vcpus", "vcpus"},
      {"/cells/0/guest_cell", "cells[0].guest_cell"},
      {"/cells/0/host_numa_node", "cells[0].host_numa_node"},
      {"/cells/0/vcpus/0", "cells[0].vcpus[0]"},
      {"/cells/0/shared_vcpus/0", "cells[0].shared_vcpus[0]"},
      {"/devices/0/numa_node", "devices[0].numa_node"},
      {"/devices/0/guest_cell", "devices[0].guest_cell"}};
  for (const auto& [pointer, field] : narrow) {
    for (const json& v : {json(4294967296ULL), json(-1), json(1e20), json(1.5), json("7")})
      expect_refused(good, pointer, v, field);
  }
  const std::vector<std::pair<std::string, std::string>> wide = {
      {"/memory_bytes", "memory_bytes"},
      {"/cells/0/memory_bytes", "cells[0].memory_bytes"},
      {"/cells/0/page_size_bytes", "cells[0].page_size_bytes"}};
  for (const auto& [pointer, field] : wide) {
    // 2^64 arrives as a float: nlohmann has no wider integer.
    for (const json& v : {json(18446744073709551616.0), json(-4096), json(-1), json(2.5)})
      expect_refused(good, pointer, v, field);
  }
}

TEST(PlacementJson, WrongTypesAndMissingFieldsAreReportedByField) {
  const json good = committed_vm();
  expect_refused(good, "/cells", 5, "cells");
  expect_refused(good, "/devices", json::object(), "devices");
  expect_refused(good, "/cells/0", "x", "cells[0]");
  expect_refused(good, "/cells/0/cpu_pinning", json::array({1}), "cells[0].cpu_pinning");
  expect_refused(good, "/cells/0/vcpus", 3, "cells[0].vcpus");
  expect_refused(good, "/cells/0/shared_pus", 3, "cells[0].shared_pus");
  expect_refused(good, "/cells/0/shared_pus", "0-x", "cells[0].shared_pus");
  expect_refused(good, "/devices/0/kind", 7, "devices[0].kind");
  const std::string pu = good["cells"][0]["cpu_pinning"].begin().key();
  expect_refused(good, "/cells/0/cpu_pinning/" + pu, 4294967296ULL, "cells[0].cpu_pinning");
  for (const auto& [pointer, field] : std::vector<std::pair<std::string, std::string>>{
           {"/memory_bytes", "memory_bytes"},
           {"/cells/0/host_numa_node", "cells[0].host_numa_node"},
           {"/devices/0/pci_bus_id", "devices[0].pci_bus_id"}}) {
    json bad = good;
    bad[json::json_pointer(pointer).parent_pointer()].erase(json::json_pointer(pointer).back());
    auto p = placement_from_json(bad);
    ASSERT_FALSE(p) << pointer;
    EXPECT_EQ(p.error().message(), "placement vm1: field '" + field + "' is missing");
  }
}

TEST(PlacementJson, TheFirstProblemIsTheOneReported) {
  json bad = committed_vm();
  bad["vcpus"] = 4294967296ULL;
  bad["cells"] = "not an array";
  bad["devices"] = nullptr;
  auto p = placement_from_json(bad);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(),
            "placement vm1: field 'vcpus': '4294967296' is out of range (0..4294967295)");
  bad = committed_vm();
  bad["cells"][0]["guest_cell"] = -1;
  bad["cells"][0]["cpu_pinning"] = nullptr;
  p = placement_from_json(bad);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(),
            "placement vm1: field 'cells[0].guest_cell': '-1' is out of range (0..4294967295)");
}

}  // namespace
}  // namespace polyaccel::place
