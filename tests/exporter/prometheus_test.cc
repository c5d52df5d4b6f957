// End to end: `polyaccel agent` with the test vendor libraries (8×H100 and 8×MI300X), the
// 8×Gaudi2 scenario in a second agent, a fake kubelet (real gRPC) for pod labels, and a captured
// host (sysfs tree with NUMA memory, hugepages and PCIe links) is scraped by the real Prometheus
// server on loopback. The test queries Prometheus' HTTP API: every family the agents serve is
// there with the scenario's values, pods get their series, and every Grafana panel query of
// deploy/grafana returns data. A third agent serves over TLS with client certificates and basic
// auth (--web-config-file), and Prometheus scrapes it as a ServiceMonitor with tlsConfig and
// basicAuth would have it.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fake_pod_resources.h"
#include "support/prometheus_server.h"
#include "support/test_pki.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using polyaccel::testing::Background;
using polyaccel::testing::PrometheusProcess;
using polyaccel::testing::run_command;
namespace fs = std::filesystem;

// Builds the captured host, starts the fake kubelet, two agents and Prometheus, and waits for
// two scrapes of each agent.
struct Stack {
  polyaccel::testing::TempDir tmp;
  std::unique_ptr<polyaccel::testing::FakePodResources> kubelet;
  std::unique_ptr<Background> nvidia_amd, gaudi;
  std::unique_ptr<PrometheusProcess> prometheus;
  int prometheus_port = 0;
  std::vector<int> agent_ports;
  fs::path fsroot;

  Stack() {
    // The captured NEC host, with NUMA meminfo and numastat files the test writes (the capture
    // has none): values of our own, known to the assertions below.
    fsroot = polyaccel::testing::extract_tarball(
        polyaccel::testing::topology_fixture(
            "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
        tmp.path());
    for (int node = 0; node < 2; ++node) {
      fs::path dir = fsroot / "sys/devices/system/node" / ("node" + std::to_string(node));
      std::ofstream(dir / "meminfo") << "Node " << node << " MemTotal:       98304000 kB\n"
                                     << "Node " << node << " MemFree:        65536000 kB\n";
      std::ofstream(dir / "numastat") << "numa_hit 1000\nnuma_miss " << 10 * node
                                      << "\nnuma_foreign 0\ninterleave_hit 5\nlocal_node 990\n"
                                         "other_node "
                                      << 7 * node << "\n";
    }
    std::string socket = (tmp.path() / "kubelet.sock").string();
    kubelet = std::make_unique<polyaccel::testing::FakePodResources>(socket);
    kubelet->set({{"infer-a",
                   "serve",
                   "server",
                   "nvidia.com/gpu",
                   {"GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21::0"}},
                  {"infer-b",
                   "serve",
                   "server",
                   "nvidia.com/gpu",
                   {"GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21::1"}},
                  {"trainer", "ml", "worker", "amd.com/gpu", {"0000:05:00.0"}}});

    const std::string inject = INJECT_DIR;
    const std::string scenarios = SCENARIO_DIR;
    std::string common = "'" + polyaccel::testing::polyaccel_binary() +
                         "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 "
                         "--hostname node-7 --fsroot '" +
                         fsroot.string() + "' --state '" +
                         (tmp.path() / "allocations.json").string() + "'";
    nvidia_amd = std::make_unique<Background>(
        "POLYACCEL_HLML_LIB=/nonexistent POLYACCEL_NVML_LIB=" + inject +
            "/nvml/libnvidia-ml.so.1 NVML_INJECT_SCENARIO=" + scenarios +
            "/nvml/scenarios/hgx-8xh100.json POLYACCEL_ROCM_SMI_LIB=" + inject +
            "/rocm_smi/librocm_smi64.so.1 ROCM_SMI_INJECT_SCENARIO=" + scenarios +
            "/rocm_smi/scenarios/mi300x-8x.json exec " + common + " --pod-resources-socket '" +
            socket + "'",
        tmp.path() / "agent1.log");
    gaudi = std::make_unique<Background>(
        "POLYACCEL_NVML_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent POLYACCEL_HLML_LIB=" +
            inject + "/hlml/libhlml.so HLML_INJECT_SCENARIO=" + scenarios +
            "/hlml/scenarios/gaudi2-8x.json exec " + common + " --pod-resources-socket ''",
        tmp.path() / "agent2.log");
    for (auto* agent : {nvidia_amd.get(), gaudi.get()})
      agent_ports.push_back(polyaccel::testing::agent_port(*agent));

    prometheus = std::make_unique<PrometheusProcess>(tmp.path(), "polyaccel-agent", agent_ports);
    prometheus_port = prometheus->port();
    // Prometheus takes about 6 s to its first scrape; then two scrapes of each agent.
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      json r = query("count(count_over_time(up{job=\"polyaccel-agent\"}[5m]) >= 2)");
      if (!r.empty() && r[0]["value"][1] == "2") return;
      std::this_thread::sleep_for(250ms);
    }
    throw std::runtime_error("Prometheus did not scrape both agents: " + prometheus->log() +
                             nvidia_amd->log() + gaudi->log());
  }

