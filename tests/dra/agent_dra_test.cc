// `polyaccel agent --dra` as a process: the real binary on the XE8640 capture with the 8xH100
// test NVML (MIG on db:00.0), the test API server (fake_api_server.h, every object checked
// against the resource.k8s.io/v1 schema) and a kubelet played by the test over the real gRPC
// protocol: the plugin watcher's registration socket, then NodePrepareResources and
// NodeUnprepareResources on the plugin's socket. It publishes the pool, prepares a claim (the
// CDI spec with the claim's device nodes and env), survives its own restart through the
// checkpoint, unprepares, and stops cleanly on SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "core/file_io.h"
#include "dra/dra_fixture.h"
#include "dra/fake_api_server.h"
#include "dra/kubelet_dra_client.h"
#include "kube/models.h"
#include "kube/proto/dra_v1.grpc.pb.h"
#include "kube/proto/pluginregistration_v1.grpc.pb.h"
#include "support/background.h"
#include "support/fake_pod_resources.h"

namespace polyaccel {
namespace {

namespace fs = std::filesystem;
namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
using namespace polyaccel::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

// hgx-8xh100.json: 4e:00.0 is a whole GPU, db:00.0 runs MIG with a 3g.40gb at slice 4 (GPU
// instance 2, compute instance 0).
const std::string kGpuUuid = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";
const std::string kMigUuid = "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58";

class AgentDra : public ::testing::Test {
 protected:
  AgentDra() : server_(dir_.path()) {
    use_vendor_libraries(NVML_INJECT_LIB, "", "");
    write_text(dir_.path() / "kubeconfig",
               "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
               "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
               "clusters:\n- name: k\n  cluster: {server: \"" +
                   server_.url() + "\"}\nusers:\n- name: u\n  user: {token: test-token}\n");
    // What the nvidia driver shows in /proc: minor N for the scenario's N-th GPU, and the MIG
    // capability minors of db:00.0's (minor 7) 3g.40gb instance.
    write_nvidia_minors(root(), {"0000:18:00.0", "0000:2a:00.0", "0000:4e:00.0", "0000:5f:00.0",
                                 "0000:9a:00.0", "0000:ab:00.0", "0000:cb:00.0", "0000:db:00.0"});
    write_mig_minors(root(), "gpu7/gi2/access 66\ngpu7/gi2/ci0/access 67\n");
  }
  ~AgentDra() override {
    agent_.reset();
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }

  fs::path root() const { return dir_.path() / "root"; }
  fs::path cdi_dir() const { return dir_.path() / "cdi"; }
  fs::path plugin_dir() const { return dir_.path() / "plugins/polyaccel.io"; }
  fs::path registration_socket() const {
    return dir_.path() / "plugins_registry/polyaccel.io-reg.sock";
  }
  std::string log() const {
    auto t = read_text_file(dir_.path() / "agent.log");
    return t ? *t : "";
  }

  void start_agent() {
    // Appended: a restarted agent's log follows the first one's.
    agent_ = std::make_unique<Background>(agent_args(), dir_.path() / "agent.log", true);
    ASSERT_TRUE(agent_->started());
    ASSERT_TRUE(wait_for([&] { return fs::exists(registration_socket()); }, 60s)) << log();
  }

  std::vector<std::string> agent_args() const {
    const std::string bin = polyaccel_binary();
    const std::string d = dir_.path().string();
    std::vector<std::string> args = {bin,
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
                                     "",
                                     "--nfd-features-dir",
                                     "",
                                     "--pod-resources-socket",
                                     "",
                                     "--state",
                                     "",
                                     "--dra",
                                     "--dra-plugins-dir",
                                     d + "/plugins",
                                     "--dra-registry-dir",
                                     d + "/plugins_registry",
                                     "--cdi-dir",
                                     cdi_dir().string(),
                                     "--dra-root",
                                     root().string(),
                                     "--kubeconfig",
                                     d + "/kubeconfig",
                                     "--node-name",
                                     "node-1"};
    return args;
  }

