// Resources and Allocate on the vendors' test libraries: the 8xH100 HGX node merged into the
// XE8640 capture (whole GPUs, MIG mixed and single, time-slicing), 8xMI300X and 8xGaudi2, with
// device nodes read from a sysfs/procfs tree the test builds; NCCL_IB_HCA from the capture's
// HCAs.
#include "kube/allocate.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/models.h"

namespace polyaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using namespace polyaccel::testing;

const std::string kGpu4e = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";  // XE8640 NUMA 3, mlx5_0/1
using polyaccel::testing::kGpu5f;
const std::string kGpuCb = "GPU-62e5f9b3-0d7a-c148-3b6f-9a1e4c8d02a7";  // NUMA 7, no HCA near
const std::string kGpuDb = "GPU-b8a14e70-5c9f-2d63-e07b-41f8a6c3d5b8";  // MIG: 3g, 2g, 1g

const PluginResource& resource(const std::vector<PluginResource>& all, const std::string& name) {
  for (const auto& r : all) {
    if (r.name == name) return r;
  }
  static PluginResource none;
  ADD_FAILURE() << "no resource " << name;
  return none;
}

std::vector<std::string> names(const std::vector<PluginResource>& all) {
  std::vector<std::string> out;
  for (const auto& r : all)
    out.push_back(r.name);
  return out;
}

void touch(const std::filesystem::path& p, const std::string& content = "") {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

TEST(Resources, HgxMigStrategies) {
  HostModel m = hgx_8xh100();
  auto none = plan_resources(m, {MigStrategy::none, nullptr});
  ASSERT_TRUE(none) << none.error().message();
  ASSERT_THAT(names(*none), ElementsAre("nvidia.com/gpu"));
  EXPECT_EQ((*none)[0].devices.size(), 8u);
  EXPECT_EQ((*none)[0].socket_name(), "polyaccel-nvidia.com_gpu.sock");

  auto mixed = plan_resources(m, {MigStrategy::mixed, nullptr});
  ASSERT_TRUE(mixed) << mixed.error().message();
  EXPECT_THAT(names(*mixed), ElementsAre("nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
                                         "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"));
  EXPECT_EQ(resource(*mixed, "nvidia.com/gpu").devices.size(), 7u);
  const auto& big = resource(*mixed, "nvidia.com/mig-3g.40gb");
  ASSERT_EQ(big.devices.size(), 1u);
  EXPECT_EQ(big.devices[0].id, "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58");
  EXPECT_EQ(big.devices[0].numa_nodes, std::vector<unsigned>{5});  // the parent's node

  auto single = plan_resources(m, {MigStrategy::single, nullptr});
  ASSERT_FALSE(single);
  EXPECT_THAT(single.error().message(), HasSubstr("does not have MIG enabled"));
}

TEST(Resources, TimeSlicingFourReplicasAndRenamedPools) {
  HostModel m = hgx_8xh100();
  auto cfg = parse_sharing_config(R"(
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
      rename: mig-1g.10gb.shared
)",
                                  "sharing.yaml");
  ASSERT_TRUE(cfg) << cfg.error().message();
  auto rs = plan_resources(m, {MigStrategy::mixed, &*cfg});
  ASSERT_TRUE(rs) << rs.error().message();
  EXPECT_THAT(names(*rs), ElementsAre("nvidia.com/gpu", "nvidia.com/mig-1g.10gb.shared",
                                      "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"));
  const auto& gpu = resource(*rs, "nvidia.com/gpu");
  EXPECT_EQ(gpu.devices.size(), 28u);
  EXPECT_EQ(gpu.max_replicas, 4u);
  EXPECT_EQ(gpu.sharing, SharingStrategy::time_slicing);
  EXPECT_NE(gpu.device(kGpu4e + "::3"), nullptr);
  EXPECT_EQ(gpu.device(kGpu4e + "::4"), nullptr);
  EXPECT_EQ(resource(*rs, "nvidia.com/mig-1g.10gb.shared").devices.size(), 2u);
  EXPECT_EQ(resource(*rs, "nvidia.com/mig-2g.20gb").sharing, SharingStrategy::none);

  auto mps = read_sharing_config(
      (shared_dir() / "fixtures/configs/nvidia-device-plugin_readme-example-3.yaml").string());
  ASSERT_TRUE(mps);
  auto refused = plan_resources(m, {MigStrategy::none, &*mps});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("sharing.mps is not supported"));
}