  // Runs an instant query; the result vector, or an empty one when Prometheus is not ready.
  json query(const std::string& promql) const {
    return polyaccel::testing::prometheus_query(prometheus_port, tmp.path(), promql);
  }
};
class PrometheusServer : public ::testing::Test {
 public:
  static void SetUpTestSuite() { env_ = new Stack(); }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }

  static Stack* env_;

  // Runs an instant query; returns the result vector (empty on error).
  static json query(const std::string& promql) { return env_->query(promql); }
  static double scalar(const std::string& promql) {
    json r = query(promql);
    if (r.size() != 1) {
      ADD_FAILURE() << promql << " gave " << r.size() << " series";
      return -1;
    }
    return std::stod(r[0]["value"][1].get<std::string>());
  }
};

Stack* PrometheusServer::env_ = nullptr;

// One test with three parts: starting Prometheus and the agents takes most of the time.
void scrapes_both_agents() {
  auto scalar = PrometheusServer::scalar;
  EXPECT_EQ(scalar("sum(up{job=\"polyaccel-agent\"})"), 2);
  EXPECT_EQ(scalar("count(polyaccel_build_info)"), 2);
}

void every_family_with_the_scenario_values() {
  auto scalar = PrometheusServer::scalar;
  auto query = PrometheusServer::query;
  auto* env_ = PrometheusServer::env_;
  // Every family an agent serves (but the exposer's own) is in Prometheus.
  for (int port : env_->agent_ports) {
    auto r =
        run_command("curl -sS --max-time 20 http://127.0.0.1:" + std::to_string(port) + "/metrics");
    std::set<std::string> families;
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("# TYPE ", 0) == 0) families.insert(line.substr(7, line.find(' ', 7) - 7));
    }
    ASSERT_GT(families.size(), 40u);
    for (const auto& f : families) {
      if (f.rfind("exposer_", 0) == 0) continue;
      EXPECT_FALSE(
          query("count(" + f + "{instance=\"127.0.0.1:" + std::to_string(port) + "\"})").empty())
          << f;
    }
  }
  // NVIDIA under DCGM-exporter's names: idle step of the scenario.
  EXPECT_EQ(scalar("DCGM_FI_DEV_GPU_TEMP{pci_bus_id=\"00000000:2A:00.0\",GPU_I_ID=\"\"}"), 31);
  EXPECT_EQ(scalar("DCGM_FI_DEV_MEM_CLOCK{pci_bus_id=\"00000000:2A:00.0\",GPU_I_ID=\"\"}"), 2619);
  EXPECT_EQ(scalar("count(DCGM_FI_DEV_GPU_UTIL)"), 9);  // 8 GPUs, one time-sliced by two pods
  // A MIG instance has its own memory; temperature is the GPU's, on the GPU's series only.
  EXPECT_EQ(scalar("count(DCGM_FI_DEV_FB_USED{GPU_I_PROFILE=\"3g.40gb\"})"), 1);
  EXPECT_EQ(scalar("count(DCGM_FI_DEV_GPU_TEMP{GPU_I_PROFILE=\"3g.40gb\"}) or vector(0)"), 0);
  // AMD under device-metrics-exporter's, Gaudi under habanalabs_*.
  EXPECT_EQ(scalar("gpu_package_power{serial_number=\"PCB05214210\"}"), 131);
  EXPECT_EQ(scalar("gpu_nodes_total"), 8);
  EXPECT_EQ(scalar("count(habanalabs_utilization)"), 8);
  EXPECT_EQ(scalar("habanalabs_power_mW{bus_id=\"0000:19:00.0\"}"), 91250);
  // One vendor-neutral family across the three vendors.
  EXPECT_EQ(scalar("count(count by (gpu, instance) (polyaccel_accelerator_info))"), 24);
  EXPECT_EQ(scalar("count(count by (vendor) (polyaccel_accelerator_power_watts))"), 3);
  EXPECT_EQ(scalar("sum(polyaccel_accelerator_healthy)"), 24);
  // Pods from the fake kubelet: one series per pod on the time-sliced GPU.
  EXPECT_EQ(scalar("count(polyaccel_accelerator_power_watts{pod=~\"infer-a|infer-b\"})"), 2);
  EXPECT_EQ(scalar("gpu_package_power{pod=\"trainer\",namespace=\"ml\",container=\"worker\"}"),
            131);
  EXPECT_EQ(scalar("polyaccel_pod_resources_up{instance=\"127.0.0.1:" +
                   std::to_string(env_->agent_ports[0]) + "\"}"),
            1);
  // Host: NUMA memory and numastat of the captured tree, hugepages, PCIe links.
  EXPECT_EQ(scalar("sum(polyaccel_numa_memory_total_bytes) / 2"), 2 * 98304000.0 * 1024);
  EXPECT_EQ(scalar("polyaccel_numa_allocations_total{type=\"other_node\",node=\"1\","
                   "instance=\"127.0.0.1:" +
                   std::to_string(env_->agent_ports[0]) + "\"}"),
            7);
  EXPECT_EQ(scalar("count(polyaccel_hugepages_pages{page_size_bytes=\"2097152\"})"), 4);
  EXPECT_GT(scalar("count(polyaccel_pcie_link_width_lanes{kind=\"accelerator\"})"), 8);
  EXPECT_EQ(scalar("min(polyaccel_collector_success)"), 1);
}

