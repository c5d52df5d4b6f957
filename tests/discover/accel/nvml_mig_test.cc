// MIG control through the production NVML loader against the test build of libnvidia-ml.so.1
// (tests/inject/nvml), which enforces the hardware's placement rules, driven by the 8xH200 MIG
// scenario: listing, the library's own profile geometry, creating at explicit placements,
// refusals with the driver's error codes, busy instances, and MIG mode changes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

#include "discover/accel/partition.h"

namespace polyaccel {
namespace {

const std::string kScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json";

class NvmlMig : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("NVML_INJECT_SCENARIO", kScenario.c_str(), 1);
    auto c = open_nvml_mig_control();
    ASSERT_TRUE(c) << c.error().message();
    control_ = std::move(*c);
  }
  void TearDown() override { control_.reset(); }  // nvmlShutdown: the next test starts afresh

  MigGpu gpu(unsigned index) {
    auto gpus = control_->gpus();
    EXPECT_TRUE(gpus) << gpus.error().message();
    for (const auto& g : *gpus) {
      if (g.index == index) return g;
    }
    ADD_FAILURE() << "no GPU " << index;
    return {};
  }

  std::unique_ptr<MigControl> control_;
};

TEST_F(NvmlMig, ListsModesInstancesAndBusyOnes) {
  auto gpus = control_->gpus();
  ASSERT_TRUE(gpus);
  ASSERT_EQ(gpus->size(), 8u);
  const MigGpu& g0 = (*gpus)[0];
  EXPECT_EQ(g0.pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(g0.pci_id, 0x233510DEu);
  EXPECT_TRUE(g0.mig_enabled);
  ASSERT_EQ(g0.instances.size(), 7u);
  for (unsigned s = 0; s < 7; ++s) {
    EXPECT_EQ(g0.instances[s].start, s);
    EXPECT_EQ(g0.instances[s].size, 1u);
    EXPECT_EQ(g0.instances[s].profile, "1g.18gb");
    EXPECT_TRUE(g0.instances[s].has_compute_instance);
    EXPECT_EQ(g0.instances[s].uuid.rfind("MIG-", 0), 0u);
  }
  EXPECT_EQ((*gpus)[2].instances[5].pids, std::vector<unsigned>{41877});
  EXPECT_TRUE((*gpus)[2].instances[4].pids.empty());
  EXPECT_FALSE((*gpus)[4].mig_enabled);
  EXPECT_TRUE((*gpus)[4].instances.empty());
}

TEST_F(NvmlMig, LibraryGeometryNamesProfilesAsNvidiaSmi) {
  auto g = gpu(3).library_geometry;
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->compute_slices, 7u);
  EXPECT_EQ(g->memory_slices, 8u);
  EXPECT_EQ(g->max_instances, 7u);
  std::vector<std::string> names;
  for (const auto& p : g->profiles)
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb",
                                             "1g.18gb+me", "1g.35gb"}));
  const MigProfile* third = g->profile("3g.71gb");
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->profile_id, 9u);
  EXPECT_EQ(third->memory_slices, 4u);
  EXPECT_EQ(third->starts, (std::vector<unsigned>{0, 4}));
}

TEST_F(NvmlMig, CreatesAtTheGivenPlacementAndRefusesWhatTheHardwareRefuses) {
  // GPU 3: MIG on, empty. 3g.71gb is profile id 9, 1g.18gb 19, 2g.35gb 14.
  auto made = control_->create(3, 9, 4);
  ASSERT_TRUE(made) << made.error().message();
  EXPECT_EQ(made->start, 4u);
  EXPECT_EQ(made->size, 4u);
  EXPECT_TRUE(made->has_compute_instance);
  EXPECT_EQ(made->uuid.rfind("MIG-", 0), 0u);
  auto bad_start = control_->create(3, 9, 2);  // 3g starts at 0 or 4 only
  ASSERT_FALSE(bad_start);
  EXPECT_NE(bad_start.error().problem.find("(NVML 2)"), std::string::npos);
  auto overlap = control_->create(3, 14, 4);  // 2g at 4 overlaps the 3g
  ASSERT_FALSE(overlap);
  EXPECT_NE(overlap.error().problem.find("(NVML 23)"), std::string::npos);
  auto slice7 = control_->create(3, 19, 7);  // a 1g never starts at 7
  ASSERT_FALSE(slice7);
  ASSERT_TRUE(control_->create(3, 9, 0));
  auto full = control_->create(3, 19, 0);
  ASSERT_FALSE(full);
  auto now = gpu(3);
  ASSERT_EQ(now.instances.size(), 2u);
  EXPECT_EQ(now.instances[0].profile, "3g.71gb");
  EXPECT_EQ(now.instances[0].start, 0u);
}

TEST_F(NvmlMig, BusyInstancesCannotBeDestroyed) {
  MigGpu g2 = gpu(2);
  auto busy = control_->destroy(2, g2.instances[5].gpu_instance_id);
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().problem.find("(NVML 19)"), std::string::npos);
  ASSERT_TRUE(control_->destroy(2, g2.instances[4].gpu_instance_id));
  EXPECT_EQ(gpu(2).instances.size(), 6u);
  // The freed slice takes a new instance; the others kept their ids and places.
  ASSERT_TRUE(control_->create(2, 19, 4));
  MigGpu after = gpu(2);
  ASSERT_EQ(after.instances.size(), 7u);
  EXPECT_EQ(after.instances[5].gpu_instance_id, g2.instances[5].gpu_instance_id);
  EXPECT_EQ(after.instances[5].pids, std::vector<unsigned>{41877});
  auto gone = control_->destroy(2, 99);
  EXPECT_FALSE(gone);
}