TEST(Allocate, NvidiaGetsUuidsAndTheHcasBesideItsGpus) {
  HostModel m = hgx_8xh100();
  auto rs = plan_resources(m, {MigStrategy::mixed, nullptr});
  ASSERT_TRUE(rs);
  auto nodes = read_device_nodes(m, "");
  const auto& gpu = resource(*rs, "nvidia.com/gpu");
  auto a = compute_allocation(m, gpu, nodes, {kGpu4e, kGpu5f}, {});
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->envs["NVIDIA_VISIBLE_DEVICES"], kGpu4e + "," + kGpu5f);
  // 4e:00.0 shares its switch with the dual-port ConnectX-6 (mlx5_0, mlx5_1), 5f:00.0 with
  // the ConnectX-7 mlx5_2.
  EXPECT_EQ(a->envs["NCCL_IB_HCA"], "=mlx5_0,mlx5_1,mlx5_2");
  EXPECT_TRUE(a->devices.empty());  // the NVIDIA container runtime makes the nodes
  // cb:00.0 (node 7) has no HCA on its node: the nearest by NUMA distance, on its socket, is
  // mlx5_3 on node 5, as topo, run and the audit say.
  a = compute_allocation(m, gpu, nodes, {kGpuCb}, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs["NCCL_IB_HCA"], "=mlx5_3");
  // A MIG device is named by its MIG UUID; its parent db:00.0 is beside mlx5_3.
  const auto& mig = resource(*rs, "nvidia.com/mig-2g.20gb");
  a = compute_allocation(m, mig, nodes, {mig.devices[0].id}, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs["NVIDIA_VISIBLE_DEVICES"], "MIG-e45a2b19-8c7d-5e03-a1f6-2d9b4c7e8a10");
  EXPECT_EQ(a->envs["NCCL_IB_HCA"], "=mlx5_3");
  auto bad = compute_allocation(m, gpu, nodes, {"GPU-00000000-0000-0000-0000-000000000000"}, {});
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("is not a device of nvidia.com/gpu"));
}

TEST(Allocate, NvidiaDeviceSpecsFromTheDriversProcFilesElseFromNvml) {
  HostModel m = hgx_8xh100();
  TempDir root;
  // The driver's file wins over NVML (which says 2 for 4e:00.0, its index): 6 here.
  touch(root.path() / "proc/driver/nvidia/gpus/0000:4e:00.0/information",
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 187\nDevice Minor: \t 6\n");
  auto nodes = read_device_nodes(m, root.path().string());
  auto rs = plan_resources(m, {MigStrategy::none, nullptr});
  AllocateOptions opts;
  opts.nvidia_device_specs = true;
  opts.dev_root = "/host/dev";
  auto a = compute_allocation(m, (*rs)[0], nodes, {kGpu4e}, opts);
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->envs["CUDA_VISIBLE_DEVICES"], kGpu4e);
  ASSERT_EQ(a->devices.size(), 4u);
  EXPECT_EQ(a->devices[0].container_path, "/dev/nvidia6");
  EXPECT_EQ(a->devices[0].host_path, "/host/dev/nvidia6");
  EXPECT_EQ(a->devices[1].container_path, "/dev/nvidiactl");
  // 5f:00.0 has no procfs entry: NVML's minor (nvmlDeviceGetMinorNumber: its index, 3).
  auto b = compute_allocation(m, (*rs)[0], nodes, {kGpu5f}, opts);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(b->devices[0].container_path, "/dev/nvidia3");
  // Neither (no vendor library answered for it): unknown, an error with device specs.
  for (auto& acc : m.accelerators)
    if (acc.pci.address.to_string() == "0000:5f:00.0") acc.inventory->device_minor.reset();
  nodes = read_device_nodes(m, root.path().string());
  auto c = compute_allocation(m, (*rs)[0], nodes, {kGpu5f}, opts);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message(), HasSubstr("0000:5f:00.0: its NVIDIA device minor is unknown"));
}