  // SIGTERM: exit code 0, both sockets gone.
  void stop_agent() {
    ASSERT_TRUE(agent_);
    auto exit_code = agent_->terminate();
    agent_.reset();
    ASSERT_TRUE(exit_code) << log();
    EXPECT_EQ(*exit_code, 0) << log();
    EXPECT_FALSE(fs::exists(registration_socket()));
    EXPECT_FALSE(fs::exists(plugin_dir() / "dra.sock"));
  }

  // kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus; the DRA endpoint.
  std::string register_plugin() {
    auto ch = grpc::CreateChannel("unix:" + registration_socket().string(),
                                  grpc::InsecureChannelCredentials());
    auto reg = pluginregistration::Registration::NewStub(ch);
    pluginregistration::PluginInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    EXPECT_TRUE(reg->GetInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.type(), "DRAPlugin");
    EXPECT_EQ(info.name(), "polyaccel.io");
    EXPECT_THAT(std::vector<std::string>(info.supported_versions().begin(),
                                         info.supported_versions().end()),
                ::testing::Contains("v1.DRAPlugin"));
    pluginregistration::RegistrationStatus st;
    st.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse r;
    grpc::ClientContext ctx2;
    EXPECT_TRUE(reg->NotifyRegistrationStatus(&ctx2, st, &r).ok());
    return info.endpoint();
  }

  v1::NodePrepareResourcesResponse prepare(const std::string& endpoint, const std::string& name,
                                           const std::string& uid) {
    return node_prepare(endpoint, {{name, uid}});
  }

  v1::NodeUnprepareResourcesResponse unprepare(const std::string& endpoint, const std::string& name,
                                               const std::string& uid) {
    return node_unprepare(endpoint, {{name, uid}});
  }

  // The published device (and its slice) whose polyaccel.io/uuid attribute is `uuid`.
  std::pair<json, json> published_device(const std::string& uuid) {
    std::lock_guard<std::mutex> lock(server_.mu);
    for (const auto& [name, s] : server_.slices)
      for (const auto& d : s["spec"].value("devices", json::array()))
        if (d.contains("attributes") && d["attributes"].contains("uuid") &&
            d["attributes"]["uuid"].value("string", "") == uuid)
          return {d, s};
    return {};
  }

  // A ResourceClaim allocated to our driver, checked against the schema like the agent's objects.
  void add_claim(const std::string& name, const std::string& uid,
                 const std::vector<std::pair<std::string, std::string>>& results) {
    json r = json::array(), req = json::array();
    for (const auto& [request, device] : results) {
      r.push_back({{"request", request},
                   {"driver", "polyaccel.io"},
                   {"pool", "node-1"},
                   {"device", device}});
      req.push_back({{"name", request}, {"exactly", {{"deviceClassName", "gpu.polyaccel.io"}}}});
    }
    json claim = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata", {{"name", name}, {"namespace", "ns1"}, {"uid", uid}}},
                  {"spec", {{"devices", {{"requests", req}}}}},
                  {"status", {{"allocation", {{"devices", {{"results", r}}}}}}}};
    auto errors = K8sSchema().validate(claim, "io.k8s.api.resource.v1.ResourceClaim");
    EXPECT_TRUE(errors.empty()) << errors.front();
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims["ns1/" + name] = claim;
  }
  void remove_claim(const std::string& name) {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims.erase("ns1/" + name);
  }
  unsigned server_writes() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.writes;
  }
  unsigned server_requests() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.requests;
  }

  TempDir dir_;
  FakeApiServer server_;
  std::unique_ptr<Background> agent_;
};