void every_dashboard_query_returns_data() {
  auto query = PrometheusServer::query;
  // rate() over $__rate_interval needs two scrapes inside the window.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (query("rate(polyaccel_accelerator_energy_joules_total[1m])").empty() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(250ms);
  int queries = 0;
  for (const char* name : {"polyaccel-fleet.json", "polyaccel-node.json", "polyaccel-gpu.json"}) {
    std::ifstream in(fs::path(POLYACCEL_SOURCE_DIR) / "deploy/grafana" / name);
    json d = json::parse(in);
    for (const auto& p : d["panels"]) {
      for (const auto& t : p["targets"]) {
        std::string expr = t["expr"];
        expr = std::regex_replace(expr, std::regex("\\$instance|\\$gpu"), ".+");
        expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
        ++queries;
        EXPECT_FALSE(query(expr).empty()) << name << " / " << p["title"] << ": " << expr;
      }
    }
  }
  EXPECT_GT(queries, 30);
}

TEST_F(PrometheusServer, ScrapesEveryFamilyAndEveryDashboardQuery) {
  {
    SCOPED_TRACE("both agents scraped");
    scrapes_both_agents();
  }
  {
    SCOPED_TRACE("every family with the scenario values");
    every_family_with_the_scenario_values();
  }
  {
    SCOPED_TRACE("every dashboard query returns data");
    every_dashboard_query_returns_data();
  }
}

