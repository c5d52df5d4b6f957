// The sharing config: NVIDIA's README examples (../shared/fixtures/configs) read as NVIDIA's
// plugin reads them, polyaccel's extensions (per device, per product, allocation policy) and
// bad files, each refused with the key named.
#include "share/time_slicing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using ::testing::HasSubstr;

std::string config_fixture(const std::string& name) {
  return (polyaccel::testing::shared_dir() / "fixtures/configs" / name).string();
}

SharingConfig parse_ok(const std::string& text) {
  auto c = parse_sharing_config(text, "test.yaml");
  EXPECT_TRUE(c) << (c ? "" : c.error().message());
  return c ? *c : SharingConfig{};
}

std::string parse_error(const std::string& text) {
  auto c = parse_sharing_config(text, "test.yaml");
  EXPECT_FALSE(c);
  return c ? "" : c.error().message();
}

ShareableDevice gpu(unsigned index, const std::string& uuid = "",
                    const std::string& product = "NVIDIA H100 80GB HBM3") {
  ShareableDevice d;
  d.resource = "nvidia.com/gpu";
  d.position = index;
  d.gpu_index = index;
  d.uuid = uuid;
  d.product = product;
  return d;
}

TEST(TimeSlicing, NvidiaReadmeExampleTwoIsTenReplicasOfEveryGpu) {
  auto c = read_sharing_config(config_fixture("nvidia-device-plugin_readme-example-2.yaml"));
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->strategy, SharingStrategy::time_slicing);
  ASSERT_EQ(c->resources.size(), 1u);
  EXPECT_EQ(c->resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(c->resources[0].replicas, 10u);
  EXPECT_TRUE(c->resources[0].devices.all);
  EXPECT_FALSE(c->rename_by_default);
  EXPECT_FALSE(c->fail_requests_greater_than_one);  // time-slicing keeps NVIDIA's false
  for (unsigned i = 0; i < 8; ++i) {
    auto r = replication_for(*c, gpu(i));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->replicas, 10u);
    EXPECT_EQ(r->resource, "nvidia.com/gpu");
  }
  // Another resource is not shared.
  ShareableDevice amd = gpu(0);
  amd.resource = "amd.com/gpu";
  EXPECT_EQ(replication_for(*c, amd)->replicas, 1u);
}

TEST(TimeSlicing, NvidiaReadmeExampleOneHasFlagsAndNoSharing) {
  auto c = read_sharing_config(config_fixture("nvidia-device-plugin_readme-example-1.yaml"));
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->strategy, SharingStrategy::none);
  EXPECT_EQ(c->mig_strategy, "none");
  EXPECT_TRUE(c->resources.empty());
}

TEST(TimeSlicing, NvidiaReadmeExampleThreeIsMpsWithOneDevicePerContainer) {
  auto c = read_sharing_config(config_fixture("nvidia-device-plugin_readme-example-3.yaml"));
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->strategy, SharingStrategy::mps);
  EXPECT_TRUE(c->fail_requests_greater_than_one);  // NVIDIA's default under MPS
  ASSERT_EQ(c->resources.size(), 1u);
  EXPECT_EQ(c->resources[0].replicas, 10u);
}

TEST(TimeSlicing, RenameByDefaultAndRename) {
  auto c = parse_ok(R"(
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
      rename: mig-small
)");
  EXPECT_TRUE(c.fail_requests_greater_than_one);
  auto r = replication_for(c, gpu(0));
  EXPECT_EQ(r->resource, "nvidia.com/gpu.shared");
  EXPECT_EQ(r->replicas, 4u);
  ShareableDevice mig = gpu(0, "MIG-2f9e7a10-5c3b-4d8e-9f01-23456789abcd");
  mig.resource = "nvidia.com/mig-1g.10gb";
  mig.mig_index = 1;
  EXPECT_EQ(replication_for(c, mig)->resource, "nvidia.com/mig-small");
}

