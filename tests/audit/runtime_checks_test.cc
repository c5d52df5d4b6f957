// The runtime family on hosts the test builds: containerd and CRI-O configurations in their own
// TOML, CDI specs in the shape nvidia-ctk writes, device nodes, toolkit programs, running
// processes (proc/<pid>/comm) and the NVIDIA driver's version files. The model is the real XE8640
// capture (4 H100).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "audit/audit.h"
#include "audit/audit_test_support.h"
#include "audit/fake_host.h"
#include "discover/discover.h"

namespace polyaccel {
namespace {

using polyaccel::testing::FakeHost;
using polyaccel::testing::topology_fixture;
using ::testing::HasSubstr;

using polyaccel::testing::with_id;
using polyaccel::testing::xe8640;

std::vector<Finding> runtime_findings(const FakeHost& h, const HostModel& m = xe8640()) {
  TuningFacts facts = read_tuning_facts(h.root_string());
  std::vector<AcceleratorSample> none;
  auto all = run_audit({m, facts, none, {}}, {});
  std::vector<Finding> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [](const Finding& f) { return f.id.starts_with("runtime."); });
  return out;
}

// The spec nvidia-ctk 1.14 writes, trimmed: one device per GPU plus "all", shared edits with the
// control nodes and the driver's libraries.
std::string nvidia_spec(unsigned gpus, const std::string& driver = "550.54.15") {
  std::string s = "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n";
  for (unsigned i = 0; i < gpus; ++i) {
    s += "- name: \"" + std::to_string(i) + "\"\n  containerEdits:\n    deviceNodes:\n" +
         "    - path: /dev/nvidia" + std::to_string(i) + "\n";
  }
  s += "- name: all\n  containerEdits:\n    deviceNodes:\n";
  for (unsigned i = 0; i < gpus; ++i)
    s += "    - path: /dev/nvidia" + std::to_string(i) + "\n";
  s += "containerEdits:\n  deviceNodes:\n  - path: /dev/nvidiactl\n  - path: /dev/nvidia-uvm\n"
       "  mounts:\n  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so." +
       driver + "\n    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so." + driver +
       "\n    options: [ro, nosuid, nodev, bind]\n";
  return s;
}

// A well-kept NVIDIA container host: containerd 1.7 with CDI on, a spec for each GPU, the
// toolkit, both daemons, one driver release everywhere, an NVSwitch.
void well_kept(const FakeHost& h) {
  h.write("usr/bin/containerd", "");
  h.write("etc/containerd/config.toml",
          "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n"
          "  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"
          "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
          "  runtime_type = \"io.containerd.runc.v2\"\n");
  h.write("etc/cdi/nvidia.yaml", nvidia_spec(4));
  for (unsigned i = 0; i < 4; ++i)
    h.write("dev/nvidia" + std::to_string(i), "");
  h.write("dev/nvidiactl", "");
  h.write("dev/nvidia-uvm", "");
  h.write("usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "");
  h.write("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", "");
  h.link("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15");
  h.write("usr/bin/nvidia-ctk", "");
  h.write("proc/1/comm", "systemd\n");
  h.write("proc/812/comm", "nvidia-persiste\n");  // the kernel keeps 15 characters
  h.write("proc/813/comm", "nv-fabricmanage\n");
  h.write("proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC "
          "2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
  FakeHost::Function nvswitch("0000:05:00.0", "0x10de", "0x22a3", "0x068000");
  h.add_pci(nvswitch);
}

TEST(RuntimeChecks, AWellKeptHostHasNoFinding) {
  FakeHost h;
  well_kept(h);
  auto facts = read_tuning_facts(h.root_string()).runtime;
  EXPECT_TRUE(facts.containerd.installed);
  EXPECT_EQ(facts.containerd.config_version, 2);
  EXPECT_EQ(facts.containerd.runtimes, std::vector<std::string>{"nvidia"});
  ASSERT_EQ(facts.cdi_specs.size(), 1u);
  EXPECT_EQ(facts.cdi_specs[0].kind, "nvidia.com/gpu");
  EXPECT_EQ(facts.cdi_specs[0].device_names.size(), 5u);
  EXPECT_EQ(facts.nvidia_module_version, "550.54.15");
  EXPECT_EQ(facts.nvml_library_versions, std::set<std::string>{"550.54.15"});
  EXPECT_TRUE(facts.process_running("nvidia-persistenced"));
  EXPECT_TRUE(facts.process_running("nv-fabricmanager"));
  EXPECT_THAT(runtime_findings(h), ::testing::IsEmpty());
}

TEST(RuntimeChecks, ContainerdWithCdiOffByItsDefaultOrByTheFile) {
  FakeHost h;
  well_kept(h);
  h.write("etc/containerd/config.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n");
  auto f = with_id(runtime_findings(h), "runtime.cdi-disabled");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "containerd");
  EXPECT_THAT(f[0].observed, HasSubstr("containerd 1.x's default, false"));
  EXPECT_THAT(f[0].remedy.summary, HasSubstr("plugins.\"io.containerd.grpc.v1.cri\""));
  EXPECT_THAT(
      f[0].remedy.commands,
      ::testing::Contains("nvidia-ctk runtime configure --runtime=containerd --cdi.enabled"));

  // An imported drop-in turns it on, as containerd merges imports over the main file.
  h.write("etc/containerd/config.toml",
          "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n");
  h.write("etc/containerd/conf.d/10-cdi.toml",
          "[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.cdi-disabled").empty());

  // containerd 2.x: on by default, off only when the file says so.
  h.remove("etc/containerd/conf.d");
  h.write("etc/containerd/config.toml", "version = 3\n");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.cdi-disabled").empty());
  h.write("etc/containerd/config.toml",
          "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\"]\nenable_cdi = false\n");
  f = with_id(runtime_findings(h), "runtime.cdi-disabled");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("sets enable_cdi = false"));
  EXPECT_THAT(f[0].remedy.summary, HasSubstr("io.containerd.cri.v1.runtime"));
}