TEST_F(NvmlMig, ModeChangesApplyOrWaitForAReset) {
  auto pending = control_->set_mig_mode(4, true);
  ASSERT_TRUE(pending);
  EXPECT_EQ(*pending, MigModeChange::pending_reset);
  MigGpu g4 = gpu(4);
  EXPECT_FALSE(g4.mig_enabled);
  EXPECT_TRUE(g4.mig_pending);
  EXPECT_FALSE(control_->create(4, 19, 0)) << "no instances before the reset";
  auto applied = control_->set_mig_mode(5, true);
  ASSERT_TRUE(applied);
  EXPECT_EQ(*applied, MigModeChange::applied);
  EXPECT_TRUE(control_->create(5, 0, 0));  // 7g.141gb
  auto same = control_->set_mig_mode(3, true);
  ASSERT_TRUE(same);
  EXPECT_EQ(*same, MigModeChange::unchanged);
  auto in_use = control_->set_mig_mode(0, false);  // instances exist
  ASSERT_FALSE(in_use);
  EXPECT_NE(in_use.error().problem.find("(NVML 19)"), std::string::npos);
}

TEST_F(NvmlMig, AGpuInstanceWhoseComputeInstanceFailsIsDestroyedAgain) {
  control_.reset();
  polyaccel::testing::TempDir tmp;
  auto scenario = nlohmann::json::parse(std::ifstream(kScenario));
  scenario["fail_compute_instance_create_after"] = 1;
  std::string path = (tmp.path() / "faulty.json").string();
  std::ofstream(path) << scenario.dump();
  ::setenv("NVML_INJECT_SCENARIO", path.c_str(), 1);
  auto c = open_nvml_mig_control();
  ASSERT_TRUE(c);
  control_ = std::move(*c);
  ASSERT_TRUE(control_->create(3, 9, 0));
  auto failed = control_->create(3, 9, 4);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().input.find("destroyed again"), std::string::npos)
      << failed.error().message();
  auto left = gpu(3).instances;
  ASSERT_EQ(left.size(), 1u) << "no GPU instance without its compute instance is left behind";
  EXPECT_EQ(left[0].start, 0u);
}

// NVML_GPU_INSTANCE_PROFILE_COUNT is 18 from CUDA 13.2.1's nvml.h: the profile enum 0x11
// (NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX) is listed and can be created. A driver of an older
// header answers NVML_ERROR_INVALID_ARGUMENT for it, which leaves it out and nothing else.
MigControl& reopen(std::unique_ptr<MigControl>& control, const std::string& scenario) {
  control.reset();
  ::setenv("NVML_INJECT_SCENARIO", scenario.c_str(), 1);
  auto c = open_nvml_mig_control();
  EXPECT_TRUE(c) << c.error().message();
  control = std::move(*c);
  return *control;
}

std::vector<std::string> profile_names(const MigGpu& g) {
  std::vector<std::string> names;
  if (g.library_geometry) {
    for (const auto& p : g.library_geometry->profiles)
      names.push_back(p.name);
  }
  return names;
}

TEST_F(NvmlMig, TheThreeSliceGfxProfileOfNewerDriversIsListedAndCreated) {
  const std::string b200 = std::string(NVML_SCENARIO_DIR) + "/b200-nvlink36-mig.json";
  MigControl& control = reopen(control_, b200);
  MigGpu g0 = gpu(0);
  EXPECT_EQ(profile_names(g0),
            (std::vector<std::string>{"1g.23gb", "3g.90gb", "7g.180gb", "3g.90gb+gfx"}));
  const MigProfile* gfx =
      g0.library_geometry ? g0.library_geometry->profile("3g.90gb+gfx") : nullptr;
  ASSERT_NE(gfx, nullptr);
  EXPECT_EQ(gfx->profile_id, 51u);
  EXPECT_EQ(gfx->profile_kind, 0x11u);
  auto made = control.create(0, 51, 4);
  ASSERT_TRUE(made) << made.error().message();
  EXPECT_EQ(made->start, 4u);
  EXPECT_EQ(made->size, 4u);
  ASSERT_EQ(gpu(0).instances.size(), 1u);
  EXPECT_EQ(gpu(0).instances[0].profile, "3g.90gb+gfx");

  // The same GPU on a driver that knows 17 profile enums: 0x11 is not there, the rest is.
  polyaccel::testing::TempDir tmp;
  auto scenario = nlohmann::json::parse(std::ifstream(b200));
  scenario["gpu_instance_profile_count"] = 17;
  const std::string older = (tmp.path() / "older-driver.json").string();
  std::ofstream(older) << scenario.dump();
  MigControl& old_control = reopen(control_, older);
  EXPECT_EQ(profile_names(gpu(0)), (std::vector<std::string>{"1g.23gb", "3g.90gb", "7g.180gb"}));
  EXPECT_FALSE(old_control.create(0, 51, 4));
  EXPECT_TRUE(old_control.create(0, 9, 4));
}

}  // namespace
}  // namespace polyaccel
