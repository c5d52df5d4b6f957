// CDI specs of real captured machines and of the vendor libraries' test builds, checked against
// the fields and formats of the CDI specification (container-device-interface SPEC.md: cdiVersion,
// kind "vendor/class", device names, containerEdits and its members); and the two commands,
// `polyaccel dra slices --json` and `polyaccel cdi generate --cdi-dir DIR --json`, run as a user
// would.
//
// A container runtime consuming the spec (podman run --device polyaccel.io/gpu=gpu-0 with a local
// rootfs) is not part of this suite: in the sandbox CI runs in, podman 4.3's runtimes cannot
// start a container at all (crun refuses the hybrid cgroup v1 hierarchy, runc's setrlimit is
// refused). The test guest runs it as root: Guest.cdi (tests/guest/cdi_podman.py).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "cdi_hook/ld_cache.h"
#include "dra/cdi.h"
#include "dra/cdi_hook.h"
#include "kube/models.h"
#include "support/k8s_schema.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;
// Debian's static ldconfig: a real producer of ld.so.cache files to read.
const char* const kHostLdconfig = "/sbin/ldconfig";

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
  const std::set<std::string> mount_fields = {"hostPath", "containerPath", "type", "options"};
  const std::set<std::string> hook_fields = {"hookName", "path", "args", "env", "timeout"};
  const std::set<std::string> hook_names = {"prestart",       "createRuntime", "createContainer",
                                            "startContainer", "poststart",     "poststop"};
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
    for (const auto& m : e.value("mounts", json::array())) {
      for (const auto& [k, v] : m.items())
        if (!mount_fields.count(k)) out.push_back(where + ": unknown mount field " + k);
      for (const char* k : {"hostPath", "containerPath"})
        if (!m.contains(k) || !m[k].is_string() || m[k].get<std::string>().empty() ||
            m[k].get<std::string>()[0] != '/')
          out.push_back(where + ": mount " + k + " not an absolute path");
      for (const auto& o : m.value("options", json::array()))
        if (!o.is_string()) out.push_back(where + ": mount option not a string");
    }
    for (const auto& h : e.value("hooks", json::array())) {
      for (const auto& [k, v] : h.items())
        if (!hook_fields.count(k)) out.push_back(where + ": unknown hook field " + k);
      if (!hook_names.count(h.value("hookName", "")))
        out.push_back(where + ": hookName " + h.value("hookName", ""));
      std::string path = h.value("path", "");
      if (path.empty() || path[0] != '/') out.push_back(where + ": hook path " + path);
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
  // The GPU on a host without the nvidia driver's files (its minor from NVML): no capability
  // minors, an error naming them, no spec.
  auto none = claim_spec(m, {d}, read_cdi_host(m, ""), "abc-1", {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("mig-minors"), std::string::npos) << none.error().message();
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

  // issue 32: every device skipped (no device minors under the root): the skips on stderr, exit 1
  // (nothing written is no success), stdout without them.
  fs::path none = dir_.path() / "none";
  std::string all_skipped = polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" +
                            topo + "' --root '" + (dir_.path() / "empty-root").string() +
                            "' --cdi-dir '" + none.string() + "'";
  fs::create_directories(dir_.path() / "empty-root");
  auto skips = run_command(all_skipped + " 2>/dev/null");
  EXPECT_EQ(skips.exit_code, 1) << skips.output;
  EXPECT_EQ(skips.output.find("skipped"), std::string::npos) << skips.output;
  auto said = run_command(all_skipped + " 2>&1 >/dev/null");
  EXPECT_NE(said.output.find("skipped: "), std::string::npos) << said.output;
  EXPECT_NE(said.output.find("nothing written"), std::string::npos) << said.output;
  EXPECT_FALSE(fs::exists(none) && !fs::is_empty(none));
  EXPECT_EQ(run_command(all_skipped + " --json 2>/dev/null").exit_code, 1);

  write_text(root() / "proc/driver/nvidia/gpus/0000:4e:00.0/information", "Device Minor: 0\n");
  fs::path out = dir_.path() / "cdi";
  auto g =
      run_command(polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" + topo +
                  "' --root '" + root().string() + "' --cdi-dir '" + out.string() + "' --json");
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
                         topo + "' --root '" + root().string() + "' --cdi-dir '" + out.string() +
                         "' --cdi-version " + v + " 2>&1");
    EXPECT_EQ(b.exit_code, 2) << v << ": " << b.output;
    EXPECT_NE(b.output.find("--cdi-version"), std::string::npos) << b.output;
    EXPECT_FALSE(fs::exists(out)) << v;
  }
}

