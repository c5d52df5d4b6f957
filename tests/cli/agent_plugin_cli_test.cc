// `polyaccel agent` with its device plugin, as a process: the 8xH100 test library on the XE8640
// capture, MIG mixed, a kubelet played by the test; SIGTERM stops it cleanly and removes its
// sockets; its log says once which device list strategy Allocate uses and why. Bad device plugin
// options are one line and exit code 2.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "kube/fake_kubelet.h"
#include "kube/models.h"
#include "support/background.h"
#include "support/prometheus_server.h"

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(AgentDevicePlugin, ServesKubeletAndStopsOnSigterm) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  const std::string bin = polyaccel_binary();
  const std::string topo = topology_fixture(kXe8640).string();
  const std::string kdir = dir.path().string();
  std::vector<std::string> args = {bin,
                                   "agent",
                                   "--topology",
                                   topo,
                                   "--accel-backends",
                                   "on",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--interval",
                                   "100ms",
                                   "--kubelet-dir",
                                   kdir,
                                   "--nfd-features-dir",
                                   kdir,
                                   "--mig-strategy",
                                   "mixed",
                                   "--pod-resources-socket",
                                   ""};
  Background agent(args, dir.path() / "agent.log", false);
  ASSERT_TRUE(agent.started());

  auto ep = kubelet.endpoint("nvidia.com/mig-3g.40gb", 60s);
  ASSERT_TRUE(ep);
  auto list = kubelet.wait_update(
      ep, [](const auto& r) { return r.devices_size() == 1; }, 30s);
  ASSERT_TRUE(list);
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(allocate(*ep, {list->devices(0).id()}, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), list->devices(0).id());
  EXPECT_TRUE(kubelet.endpoint("nvidia.com/gpu", 10s));
  auto labels = read_text_file(dir.path() / "polyaccel");
  ASSERT_TRUE(labels);
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/mig.strategy=mixed\n"));
  EXPECT_THAT(*labels, HasSubstr("nvidia.com/mig-3g.40gb.count=1\n"));

  auto exit_code = agent.terminate();
  ASSERT_TRUE(exit_code) << agent.log();
  EXPECT_EQ(*exit_code, 0) << agent.log();
  // The default, auto: with --topology no root is read, so no container runtime is found.
  const std::string chosen =
      "polyaccel agent: device plugin: device list strategy envvar (auto: no containerd or CRI-O "
      "found)\n";
  auto log = agent.log();
  EXPECT_THAT(log, HasSubstr(chosen));
  EXPECT_EQ(log.find(chosen), log.rfind(chosen)) << "said once";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "kubelet.sock"));
}