TEST(Allocate, ReplicasOfOneGpuNameItOnceAndFailRequestsGreaterThanOne) {
  HostModel m = hgx_8xh100();
  auto cfg = parse_sharing_config(
      "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n", "s");
  ASSERT_TRUE(cfg);
  auto rs = plan_resources(m, {MigStrategy::none, &*cfg});
  auto nodes = read_device_nodes(m, "");
  auto a = compute_allocation(m, (*rs)[0], nodes, {kGpuDb + "::0", kGpuDb + "::3"}, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs["NVIDIA_VISIBLE_DEVICES"], kGpuDb);
  cfg->fail_requests_greater_than_one = true;
  rs = plan_resources(m, {MigStrategy::none, &*cfg});
  auto refused = compute_allocation(m, (*rs)[0], nodes, {kGpuDb + "::0", kGpuDb + "::3"}, {});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("one device per container"));
  EXPECT_TRUE(compute_allocation(m, (*rs)[0], nodes, {kGpuDb + "::1"}, {}));
}

TEST(Allocate, AmdGetsKfdAndItsGpusDriNodes) {
  HostModel m = injected_only(true);
  ASSERT_EQ(m.accelerators.size(), 8u);
  TempDir root;
  for (unsigned i = 0; i < 8; ++i) {
    auto drm =
        root.path() / "sys/bus/pci/devices" / m.accelerators[i].pci.address.to_string() / "drm";
    std::filesystem::create_directories(drm / ("card" + std::to_string(i + 1)));
    std::filesystem::create_directories(drm / ("renderD" + std::to_string(128 + i)));
  }
  auto nodes = read_device_nodes(m, root.path().string());
  auto rs = plan_resources(m, {});
  ASSERT_TRUE(rs);
  ASSERT_THAT(names(*rs), ElementsAre("amd.com/gpu"));
  const auto& gpu = (*rs)[0];
  ASSERT_EQ(gpu.devices.size(), 8u);
  EXPECT_EQ(gpu.devices[1].id, "0000:26:00.0");
  auto a = compute_allocation(m, gpu, nodes, {"0000:26:00.0", "0000:a6:00.0"}, {});
  ASSERT_TRUE(a) << a.error().message();
  std::vector<std::string> paths;
  for (const auto& d : a->devices)
    paths.push_back(d.container_path);
  EXPECT_THAT(paths, ElementsAre("/dev/kfd", "/dev/dri/card2", "/dev/dri/renderD129",
                                 "/dev/dri/card6", "/dev/dri/renderD133"));
  EXPECT_TRUE(a->envs.empty());  // no NIC in this model
  // Without the driver's nodes there is nothing to give: an error, not an empty container.
  auto none = compute_allocation(m, gpu, read_device_nodes(m, ""), {"0000:26:00.0"}, {});
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message(), HasSubstr("no DRM card or render node"));
}

TEST(Allocate, GaudiGetsAccelNodesAndHabanaVariables) {
  HostModel m = injected_only(false);
  ASSERT_EQ(m.accelerators.size(), 8u);
  TempDir root;
  for (unsigned i = 0; i < 8; ++i) {
    auto pci = root.path() / "sys/bus/pci/devices" / m.accelerators[i].pci.address.to_string();
    std::filesystem::create_directories(pci / "accel" / ("accel" + std::to_string(7 - i)));
  }
  auto nodes = read_device_nodes(m, root.path().string());
  auto rs = plan_resources(m, {});
  ASSERT_TRUE(rs);
  ASSERT_THAT(names(*rs), ElementsAre("habana.ai/gaudi"));
  const auto& hpu = (*rs)[0];
  EXPECT_EQ(hpu.devices[0].id, "AN23012841");  // the board serial, as Habana's plugin
  auto a = compute_allocation(m, hpu, nodes, {"AN23012841", "AN23012857"}, {});
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->envs["HABANA_VISIBLE_DEVICES"], "7,6");
  EXPECT_EQ(a->envs["HL_VISIBLE_DEVICES"], "/dev/accel/accel7,/dev/accel/accel6");
  EXPECT_EQ(a->envs["HL_VISIBLE_DEVICES_UUID"], "AN23012841,AN23012857");
  std::vector<std::string> paths;
  for (const auto& d : a->devices)
    paths.push_back(d.host_path);
  EXPECT_THAT(paths, ElementsAre("/dev/accel/accel7", "/dev/accel/accel_controlD7",
                                 "/dev/accel/accel6", "/dev/accel/accel_controlD6"));
}

