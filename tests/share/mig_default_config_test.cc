// The default ConfigMap of MIG layouts (share/mig_default_config.h): the file deploy/ ships is
// what the generator writes from our profile tables, mig-parted's parser takes it, and every
// config it has fits an empty GPU of every model it names.
#include <gtest/gtest.h>

#include "share/mig_default_config.h"
#include "share/mig_parted_config.h"
#include "share/mig_profiles.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

const std::filesystem::path kShipped =
    std::filesystem::path(POLYACCEL_SOURCE_DIR) /
    "deploy/kubernetes/components/mig-manager/config-default.yaml";

TEST(MigDefaultConfig, TheShippedFileIsTheGeneratedOne) {
  std::string generated = default_mig_parted_config_yaml();
  std::string shipped = polyaccel::testing::read_text(kShipped);
  if (shipped != generated) {
    std::string path = ::testing::TempDir() + "polyaccel-config-default.yaml";
    polyaccel::testing::write_text(path, generated);
    FAIL() << kShipped << " differs from the profile tables: the current text is in " << path
           << "; copy it over the shipped file";
  }
}

TEST(MigDefaultConfig, EveryConfigFitsAnEmptyGpuOfEveryModel) {
  auto config = parse_mig_parted_config(default_mig_parted_config_yaml(), "config-default.yaml");
  ASSERT_TRUE(config) << config.error().message();
  for (const char* name : {"all-disabled", "all-enabled", "all-balanced", "all-1g.18gb",
                           "all-7g.141gb", "all-1g.10gb.me", "all-3g.40gb"})
    EXPECT_TRUE(config->configs.count(name)) << name;
  unsigned planned = 0;
  for (const auto& [name, entries] : config->configs) {
    for (const auto& g : builtin_mig_geometries()) {
      std::vector<MigPartedGpu> gpus = {{0, g.pci_ids.front()}};
      auto targets = select_mig_parted_config(*config, name, gpus);
      ASSERT_TRUE(targets) << name << ": " << targets.error().message();
      if (!(*targets)[0]) continue;  // a profile this model does not have
      MigGpuInput in{0, &g, true, g.pci_ids.front(), {}};
      auto plan = plan_mig_per_gpu({in}, {*(*targets)[0]}, false);
      ASSERT_TRUE(plan) << name << " on " << g.model << ": " << plan.error().message();
      EXPECT_TRUE(plan->fit) << name << " on " << g.model << ": " << plan->reason;
      ++planned;
    }
  }
  EXPECT_GT(planned, 40u);
  // all-1g.18gb is the H200's and fills it; all-balanced is mig-parted's H200 layout.
  const MigGeometry* h200 = find_mig_geometry("H200");
  ASSERT_TRUE(h200);
  auto all_1g = select_mig_parted_config(*config, "all-1g.18gb", {{0, h200->pci_ids.front()}});
  ASSERT_TRUE(all_1g && (*all_1g)[0]);
  EXPECT_EQ((*all_1g)[0]->devices, (MigRequest{{"1g.18gb", 7}}));
  auto balanced = select_mig_parted_config(*config, "all-balanced", {{0, h200->pci_ids.front()}});
  ASSERT_TRUE(balanced && (*balanced)[0]);
  EXPECT_EQ((*balanced)[0]->devices, (MigRequest{{"1g.18gb", 2}, {"2g.35gb", 1}, {"3g.71gb", 1}}));
}

}  // namespace
}  // namespace polyaccel