TEST(AgentDevicePlugin, BadOptionsAreOneLineAndExitTwo) {
  TempDir dir;
  const std::string base = polyaccel_binary() + " agent --topology " +
                           topology_fixture(kXe8640).string() +
                           " --listen 127.0.0.1:0 --pod-resources-socket '' --kubelet-dir " +
                           dir.path().string() + " --nfd-features-dir '' ";
  std::ofstream(dir.path() / "bad.yaml") << "sharing:\n  timeSlicing:\n    resources: []\n";
  auto r = run_command(base + "--sharing-config " + (dir.path() / "bad.yaml").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output,
              HasSubstr("bad.yaml: sharing.timeSlicing.resources: no resources specified"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = run_command(base + "--mig-strategy half 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--mig-strategy: 'half' is not a MIG strategy"));
  r = run_command(base + "--device-list-strategy envvar,volume-mounts 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output,
              HasSubstr("--device-list-strategy: 'volume-mounts' is not a device list strategy"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // Nothing was left in the kubelet directory.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    left.push_back(e.path().filename());
  EXPECT_THAT(left, ::testing::ElementsAre("bad.yaml"));
  // Another agent holds the directory's lock: a second one is refused, exit code 2.
  int fd = ::open((dir.path() / "polyaccel.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  r = run_command(base + "2>&1");
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("polyaccel.lock: is held by another polyaccel agent"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
}

// --node-cdi-specs: the agent writes the node's CDI specs (a device per GPU and MIG instance,
// the names Allocate gives) before kubelet can ask, and auto names those CDI devices in Allocate
// beside the variables: a node whose runtime has CDI and no NVIDIA container runtime then gives a
// pod the driver's libraries (Guest.node-* runs it on containerd). Not with --dra.
TEST(AgentDevicePlugin, NodeCdiSpecsAreWrittenAndAllocateNamesThem) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  TempDir dir;
  FakeKubelet kubelet(dir.path().string());
  const std::string cdi = (dir.path() / "cdi").string();
  std::vector<std::string> args = {polyaccel_binary(),
                                   "agent",
                                   "--topology",
                                   topology_fixture(kXe8640).string(),
                                   "--accel-backends",
                                   "on",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--kubelet-dir",
                                   dir.path().string(),
                                   "--nfd-features-dir",
                                   "",
                                   "--pod-resources-socket",
                                   "",
                                   "--node-cdi-specs",
                                   "--cdi-dir",
                                   cdi};
  Background agent(args, dir.path() / "agent.log", false);
  ASSERT_TRUE(agent.started());
  auto ep = kubelet.endpoint("nvidia.com/gpu", 60s);
  ASSERT_TRUE(ep) << agent.log();
  auto list = kubelet.wait_update(
      ep, [](const auto& r) { return r.devices_size() > 0; }, 30s);
  ASSERT_TRUE(list);
  // Written before the device plugin listed a device.
  auto spec_text = read_text_file(std::filesystem::path(cdi) / "polyaccel.io-gpu.json");
  ASSERT_TRUE(spec_text) << agent.log();
  auto spec = nlohmann::json::parse(*spec_text);
  EXPECT_EQ(spec["kind"], "polyaccel.io/gpu");
  std::set<std::string> names;
  for (const auto& d : spec["devices"])
    names.insert(d["name"].get<std::string>());
  v1beta1::AllocateResponse resp;
  const std::string id = list->devices(0).id();
  ASSERT_TRUE(allocate(*ep, {id}, &resp).ok());
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.cdi_devices_size(), 1) << agent.log();
  const std::string name = c.cdi_devices(0).name();
  ASSERT_TRUE(name.starts_with("polyaccel.io/gpu=")) << name;
  EXPECT_TRUE(names.count(name.substr(name.find('=') + 1))) << name << " is in the spec";
  EXPECT_EQ(c.envs().at("NVIDIA_VISIBLE_DEVICES"), id);
  auto exit_code = agent.terminate();
  ASSERT_TRUE(exit_code) << agent.log();
  EXPECT_EQ(*exit_code, 0) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("device list strategy envvar,cdi-cri (auto: --node-cdi-specs "
                                     "writes the node's CDI specs to " +
                                     cdi));
  EXPECT_THAT(agent.log(), HasSubstr("polyaccel agent: node CDI specs: "));

  TempDir other;
  auto r = run_command(polyaccel_binary() + " agent --dra --node-cdi-specs --kubelet-dir '' " +
                       "--topology " + topology_fixture(kXe8640).string() + " --cdi-dir " +
                       other.path().string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--dra with --node-cdi-specs: the DRA driver writes a CDI spec"));
  EXPECT_TRUE(std::filesystem::is_empty(other.path()));
}

}  // namespace
}  // namespace polyaccel

namespace polyaccel {
namespace {

using namespace polyaccel::testing;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Issue 40, item 1: no exception leaves a thread of the agent. Each part's work is made to throw
// (POLYACCEL_FAULT_PART, core/agent_parts.h): the agent keeps running and serving /metrics,
// /healthz answers 503 naming the part, its metrics say it stopped while the others run, and
// SIGTERM still stops the agent cleanly. Before run_part the throw ended in std::terminate
// (SIGABRT), the exporter, device plugin and DRA driver with it.
TEST(AgentParts, APartThatThrowsStopsAloneAndSaysSo) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  for (const std::string part : {"monitor-nvml", "monitor-listener", "host-sampler",
                                 "device-plugin", "device-plugin-follower", "pod-resources"}) {
    SCOPED_TRACE(part);
    ::setenv("POLYACCEL_FAULT_PART", part.c_str(), 1);
    TempDir dir;
    FakeKubelet kubelet(dir.path().string());
    std::vector<std::string> args = {polyaccel_binary(),
                                     "agent",
                                     "--topology",
                                     topology_fixture(kXe8640).string(),
                                     "--accel-backends",
                                     "on",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--interval",
                                     "100ms",
                                     "--kubelet-dir",
                                     dir.path().string(),
                                     "--nfd-features-dir",
                                     dir.path().string(),
                                     "--pod-resources-socket",
                                     (dir.path() / "pod-resources.sock").string(),
                                     "--node-cdi-specs",  // a listener of the monitor
                                     "--cdi-dir",
                                     (dir.path() / "cdi").string()};
    Background agent(args, dir.path() / "agent.log", false);
    ::unsetenv("POLYACCEL_FAULT_PART");
    ASSERT_TRUE(agent.started());
    const std::string said = "part " + part + " failed and stopped: fault injected";
    for (int i = 0; i < 600 && agent.log().find(said) == std::string::npos; ++i)
      std::this_thread::sleep_for(20ms);
    ASSERT_THAT(agent.log(), HasSubstr(said));
    const int port = agent_port(agent);
    const std::string base = "curl -sS --max-time 20 http://127.0.0.1:" + std::to_string(port);
    auto health = run_command(base + "/healthz -w ' %{http_code}'");
    EXPECT_THAT(health.output, HasSubstr("part " + part + " failed: fault injected"));
    EXPECT_THAT(health.output, ::testing::EndsWith(" 503"));
    auto metrics = run_command(base + "/metrics");
    EXPECT_THAT(metrics.output, HasSubstr("polyaccel_agent_part_up{part=\"" + part + "\"} 0"));
    EXPECT_THAT(metrics.output,
                HasSubstr("polyaccel_agent_part_failures_total{part=\"" + part + "\"} 1"));
    EXPECT_THAT(metrics.output, HasSubstr("polyaccel_agent_part_up{part=\"http-front\"} 1"));
    auto exit_code = agent.terminate();
    ASSERT_TRUE(exit_code) << "ended by a signal: " << agent.log();
    EXPECT_EQ(*exit_code, 0) << agent.log();
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "polyaccel-nvidia.com_gpu.sock"));
  }
}

}  // namespace
}  // namespace polyaccel