TEST(Allocate, JurecaEachA100HasItsOwnHcaAndG4dnEfaIsNotAnIbHca) {
  HostModel j = load_fixture(kJureca);
  for (size_t i = 0; i < j.accelerators.size(); ++i) {
    auto hcas = closest_rdma_devices(j, {i});
    ASSERT_EQ(hcas.size(), 1u) << j.accelerators[i].id;
    EXPECT_EQ(hcas[0].rfind("mlx5_", 0), 0u);
  }
  EXPECT_EQ(closest_rdma_devices(j, {0, 1, 2, 3}).size(), 4u);
  HostModel g = load_fixture(kG4dn);
  EXPECT_TRUE(closest_rdma_devices(g, {4, 5}).empty());
}

// --device-list-strategy auto on container runtime configurations under a root the test builds:
// the corpus's real containerd 1.7 (version 2) and 2.0 (version 3) files and CRI-O's crio.conf,
// and the version defaults alone; read by the audit's parser (read_container_runtime_facts).
class AutoDeviceListStrategy : public ::testing::Test {
 protected:
  void copy_corpus(const std::string& name, const std::string& to) {
    std::string text = read_text(std::string(POLYACCEL_SOURCE_DIR) +
                                 "/tests/fuzz/corpus/container_runtime_toml/" + name);
    ASSERT_FALSE(text.empty()) << name;
    write(to, text);
  }
  void write(const std::string& file, const std::string& text) { write_text(root() / file, text); }
  // A spec as `polyaccel cdi generate --cdi-dir /var/run/cdi` writes it (kind polyaccel.io/gpu).
  void write_polyaccel_spec(const std::string& dir = "var/run/cdi") {
    write(dir + "/polyaccel.io-gpu.json",
          R"({"cdiVersion":"0.8.0","kind":"polyaccel.io/gpu","devices":[{"name":")" + kGpu4e +
              R"(","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}]})");
  }
  DeviceListChoice choose(const std::string& text = "auto") {
    auto c = choose_device_list_strategy(text, "--device-list-strategy",
                                         read_container_runtime_facts(root().string()));
    EXPECT_TRUE(c) << c.error().message();
    return c ? *c : DeviceListChoice{};
  }
  std::filesystem::path root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

TEST_F(AutoDeviceListStrategy, Containerd17WithEnableCdiAndOurSpecSendsCdiDevices) {
  write("usr/bin/containerd", "");
  copy_corpus("containerd-1.7-v2.toml", "etc/containerd/config.toml");
  write_polyaccel_spec();
  auto c = choose();
  EXPECT_EQ(to_string(c.strategy), "envvar,cdi-cri");
  EXPECT_EQ(c.reason,
            "auto: /etc/containerd/config.toml (config version 2) sets enable_cdi = true and reads "
            "/var/run/cdi/polyaccel.io-gpu.json");
}

TEST_F(AutoDeviceListStrategy, CdiOnWithoutOurSpecStaysEnvvar) {
  write("usr/bin/containerd", "");
  copy_corpus("containerd-1.7-v2.toml", "etc/containerd/config.toml");
  write("etc/cdi/nvidia.yaml",
        "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"
        "  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n");
  auto c = choose();
  EXPECT_EQ(to_string(c.strategy), "envvar");
  EXPECT_THAT(c.reason, HasSubstr("sets enable_cdi = true, but no polyaccel.io spec is in the CDI "
                                  "directories containerd reads"));
}

