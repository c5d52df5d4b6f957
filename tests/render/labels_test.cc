// Node labels: GPU Feature Discovery's names on the 8xH100 node of the NVML test library merged
// into the XE8640 capture (whole, shared and MIG resources), AMD and Gaudi from their test
// libraries, polyaccel.io facts from the capture, and the feature file written only on change.
#include "render/labels.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file_io.h"
#include "kube/models.h"

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using ::testing::HasSubstr;

TEST(Labels, NvidiaAsGpuFeatureDiscoveryNamesThem) {
  HostModel m = hgx_8xh100();
  LabelOptions o;
  o.mig_strategy = "mixed";
  o.resources = {{"nvidia.com/gpu", 7, 4, "time-slicing", false},
                 {"nvidia.com/mig-3g.40gb", 1, 1, "none", false}};
  NodeLabels l = node_labels(m, o);
  EXPECT_EQ(l["nvidia.com/gpu.present"], "true");
  EXPECT_EQ(l["nvidia.com/gpu.count"], "7");
  EXPECT_EQ(l["nvidia.com/gpu.replicas"], "4");
  EXPECT_EQ(l["nvidia.com/gpu.sharing-strategy"], "time-slicing");
  EXPECT_EQ(l["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3-SHARED");
  EXPECT_EQ(l["nvidia.com/gpu.memory"], "81559");
  EXPECT_EQ(l["nvidia.com/gpu.family"], "hopper");
  EXPECT_EQ(l["nvidia.com/gpu.compute.major"], "9");
  EXPECT_EQ(l["nvidia.com/gpu.compute.minor"], "0");
  EXPECT_EQ(l["nvidia.com/cuda.driver-version.full"], "550.90.07");
  EXPECT_EQ(l["nvidia.com/cuda.driver-version.revision"], "07");
  EXPECT_EQ(l["nvidia.com/mig.strategy"], "mixed");
  EXPECT_EQ(l["nvidia.com/mig.capable"], "true");
  EXPECT_EQ(l["nvidia.com/mig-3g.40gb.count"], "1");
  EXPECT_EQ(l["nvidia.com/mig-3g.40gb.memory"], "40192");
  EXPECT_EQ(l["nvidia.com/mig-3g.40gb.slices.gi"], "3");
  EXPECT_EQ(l["nvidia.com/mig-3g.40gb.product"], "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb");
  // The capture's facts: four mlx5 HCAs, three GPUs share a switch with one.
  EXPECT_EQ(l["polyaccel.io/rdma-nics"], "4");
  EXPECT_EQ(l["polyaccel.io/accelerators"], "8");
  EXPECT_EQ(l["polyaccel.io/accelerators-with-pcie-local-rdma-nic"], "3");
  EXPECT_EQ(l["polyaccel.io/accelerators-peer-linked"], "8");
  EXPECT_EQ(l["polyaccel.io/numa-nodes"], "8");
  for (const auto& [k, v] : l) {
    EXPECT_LE(v.size(), 63u) << k;
    EXPECT_EQ(v.find_first_of(" ,/="), std::string::npos) << k << "=" << v;
  }
}

TEST(Labels, AmdAndGaudi) {
  HostModel amd = injected_only(true);
  NodeLabels l = node_labels(amd, {"none", {{"amd.com/gpu", 8, 1, "none", false}}});
  EXPECT_EQ(l["amd.com/gpu.count"], "8");
  EXPECT_EQ(l["amd.com/gpu.product-name"], "AMD-Instinct-MI300X");
  EXPECT_EQ(l["amd.com/gpu.family"], "gfx942");
  EXPECT_EQ(l["amd.com/compute-memory-partition"], "spx_nps1");
  EXPECT_EQ(l.count("nvidia.com/gpu.present"), 0u);
  HostModel hpu = injected_only(false);
  l = node_labels(hpu, {"none", {{"habana.ai/gaudi", 8, 1, "none", false}}});
  EXPECT_EQ(l["habana.ai/gaudi.count"], "8");
  EXPECT_EQ(l["habana.ai/gaudi.product"], "HL-225");
  EXPECT_EQ(l["habana.ai/gaudi.memory"], "98304");
}

TEST(Labels, FeatureFileIsWrittenOnlyWhenItChanges) {
  TempDir dir;
  const std::string path = (dir.path() / "polyaccel").string();
  NodeLabels l = {{"nvidia.com/gpu.count", "8"}, {"polyaccel.io/rdma-nics", "4"}};
  auto w = write_feature_file(path, l);
  ASSERT_TRUE(w);
  EXPECT_TRUE(*w);
  EXPECT_EQ(*read_text_file(path), feature_file_text(l));
  EXPECT_THAT(*read_text_file(path),
              HasSubstr("\nnvidia.com/gpu.count=8\npolyaccel.io/rdma-nics=4\n"));
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  w = write_feature_file(path, l);
  ASSERT_TRUE(w);
  EXPECT_FALSE(*w);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // not replaced
  l["nvidia.com/gpu.count"] = "7";
  w = write_feature_file(path, l);
  ASSERT_TRUE(w);
  EXPECT_TRUE(*w);
  EXPECT_THAT(*read_text_file(path), HasSubstr("nvidia.com/gpu.count=7"));
  auto bad = write_feature_file((dir.path() / "missing/dir/polyaccel").string(), l);
  EXPECT_FALSE(bad);
}

}  // namespace
}  // namespace polyaccel
