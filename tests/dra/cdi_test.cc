// CDI specs of real captured machines and of the vendor libraries' test builds, checked against
// the fields and formats of the CDI specification (container-device-interface SPEC.md: cdiVersion,
// kind "vendor/class", device names, containerEdits and its members); and the two commands,
// `polyaccel dra slices --json` and `polyaccel cdi generate -o DIR --json`, run as a user would.
//
// A container runtime consuming the spec (podman run --device polyaccel.io/gpu=gpu-0 with a local
// rootfs) is not part of this suite: in the sandbox CI runs in, podman 4.3's runtimes cannot
// start a container at all (crun refuses the hybrid cgroup v1 hierarchy, runc's setrlimit is
// refused). The test guest runs it as root: Guest.cdi (tests/guest/cdi_podman.py).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "dra/cdi.h"
#include "kube/models.h"
#include "support/k8s_schema.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;

// The CDI JSON specification's fields (SPEC.md, "CDI JSON Specification"), as a checker.
std::vector<std::string> cdi_problems(const json& spec) {
  std::vector<std::string> out;
  static const std::regex version(R"(^(0\.[3-8]\.0|1\.[01]\.0)$)");
  static const std::regex kind(
      R"(^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$)");
  static const std::regex device_name(R"(^[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?$)");
  static const std::regex env(R"(^[A-Za-z_][A-Za-z0-9_]*=.*$)");
  const std::set<std::string> top = {"cdiVersion", "kind", "annotations", "devices",
                                     "containerEdits"};
  const std::set<std::string> edits = {"env",   "deviceNodes", "mounts",
                                       "hooks", "intelRdt",    "additionalGids"};
  const std::set<std::string> node_fields = {"path",     "hostPath",    "type", "major", "minor",
                                             "fileMode", "permissions", "uid",  "gid"};
  auto check_edits = [&](const json& e, const std::string& where) {
    if (!e.is_object()) return out.push_back(where + ": containerEdits is not an object");
    for (const auto& [k, v] : e.items()) {
      if (!edits.count(k)) out.push_back(where + ": unknown containerEdits field " + k);
    }
    for (const auto& s : e.value("env", json::array()))
      if (!s.is_string() || !std::regex_match(s.get<std::string>(), env))
        out.push_back(where + ": env " + s.dump());
    for (const auto& n : e.value("deviceNodes", json::array())) {
      for (const auto& [k, v] : n.items())
        if (!node_fields.count(k)) out.push_back(where + ": unknown deviceNode field " + k);
      std::string p = n.value("path", "");
      if (p.empty() || p[0] != '/') out.push_back(where + ": deviceNode path " + p);
      if (n.contains("hostPath") && n["hostPath"].get<std::string>()[0] != '/')
        out.push_back(where + ": hostPath not absolute");
      std::string perm = n.value("permissions", "rwm");
      if (perm.empty() || perm.find_first_not_of("rwm") != std::string::npos)
        out.push_back(where + ": permissions " + perm);
    }
  };
  for (const auto& [k, v] : spec.items())
    if (!top.count(k)) out.push_back("unknown field " + k);
  if (!std::regex_match(spec.value("cdiVersion", ""), version)) out.push_back("cdiVersion");
  if (!std::regex_match(spec.value("kind", ""), kind))
    out.push_back("kind " + spec.value("kind", ""));
  if (!spec.contains("devices") || !spec["devices"].is_array() || spec["devices"].empty())
    out.push_back("devices: required, at least one");
  std::set<std::string> names;
  for (const auto& d : spec.value("devices", json::array())) {
    std::string n = d.value("name", "");
    if (!std::regex_match(n, device_name)) out.push_back("device name " + n);
    if (!names.insert(n).second) out.push_back("device " + n + " twice");
    if (!d.contains("containerEdits"))
      out.push_back(n + ": containerEdits required");
    else
      check_edits(d["containerEdits"], n);
    if (d.value("containerEdits", json::object()).empty()) out.push_back(n + ": edits nothing");
  }
  if (spec.contains("containerEdits")) check_edits(spec["containerEdits"], "spec");
  return out;
}

class Cdi : public ::testing::Test {
 protected:
  fs::path root() const { return dir_.path() / "root"; }
  TempDir dir_;
};