TEST_F(AutoDeviceListStrategy, Containerd20ThatTurnsCdiOffStaysEnvvar) {
  write("usr/bin/containerd", "");
  copy_corpus("containerd-2.0-v3.toml", "etc/containerd/config.toml");
  write_polyaccel_spec();
  auto c = choose();
  EXPECT_EQ(to_string(c.strategy), "envvar");
  EXPECT_EQ(c.reason,
            "auto: /etc/containerd/config.toml (config version 3) sets enable_cdi = false");
}

TEST_F(AutoDeviceListStrategy, TheDefaultOfEachContainerdVersion) {
  write("usr/bin/containerd", "");
  write_polyaccel_spec("etc/cdi");
  write("etc/containerd/config.toml", "version = 3\n");
  auto two = choose();
  EXPECT_EQ(to_string(two.strategy), "envvar,cdi-cri");
  EXPECT_THAT(two.reason, HasSubstr("leaves enable_cdi at containerd 2.x's default, true"));
  write("etc/containerd/config.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n");
  auto one = choose();
  EXPECT_EQ(to_string(one.strategy), "envvar");
  EXPECT_THAT(one.reason, HasSubstr("leaves enable_cdi at containerd 1.x's default, false"));
  std::filesystem::remove(root() / "etc/containerd/config.toml");
  auto unknown = choose();
  EXPECT_EQ(to_string(unknown.strategy), "envvar");
  EXPECT_EQ(unknown.reason,
            "auto: containerd has no /etc/containerd/config.toml: its CDI default is unknown");
}

TEST_F(AutoDeviceListStrategy, CriOHasCdiUnlessItsSpecDirsAreEmptied) {
  write("usr/bin/crio", "");
  copy_corpus("crio.conf", "etc/crio/crio.conf");
  write_polyaccel_spec();
  auto on = choose();
  EXPECT_EQ(to_string(on.strategy), "envvar,cdi-cri");
  EXPECT_EQ(on.reason, "auto: CRI-O has CDI on and reads /var/run/cdi/polyaccel.io-gpu.json");
  write("etc/crio/crio.conf.d/99-nocdi.conf", "[crio.runtime]\ncdi_spec_dirs = []\n");
  auto off = choose();
  EXPECT_EQ(to_string(off.strategy), "envvar");
  EXPECT_EQ(off.reason, "auto: CRI-O's cdi_spec_dirs = [] leaves it no CDI spec to read");
}

TEST_F(AutoDeviceListStrategy, BothRuntimesMustHaveCdiAndNoneMeansEnvvar) {
  auto none = choose();
  EXPECT_EQ(to_string(none.strategy), "envvar");
  EXPECT_EQ(none.reason, "auto: no containerd or CRI-O found");
  write("usr/bin/crio", "");
  copy_corpus("crio.conf", "etc/crio/crio.conf");
  write("usr/bin/containerd", "");
  copy_corpus("containerd-2.0-v3.toml", "etc/containerd/config.toml");
  write_polyaccel_spec();
  EXPECT_EQ(to_string(choose().strategy), "envvar");
}

TEST_F(AutoDeviceListStrategy, AnExplicitStrategyOverridesTheRuntime) {
  write("usr/bin/containerd", "");
  copy_corpus("containerd-2.0-v3.toml", "etc/containerd/config.toml");
  auto c = choose("cdi-cri");
  EXPECT_EQ(to_string(c.strategy), "cdi-cri");
  EXPECT_EQ(c.reason, "set by --device-list-strategy");
  auto bad = choose_device_list_strategy("auto,cdi-cri", "--device-list-strategy",
                                         read_container_runtime_facts(root().string()));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "--device-list-strategy: 'auto' is not a device list strategy (use envvar, cdi-cri, "
            "envvar,cdi-cri or auto)");
}

}  // namespace
}  // namespace polyaccel