TEST(RuntimeChecks, BrokenContainerdConfigIsNamedWithItsLine) {
  FakeHost h;
  well_kept(h);
  h.write("etc/containerd/config.toml", "version = 2\n[plugins\nenable_cdi = true\n");
  auto facts = read_tuning_facts(h.root_string()).runtime;
  EXPECT_THAT(facts.containerd.problem, HasSubstr("/etc/containerd/config.toml:2"));
}

// A version that does not fit an int is refused, not narrowed (4294967299 would read as 3).
TEST(RuntimeChecks, ContainerdConfigVersionOutOfRangeIsAProblem) {
  FakeHost h;
  well_kept(h);
  for (const char* version : {"4294967299", "0", "-1", "4"}) {
    h.write("etc/containerd/config.toml", std::string("version = ") + version + "\n");
    auto facts = read_tuning_facts(h.root_string()).runtime;
    EXPECT_EQ(facts.containerd.config_path, "") << version;
    EXPECT_EQ(facts.containerd.config_version, 0) << version;
    EXPECT_THAT(facts.containerd.problem,
                HasSubstr(std::string("/etc/containerd/config.toml: version ") + version +
                          " is not one containerd reads"));
    EXPECT_TRUE(with_id(runtime_findings(h), "runtime.cdi-disabled").empty()) << version;
  }
}

TEST(RuntimeChecks, CrioWithItsSpecDirectoriesEmptied) {
  FakeHost h;
  well_kept(h);
  h.remove("etc/containerd");
  h.remove("usr/bin/containerd");
  h.write("usr/bin/crio", "");
  h.write("etc/crio/crio.conf", "[crio.runtime]\ndefault_runtime = \"crun\"\n");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.cdi-disabled").empty());
  h.write("etc/crio/crio.conf.d/99-nocdi.conf", "[crio.runtime]\ncdi_spec_dirs = []\n");
  auto f = with_id(runtime_findings(h), "runtime.cdi-disabled");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "cri-o");
}

TEST(RuntimeChecks, SpecsThatMissDevicesOrNameNone) {
  FakeHost h;
  well_kept(h);
  h.write("etc/cdi/nvidia.yaml", nvidia_spec(2));
  auto f = with_id(runtime_findings(h), "runtime.cdi-spec-missing");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].observed, "CDI specs name 2 devices, the host has 4");
  EXPECT_THAT(f[0].remedy.commands,
              ::testing::Contains("polyaccel cdi generate --cdi-dir /var/run/cdi"));

  h.remove("etc/cdi");
  f = with_id(runtime_findings(h), "runtime.cdi-spec-missing");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].observed, "no CDI spec names a NVIDIA device");

  // Specs in the transient directory count as well (polyaccel and the DRA drivers write there).
  h.write("var/run/cdi/polyaccel.json",
          R"({"cdiVersion":"0.6.0","kind":"polyaccel.io/gpu","devices":[)"
          R"({"name":"gpu0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}},)"
          R"({"name":"gpu1","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia1"}]}},)"
          R"({"name":"gpu2","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia2"}]}},)"
          R"({"name":"gpu3","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia3"}]}}]})");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.cdi-spec-missing").empty());
}