TEST_F(Cdi, NvidiaAndRdmaSpecsOfTheXe8640) {
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  for (size_t i = 0; i < m.accelerators.size(); ++i)
    write_text(root() / "proc/driver/nvidia/gpus" / m.accelerators[i].pci.address.to_string() /
                   "information",
               "Device Minor: " + std::to_string(3 - i) + "\n");
  write_text(root() / "sys/class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n");
  write_text(root() / "sys/class/infiniband_verbs/uverbs1/ibdev", "mlx5_1\n");
  SliceOptions so;
  so.node = "n";
  Pool pool = *build_pool(m, so);
  std::vector<std::string> skipped;
  auto specs = node_specs(m, pool, read_cdi_host(m, root().string()), {}, &skipped);
  ASSERT_EQ(specs.size(), 2u);  // gpu, nic
  for (const auto& s : specs) {
    auto problems = cdi_problems(to_json(s));
    EXPECT_TRUE(problems.empty()) << s.kind << ": " << problems.front();
  }
  const CdiSpec& gpu = specs[0];
  EXPECT_EQ(gpu.kind, "polyaccel.io/gpu");
  EXPECT_EQ(gpu.version, kCdiVersion);
  ASSERT_EQ(gpu.devices.size(), 4u);
  EXPECT_EQ(gpu.devices[0].edits.device_nodes[0].path, "/dev/nvidia3");
  EXPECT_EQ(gpu.devices[0].edits.env[0], "NVIDIA_VISIBLE_DEVICES=0000:4e:00.0");
  std::vector<std::string> ctl;
  for (const auto& n : gpu.edits.device_nodes)
    ctl.push_back(n.path);
  EXPECT_EQ(ctl, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                           "/dev/nvidia-uvm-tools"}));
  // mlx5_2 and mlx5_3 have no uverbs node in this tree: left out, and said so.
  EXPECT_EQ(specs[1].devices.size(), 2u);
  EXPECT_EQ(skipped.size(), 2u);
  EXPECT_EQ(gpu.file_name(), "polyaccel.io-gpu.json");
}

TEST_F(Cdi, AmdAndGaudiSpecsFromTheTestLibraries) {
  for (bool amd : {true, false}) {
    HostModel m = polyaccel::testing::injected_only(amd);
    ASSERT_FALSE(m.accelerators.empty());
    for (size_t i = 0; i < m.accelerators.size(); ++i) {
      fs::path pci = root() / "sys/bus/pci/devices" / m.accelerators[i].pci.address.to_string();
      if (amd) {
        fs::create_directories(pci / "drm" / ("card" + std::to_string(i + 1)));
        fs::create_directories(pci / "drm" / ("renderD" + std::to_string(128 + i)));
      } else {
        fs::create_directories(pci / "accel" / ("accel" + std::to_string(i)));
      }
    }
    SliceOptions so;
    so.node = "n";
    Pool pool = *build_pool(m, so);
    auto specs = node_specs(m, pool, read_cdi_host(m, root().string()), {}, nullptr);
    ASSERT_EQ(specs.size(), 1u);
    auto problems = cdi_problems(to_json(specs[0]));
    EXPECT_TRUE(problems.empty()) << problems.front();
    if (amd) {
      EXPECT_EQ(specs[0].kind, "polyaccel.io/gpu");
      EXPECT_EQ(specs[0].edits.device_nodes[0].path, "/dev/kfd");
      EXPECT_EQ(specs[0].devices[0].edits.device_nodes[1].path, "/dev/dri/renderD128");
    } else {
      EXPECT_EQ(specs[0].kind, "polyaccel.io/hpu");
      EXPECT_EQ(specs[0].devices[1].edits.device_nodes[0].path, "/dev/accel/accel1");
      EXPECT_EQ(specs[0].devices[1].edits.env[0], "HABANA_VISIBLE_DEVICES=1");
    }
    fs::remove_all(root());
  }
}