// Debian's Prometheus scrapes an agent over TLS, with a client certificate and basic auth (the
// password from a file, as a ServiceMonitor's basicAuth Secret gives it); the same target without
// the password, and in clear text, is down.
TEST(PrometheusOverTls, ScrapesTheAgentWithClientCertificateAndBasicAuth) {
  polyaccel::testing::TempDir tmp;
  polyaccel::testing::TestPki pki(tmp.path());
  std::string web = (tmp.path() / "web.yml").string();
  polyaccel::testing::write_text(
      web,
      "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
      "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
      // exporter-toolkit's test hash (Go's bcrypt): carol123
      "basic_auth_users:\n  carol: $2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu\n");
  std::string password = (tmp.path() / "password").string();
  polyaccel::testing::write_text(password, "carol123");
  Background agent("exec '" + polyaccel::testing::polyaccel_binary() + "' agent --topology '" +
                       polyaccel::testing::topology_fixture(
                           "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                           .string() +
                       "' --kubelet-dir '' --pod-resources-socket '' --nfd-features-dir '' "
                       "--state '' --audit-interval off --listen 127.0.0.1:0 --web-config-file '" +
                       web + "'",
                   tmp.path() / "agent.log");
  int agent_port = polyaccel::testing::agent_port(agent);
  int port = polyaccel::testing::free_port();
  std::string target = "      - targets: ['127.0.0.1:" + std::to_string(agent_port) + "']\n";
  std::string tls = "    scheme: https\n    tls_config:\n      ca_file: " + pki.ca_crt +
                    "\n      cert_file: " + pki.client_crt + "\n      key_file: " + pki.client_key +
                    "\n";
  std::ofstream(tmp.path() / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n"
      << "  - job_name: tls-auth\n"
      << tls << "    basic_auth:\n      username: carol\n      password_file: " << password
      << "\n    static_configs:\n"
      << target << "  - job_name: tls-no-password\n"
      << tls << "    static_configs:\n"
      << target << "  - job_name: clear-text\n    static_configs:\n"
      << target;
  Background prometheus(
      "exec prometheus --config.file='" + (tmp.path() / "prometheus.yml").string() +
          "' --storage.tsdb.path='" + (tmp.path() / "tsdb").string() +
          "' --web.listen-address=127.0.0.1:" + std::to_string(port) + " --log.level=warn",
      tmp.path() / "prometheus.log");
  auto query = [&](const std::string& promql) {
    return polyaccel::testing::prometheus_query(port, tmp.path(), promql);
  };
  auto value = [&](const std::string& promql) -> std::string {
    json r = query(promql);
    return r.size() == 1 ? r[0]["value"][1].get<std::string>() : "";
  };
  // Two scrapes of each job, then the verdicts.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (value("count(count_over_time(up[5m]) >= 2)") != "3" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(250ms);
  EXPECT_EQ(value("up{job=\"tls-auth\"}"), "1") << prometheus.log() << agent.log();
  EXPECT_EQ(value("count(polyaccel_build_info{job=\"tls-auth\"})"), "1");
  EXPECT_FALSE(query("count({job=\"tls-auth\",__name__=~\"polyaccel_.+\"}) > 10").empty());
  EXPECT_EQ(value("up{job=\"tls-no-password\"}"), "0");
  EXPECT_EQ(value("up{job=\"clear-text\"}"), "0");
  // Nothing of the password or key in the agent's log.
  EXPECT_EQ(agent.log().find("carol123"), std::string::npos);
  EXPECT_EQ(agent.log().find("PRIVATE KEY"), std::string::npos);
}

}  // namespace
}  // namespace polyaccel