TEST(RuntimeChecks, StaleSpecsAfterADriverUpgradeOrAGpuGone) {
  FakeHost h;
  well_kept(h);
  h.write("etc/cdi/nvidia.yaml", nvidia_spec(4, "535.104.05"));
  auto f = with_id(runtime_findings(h), "runtime.cdi-spec-stale");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "/etc/cdi/nvidia.yaml");
  EXPECT_THAT(
      f[0].observed,
      HasSubstr("names what the host lacks: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"));
  EXPECT_THAT(f[0].observed, HasSubstr("of driver 535.104.05, the kernel module is 550.54.15"));
  EXPECT_THAT(f[0].remedy.commands,
              ::testing::Contains("nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"));

  h.write("etc/cdi/nvidia.yaml", nvidia_spec(4));
  h.remove("dev/nvidia3");
  f = with_id(runtime_findings(h), "runtime.cdi-spec-stale");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].observed, "names what the host lacks: /dev/nvidia3");

  h.write("dev/nvidia3", "");
  h.write("etc/cdi/broken.yaml", "cdiVersion: 0.6.0\nkind: [unclosed\n");
  f = with_id(runtime_findings(h), "runtime.cdi-spec-stale");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "/etc/cdi/broken.yaml");
  EXPECT_THAT(f[0].observed, HasSubstr("cannot be parsed: line"));
}

TEST(RuntimeChecks, ToolkitMissingOnlyWhereContainersRun) {
  FakeHost h;
  well_kept(h);
  h.remove("usr/bin/nvidia-ctk");
  auto f = with_id(runtime_findings(h), "runtime.toolkit-missing");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "NVIDIA toolkit");
  EXPECT_EQ(f[0].remedy.commands,
            std::vector<std::string>{"apt-get install nvidia-container-toolkit"});
  // The GPU Operator puts it under /usr/local/nvidia/toolkit.
  h.write("usr/local/nvidia/toolkit/nvidia-container-runtime", "");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.toolkit-missing").empty());
  // No container runtime at all (a hypervisor): nothing to say about CDI or toolkits.
  h.remove("usr/local/nvidia");
  h.remove("usr/bin/containerd");
  h.remove("etc/containerd");
  auto all = runtime_findings(h);
  EXPECT_TRUE(with_id(all, "runtime.toolkit-missing").empty());
  EXPECT_TRUE(with_id(all, "runtime.cdi-disabled").empty());
}

TEST(RuntimeChecks, FabricManagerWhereNvswitchesAreAndPersistenced) {
  FakeHost h;
  well_kept(h);
  h.remove("proc/813");
  auto f = with_id(runtime_findings(h), "runtime.fabricmanager");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::critical);
  EXPECT_EQ(f[0].observed, "1 NVSwitch and no nv-fabricmanager running");

  h.remove("proc/812");
  f = with_id(runtime_findings(h), "runtime.persistenced");
  ASSERT_EQ(f.size(), 1u);
  // Persistence known from NVML: gpu.persistence judges, this check stays quiet.
  HostModel m = xe8640();
  for (auto& a : m.accelerators) {
    a.inventory.emplace();
    a.inventory->persistence_mode = true;
  }
  EXPECT_TRUE(with_id(runtime_findings(h, m), "runtime.persistenced").empty());
  // A gathered tree has no processes: neither daemon check can tell.
  h.remove("proc/1");
  EXPECT_THAT(runtime_findings(h), ::testing::IsEmpty());
}

TEST(RuntimeChecks, KernelModuleAndLibraryOfDifferentReleases) {
  FakeHost h;
  well_kept(h);
  h.remove("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15");
  h.write("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05", "");
  auto f = with_id(runtime_findings(h), "runtime.driver-mismatch");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::critical);
  EXPECT_EQ(f[0].observed, "kernel module 550.54.15, user-space library 535.104.05");
  // sys/module/nvidia/version is preferred to the proc text (the open module's wording differs).
  h.write("sys/module/nvidia/version", "535.104.05\n");
  EXPECT_TRUE(with_id(runtime_findings(h), "runtime.driver-mismatch").empty());
}

TEST(RuntimeChecks, HostWithoutAcceleratorsIsSilent) {
  FakeHost h;
  well_kept(h);
  h.remove("etc/cdi");
  h.remove("usr/bin/nvidia-ctk");
  HostModel m = xe8640();
  m.accelerators.clear();
  EXPECT_THAT(runtime_findings(h, m), ::testing::IsEmpty());
}

TEST(RuntimeChecks, CdiSpecParserNamesWhatIsWrong) {
  EXPECT_EQ(parse_cdi_spec("/etc/cdi/a.yaml", "[]").problem,
            "not a CDI spec (no mapping at the top)");
  EXPECT_EQ(parse_cdi_spec("/etc/cdi/a.yaml", "kind: x/y\n").problem,
            "cdiVersion or kind is missing");
  EXPECT_EQ(
      parse_cdi_spec("/etc/cdi/a.yaml", "cdiVersion: 0.6.0\nkind: x/y\ndevices: []\n").problem,
      "declares no device");
  auto ok = parse_cdi_spec("/etc/cdi/a.yaml", nvidia_spec(1));
  EXPECT_EQ(ok.problem, "");
  EXPECT_EQ(ok.cdi_version, "0.5.0");
  EXPECT_EQ(ok.device_nodes, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                                       "/dev/nvidia0", "/dev/nvidia0"}));
}

}  // namespace
}  // namespace polyaccel