TEST_F(AgentDra, PublishesPreparesSurvivesARestartAndStopsOnSigterm) {
  start_agent();
  std::string endpoint = register_plugin();
  EXPECT_EQ(endpoint, (plugin_dir() / "dra.sock").string());
  EXPECT_TRUE(fs::exists(endpoint));
  ASSERT_TRUE(wait_for([&] { return !published_device(kMigUuid).first.is_null(); }, 60s)) << log();
  // The whole GPU and the MIG instance as the scheduler sees them.
  auto [gpu, gpu_slice] = published_device(kGpuUuid);
  auto [mig, mig_slice] = published_device(kMigUuid);
  ASSERT_FALSE(gpu.is_null());
  const std::string gpu_name = gpu["name"], mig_name = mig["name"];
  EXPECT_EQ(gpu["attributes"]["resource.kubernetes.io/pciBusID"]["string"], "0000:4e:00.0");
  EXPECT_TRUE(gpu["attributes"].contains("resource.kubernetes.io/numaNode"))
      << "4e:00.0 is in the XE8640 capture";
  EXPECT_THAT(mig_name, ::testing::EndsWith("-mig-3g-40gb-s4"));
  EXPECT_EQ(mig["attributes"]["migProfile"]["string"], "3g.40gb");
  EXPECT_FALSE(mig.contains("consumesCounters")) << "an existing instance is a device of its own";
  EXPECT_FALSE(mig_slice["spec"].contains("sharedCounters"))
      << "nothing to share without placements";
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    for (const auto& [name, s] : server_.slices) {
      EXPECT_EQ(s["spec"]["nodeName"], "node-1");
      EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
      EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], server_.slices.size());
    }
  }

  // kubelet prepares a claim for both.
  add_claim("train", kUidA, {{"gpu", gpu_name}, {"mig", mig_name}});
  auto resp = prepare(endpoint, "train", kUidA);
  ASSERT_EQ(resp.claims().count(kUidA), 1u);
  const auto& c = resp.claims().at(kUidA);
  ASSERT_EQ(c.error(), "") << log();
  ASSERT_EQ(c.devices_size(), 2);
  EXPECT_EQ(c.devices(0).device_name(), gpu_name);
  EXPECT_EQ(c.devices(0).pool_name(), "node-1");
  EXPECT_EQ(c.devices(0).cdi_device_ids(0), "polyaccel.io/claim=" + kUidA + "-" + gpu_name);
  EXPECT_EQ(c.devices(1).cdi_device_ids(0), "polyaccel.io/claim=" + kUidA + "-" + mig_name);
  fs::path spec_file = cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json");
  ASSERT_TRUE(fs::exists(spec_file));
  json spec = json::parse(std::ifstream(spec_file));
  EXPECT_EQ(spec["kind"], "polyaccel.io/claim");
  ASSERT_EQ(spec["devices"].size(), 2u);
  std::vector<std::string> gpu_nodes, mig_nodes, common_nodes;
  for (const auto& n : spec["devices"][0]["containerEdits"]["deviceNodes"])
    gpu_nodes.push_back(n["path"]);
  for (const auto& n : spec["devices"][1]["containerEdits"]["deviceNodes"])
    mig_nodes.push_back(n["path"]);
  for (const auto& n : spec["containerEdits"]["deviceNodes"])
    common_nodes.push_back(n["path"]);
  EXPECT_THAT(gpu_nodes, ::testing::ElementsAre("/dev/nvidia2")) << "4e:00.0 has minor 2";
  EXPECT_THAT(mig_nodes,
              ::testing::UnorderedElementsAre("/dev/nvidia7", "/dev/nvidia-caps/nvidia-cap66",
                                              "/dev/nvidia-caps/nvidia-cap67"));
  EXPECT_THAT(common_nodes, ::testing::IsSupersetOf({"/dev/nvidiactl", "/dev/nvidia-uvm"}));
  EXPECT_THAT(spec["containerEdits"]["env"].get<std::vector<std::string>>(),
              ::testing::Contains("NVIDIA_VISIBLE_DEVICES=" + kGpuUuid + "," + kMigUuid));
  auto checkpoint = read_text_file(plugin_dir() / "checkpoint.json");
  ASSERT_TRUE(checkpoint);
  EXPECT_THAT(*checkpoint, HasSubstr(kUidA));

  // SIGTERM: a clean stop; the prepared claim's spec and record stay for the next start.
  unsigned writes = server_writes();
  stop_agent();
  EXPECT_TRUE(fs::exists(spec_file)) << "a running pod still uses it";
  EXPECT_THAT(log(), HasSubstr("SIGTERM, stopping"));

  // The next agent: the claim is gone from the API server, yet the checkpoint answers it the
  // same; the GPU stays held against another claim; the unchanged pool is not written again.
  remove_claim("train");
  add_claim("other", kUidB, {{"gpu", gpu_name}});
  unsigned requests = server_requests();
  start_agent();
  endpoint = register_plugin();
  auto again = prepare(endpoint, "train", kUidA);
  ASSERT_EQ(again.claims().at(kUidA).error(), "");
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
  auto refused = prepare(endpoint, "other", kUidB);
  EXPECT_THAT(refused.claims().at(kUidB).error(), HasSubstr("prepared for another claim"));
  ASSERT_TRUE(wait_for([&] { return server_requests() > requests + 1; }, 30s));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(server_writes(), writes) << "a restart with the same devices writes nothing";

  // Unprepare: the spec and the record go, and the GPU is free for the other claim; a repeat is
  // fine.
  auto u = unprepare(endpoint, "train", kUidA);
  ASSERT_EQ(u.claims().count(kUidA), 1u);
  EXPECT_EQ(u.claims().at(kUidA).error(), "");
  EXPECT_FALSE(fs::exists(spec_file));
  checkpoint = read_text_file(plugin_dir() / "checkpoint.json");
  ASSERT_TRUE(checkpoint);
  EXPECT_THAT(*checkpoint, ::testing::Not(HasSubstr(kUidA)));
  EXPECT_EQ(unprepare(endpoint, "train", kUidA).claims().at(kUidA).error(), "");
  auto other = prepare(endpoint, "other", kUidB);
  ASSERT_EQ(other.claims().at(kUidB).error(), "");
  EXPECT_TRUE(fs::exists(cdi_dir() / ("polyaccel.io-claim_" + kUidB + ".json")));
  stop_agent();
}

