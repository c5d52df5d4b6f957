// AMD Device Config Manager profiles (share/amd_partition_config.h): DCM's own example ConfigMap
// shapes, its checks (GPUs counted, skipped ids, one memory mode), and the GPUs each set gets.
#include <gtest/gtest.h>

#include "share/amd_partition_config.h"

namespace polyaccel {
namespace {

// The shape of DCM's docs/configuration/configmap.md example.
const std::string kDcmExample = R"({
  "gpu-config-profiles": {
    "default": {"skippedGPUs": {"ids": []},
                "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 6},
                             {"computePartition": "SPX", "memoryPartition": "NPS1", "numGPUsAssigned": 2}]},
    "profile-1": {"skippedGPUs": {"ids": [0, 1, 2]},
                  "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 5}]}
  },
  "gpuClientSystemdServices": {"names": ["amd-metrics-exporter", "gpuagent"]}
})";

TEST(AmdPartitionConfig, DcmProfilesGiveEachGpuItsModes) {
  auto config = parse_amd_partition_config(kDcmExample, "config.json");
  ASSERT_TRUE(config) << config.error().message();
  auto d = select_amd_partition_profile(*config, "default", 8);
  ASSERT_TRUE(d) << d.error().message();
  for (unsigned i = 0; i < 8; ++i) {
    ASSERT_TRUE((*d)[i]);
    EXPECT_EQ((*d)[i]->compute, i < 6 ? "CPX" : "SPX") << i;
  }
  auto p1 = select_amd_partition_profile(*config, "profile-1", 8);
  ASSERT_TRUE(p1) << p1.error().message();
  for (unsigned i = 0; i < 3; ++i)
    EXPECT_FALSE((*p1)[i]) << "skipped " << i;
  for (unsigned i = 3; i < 8; ++i)
    EXPECT_EQ((*p1)[i]->compute, "CPX");
  auto small = select_amd_partition_profile(*config, "profile-1", 4);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message().find("assigns 5 GPUs and skips 3 on a node with 4"),
            std::string::npos);
  auto unknown = select_amd_partition_profile(*config, "nope", 8);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("default, profile-1"), std::string::npos);
}

TEST(AmdPartitionConfig, WhatDcmRefusesIsBadInputNamingIt) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[]", "not a JSON object"},
      {R"({"profiles": {}})", "unknown key profiles"},
      {R"({"gpu-config-profiles": {"p": {"profiles": []}}})", "non-empty list"},
      {R"({"gpu-config-profiles": {"p": {"profiles": [{"computePartition": "XPX", "memoryPartition": "NPS1", "numGPUsAssigned": 1}]}}})",
       "computePartition must be one of"},
      {R"({"gpu-config-profiles": {"p": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 0}]}}})",
       "numGPUsAssigned must be 1..64"},
      {R"({"gpu-config-profiles": {"p": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1"}]}}})",
       "numGPUsAssigned"},
      {R"({"gpu-config-profiles": {"p": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS4", "numGPUsAssigned": 2}, {"computePartition": "SPX", "memoryPartition": "NPS1", "numGPUsAssigned": 2}]}}})",
       "one memoryPartition per profile"},
      {R"({"gpu-config-profiles": {"p": {"skippedGPUs": {"ids": [1, 1]}, "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 2}]}}})",
       "skipped twice"},
      {R"({"gpu-config-profiles": {"p": {"skippedGPUs": {"ids": [-1]}, "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1", "numGPUsAssigned": 2}]}}})",
       "GPU numbers"},
  };
  for (const auto& [text, problem] : bad) {
    auto c = parse_amd_partition_config(text, "config.json");
    ASSERT_FALSE(c) << text;
    EXPECT_EQ(c.error().code, ErrorCode::bad_input);
    EXPECT_NE(c.error().message().find(problem), std::string::npos) << c.error().message();
    EXPECT_NE(c.error().message().find("config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace polyaccel
