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

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fake_pod_resources.h"
#include "support/infiniband_tree.h"
#include "support/prometheus_server.h"
#include "support/test_pki.h"
#include "support/test_support.h"
#include "support/yaml_json.h"

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
    // Its two InfiniBand HCAs as RDMA devices with port counters (the capture has none).
    polyaccel::testing::add_infiniband_device(fsroot, polyaccel::testing::kNecIbHca0Dir, "mlx5_0",
                                              "100 Gb/sec (4X EDR)", 1000);
    polyaccel::testing::add_infiniband_device(fsroot, polyaccel::testing::kNecIbHca1Dir, "mlx5_1",
                                              "56 Gb/sec (4X FDR)", 3000);
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
  EXPECT_EQ(scalar("polyaccel_numa_allocations_total{type=\"other_node\",numa_node=\"1\","
                   "instance=\"127.0.0.1:" +
                   std::to_string(env_->agent_ports[0]) + "\"}"),
            7);
  EXPECT_EQ(scalar("count(polyaccel_hugepages_pages{page_size_bytes=\"2097152\"})"), 4);
  EXPECT_GT(scalar("count(polyaccel_pcie_link_width_lanes{kind=\"accelerator\"})"), 8);
  // RDMA ports: port_rcv_data's 4-byte words as bytes, the rate file's Gb/s as bytes/s; both
  // agents read the tree: 2 ports each.
  const std::string first = "instance=\"127.0.0.1:" + std::to_string(env_->agent_ports[0]) + "\"";
  EXPECT_EQ(
      scalar("polyaccel_rdma_port_data_received_bytes_total{device=\"mlx5_1\"," + first + "}"),
      12000);
  EXPECT_EQ(scalar("polyaccel_rdma_rate_bytes_per_second{device=\"mlx5_1\"," + first + "}"), 7e9);
  EXPECT_EQ(scalar("count(polyaccel_rdma_state_id == 4)"), 4);
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
        // Each variable at "All": its allValue, as Grafana sends it.
        std::string expr = t["expr"];
        for (const auto& v : d["templating"]["list"])
          if (v.contains("allValue"))
            expr =
                std::regex_replace(expr, std::regex("\\$" + v["name"].get<std::string>() + "\\b"),
                                   v["allValue"].get<std::string>());
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

// The monitoring overlay as the Prometheus Operator runs it. The rendered ServiceMonitor (beside
// the device plugin's Service and DaemonSet) is translated into the scrape configuration the
// operator generates for it (pkg/prometheus/promcfg.go, generateServiceMonitorConfig: its
// relabelings before the endpoint's own), for the fields the overlay uses; a field this does not
// translate fails the test rather than being left out. There is no Kubernetes API, so the
// endpoints discovery is a file_sd target carrying the __meta_kubernetes_* labels that discovery
// gives the agent's pod, and the operator's relabelings read them.
constexpr const char* kK8sNode = "gpu-node-1";
constexpr const char* kPodName = "polyaccel-agent-x7k2p";

// Label names as Kubernetes discovery writes them: every character outside [a-zA-Z0-9_] is "_".
std::string sd_label_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s;
}

// A ServiceMonitor relabeling (camelCase) as a Prometheus relabel_config.
json relabel_config(const json& r) {
  static const std::map<std::string, std::string> keys = {
      {"sourceLabels", "source_labels"}, {"targetLabel", "target_label"},
      {"separator", "separator"},        {"regex", "regex"},
      {"replacement", "replacement"},    {"modulus", "modulus"}};
  json out = json::object();
  for (const auto& [k, v] : r.items()) {
    if (k == "action") {
      std::string a = v;
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      out["action"] = a;
    } else if (keys.count(k)) {
      out[keys.at(k)] = v;
    } else {
      ADD_FAILURE() << "relabeling field " << k << " is not translated";
    }
  }
  return out;
}