// Issue 29: SIGTERM while a request hangs in an API server that accepts and never answers: the
// request is cancelled, the agent stops in well under the 5 s watchdog, blames no vendor call,
// and removes dra.sock and the registration socket. The token, planted in the kubeconfig, is in
// no line of the log.
TEST_F(AgentDra, SigtermDuringAHungApiCallStopsCleanlyAndLeaksNoSecret) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);  // never accepted: the kernel completes the handshake
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string secret = "PLANTED-s3cret-token-4f1c";
  write_text(dir_.path() / "kubeconfig",
             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
             "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
             "clusters:\n- name: k\n  cluster: {server: \"http://127.0.0.1:" +
                 std::to_string(ntohs(addr.sin_port)) +
                 "\"}\nusers:\n- name: u\n  user: {token: " + secret + "}\n");
  start_agent();
  std::this_thread::sleep_for(1500ms);  // the first list is under way, and hangs
  auto begin = std::chrono::steady_clock::now();
  auto exit_code = agent_->terminate();
  auto took = std::chrono::steady_clock::now() - begin;
  agent_.reset();
  ::close(listener);
  ASSERT_TRUE(exit_code) << log();
  EXPECT_EQ(*exit_code, 0) << log();
  EXPECT_LT(took, 4s) << log();
  EXPECT_THAT(log(), ::testing::Not(HasSubstr("vendor call")));
  EXPECT_THAT(log(), ::testing::Not(HasSubstr("still hangs")));
  EXPECT_FALSE(fs::exists(registration_socket()));
  EXPECT_FALSE(fs::exists(plugin_dir() / "dra.sock"));
  EXPECT_THAT(log(), ::testing::Not(HasSubstr(secret)));
}