TEST_F(Cdi, MigInstancesGetTheirCapabilityNodes) {
  polyaccel::testing::use_vendor_libraries(NVML_INJECT_LIB, "", "");
  ::setenv("NVML_INJECT_SCENARIO",
           (std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json").c_str(), 1);
  HostModel m;
  auto backends = make_all_backends();
  merge_accelerators(m, backends);
  ASSERT_FALSE(m.accelerators.empty());
  SliceOptions so;
  so.node = "n";
  Pool pool = *build_pool(m, so);
  const Device* d = nullptr;
  for (const auto& dev : pool.slices[0].devices)
    if (!d && dev.kind == DeviceKind::mig && dev.mig_instance) d = &dev;
  ASSERT_NE(d, nullptr);
  const Accelerator& gpu = m.accelerators[d->accelerator];
  const auto& inst = gpu.inventory->mig_instances.at(*d->mig_instance);
  write_text(root() / "proc/driver/nvidia/gpus" / gpu.pci.address.to_string() / "information",
             "Device Minor: 0\n");
  std::string gi = "gpu0/gi" + std::to_string(inst.gpu_instance_id);
  write_text(root() / "proc/driver/nvidia-caps/mig-minors",
             "config 1\nmonitor 2\n" + gi + "/access 21\n" + gi + "/ci" +
                 std::to_string(inst.compute_instance_id) + "/access 22\n");
  auto spec = claim_spec(m, {d}, read_cdi_host(m, root().string()), "abc-1", {});
  ASSERT_TRUE(spec) << spec.error().message();
  auto problems = cdi_problems(to_json(*spec));
  EXPECT_TRUE(problems.empty()) << problems.front();
  std::vector<std::string> paths;
  for (const auto& n : spec->devices[0].edits.device_nodes)
    paths.push_back(n.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                                             "/dev/nvidia-caps/nvidia-cap22"}));
  EXPECT_EQ(spec->edits.env[0], "NVIDIA_VISIBLE_DEVICES=" + inst.uuid);
  EXPECT_EQ(spec->file_name(), "polyaccel.io-claim_abc-1.json");
  // The GPU on a host without the nvidia driver: an error naming it, no spec.
  auto none = claim_spec(m, {d}, read_cdi_host(m, ""), "abc-1", {});
  EXPECT_FALSE(none);
}

TEST_F(Cdi, CommandsPrintSlicesAndWriteSpecs) {
  using polyaccel::testing::run_command;
  const std::string topo =
      polyaccel::testing::topology_fixture(polyaccel::testing::kXe8640).string();
  auto r = run_command(polyaccel::testing::polyaccel_binary() + " dra slices --topology '" + topo +
                       "' --node gpu-node-7 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["node"], "gpu-node-7");
  polyaccel::testing::K8sSchema schema;
  ASSERT_FALSE(j["resourceSlices"].empty());
  for (const auto& s : j["resourceSlices"]) {
    auto e = schema.validate(s);
    EXPECT_TRUE(e.empty()) << e.front();
  }
  auto bad = run_command(polyaccel::testing::polyaccel_binary() + " dra slices --topology '" +
                         topo + "' --node Bad_Name --json 2>&1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("Bad_Name"), std::string::npos);

  write_text(root() / "proc/driver/nvidia/gpus/0000:4e:00.0/information", "Device Minor: 0\n");
  fs::path out = dir_.path() / "cdi";
  auto g =
      run_command(polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" + topo +
                  "' --root '" + root().string() + "' -o '" + out.string() + "' --json");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  auto gj = json::parse(g.output);
  ASSERT_EQ(gj["specs"].size(), 1u);
  EXPECT_EQ(gj["specs"][0]["devices"].size(), 1u);
  EXPECT_FALSE(gj["skipped"].empty());
  auto written = json::parse(std::ifstream(out / "polyaccel.io-gpu.json"));
  EXPECT_EQ(written, gj["specs"][0]);
  EXPECT_TRUE(cdi_problems(written).empty());
  // A cdiVersion no CDI library knows (or one below what the spec uses, 0.5.0) would be skipped
  // by the runtime without a reason: refused in one line, nothing written.
  fs::remove_all(out);
  for (const std::string v : {"0.4.0", "0.9.0", "x"}) {
    auto b = run_command(polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" +
                         topo + "' --root '" + root().string() + "' -o '" + out.string() +
                         "' --cdi-version " + v + " 2>&1");
    EXPECT_EQ(b.exit_code, 2) << v << ": " << b.output;
    EXPECT_NE(b.output.find("--cdi-version"), std::string::npos) << b.output;
    EXPECT_FALSE(fs::exists(out)) << v;
  }
}

}  // namespace
}  // namespace polyaccel::dra