// Endpoint `i` of the ServiceMonitor `sm` as the operator's scrape config; the discovery is the
// file `sd_file`.
json operator_scrape_config(const json& sm, size_t i, const std::string& sd_file) {
  const json& spec = sm["spec"];
  const json& ep = spec["endpoints"][i];
  json c = {{"job_name", "serviceMonitor/" + sm["metadata"]["namespace"].get<std::string>() + "/" +
                             sm["metadata"]["name"].get<std::string>() + "/" + std::to_string(i)},
            {"honor_labels", ep.value("honorLabels", false)},
            {"file_sd_configs", {{{"files", {sd_file}}, {"refresh_interval", "1s"}}}},
            {"metrics_path", ep.value("path", "/metrics")},
            {"scheme", ep.value("scheme", "http")}};
  json relabel = json::array();
  relabel.push_back({{"source_labels", {"job"}}, {"target_label", "__tmp_prometheus_job_name"}});
  for (const auto& [k, v] : spec["selector"]["matchLabels"].items()) {
    std::string l = sd_label_name(k);
    relabel.push_back(
        {{"action", "keep"},
         {"source_labels",
          {"__meta_kubernetes_service_label_" + l, "__meta_kubernetes_service_labelpresent_" + l}},
         {"regex", "(" + v.get<std::string>() + ");true"}});
  }
  relabel.push_back({{"action", "keep"},
                     {"source_labels", {"__meta_kubernetes_endpoint_port_name"}},
                     {"regex", ep["port"]}});
  for (const char* kind : {"Node", "Pod"}) {
    relabel.push_back({{"source_labels",
                        {"__meta_kubernetes_endpoint_address_target_kind",
                         "__meta_kubernetes_endpoint_address_target_name"}},
                       {"separator", ";"},
                       {"regex", std::string(kind) + ";(.*)"},
                       {"replacement", "${1}"},
                       {"target_label", kind == std::string("Node") ? "node" : "pod"}});
  }
  for (auto [from, to] : {std::pair{"namespace", "namespace"},
                          {"service_name", "service"},
                          {"pod_name", "pod"},
                          {"pod_container_name", "container"}})
    relabel.push_back(
        {{"source_labels", {std::string("__meta_kubernetes_") + from}}, {"target_label", to}});
  relabel.push_back({{"action", "drop"},
                     {"source_labels", {"__meta_kubernetes_pod_phase"}},
                     {"regex", "(Failed|Succeeded)"}});
  relabel.push_back({{"source_labels", {"__meta_kubernetes_service_name"}},
                     {"target_label", "job"},
                     {"replacement", "${1}"}});
  if (spec.contains("jobLabel"))
    relabel.push_back(
        {{"source_labels", {"__meta_kubernetes_service_label_" + sd_label_name(spec["jobLabel"])}},
         {"target_label", "job"},
         {"regex", "(.+)"},
         {"replacement", "${1}"}});
  relabel.push_back({{"target_label", "endpoint"}, {"replacement", ep["port"]}});
  for (const auto& r : ep.value("relabelings", json::array()))
    relabel.push_back(relabel_config(r));
  c["relabel_configs"] = relabel;
  json metric = json::array();
  for (const auto& r : ep.value("metricRelabelings", json::array()))
    metric.push_back(relabel_config(r));
  c["metric_relabel_configs"] = metric;
  for (const auto& [k, v] : ep.items()) {
    static const std::set<std::string> translated = {
        "port",   "path",        "interval",    "scrapeTimeout",
        "scheme", "honorLabels", "relabelings", "metricRelabelings"};
    if (!translated.count(k)) ADD_FAILURE() << "endpoint field " << k << " is not translated";
  }
  return c;
}

// What Kubernetes' endpoints discovery says of the agent's pod on kK8sNode behind `service`.
json discovered_target(int port, const json& service, const std::string& port_name,
                       const std::string& container) {
  json labels = {{"__meta_kubernetes_namespace", service["metadata"]["namespace"]},
                 {"__meta_kubernetes_service_name", service["metadata"]["name"]},
                 {"__meta_kubernetes_endpoint_port_name", port_name},
                 {"__meta_kubernetes_endpoint_ready", "true"},
                 {"__meta_kubernetes_endpoint_address_target_kind", "Pod"},
                 {"__meta_kubernetes_endpoint_address_target_name", kPodName},
                 {"__meta_kubernetes_pod_name", kPodName},
                 {"__meta_kubernetes_pod_node_name", kK8sNode},
                 {"__meta_kubernetes_pod_container_name", container},
                 {"__meta_kubernetes_pod_phase", "Running"},
                 {"__meta_kubernetes_pod_ready", "true"}};
  for (const auto& [k, v] : service["metadata"]["labels"].items()) {
    labels["__meta_kubernetes_service_label_" + sd_label_name(k)] = v;
    labels["__meta_kubernetes_service_labelpresent_" + sd_label_name(k)] = "true";
  }
  return json::array({{{"targets", {"127.0.0.1:" + std::to_string(port)}}, {"labels", labels}}});
}

