// The compiled-in MIG profile tables hold exactly the facts of ../shared/data/mig-profiles.json.
#include "share/mig_profiles.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace polyaccel {
namespace {

nlohmann::json facts() {
  std::ifstream in(polyaccel::testing::shared_dir() / "data/mig-profiles.json");
  return nlohmann::json::parse(in);
}

TEST(MigProfiles, TablesMatchTheReferenceData) {
  auto doc = facts();
  ASSERT_EQ(doc["gpus"].size(), builtin_mig_geometries().size());
  for (const auto& gpu : doc["gpus"]) {
    const MigGeometry* g = find_mig_geometry(gpu["key"].get<std::string>());
    ASSERT_NE(g, nullptr) << gpu["key"];
    EXPECT_EQ(g->model, gpu["key"]);
    EXPECT_EQ(g->compute_slices, gpu["compute_slices_total"]);
    EXPECT_EQ(g->memory_slices, gpu["memory_slices_total"]);
    EXPECT_EQ(g->max_instances, gpu["max_instances"]);
    for (const auto& alias : gpu["aliases"])
      EXPECT_EQ(find_mig_geometry(alias.get<std::string>()), g) << alias;
    for (const auto& id : gpu["pci_device_ids"]) {
      auto v = static_cast<std::uint32_t>(std::stoul(id.get<std::string>(), nullptr, 16));
      EXPECT_EQ(find_mig_geometry(v), g) << id;
    }
    ASSERT_EQ(g->profiles.size(), gpu["profiles"].size()) << g->model;
    for (size_t i = 0; i < g->profiles.size(); ++i) {
      const MigProfile& p = g->profiles[i];
      const auto& f = gpu["profiles"][i];
      EXPECT_EQ(p.name, f["name"]);
      EXPECT_EQ(p.profile_id, f["nvidia_smi_gi_profile_id"]) << p.name;
      EXPECT_EQ(p.profile_kind, f["nvml_gi_profile_enum_value"]) << p.name;
      EXPECT_EQ(p.compute_slices, f["compute_slices"]) << p.name;
      EXPECT_EQ(p.memory_slices, f["memory_slices"]) << p.name;
      EXPECT_EQ(p.memory_slices, f["placements"]["size"]) << p.name;
      EXPECT_EQ(p.max_instances, f["max_instances"]) << p.name;
      EXPECT_EQ(p.memory_gb, f["memory_gb_nominal"]) << p.name;
      EXPECT_EQ(p.starts, f["placements"]["starts"].get<std::vector<unsigned>>()) << p.name;
      EXPECT_EQ(g->profile(p.name), &p);
      EXPECT_EQ(g->profile_by_id(p.profile_id), &p);
    }
  }
}

TEST(MigProfiles, OperatorsNamesFindTheirModel) {
  EXPECT_EQ(find_mig_geometry("H200")->model, "H200-SXM5-141GB");
  EXPECT_EQ(find_mig_geometry("h100-nvl")->model, "H100-NVL-94GB");
  EXPECT_EQ(find_mig_geometry("NVIDIA H100 80GB HBM3")->model, "H100-SXM5-80GB");
  EXPECT_EQ(find_mig_geometry("b200")->model, "B200-180GB");
  EXPECT_EQ(find_mig_geometry("A100-80GB")->model, "A100-SXM4-80GB");
  EXPECT_EQ(find_mig_geometry("A30"), nullptr);
  EXPECT_EQ(find_mig_geometry(""), nullptr);
  EXPECT_EQ(find_mig_geometry(0x20B710DEu), nullptr);  // A30: read from NVML instead
  // mig-parted's config names write "+me" as ".me".
  EXPECT_EQ(find_mig_geometry("H200")->profile("1g.18gb.me")->name, "1g.18gb+me");
}

}  // namespace
}  // namespace polyaccel