// A driver root as NVIDIA's installer lays it out, with real ELF libraries where a SONAME matters
// (the test builds of libcuda.so.1 and libnvidia-ml.so.1) and hostile entries next to them.
struct DriverRootTree {
  static constexpr const char* kVersion = "550.54.15";
  fs::path root, lib, outside;
  explicit DriverRootTree(const fs::path& base) : root(base / "driver"), outside(base / "outside") {
    lib = root / "usr/lib/x86_64-linux-gnu";
    const std::string v = kVersion;
    fs::create_directories(lib / "vdpau");
    fs::create_directories(outside);
    fs::copy_file(CUDA_INJECT_LIB, lib / ("libcuda.so." + v));
    fs::copy_file(NVML_INJECT_LIB, lib / ("libnvidia-ml.so." + v));
    write_text(lib / ("libnvidia-ptxjitcompiler.so." + v), "not an ELF file");
    write_text(lib / "vdpau" / ("libvdpau_nvidia.so." + v), "x");
    write_text(lib / "libfoo.so.1.2", "another version: not the driver's");
    // A link out of the root: resolved inside it (to nothing), never to the host's file.
    write_text(outside / ("libnvidia-cfg.so." + v), "outside");
    fs::create_symlink(outside / ("libnvidia-cfg.so." + v), lib / ("libnvidia-cfg.so." + v));
    ::mkfifo((lib / ("libnvidia-gpucomp.so." + v)).c_str(), 0644);
    write_text(root / "usr/bin/nvidia-smi", "#!/bin/sh\n");
    fs::permissions(root / "usr/bin/nvidia-smi", fs::perms::owner_all);
    write_text(root / "usr/bin/nvidia-debugdump", "not executable");
    write_text(root / "lib/firmware/nvidia" / v / "gsp_ga10x.bin", "fw");
    write_text(root / "run/nvidia-fabricmanager/socket", "a regular file, not a socket");
    fs::create_directories(root / "run/nvidia-persistenced");
    bind_socket(root / "run/nvidia-persistenced/socket");
    fs::create_directories(root / "tmp/nvidia-mps");
  }
  static void bind_socket(const fs::path& p) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    ASSERT_LT(p.string().size(), sizeof a.sun_path);
    std::strncpy(a.sun_path, p.c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << p;
    ::close(fd);
  }
};

// The GPU Operator's driver container: the host's root has no driver, its /run/nvidia/driver
// has one. The agent's --driver-root /host (the base DaemonSet's) moves there by itself.
TEST_F(Cdi, TheGpuOperatorsDriverIsFoundUnderRunNvidiaDriverWhenTheRootHasNone) {
  const fs::path host = dir_.path() / "host";
  fs::create_directories(host / "usr/lib/x86_64-linux-gnu");
  DriverRootTree operator_driver(host / "run/nvidia");
  dra::DriverRoots r = dra::find_gpu_operator_driver(host.string(), "/");
  EXPECT_TRUE(r.gpu_operator);
  EXPECT_EQ(r.driver_root, (host / "run/nvidia/driver").string());
  EXPECT_EQ(r.host_driver_root, "/run/nvidia/driver");
  EXPECT_EQ(dra::read_nvidia_driver(r.driver_root).version, DriverRootTree::kVersion);
  // Without --host-driver-root: the same root's path.
  EXPECT_EQ(dra::find_gpu_operator_driver(host.string(), "").host_driver_root,
            (host / "run/nvidia/driver").string());

  // A root with a driver of its own keeps it, even with the operator's beside it.
  const fs::path own = dir_.path() / "own";
  DriverRootTree host_driver(own);
  DriverRootTree beside(own / "driver/run/nvidia");
  r = dra::find_gpu_operator_driver((own / "driver").string(), "/");
  EXPECT_FALSE(r.gpu_operator);
  EXPECT_EQ(r.driver_root, (own / "driver").string());
  EXPECT_EQ(r.host_driver_root, "/");

  // No driver anywhere (a node before the operator's driver is installed): unchanged.
  const fs::path none = dir_.path() / "none";
  fs::create_directories(none / "run/nvidia/driver");
  r = dra::find_gpu_operator_driver(none.string(), "/");
  EXPECT_FALSE(r.gpu_operator);
  EXPECT_EQ(r.driver_root, none.string());
}