// The rendered device plugin with monitoring beside it, as docs/install.md composes them, with
// the kubectl on PATH (else kubectl 1.22, the oldest supported; manifests_test renders with both).
std::vector<json> render_monitoring_beside_device_plugin(const fs::path& dir) {
  const fs::path kube = fs::path(POLYACCEL_SOURCE_DIR) / "deploy/kubernetes";
  polyaccel::testing::write_text(
      dir / "kustomization.yaml",
      "resources:\n  - " + fs::relative(kube / "overlays/device-plugin", dir).string() +
          "\ncomponents:\n  - " + fs::relative(kube / "components/monitoring", dir).string() +
          "\n");
  std::string kubectl = "kubectl";
  if (const char* k = std::getenv("POLYACCEL_KUBECTL"); k && *k)
    kubectl = k;
  else if (run_command("command -v kubectl >/dev/null").exit_code != 0)
    kubectl = "/usr/local/lib/polyaccel-test/kubectl-1.22/kubectl";
  auto r = run_command("'" + kubectl + "' kustomize '" + dir.string() + "' 2>&1");
  if (r.exit_code != 0) throw std::runtime_error(kubectl + " kustomize: " + r.output);
  return polyaccel::testing::yaml_documents(r.output);
}

const json& only_of_kind(const std::vector<json>& all, const std::string& kind) {
  const json* found = nullptr;
  for (const auto& o : all) {
    if (o.value("kind", "") != kind) continue;
    if (found) throw std::runtime_error("two " + kind + " in the render");
    found = &o;
  }
  if (!found) throw std::runtime_error("no " + kind + " in the render");
  return *found;
}