TEST(TimeSlicing, PerDevicePerProductAndCountAreHonoured) {
  auto c = parse_ok(R"(
version: v1
sharing:
  timeSlicing:
    allocationPolicy: packed
    resources:
    - name: nvidia.com/gpu
      devices: [0, "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"]
      replicas: 8
      rename: gpu.small
    - name: nvidia.com/gpu
      devices: ["2"]
      product: A100
      replicas: 3
    - name: nvidia.com/mig-3g.40gb
      devices: ["7:0", "MIG-GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63/2/0"]
      replicas: 2
    - name: amd.com/gpu
      devices: 2
      replicas: 4
)");
  EXPECT_EQ(c.policy, ReplicaPolicy::packed);
  EXPECT_EQ(replication_for(c, gpu(0))->replicas, 8u);
  EXPECT_EQ(replication_for(c, gpu(0))->resource, "nvidia.com/gpu.small");
  EXPECT_EQ(replication_for(c, gpu(5, "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"))->replicas, 8u);
  EXPECT_EQ(replication_for(c, gpu(1))->replicas, 1u);
  // GPU 2 is selected only when it is an A100.
  EXPECT_EQ(replication_for(c, gpu(2))->replicas, 1u);
  EXPECT_EQ(replication_for(c, gpu(2, "", "NVIDIA A100-SXM4-80GB"))->replicas, 3u);
  ShareableDevice mig = gpu(7, "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  mig.resource = "nvidia.com/mig-3g.40gb";
  mig.mig_index = 0;
  EXPECT_EQ(replication_for(c, mig)->replicas, 2u);
  mig.mig_index = 1;
  EXPECT_EQ(replication_for(c, mig)->replicas, 1u);
  // The legacy form names the MIG device by its parent and GI/CI.
  mig.gpu_index = 3;
  mig.parent_uuid = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";
  mig.gpu_instance = 2;
  EXPECT_EQ(replication_for(c, mig)->replicas, 2u);
  ShareableDevice amd;
  amd.resource = "amd.com/gpu";
  amd.position = 1;
  EXPECT_EQ(replication_for(c, amd)->replicas, 4u);
  amd.position = 2;
  EXPECT_EQ(replication_for(c, amd)->replicas, 1u);
}

TEST(TimeSlicing, ADeviceSelectedTwiceIsAnError) {
  auto c = parse_ok(R"(
version: v1
sharing:
  timeSlicing:
    resources:
    - {name: nvidia.com/gpu, replicas: 2}
    - {name: nvidia.com/gpu, devices: [1], replicas: 3}
)");
  EXPECT_TRUE(replication_for(c, gpu(0)));
  auto r = replication_for(c, gpu(1));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("two sharing entries"));
}

TEST(TimeSlicing, BadFilesNameTheKey) {
  EXPECT_THAT(parse_error("version: v2\n"), HasSubstr("unknown version 'v2'"));
  EXPECT_THAT(parse_error("version: v1\nsharing:\n  timeSlicing:\n    resources: []\n"),
              HasSubstr("no resources specified"));
  EXPECT_THAT(parse_error("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"),
              HasSubstr("no replicas specified"));
  EXPECT_THAT(
      parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                  "replicas: 0}\n"),
      HasSubstr("sharing.timeSlicing.resources[0].replicas: '0' is out of range (1..1024)"));
  EXPECT_THAT(parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                          "replica: 4}\n"),
              HasSubstr("unknown key sharing.timeSlicing.resources[0].replica"));
  EXPECT_THAT(
      parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n"),
      HasSubstr("'gpu' is not a resource name"));
  EXPECT_THAT(parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                          "replicas: 2, devices: some}\n"),
              HasSubstr("'some' is neither 'all', a count nor a list of devices"));
  EXPECT_THAT(parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                          "replicas: 2, devices: [GPU-xyz]}\n"),
              HasSubstr("'GPU-xyz' is not a GPU index"));
  EXPECT_THAT(
      parse_error("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                  "replicas: many}\n"),
      HasSubstr(
          "test.yaml: sharing.timeSlicing.resources[0].replicas: 'many' is not a whole number"));
  EXPECT_THAT(parse_error("sharing: [\n"), HasSubstr("is not valid YAML"));
  EXPECT_THAT(parse_error("flags:\n  migStrategy: both\n"), HasSubstr("flags.migStrategy"));
  EXPECT_THAT(parse_error("sharing:\n  timeslicing: {}\n"),
              HasSubstr("unknown key sharing.timeslicing"));
  auto missing = read_sharing_config("/nonexistent/sharing.yaml");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("/nonexistent/sharing.yaml: no such file"));
}

TEST(TimeSlicing, AnEmptyFileSharesNothing) {
  auto c = parse_ok("");
  EXPECT_EQ(c.strategy, SharingStrategy::none);
  EXPECT_EQ(replication_for(c, gpu(0))->replicas, 1u);
}

// Counts past every range: refused with the key named, never wrapped (replicas 4294967296 was
// 0 and hid every GPU; devices 99999999999999999999 threw out of the parser and killed the agent).
TEST(TimeSlicing, HugeCountsAreRefusedByName) {
  auto config = [](const std::string& replicas, const std::string& devices) {
    return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
           "      replicas: " +
           replicas + "\n      devices: " + devices + "\n";
  };
  for (const char* replicas : {"4294967296", "4294967297", "99999999999999999999", "-1", "0", "1.5",
                               "1e3", "[1]", "1025"}) {
    EXPECT_THAT(parse_error(config(replicas, "all")), HasSubstr("replicas")) << replicas;
  }
  for (const char* devices : {"99999999999999999999", "4294967296", "0", "1025"}) {
    EXPECT_THAT(parse_error(config("2", devices)), HasSubstr("devices")) << devices;
  }
  EXPECT_EQ(parse_ok(config("1024", "8")).resources.at(0).replicas, 1024u);
}

}  // namespace
}  // namespace polyaccel