TEST_F(Cdi, NvidiaDriverFilesAreFoundUnderTheDriverRoot) {
  DriverRootTree t(dir_.path());
  NvidiaDriverFiles d = read_nvidia_driver(t.root.string());
  EXPECT_EQ(d.version, "550.54.15");
  std::map<std::string, CdiMount> by_path;
  for (const auto& m : d.mounts)
    by_path[m.container_path] = m;
  const std::string L = "/usr/lib/x86_64-linux-gnu/";
  std::vector<std::string> paths;
  for (const auto& [p, m] : by_path)
    paths.push_back(p);
  EXPECT_EQ(paths,
            (std::vector<std::string>{
                "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "/run/nvidia-persistenced/socket",
                "/tmp/nvidia-mps", "/usr/bin/nvidia-smi", L + "libcuda.so.550.54.15",
                L + "libnvidia-ml.so.550.54.15", L + "libnvidia-ptxjitcompiler.so.550.54.15",
                L + "vdpau/libvdpau_nvidia.so.550.54.15"}));
  const CdiMount& cuda = by_path[L + "libcuda.so.550.54.15"];
  EXPECT_EQ(cuda.host_path, fs::canonical(t.lib / "libcuda.so.550.54.15").string());
  EXPECT_EQ(cuda.options, (std::vector<std::string>{"ro", "nosuid", "nodev", "rbind", "rprivate"}));
  EXPECT_EQ(by_path["/run/nvidia-persistenced/socket"].options,
            (std::vector<std::string>{"nosuid", "nodev", "rbind", "rprivate", "noexec"}));
  // SONAME links from the ELF files themselves, and libcuda.so; none for the non-ELF file.
  EXPECT_EQ(d.symlinks,
            (std::vector<std::string>{"libcuda.so.550.54.15::" + L + "libcuda.so.1",
                                      "libcuda.so.1::" + L + "libcuda.so",
                                      "libnvidia-ml.so.550.54.15::" + L + "libnvidia-ml.so.1"}));
  EXPECT_EQ(d.library_dirs, (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu",
                                                      "/usr/lib/x86_64-linux-gnu/vdpau"}));
  // The FIFO is named; the link out of the root resolved to nothing in it.
  EXPECT_TRUE(std::any_of(d.notes.begin(), d.notes.end(), [](const std::string& n) {
    return n.find("libnvidia-gpucomp") != std::string::npos;
  }));
  for (const auto& m : d.mounts)
    EXPECT_EQ(m.host_path.rfind(fs::canonical(t.root).string() + "/", 0), 0u) << m.host_path;

  // The same root seen from a container that mounts it elsewhere: host paths under the host's.
  NvidiaDriverFiles moved = read_nvidia_driver(t.root.string(), "/run/nvidia/driver/");
  ASSERT_EQ(moved.mounts.size(), d.mounts.size());
  for (const auto& m : moved.mounts)
    EXPECT_EQ(m.host_path, "/run/nvidia/driver" + m.container_path);

  // No driver under a root: nothing, and a note that says where it looked.
  NvidiaDriverFiles none = read_nvidia_driver(t.outside.string());
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.version.empty());
  ASSERT_EQ(none.notes.size(), 1u);

  // SONAMEs of what is not a 64-bit ELF file: none.
  int fd = ::open((t.lib / "libnvidia-ptxjitcompiler.so.550.54.15").c_str(), O_RDONLY);
  EXPECT_FALSE(cdi_hook::elf_soname(fd, 15));
  ::close(fd);
}