// The `{{label}}`s of a Grafana legend.
std::vector<std::string> legend_labels(const std::string& legend) {
  static const std::regex re("\\{\\{\\s*([A-Za-z_][A-Za-z0-9_]*)\\s*\\}\\}");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(legend.begin(), legend.end(), re);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// Debian's Prometheus scrapes an agent (8×H100 and 8×MI300X, the captured 2-node NEC host with
// node 1's 2 MiB hugepages all taken and a placement holding every PU of one NUMA node) through
// the ServiceMonitor's configuration and loads the PrometheusRule. Kubernetes' node name and the
// agent's NUMA node are two labels, `node` and `numa_node`: nothing is renamed exported_node,
// the node dashboard's NUMA panels and the two NUMA alerts carry both, and the fleet dashboard's
// node picker lists the Kubernetes node.
TEST(PrometheusOperator, ServiceMonitorKeepsTheNumaNodeBesideTheKubernetesNode) {
  polyaccel::testing::TempDir tmp;
  for (const char* dir : {"render", "host"})
    fs::create_directory(tmp.path() / dir);
  auto all = render_monitoring_beside_device_plugin(tmp.path() / "render");
  const json& sm = only_of_kind(all, "ServiceMonitor");
  const json& service = only_of_kind(all, "Service");
  const json& daemonset = only_of_kind(all, "DaemonSet");
  const json& rule = only_of_kind(all, "PrometheusRule");
  ASSERT_EQ(sm["spec"]["endpoints"].size(), 1u);

  fs::path fsroot = polyaccel::testing::extract_tarball(
      polyaccel::testing::topology_fixture(
          "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      tmp.path() / "host");
  fs::path node_dir = fsroot / "sys/devices/system/node";
  for (int node = 0; node < 2; ++node) {
    fs::path dir = node_dir / ("node" + std::to_string(node));
    std::ofstream(dir / "meminfo") << "Node " << node << " MemTotal:       98304000 kB\n"
                                   << "Node " << node << " MemFree:        65536000 kB\n";
    std::ofstream(dir / "numastat") << "numa_hit 1000\nnuma_miss 3\nother_node 2\n";
  }
  std::ofstream(node_dir / "node1/hugepages/hugepages-2048kB/free_hugepages") << "0\n";
  // Its two HCAs with port counters, for the fabric panels.
  polyaccel::testing::add_infiniband_device(fsroot, polyaccel::testing::kNecIbHca0Dir, "mlx5_0",
                                            "100 Gb/sec (4X EDR)", 1000);
  polyaccel::testing::add_infiniband_device(fsroot, polyaccel::testing::kNecIbHca1Dir, "mlx5_1",
                                            "56 Gb/sec (4X FDR)", 3000);
  const std::string state = (tmp.path() / "allocations.json").string();
  auto placed = run_command("'" + polyaccel::testing::polyaccel_binary() + "' place --fsroot '" +
                            fsroot.string() + "' --state '" + state +
                            "' --vcpus 16 --memory 1GiB --spec hw:cpu_policy=dedicated "
                            "--commit --name vm1 2>&1");
  ASSERT_EQ(placed.exit_code, 0) << placed.output;

  const std::string inject = INJECT_DIR;
  const std::string scenarios = SCENARIO_DIR;
  Background agent("POLYACCEL_HLML_LIB=/nonexistent POLYACCEL_NVML_LIB=" + inject +
                       "/nvml/libnvidia-ml.so.1 NVML_INJECT_SCENARIO=" + scenarios +
                       "/nvml/scenarios/hgx-8xh100.json POLYACCEL_ROCM_SMI_LIB=" + inject +
                       "/rocm_smi/librocm_smi64.so.1 ROCM_SMI_INJECT_SCENARIO=" + scenarios +
                       "/rocm_smi/scenarios/mi300x-8x.json exec '" +
                       polyaccel::testing::polyaccel_binary() +
                       "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 "
                       "--fsroot '" +
                       fsroot.string() + "' --state '" + state +
                       "' --pod-resources-socket '' --kubelet-dir '' --nfd-features-dir ''",
                   tmp.path() / "agent.log");
  int agent_port = polyaccel::testing::agent_port(agent);

  std::string port_name = sm["spec"]["endpoints"][0]["port"];
  std::string container = daemonset["spec"]["template"]["spec"]["containers"][0]["name"];
  std::ofstream(tmp.path() / "targets.json")
      << discovered_target(agent_port, service, port_name, container).dump(2);
  json scrape = operator_scrape_config(sm, 0, (tmp.path() / "targets.json").string());
  // 15s and 10s in the cluster; every second here, so that the test takes seconds.
  EXPECT_EQ(sm["spec"]["endpoints"][0]["interval"], "15s");
  scrape["scrape_interval"] = "1s";
  scrape["scrape_timeout"] = "1s";
  std::ofstream(tmp.path() / "rules.yml") << json{{"groups", rule["spec"]["groups"]}}.dump(2);
  // JSON is YAML: Prometheus reads both files as they are.
  std::ofstream(tmp.path() / "prometheus.yml") << json{
      {"global", {{"scrape_interval", "1s"}, {"evaluation_interval", "1s"}}},
      {"rule_files", {(tmp.path() / "rules.yml").string()}},
      {"scrape_configs", {scrape}}}.dump(2);
  int port = polyaccel::testing::free_port();
  Background prometheus(
      "exec prometheus --config.file='" + (tmp.path() / "prometheus.yml").string() +
          "' --storage.tsdb.path='" + (tmp.path() / "tsdb").string() +
          "' --web.listen-address=127.0.0.1:" + std::to_string(port) + " --log.level=warn",
      tmp.path() / "prometheus.log");
  auto api = [&](const std::string& path, const std::string& param, const std::string& value) {
    fs::path q = tmp.path() / "query.txt";
    std::ofstream(q) << value;
    auto r = run_command("curl -sS --max-time 20 -G --data-urlencode '" + param + "@" + q.string() +
                         "' http://127.0.0.1:" + std::to_string(port) + path + " 2>/dev/null");
    json j = json::parse(r.output, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return json::array();
    return j["data"];
  };
  auto query = [&](const std::string& promql) {
    json d = api("/api/v1/query", "query", promql);
    return d.is_object() ? d["result"] : json::array();
  };
  // Two scrapes, a rate over them, and both alerts pending (their `for` is minutes).
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while ((query("rate(polyaccel_numa_allocations_total[1m])").empty() ||
          query("ALERTS{alertname=~\"HugepagesExhausted|PlacementNodeFull\"}").size() < 2) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(250ms);

  // The target as the operator labels it, under the job the alert rules select.
  json up = query("up");
  ASSERT_EQ(up.size(), 1u) << prometheus.log() << agent.log();
  EXPECT_EQ(up[0]["value"][1], "1") << agent.log();
  EXPECT_EQ(up[0]["metric"], json({{"__name__", "up"},
                                   {"job", "polyaccel-agent"},
                                   {"instance", "127.0.0.1:" + std::to_string(agent_port)},
                                   {"namespace", "polyaccel-system"},
                                   {"service", "polyaccel-agent"},
                                   {"endpoint", port_name},
                                   {"pod", kPodName},
                                   {"container", container},
                                   {"node", kK8sNode}}));
  // Nothing renamed: no series has exported_node, and every series has the Kubernetes node.
  EXPECT_EQ(query("count({__name__=~\".+\",exported_node!=\"\"})"), json::array());
  EXPECT_EQ(query("count({__name__=~\".+\",node!=\"" + std::string(kK8sNode) + "\"})"),
            json::array());
  for (const char* family : {"polyaccel_numa_memory_free_bytes", "polyaccel_numa_allocations_total",
                             "polyaccel_hugepages_pages", "polyaccel_placement_free_pus"}) {
    json r = query("count by (numa_node) (" + std::string(family) + ")");
    std::set<std::string> numa;
    for (const auto& s : r)
      numa.insert(s["metric"].value("numa_node", ""));
    EXPECT_EQ(numa, (std::set<std::string>{"0", "1"})) << family;
  }

  // The node dashboard's NUMA panels: data, with both labels, and every label of the legend.
  std::ifstream node_in(fs::path(POLYACCEL_SOURCE_DIR) / "deploy/grafana/polyaccel-node.json");
  json node_dashboard = json::parse(node_in);
  int numa_targets = 0;
  for (const auto& p : node_dashboard["panels"]) {
    for (const auto& t : p["targets"]) {
      std::string legend = t.value("legendFormat", "");
      if (legend.find("numa_node") == std::string::npos) continue;
      ++numa_targets;
      std::string expr =
          std::regex_replace(t["expr"].get<std::string>(), std::regex("\\$instance"), ".+");
      expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
      json r = query(expr);
      EXPECT_FALSE(r.empty()) << p["title"] << ": " << expr;
      for (const auto& s : r) {
        EXPECT_EQ(s["metric"].value("node", ""), kK8sNode) << expr;
        EXPECT_FALSE(s["metric"].contains("exported_node")) << expr;
        for (const auto& l : legend_labels(legend))
          EXPECT_NE(s["metric"].value(l, ""), "") << p["title"] << ": " << legend << " lacks " << l;
      }
    }
  }
  EXPECT_EQ(numa_targets, 8);  // 7 NUMA panels' queries and the RDMA ports' rate

  // The alerts, evaluated by Prometheus from the PrometheusRule: pending, with the NUMA node of
  // the exhausted pool and of the full node, and the Kubernetes node.
  json full = query("polyaccel_placement_free_pus == 0");
  ASSERT_EQ(full.size(), 1u) << "the placement holds every PU of one NUMA node";
  std::string full_numa = full[0]["metric"]["numa_node"];
  std::map<std::string, json> want = {
      {"HugepagesExhausted", {{"numa_node", "1"}, {"page_size_bytes", "2097152"}}},
      {"PlacementNodeFull", {{"numa_node", full_numa}}}};
  for (const auto& [alert, labels] : want) {
    json r = query("ALERTS{alertname=\"" + alert + "\"}");
    ASSERT_EQ(r.size(), 1u) << alert << ": " << prometheus.log();
    const json& m = r[0]["metric"];
    EXPECT_EQ(m.value("node", ""), kK8sNode) << alert;
    EXPECT_FALSE(m.contains("exported_node")) << alert;
    for (const auto& [k, v] : labels.items())
      EXPECT_EQ(m.value(k, ""), v) << alert << " " << k;
  }

  // The fleet dashboard picks by Kubernetes node: its variable lists kK8sNode (not the pod's
  // address), and every panel has data for it and none for another node.
  std::ifstream fleet_in(fs::path(POLYACCEL_SOURCE_DIR) / "deploy/grafana/polyaccel-fleet.json");
  json fleet = json::parse(fleet_in);
  json picker;
  for (const auto& v : fleet["templating"]["list"])
    if (v["type"] == "query") picker = v;
  ASSERT_EQ(picker.value("name", ""), "node");
  std::smatch m;
  std::string picker_query = picker["query"];
  ASSERT_TRUE(
      std::regex_match(picker_query, m, std::regex("label_values\\((.+),\\s*([A-Za-z_]+)\\)")))
      << picker_query;
  EXPECT_EQ(api("/api/v1/label/" + m[2].str() + "/values", "match[]", m[1].str()),
            json::array({kK8sNode}));
  int fleet_targets = 0;
  for (const auto& p : fleet["panels"]) {
    for (const auto& t : p["targets"]) {
      std::string expr = t["expr"];
      ASSERT_NE(expr.find("node=~\"$node\""), std::string::npos) << p["title"] << ": " << expr;
      expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
      ++fleet_targets;
      EXPECT_FALSE(query(std::regex_replace(expr, std::regex("\\$node\\b"), kK8sNode)).empty())
          << p["title"] << ": " << expr;
      if (expr.find("vector(0)") == std::string::npos) {
        EXPECT_TRUE(query(std::regex_replace(expr, std::regex("\\$node\\b"), "other")).empty())
            << p["title"] << ": " << expr;
      }
    }
  }
  EXPECT_EQ(fleet_targets, 14);
}

}  // namespace
}  // namespace polyaccel