// The same planted token against a server that refuses it: the 401 is logged naming the
// kubeconfig user's token, never the token; a server URL with a password is refused at start
// without the password.
TEST_F(AgentDra, UnauthorizedIsLoggedWithoutTheToken) {
  const std::string secret = "PLANTED-s3cret-token-77aa";
  auto kubeconfig = [&](const std::string& server) {
    write_text(dir_.path() / "kubeconfig",
               "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
               "contexts:\n- name: c\n  context: {cluster: k, user: ci}\n"
               "clusters:\n- name: k\n  cluster: {server: \"" +
                   server + "\"}\nusers:\n- name: ci\n  user: {token: " + secret + "}\n");
  };
  kubeconfig(server_.url());
  start_agent();
  ASSERT_TRUE(wait_for([&] { return log().find("401") != std::string::npos; }, 30s)) << log();
  stop_agent();
  EXPECT_THAT(log(), HasSubstr("user ci's token in the kubeconfig"));
  EXPECT_THAT(log(), ::testing::Not(HasSubstr(secret)));
  EXPECT_THAT(log(), ::testing::Not(HasSubstr("service account")));

  kubeconfig("http://agent:" + secret + "@127.0.0.1:1");
  std::string command;
  for (const auto& a : agent_args())
    command += "'" + a + "' ";
  auto r = run_command(command + "2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("holds credentials"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr(secret)));
}

// Issue 39: --reserved-cpus is kubelet's list of this node's CPUs; anything else is one error
// naming the flag (escaped), exit 2, before any socket, spec or checkpoint is made.
TEST_F(AgentDra, ABadReservedCpuListIsRefusedBeforeAnythingIsMade) {
  for (const std::string bad : {"0-300", "1,\x1b[2Jx", "4-2"}) {
    std::string command;
    for (const auto& a : agent_args())
      command += "'" + a + "' ";
    auto r = run_command(command + "--dra-cpus core --reserved-cpus '" + bad + "' 2>&1");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("--reserved-cpus"));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("\x1b[2J")));
    EXPECT_FALSE(std::filesystem::exists(dir_.path() / "plugins")) << r.output;
  }
}

// Issue 29: a socket path that is a directory (or another file) is polyaccel's one error, exit 2,
// before gRPC could log its own chttp2_server line; the directory is left as it was.
TEST_F(AgentDra, ASocketPathThatIsADirectoryIsOneErrorAtStart) {
  for (const fs::path& taken : {plugin_dir() / "dra.sock", registration_socket()}) {
    fs::create_directories(taken);
    std::string command;
    for (const auto& a : agent_args())
      command += "'" + a + "' ";
    auto r = run_command(command + "2>&1");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(taken.string() + ": is a directory, not a socket"));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("chttp2")));
    // Every line is polyaccel's own: gRPC's log lines start with a severity and a date (E1203).
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);)
      EXPECT_EQ(line.rfind("polyaccel", 0), 0u) << line;
    EXPECT_TRUE(fs::is_directory(taken)) << "left as it was";
    fs::remove(taken);
  }
}