// A driver installed outside the search paths is found through the driver root's own ld cache,
// written here by the host's ldconfig (-r: as the driver root's ldconfig would).
TEST_F(Cdi, NvidiaDriverOutsideTheSearchPathsIsFoundThroughItsLdCache) {
  if (::geteuid() != 0) GTEST_SKIP() << "ldconfig -r chroots: needs root";
  if (!fs::exists(kHostLdconfig)) GTEST_SKIP() << kHostLdconfig << " is missing";
  fs::path root = dir_.path() / "driver", lib = root / "opt/nvidia/lib64";
  fs::create_directories(lib);
  fs::create_directories(root / "etc");
  fs::copy_file(CUDA_INJECT_LIB, lib / "libcuda.so.550.54.15");
  write_text(root / "etc/ld.so.conf", "/opt/nvidia/lib64\n");
  auto r = polyaccel::testing::run_command(std::string(kHostLdconfig) + " -r '" + root.string() +
                                           "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto text = polyaccel::testing::read_text(root / "etc/ld.so.cache");
  auto cache = cdi_hook::parse_ld_cache(text);
  EXPECT_EQ(cache.problem, "");
  EXPECT_TRUE(std::any_of(cache.entries.begin(), cache.entries.end(), [](const auto& e) {
    return e.name == "libcuda.so.1" && e.path == "/opt/nvidia/lib64/libcuda.so.1";
  }));
  NvidiaDriverFiles d = read_nvidia_driver(root.string());
  EXPECT_EQ(d.version, "550.54.15");
  ASSERT_EQ(d.mounts.size(), 1u);
  EXPECT_EQ(d.mounts[0].container_path, "/opt/nvidia/lib64/libcuda.so.550.54.15");
  EXPECT_EQ(d.library_dirs, (std::vector<std::string>{"/opt/nvidia/lib64"}));
  // Cut anywhere, or with offsets past its end, the cache gives what it can and nothing more.
  for (size_t n = 0; n < text.size(); n += 7)
    EXPECT_LE(cdi_hook::parse_ld_cache(text.substr(0, n)).entries.size(), cache.entries.size());
  std::string bad = text;
  for (size_t i = 48 + text.find("glibc-ld.so.cache1.1"); i + 4 <= bad.size() && i < 200; i += 4)
    bad[i] = '\xff';
  EXPECT_TRUE(cdi_hook::parse_ld_cache(bad).entries.empty());
}

TEST_F(Cdi, NvidiaSpecMountsTheDriverAndRunsTheHooks) {
  DriverRootTree t(dir_.path());
  HostModel m = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  for (size_t i = 0; i < m.accelerators.size(); ++i)
    write_text(root() / "proc/driver/nvidia/gpus" / m.accelerators[i].pci.address.to_string() /
                   "information",
               "Device Minor: " + std::to_string(i) + "\n");
  SliceOptions so;
  so.node = "n";
  Pool pool = *build_pool(m, so);
  CdiOptions o;
  o.hook_path = "/usr/local/bin/polyaccel-cdi-hook";
  CdiHost host = read_cdi_host(m, root().string(), t.root.string());
  auto specs = node_specs(m, pool, host, o, nullptr);
  ASSERT_FALSE(specs.empty());
  const CdiSpec& gpu = specs[0];
  ASSERT_EQ(gpu.kind, "polyaccel.io/gpu");
  EXPECT_TRUE(cdi_problems(to_json(gpu)).empty()) << cdi_problems(to_json(gpu)).front();
  // Common to the spec's devices, as nvidia-ctk puts them; none in a device's own edits.
  EXPECT_EQ(gpu.edits.mounts, host.nvidia_driver.mounts);
  for (const auto& d : gpu.devices)
    EXPECT_TRUE(d.edits.mounts.empty() && d.edits.hooks.empty()) << d.name;
  ASSERT_EQ(gpu.edits.hooks.size(), 2u);
  const CdiHook& links = gpu.edits.hooks[0];
  EXPECT_EQ(links.hook_name, "createContainer");
  EXPECT_EQ(links.path, "/usr/local/bin/polyaccel-cdi-hook");
  EXPECT_EQ(std::vector<std::string>(links.args.begin(), links.args.begin() + 4),
            (std::vector<std::string>{"polyaccel-cdi-hook", "create-symlinks", "--link",
                                      host.nvidia_driver.symlinks[0]}));
  EXPECT_EQ(gpu.edits.hooks[1].args,
            (std::vector<std::string>{"polyaccel-cdi-hook", "update-ldcache", "--folder",
                                      "/usr/lib/x86_64-linux-gnu", "--folder",
                                      "/usr/lib/x86_64-linux-gnu/vdpau"}));
  json j = to_json(gpu);
  EXPECT_EQ(j["containerEdits"]["mounts"][0]["options"][0], "ro");
  EXPECT_EQ(j["containerEdits"]["hooks"][0]["hookName"], "createContainer");
  // A claim's spec carries the same; without a hook path, mounts only.
  const Device* d0 = &pool.slices[0].devices[0];
  auto claim = claim_spec(m, {d0}, host, "u-1", o);
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->edits.mounts, gpu.edits.mounts);
  EXPECT_EQ(claim->edits.hooks, gpu.edits.hooks);
  auto bare = claim_spec(m, {d0}, host, "u-1", {});
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->edits.mounts.empty());
  EXPECT_TRUE(bare->edits.hooks.empty());
}