// Issue 41, 1: kubelet's pod-resources (as 1.34 answers, dynamic_resources) says a pod's
// container holds the GPU and the MIG instance of a claim allocated from this node's pool: the
// agent's /metrics give their DCGM series that pod's labels, as for a device plugin's GPU.
TEST_F(AgentDra, PodsOfDraClaimsLabelTheirDevicesMetrics) {
  const fs::path socket = dir_.path() / "pod-resources.sock";
  FakePodResources kubelet(socket.string());
  auto args = agent_args();
  *(std::find(args.begin(), args.end(), "--pod-resources-socket") + 1) = socket.string();
  agent_ = std::make_unique<Background>(args, dir_.path() / "agent.log", true);
  ASSERT_TRUE(agent_->started());
  ASSERT_TRUE(wait_for([&] { return !published_device(kMigUuid).first.is_null(); }, 60s)) << log();
  const std::string gpu = published_device(kGpuUuid).first["name"];
  const std::string mig = published_device(kMigUuid).first["name"];
  kubelet.set(
      {{"train-0",
        "ml",
        "main",
        "",
        {},
        {{"ml", "train", {{"polyaccel.io", "node-1", gpu}, {"polyaccel.io", "node-1", mig}}}}}});
  std::smatch m;
  std::string text;
  ASSERT_TRUE(wait_for(
      [&] { return std::regex_search(text = log(), m, std::regex("on port ([0-9]+)")); }, 30s))
      << text;
  const std::string url = "curl -sS --max-time 20 http://127.0.0.1:" + m[1].str() + "/metrics";
  const std::string gpu_series = "pci_bus_id=\"00000000:4E:00.0\"";
  std::string metrics;
  wait_for(
      [&] {
        metrics = run_command(url).output;
        return metrics.find("pod=\"train-0\"") != std::string::npos &&
               metrics.find("GPU_I_PROFILE=\"3g.40gb\"") != std::string::npos;
      },
      30s);
  std::istringstream lines(metrics);
  bool gpu_labelled = false, mig_labelled = false;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("DCGM_FI_DEV_FB_USED{")) continue;
    const bool pod = line.find("pod=\"train-0\"") != std::string::npos &&
                     line.find("namespace=\"ml\"") != std::string::npos &&
                     line.find("container=\"main\"") != std::string::npos;
    if (line.find("GPU_I_PROFILE=\"3g.40gb\"") != std::string::npos)
      mig_labelled |= pod;
    else if (line.find(gpu_series) != std::string::npos)
      gpu_labelled |= pod;
    else
      EXPECT_FALSE(pod) << line;
  }
  EXPECT_TRUE(gpu_labelled) << metrics.substr(0, 4000);
  EXPECT_TRUE(mig_labelled) << metrics.substr(0, 4000);
  stop_agent();
}

// Issue 40, item 1, the DRA driver's threads: its follower of the monitor and its watch of the
// pool's slices each made to throw (POLYACCEL_FAULT_PART): the kubelet plugin stays registered,
// /healthz names the part (503), its metrics say it stopped, and SIGTERM stops the agent
// cleanly.
TEST_F(AgentDra, ADraPartThatThrowsStopsAloneAndSaysSo) {
  for (const std::string part : {"dra-follower", "dra-slice-watch"}) {
    SCOPED_TRACE(part);
    ::setenv("POLYACCEL_FAULT_PART", part.c_str(), 1);
    start_agent();
    ::unsetenv("POLYACCEL_FAULT_PART");
    const std::string said = "part " + part + " failed and stopped: fault injected";
    // The part can fail before the exporter says its port: wait for both lines.
    const std::regex port_line("on port ([0-9]+)");
    std::smatch m;
    std::string text;
    ASSERT_TRUE(wait_for(
        [&] {
          text = log();
          return text.find(said) != std::string::npos && std::regex_search(text, m, port_line);
        },
        30s))
        << log();
    const std::string base = "curl -sS --max-time 20 http://127.0.0.1:" + m[1].str();
    auto health = run_command(base + "/healthz -w ' %{http_code}'");
    EXPECT_THAT(health.output, HasSubstr("part " + part + " failed: fault injected"));
    EXPECT_THAT(health.output, ::testing::EndsWith(" 503"));
    auto metrics = run_command(base + "/metrics");
    EXPECT_THAT(metrics.output, HasSubstr("polyaccel_agent_part_up{part=\"" + part + "\"} 0"));
    EXPECT_TRUE(fs::exists(registration_socket())) << "the kubelet plugin goes on";
    stop_agent();
    fs::remove(dir_.path() / "agent.log");
  }
}

}  // namespace
}  // namespace polyaccel