TEST_F(Cdi, GaudiDevicesGetTheirOnChipNicVerbsNode) {
  HostModel m = polyaccel::testing::injected_only(false);
  ASSERT_FALSE(m.accelerators.empty());
  for (size_t i = 0; i < m.accelerators.size(); ++i)
    fs::create_directories(root() / "sys/bus/pci/devices" /
                           m.accelerators[i].pci.address.to_string() / "accel" /
                           ("accel" + std::to_string(i)));
  fs::create_directories(root() / "sys/class/infiniband/hlib_1/device/infiniband_verbs/uverbs7");
  SliceOptions so;
  so.node = "n";
  Pool pool = *build_pool(m, so);
  auto specs = node_specs(m, pool, read_cdi_host(m, root().string()), {}, nullptr);
  ASSERT_EQ(specs.size(), 1u);
  ASSERT_GE(specs[0].devices.size(), 2u);
  EXPECT_EQ(specs[0].devices[0].edits.device_nodes.size(), 2u);
  ASSERT_EQ(specs[0].devices[1].edits.device_nodes.size(), 3u);
  EXPECT_EQ(specs[0].devices[1].edits.device_nodes[2].path, "/dev/infiniband/uverbs7");
}

// The container's root as runc and crun give it to a createContainer hook: the OCI state's bundle,
// its config.json's root.path (relative to the bundle).
fs::path make_bundle(const fs::path& base, const std::string& root_path) {
  fs::create_directories(base / "bundle/rootfs");
  write_text(base / "bundle/config.json",
             json{{"ociVersion", "1.0.2"}, {"root", {{"path", root_path}}}}.dump());
  return base / "bundle";
}

TEST_F(Cdi, GenerateWritesTheDriverRootAndTheHookCommandsRun) {
  using polyaccel::testing::run_command;
  DriverRootTree t(dir_.path());
  const std::string topo =
      polyaccel::testing::topology_fixture(polyaccel::testing::kXe8640).string();
  write_text(root() / "proc/driver/nvidia/gpus/0000:4e:00.0/information", "Device Minor: 0\n");
  fs::path hook = dir_.path() / "host-bin/polyaccel-cdi-hook";
  auto g =
      run_command(polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" + topo +
                  "' --root '" + root().string() + "' --driver-root '" + t.root.string() +
                  "' --cdi-hook-path '" + hook.string() + "' --install-hook --json 2>&1");
#ifndef POLYACCEL_HOOK_STATIC
  // The sanitizer builds link the hook dynamically: installed, then refused by the check.
  EXPECT_EQ(g.exit_code, 2) << g.output;
  EXPECT_NE(g.output.find("is dynamically linked"), std::string::npos) << g.output;
  GTEST_SKIP() << "the hook of a sanitizer build is not static";
#endif
  ASSERT_EQ(g.exit_code, 0) << g.output;
  auto spec = json::parse(g.output)["specs"][0];
  EXPECT_TRUE(cdi_problems(spec).empty());
  EXPECT_EQ(spec["containerEdits"]["hooks"][0]["path"], hook.string());
  EXPECT_EQ(spec["containerEdits"]["mounts"].size(), 8u);
  // The static hook program was copied there, executable; the copy runs the hooks as the
  // runtime would.
  ASSERT_TRUE(fs::exists(hook));
  EXPECT_NE(fs::status(hook).permissions() & fs::perms::owner_exec, fs::perms::none);
  fs::path bundle = make_bundle(dir_.path(), "rootfs");
  write_text(dir_.path() / "state.json", json{{"bundle", bundle.string()}}.dump());
  std::string cmd = hook.string();
  const auto& args = spec["containerEdits"]["hooks"][0]["args"];
  ASSERT_EQ(args[0], "polyaccel-cdi-hook");
  for (size_t i = 1; i < args.size(); ++i)
    cmd += " '" + args[i].get<std::string>() + "'";
  auto h = run_command(cmd + " < '" + (dir_.path() / "state.json").string() + "' 2>&1");
  EXPECT_EQ(h.exit_code, 0) << h.output;
  EXPECT_EQ(fs::read_symlink(bundle / "rootfs/usr/lib/x86_64-linux-gnu/libcuda.so"),
            "libcuda.so.1");
  auto bad = run_command(hook.string() + " create-symlinks --link a::/b < /dev/null 2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("OCI state"), std::string::npos) << bad.output;
  // --no-hooks: the mounts without hooks.
  auto n = run_command(polyaccel::testing::polyaccel_binary() + " cdi generate --topology '" +
                       topo + "' --root '" + root().string() + "' --driver-root '" +
                       t.root.string() + "' --no-hooks --json");
  ASSERT_EQ(n.exit_code, 0) << n.output;
  auto ns = json::parse(n.output)["specs"][0];
  EXPECT_FALSE(ns["containerEdits"].contains("hooks"));
  EXPECT_EQ(ns["containerEdits"]["mounts"].size(), 8u);
}

}  // namespace
}  // namespace polyaccel::dra
