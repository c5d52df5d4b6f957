// The agent as a drop-in for the vendors' exporters, judged by the vendors' own dashboards
// (../shared/reference/vendor-dashboards): for each scenario (8×H100 through NVML, 8×MI300X
// through amd-smi, 8×Gaudi2 through HLML) one agent is scraped by its own real Prometheus server,
// as on a cluster of that vendor. Each dashboard's template variables are resolved from the
// scraped series the way Grafana does (label_values through Prometheus' HTTP API), then every
// panel query is evaluated. A panel without data fails, unless the reviewed list below names it
// with the reason; a listed panel that has data fails too, so that the list stays true. The Gaudi
// exporter ships no dashboard: its metric list is the contract. Values are checked against the
// scenarios in the upstream units.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
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
#include "support/prometheus_server.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using polyaccel::testing::Background;
using polyaccel::testing::PrometheusProcess;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
namespace fs = std::filesystem;

const fs::path kDashboards = fs::path(POLYACCEL_SHARED_DIR) / "reference/vendor-dashboards";

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// One vendor's cluster in miniature: a fake kubelet with one pod, the agent on the scenario, and
// a Prometheus server scraping it every second.
class VendorStack {
 public:
  VendorStack(const std::string& name, const std::string& library_env,
              std::vector<polyaccel::testing::FakeContainer> pods)
      : name_(name) {
    std::string socket = (tmp_.path() / "kubelet.sock").string();
    kubelet_ = std::make_unique<polyaccel::testing::FakePodResources>(socket);
    kubelet_->set(std::move(pods));
    agent_ = std::make_unique<Background>(
        "POLYACCEL_NVML_LIB=/nonexistent POLYACCEL_AMD_SMI_LIB=/nonexistent "
        "POLYACCEL_ROCM_SMI_LIB=/nonexistent POLYACCEL_HLML_LIB=/nonexistent " +
            library_env + " exec '" + polyaccel::testing::polyaccel_binary() +
            "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 --hostname node-7 "
            "--cluster-name lab --kubelet-dir '' --audit-interval 1m --state '' "
            "--pod-resources-socket '" +
            socket + "'",
        tmp_.path() / "agent.log");
    agent_port_ = polyaccel::testing::agent_port(*agent_, name + ": ");
    prometheus_ =
        std::make_unique<PrometheusProcess>(tmp_.path(), name, std::vector<int>{agent_port_});
    prometheus_port_ = prometheus_->port();
  }

  // Waits until Prometheus holds enough scrapes for delta() over 15 s windows.
  void wait_for_scrapes(int scrapes) const {
    auto deadline = std::chrono::steady_clock::now() + 90s;
    std::string q = "count_over_time(up[1m]) >= " + std::to_string(scrapes);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!query(q).empty()) return;
      std::this_thread::sleep_for(250ms);
    }
    throw std::runtime_error(
        name_ + ": Prometheus did not scrape the agent: " + prometheus_->log() + agent_->log());
  }

  // GET on Prometheus' HTTP API; the parsed answer (status "error" when it did not parse).
  json api(const std::string& path_and_query) const {
    auto r =
        run_command("curl -sS --max-time 20 'http://127.0.0.1:" + std::to_string(prometheus_port_) +
                    path_and_query + "' 2>/dev/null");
    json j = json::parse(r.output, nullptr, false);
    if (j.is_discarded()) return json{{"status", "error"}, {"error", r.output}};
    return j;
  }
  // An instant query: its result vector; an error answer gives `error` its text.
  json query(const std::string& promql, std::string* error = nullptr) const {
    json j = api("/api/v1/query?query=" + url_encode(promql));
    if (j.value("status", "") != "success") {
      if (error) *error = j.value("error", "no answer");
      return json::array();
    }
    if (error) error->clear();
    return j["data"]["result"];
  }
  // Values of `label` on the series `selector` selects (every series: empty), as Grafana's
  // label_values(); sorted, without empty values.
  std::vector<std::string> label_values(const std::string& label,
                                        const std::string& selector) const {
    std::string path = "/api/v1/label/" + label + "/values";
    if (!selector.empty()) path += "?match[]=" + url_encode(selector);
    json j = api(path);
    std::vector<std::string> out;
    if (j.value("status", "") != "success") return out;
    for (const auto& v : j["data"]) {
      if (!v.get<std::string>().empty()) out.push_back(v);
    }
    return out;
  }
  double scalar(const std::string& promql) const {
    json r = query(promql);
    if (r.size() != 1) {
      ADD_FAILURE() << name_ << ": " << promql << " gave " << r.size() << " series";
      return -1;
    }
    return std::stod(r[0]["value"][1].get<std::string>());
  }
  std::string agent_metrics() const {
    return run_command("curl -sS --max-time 20 http://127.0.0.1:" + std::to_string(agent_port_) +
                       "/metrics")
        .output;
  }

 private:
  std::string name_;
  polyaccel::testing::TempDir tmp_;
  std::unique_ptr<polyaccel::testing::FakePodResources> kubelet_;
  std::unique_ptr<Background> agent_;
  std::unique_ptr<PrometheusProcess> prometheus_;
  int agent_port_ = 0, prometheus_port_ = 0;
};

// The four stacks, each started on first use and then kept for the process: ctest runs each test
// case in a process of its own, which so starts only the stack it reads.
struct Stacks {
  std::unique_ptr<VendorStack> nvidia, amd, gaudi;
  std::unique_ptr<VendorStack> amd_partitioned;  // an MI300X in DPX next to one in SPX
  std::unique_ptr<VendorStack> amd_mi2xx;        // 8 GCDs of 4 MI250X
};
Stacks* stacks = nullptr;

const VendorStack& started(std::unique_ptr<VendorStack>& slot, const std::string& name,
                           const std::string& library_env,
                           std::vector<polyaccel::testing::FakeContainer> pods) {
  if (!slot) {
    slot = std::make_unique<VendorStack>(name, library_env, std::move(pods));
    // delta() over $__interval (15 s) needs two points in the window: wait for 4 scrapes.
    slot->wait_for_scrapes(4);
  }
  return *slot;
}

const std::string kScenarios = SCENARIO_DIR;

// NVIDIA at the scenario's training step (GPM busy, memory in use on the MIG GPU). Its pod holds
// a MIG instance of the MIG-mode GPU (db:00.0); the AMD and Gaudi pods one whole device each.
const VendorStack& nvidia_stack() {
  return started(
      stacks->nvidia, "nvidia",
      std::string("POLYACCEL_NVML_LIB=") + NVML_INJECT_LIB + " NVML_INJECT_SCENARIO=" + kScenarios +
          "/nvml/scenarios/hgx-8xh100.json NVML_INJECT_STEP=1",
      {{"llm-0", "serve", "server", "nvidia.com/gpu", {"MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58"}},
       {"train-0",
        "ml",
        "worker",
        "nvidia.com/gpu",
        {"GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"}}});
}
const VendorStack& amd_stack() {
  return started(stacks->amd, "amd",
                 std::string("POLYACCEL_AMD_SMI_LIB=") + AMD_SMI_INJECT_LIB +
                     " AMD_SMI_INJECT_SCENARIO=" + kScenarios + "/amd_smi/scenarios/mi300x-8x.json",
                 {{"trainer", "ml", "worker", "amd.com/gpu", {"0000:05:00.0"}}});
}
const VendorStack& amd_dpx_stack() {
  return started(stacks->amd_partitioned, "amd-dpx",
                 std::string("POLYACCEL_AMD_SMI_LIB=") + AMD_SMI_INJECT_LIB +
                     " AMD_SMI_INJECT_SCENARIO=" + kScenarios +
                     "/amd_smi/scenarios/mi300x-2x-dpx.json",
                 {});
}
// The MI2xx branch of AMD's dashboards: 4 MI250X, each GCD a device; the pod holds a GCD.
const VendorStack& amd_mi250x_stack() {
  return started(stacks->amd_mi2xx, "amd-mi250x",
                 std::string("POLYACCEL_AMD_SMI_LIB=") + AMD_SMI_INJECT_LIB +
                     " AMD_SMI_INJECT_SCENARIO=" + kScenarios +
                     "/amd_smi/scenarios/mi250x-8gcd.json",
                 {{"trainer", "ml", "worker", "amd.com/gpu", {"0000:c1:00.0"}}});
}
const VendorStack& gaudi_stack() {
  return started(stacks->gaudi, "gaudi",
                 std::string("POLYACCEL_HLML_LIB=") + HLML_INJECT_LIB +
                     " HLML_INJECT_SCENARIO=" + kScenarios + "/hlml/scenarios/gaudi2-8x.json",
                 {{"finetune", "ml", "worker", "habana.ai/gaudi", {"0000:19:00.0"}}});
}

class VendorDashboards : public ::testing::Test {
 public:
  static void SetUpTestSuite() { stacks = new Stacks; }
  static void TearDownTestSuite() {
    delete stacks;
    stacks = nullptr;
  }
};

// ---- Grafana's part: template variables and panel queries ----

std::string variable_query(const json& v) {
  const json& q = v.contains("query") ? v["query"] : json();
  if (q.is_string()) return q;
  if (q.is_object() && q.contains("query") && q["query"].is_string()) return q["query"];
  return "";
}

// Replaces $name and ${name} (longest names first, so $g_gpu does not eat $g_gpu_id).
std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  std::vector<std::pair<std::string, std::string>> by_length(values.begin(), values.end());
  std::sort(by_length.begin(), by_length.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [name, value] : by_length) {
    for (const std::string& token : {"${" + name + "}", "$" + name}) {
      for (size_t at = text.find(token); at != std::string::npos;
           at = text.find(token, at + value.size()))
        text.replace(at, token.size(), value);
    }
  }
  return text;
}

// Resolves every variable of a dashboard from the series in Prometheus, as Grafana does on
// first load: a query variable takes its first value; one that is multi-valued or has "All"
// takes all of them (one value alone, several as a regex alternation); no value gives "".
// Variables are resolved in dependency order.
std::map<std::string, std::string> resolve_variables(const json& dashboard,
                                                     const VendorStack& prometheus) {
  std::map<std::string, std::string> values = {{"__interval", "15s"}, {"__rate_interval", "1m"}};
  std::vector<json> pending;
  for (const auto& v : dashboard["templating"]["list"])
    pending.push_back(v);
  for (int round = 0; round < 10 && !pending.empty(); ++round) {
    std::vector<json> later;
    for (const auto& v : pending) {
      std::string name = v["name"];
      std::string type = v.value("type", "");
      std::string q = variable_query(v);
      if (type == "textbox" || type == "constant") {
        values[name] = v.contains("current") && v["current"].contains("value")
                           ? v["current"]["value"].get<std::string>()
                           : q;
        continue;
      }
      if (type != "query") continue;  // the datasource variable
      // Depends on a variable not resolved yet?
      std::smatch m;
      std::string rest = q;
      bool waits = false;
      static const std::regex ref("\\$\\{?([A-Za-z_][A-Za-z0-9_]*)");
      while (std::regex_search(rest, m, ref)) {
        if (!values.count(m[1])) waits = true;
        rest = m.suffix();
      }
      if (waits && round < 9) {
        later.push_back(v);
        continue;
      }
      q = substitute(q, values);
      static const std::regex form("^\\s*label_values\\((.*)\\)\\s*$");
      if (!std::regex_match(q, m, form)) {
        ADD_FAILURE() << "variable " << name << ": unknown query " << q;
        continue;
      }
      std::string args = m[1];
      size_t comma = args.rfind(',');
      std::string selector, label;
      if (comma == std::string::npos) {
        label = args;
      } else {
        selector = args.substr(0, comma);
        label = args.substr(comma + 1);
      }
      auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(" \t"));
        s.erase(s.find_last_not_of(" \t") + 1);
        return s;
      };
      auto found = prometheus.label_values(trim(label), trim(selector));
      bool many = v.value("multi", false) || v.value("includeAll", false);
      std::string value;
      if (found.empty()) {
        value = "";
      } else if (!many || found.size() == 1) {
        value = found.front();
      } else {
        value = "(";
        for (size_t i = 0; i < found.size(); ++i)
          value += (i ? "|" : "") + found[i];
        value += ")";
      }
      values[name] = value;
    }
    pending = std::move(later);
  }
  return values;
}

// Prometheus 3 quoting, `{"name", label="x"}`, in the 2.x form `name{label="x"}`.
std::string prometheus2_form(const std::string& expr) {
  static const std::regex quoted("\\{\"([A-Za-z_:][A-Za-z0-9_:]*)\"\\s*(,\\s*)?");
  return std::regex_replace(expr, quoted, "$1{");
}

struct PanelResult {
  std::string dashboard, title;
  bool has_data = false;
  std::vector<std::string> failures;  // queries that did not parse or disagree across forms
};

void collect_panels(const json& panels, std::vector<const json*>& out) {
  for (const auto& p : panels) {
    out.push_back(&p);
    if (p.contains("panels")) collect_panels(p["panels"], out);
  }
}

std::vector<PanelResult> evaluate_dashboard(const std::string& file,
                                            const VendorStack& prometheus) {
  std::ifstream in(kDashboards / file);
  json d = json::parse(in);
  auto values = resolve_variables(d, prometheus);
  std::vector<const json*> panels;
  collect_panels(d["panels"], panels);
  std::vector<PanelResult> out;
  for (const json* p : panels) {
    if (!p->contains("targets")) continue;
    PanelResult r{file, p->value("title", ""), false, {}};
    for (const auto& t : (*p)["targets"]) {
      if (!t.contains("expr") || !t["expr"].is_string()) continue;  // a math expression
      std::string written = substitute(t["expr"], values);
      std::string v2 = prometheus2_form(written);
      std::string error;
      json result = prometheus.query(v2, &error);
      if (!error.empty()) r.failures.push_back(v2 + ": " + error);
      if (!result.empty()) r.has_data = true;
      if (v2 != written) {
        // As written: Debian's Prometheus 2.42 rejects the quoted name; where it parses, the
        // two forms must agree.
        json as_written = prometheus.query(written, &error);
        if (error.empty() && as_written.size() != result.size())
          r.failures.push_back(written + " and " + v2 + " disagree");
      }
    }
    out.push_back(r);
  }
  return out;
}

// Panels that stay empty on purpose: dashboard, panel title → why.
using Reviewed = std::map<std::pair<std::string, std::string>, std::string>;

void expect_every_panel_with_data(const std::vector<std::string>& files,
                                  const VendorStack& prometheus, const Reviewed& reviewed,
                                  int min_panels) {
  int panels = 0, with_data = 0;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& file : files) {
    for (const auto& r : evaluate_dashboard(file, prometheus)) {
      ++panels;
      with_data += r.has_data ? 1 : 0;
      for (const auto& f : r.failures)
        ADD_FAILURE() << file << " / " << r.title << ": " << f;
      auto key = std::make_pair(file, r.title);
      auto it = reviewed.find(key);
      if (it == reviewed.end()) {
        EXPECT_TRUE(r.has_data) << file << " / \"" << r.title << "\" has no data";
      } else if (r.has_data && !seen.count(key)) {
        ADD_FAILURE() << file << " / \"" << r.title << "\" has data now: take it off the list ("
                      << it->second << ")";
      }
      if (r.has_data) seen.insert(key);
    }
  }
  std::cout << "panels with data: " << with_data << " of " << panels << "\n";
  EXPECT_GE(panels, min_panels);
}

// ---- NVIDIA ----

TEST_F(VendorDashboards, NvidiaDashboardEveryPanel) {
  expect_every_panel_with_data({"nvidia/dcgm-exporter-dashboard.json"}, nvidia_stack(), {}, 8);
}

// Every field of dcgm-exporter's default list that NVML gives is exported.
TEST_F(VendorDashboards, NvidiaDefaultCounters) {
  const std::map<std::string, std::string> not_from_nvml = {
      {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "a vGPU guest's licence state: no vGPU in the scenario"},
  };
  std::ifstream in(kDashboards / "nvidia/default-counters.csv");
  std::string line;
  int fields = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string field = line.substr(0, line.find(','));
    field.erase(0, field.find_first_not_of(" "));
    field.erase(field.find_last_not_of(" ") + 1);
    // DCGM_FI_DRIVER_VERSION is a label of every series, not a metric.
    if (field.rfind("DCGM_", 0) != 0 || line.find("label") != std::string::npos) continue;
    ++fields;
    bool present = !nvidia_stack().query("count(" + field + ")").empty();
    if (not_from_nvml.count(field)) {
      EXPECT_FALSE(present) << field << " has data now: take it off the list";
      continue;
    }
    EXPECT_TRUE(present) << field;
  }
  EXPECT_EQ(fields, 25);  // its 26 fields but the DCGM_FI_DRIVER_VERSION label
}

TEST_F(VendorDashboards, NvidiaValuesInDcgmUnits) {
  const VendorStack& p = nvidia_stack();
  // Training step: 652.34 W on seven GPUs, 699.81 W on 4e:00.0 at its cap, each counted once
  // (MIG instances carry no power).
  EXPECT_NEAR(p.scalar("sum(DCGM_FI_DEV_POWER_USAGE)"), 7 * 652.34 + 699.81, 1e-6);
  EXPECT_TRUE(p.query("DCGM_FI_DEV_POWER_USAGE{GPU_I_ID!=\"\"}").empty());
  EXPECT_TRUE(p.query("DCGM_FI_DEV_GPU_TEMP{GPU_I_ID!=\"\"}").empty());
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_GPU_TEMP)"), 8);
  EXPECT_EQ(p.scalar("DCGM_FI_DEV_SM_CLOCK{pci_bus_id=\"00000000:2A:00.0\"}"), 1980);
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_GPU_TEMP{Hostname=\"node-7\"})"), 8);
  // MIG: memory per instance, in MiB, summing to the GPU's; the pod's series on its instance.
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_FB_USED{pci_bus_id=\"00000000:DB:00.0\"})"), 3);
  EXPECT_TRUE(
      p.query("DCGM_FI_DEV_FB_USED{pci_bus_id=\"00000000:DB:00.0\",GPU_I_ID=\"\"}").empty());
  EXPECT_DOUBLE_EQ(
      p.scalar("sum(DCGM_FI_DEV_FB_USED{pci_bus_id=\"00000000:DB:00.0\"})"),
      p.scalar("polyaccel_accelerator_memory_used_bytes{pci_bus_id=\"0000:db:00.0\"}") / 1048576);
  EXPECT_NEAR(p.scalar("sum(DCGM_FI_DEV_FB_USED{pci_bus_id=\"00000000:DB:00.0\"})"), 30127, 1e-6);
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_FB_USED{pod=\"llm-0\",GPU_I_PROFILE=\"3g.40gb\"})"), 1);
  EXPECT_EQ(p.scalar("DCGM_FI_DEV_FB_RESERVED{pci_bus_id=\"00000000:2A:00.0\"}"), 546);
  // GPM as DCGM's ratios and bytes per second; per MIG instance on the MIG GPU.
  EXPECT_DOUBLE_EQ(p.scalar("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{pci_bus_id=\"00000000:2A:00.0\"}"),
                   0.6325);
  EXPECT_DOUBLE_EQ(p.scalar("DCGM_FI_PROF_GR_ENGINE_ACTIVE{pci_bus_id=\"00000000:2A:00.0\"}"),
                   0.975);
  EXPECT_DOUBLE_EQ(p.scalar("DCGM_FI_PROF_PCIE_RX_BYTES{pci_bus_id=\"00000000:2A:00.0\"}"),
                   9216.0 * 1048576);
  EXPECT_DOUBLE_EQ(p.scalar("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{GPU_I_ID=\"2\"}"), 0.4475);
  EXPECT_EQ(p.scalar("count(DCGM_FI_PROF_GR_ENGINE_ACTIVE)"), 7 + 3);
  // NVLink bandwidth as DCGM computes it (MB/s: KiB/s over 1000) from NVML's data counters,
  // once per GPU: 148736 + 148224 MiB/s at this step; the MIG GPU's links are idle.
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL)"), 8);
  EXPECT_NEAR(p.scalar("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{pci_bus_id=\"00000000:2A:00.0\"}"),
              (148736 + 148224) * 1024 / 1000.0, 1.0);
  EXPECT_EQ(p.scalar("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{pci_bus_id=\"00000000:DB:00.0\"}"), 0);
  // The last XID with upstream's labels; clock event reasons as a mask and by name.
  EXPECT_EQ(p.scalar("count(DCGM_FI_DEV_XID_ERRORS{err_code=\"0\",err_msg=\"No Error\"})"), 8);
  EXPECT_EQ(p.scalar("DCGM_FI_DEV_CLOCKS_EVENT_REASONS{pci_bus_id=\"00000000:4E:00.0\"}"), 4);
  EXPECT_EQ(
      p.scalar("count(polyaccel_accelerator_clock_event_reasons{pci_bus_id=\"0000:4e:00.0\"})"), 1);
}

// ---- AMD ----

const std::vector<std::string> kAmdDashboards = {"amd/dashboard_overview.json",
                                                 "amd/dashboard_gpu.json", "amd/dashboard_job.json",
                                                 "amd/dashboard_system.json"};

Reviewed amd_reviewed() {
  Reviewed r;
  // The job dashboard's and system dashboard's profiler panels read gpu_prof_*: AMD's exporter
  // takes them from rocprofiler-sdk counters, which no SMI library gives.
  for (const char* f : {"amd/dashboard_job.json", "amd/dashboard_system.json"}) {
    for (const char* t : {"SM Active", "Occupancy / Compute", "SIMD Utilization", "Tensor Active",
                          "Occupancy / Active Compute", "GUI Utilization"})
      r[{f, t}] = "gpu_prof_*: rocprofiler counters, not an SMI field";
  }
  return r;
}

TEST_F(VendorDashboards, AmdDashboardsEveryPanel) {
  expect_every_panel_with_data(kAmdDashboards, amd_stack(), amd_reviewed(), 89);
}

TEST_F(VendorDashboards, AmdValuesInExporterUnits) {
  const VendorStack& p = amd_stack();
  EXPECT_EQ(p.scalar("gpu_package_power{serial_number=\"PCB05214210\"}"), 131);
  EXPECT_EQ(p.scalar("sum(gpu_nodes_total)"), 8);
  // GT/s, from AMD SMI's pcie_static (MT/s), where this host's sysfs has no MI300X link.
  EXPECT_EQ(p.scalar("max(pcie_max_speed)"), 32);
  EXPECT_EQ(p.scalar("count(pcie_max_speed)"), 8);
  // MB as AMD's exporter: 192 GiB.
  EXPECT_EQ(p.scalar("gpu_total_vram{gpu_id=\"0\"}"), 196608);
  // GFX busy per XCC (eight on an MI300X in SPX, labelled xcc_index as AMD's exporter); the
  // dashboards' avg() over them gives the GPU's activity.
  EXPECT_EQ(p.scalar("count(gpu_gfx_busy_instantaneous{card_model=~\"102-G30211-.*\"})"), 64);
  EXPECT_EQ(p.scalar("count(gpu_gfx_busy_instantaneous{gpu_id=\"0\",xcc_index=\"7\"})"), 1);
  EXPECT_EQ(p.scalar("avg by (gpu_id) (gpu_gfx_busy_instantaneous{gpu_id=\"0\"})"),
            p.scalar("gpu_gfx_activity{gpu_id=\"0\"}"));
  EXPECT_EQ(p.scalar("count(gpu_clock{clock_type=\"system\"})"), 8);
  // The clocks' ranges, MHz (MI300X: GFX 500-2100, memory 900-1300).
  EXPECT_EQ(p.scalar("gpu_min_clock{gpu_id=\"0\",clock_type=\"system\"}"), 500);
  EXPECT_EQ(p.scalar("gpu_max_clock{gpu_id=\"0\",clock_type=\"system\"}"), 2100);
  EXPECT_EQ(p.scalar("gpu_min_clock{gpu_id=\"0\",clock_type=\"memory\"}"), 900);
  EXPECT_EQ(p.scalar("gpu_max_clock{gpu_id=\"0\",clock_type=\"memory\"}"), 1300);
  EXPECT_EQ(p.scalar("count(gpu_health{gpu_compute_partition_type=\"spx\","
                     "gpu_memory_partition_type=\"nps1\"})"),
            8);
  EXPECT_EQ(p.scalar("count(gpu_health{pod=\"trainer\",cluster_name=\"lab\"})"), 1);
  EXPECT_EQ(p.scalar("pcie_speed{gpu_id=\"0\"}"), 32);
  EXPECT_EQ(p.scalar("count(pcie_nack_sent_count)"), 8);
  EXPECT_EQ(p.scalar("count(gpu_ecc_correct_total)"), 8);
  // metricslist.md's per-block ECC, GTT / visible VRAM (MB), violation counters, XGMI data per
  // link (KB), PCIe and VRAM bandwidth (GB/s) and VCN/JPEG busy (%), once per GPU.
  EXPECT_EQ(p.scalar("gpu_ecc_correct_sdma{gpu_id=\"2\"}"), 1);
  EXPECT_EQ(p.scalar("sum(gpu_ecc_correct_sdma)"), 1);
  EXPECT_EQ(p.scalar("count(gpu_ecc_deferred_xgmi_wafl)"), 8);
  EXPECT_TRUE(p.query("gpu_ecc_correct_athub").empty());  // no RAS on ATHUB: absent, not 0
  EXPECT_EQ(p.scalar("gpu_total_gtt{gpu_id=\"0\"}"), 1572864);
  EXPECT_EQ(p.scalar("gpu_free_gtt{gpu_id=\"0\"}"), 1572852);
  EXPECT_EQ(p.scalar("gpu_used_visible_vram{gpu_id=\"0\"}"), 284);
  EXPECT_EQ(p.scalar("gpu_violation_current_accumulated_counter{gpu_id=\"0\"}"), 5180000);
  EXPECT_EQ(p.scalar("count(gpu_violation_ppt_residency_percentage)"), 8);
  EXPECT_EQ(p.scalar("count(gpu_violation_low_utilization_percentage)"), 8 * 8);  // per XCC
  EXPECT_EQ(p.scalar("count(gpu_violation_gfx_clock_below_host_limit_total_accumulated{"
                     "gpu_id=\"0\",xcc_index=\"7\"})"),
            1);
  EXPECT_EQ(p.scalar("gpu_xgmi_link_rx{gpu_id=\"0\",link_index=\"1\"}"), 2776148);
  EXPECT_EQ(p.scalar("count(gpu_xgmi_link_tx)"), 64);
  EXPECT_EQ(p.scalar("pcie_bidirectional_bandwidth{gpu_id=\"0\"}"), 1824);
  EXPECT_EQ(p.scalar("gpu_vram_max_bandwidth{gpu_id=\"0\"}"), 5300);
  EXPECT_EQ(p.scalar("gpu_vcn_busy_instantaneous{gpu_id=\"0\",xcc_index=\"0\"}"), 12);
  EXPECT_EQ(p.scalar("gpu_jpeg_busy_instantaneous{gpu_id=\"0\",xcc_index=\"3\"}"), 25);
  EXPECT_EQ(p.scalar("count(gpu_jpeg_busy_instantaneous)"), 8 * 32);
}

// AMD's dashboards on MI2xx GPUs (card_model one of their MI2xx part numbers): the edge
// temperature, HBM stacks and average power their MI2xx queries read.
Reviewed amd_mi2xx_reviewed() {
  Reviewed r = amd_reviewed();
  // Per-XCC GFX busy: the dashboard reads it for MI3xx only (card_model!~ its MI2xx numbers).
  r[{"amd/dashboard_gpu.json", "GPU Compute Core Usage"}] =
      "gpu_gfx_busy_instantaneous: queried for MI3xx card models only";
  // pcie_bandwidth is the metrics table's instantaneous PCIe bandwidth (v1.4 and later, MI300);
  // MI200's table is v1.3, without it, and the agent has no other source of it.
  const char* kNoPcieBandwidth = "pcie_bandwidth: not in MI200's v1.3 metrics table";
  r[{"amd/dashboard_gpu.json", "PCIe Bandwidth"}] = kNoPcieBandwidth;
  r[{"amd/dashboard_overview.json", "Current Total PCIe Bandwidth"}] = kNoPcieBandwidth;
  for (const char* f :
       {"amd/dashboard_overview.json", "amd/dashboard_job.json", "amd/dashboard_system.json"})
    r[{f, "Total PCIe Bandwidth"}] = kNoPcieBandwidth;
  for (const char* f : {"amd/dashboard_job.json", "amd/dashboard_system.json"})
    r[{f, "Total Current PCIe Bandwidth"}] = kNoPcieBandwidth;
  return r;
}

TEST_F(VendorDashboards, AmdMi2xxDashboardsEveryPanel) {
  expect_every_panel_with_data(kAmdDashboards, amd_mi250x_stack(), amd_mi2xx_reviewed(), 89);
}

TEST_F(VendorDashboards, AmdMi2xxValuesInExporterUnits) {
  const VendorStack& p = amd_mi250x_stack();
  // Every GCD is a GPU of AMD's MI2xx list, so the dashboards take their MI2xx queries.
  EXPECT_EQ(p.scalar("count(gpu_gfx_activity{card_model=~\"102-D65208-0C|102-D67305-00|"
                     "102-D65209-0C\"})"),
            8);
  EXPECT_EQ(p.scalar("sum(gpu_nodes_total)"), 8);
  // 64 GiB of the OAM's 128 GiB per GCD, in MB.
  EXPECT_EQ(p.scalar("gpu_total_vram{gpu_id=\"0\"}"), 65536);
  // Degrees C: the edge sensor (training 44, idle 36), the junction, each HBM stack.
  EXPECT_EQ(p.scalar("gpu_edge_temperature{gpu_id=\"0\"}"), 44);
  EXPECT_EQ(p.scalar("gpu_edge_temperature{gpu_id=\"7\"}"), 36);
  EXPECT_EQ(p.scalar("count(gpu_edge_temperature)"), 8);
  EXPECT_EQ(p.scalar("gpu_junction_temperature{gpu_id=\"0\"}"), 58);
  EXPECT_EQ(p.scalar("gpu_memory_temperature{gpu_id=\"0\"}"), 49);
  EXPECT_EQ(p.scalar("count(gpu_hbm_temperature)"), 8 * 4);
  EXPECT_EQ(p.scalar("gpu_hbm_temperature{gpu_id=\"0\",hbm_index=\"0\"}"), 45);
  EXPECT_EQ(p.scalar("gpu_hbm_temperature{gpu_id=\"0\",hbm_index=\"3\"}"), 48);
  EXPECT_EQ(p.scalar("gpu_hbm_temperature{gpu_id=\"1\",hbm_index=\"1\"}"), 48);
  EXPECT_EQ(p.scalar("avg(gpu_hbm_temperature{gpu_id=\"6\"})"), (39 + 40 + 39 + 41) / 4.0);
  // W: the OAM's average socket power, on its first GCD only (the second has no sensor): three
  // training OAMs at 482 W and the idle one at 92 W.
  EXPECT_EQ(p.scalar("gpu_average_package_power{gpu_id=\"0\"}"), 482);
  EXPECT_EQ(p.scalar("count(gpu_average_package_power)"), 4);
  EXPECT_EQ(p.scalar("sum(gpu_average_package_power)"), 3 * 482 + 92);
  EXPECT_TRUE(p.query("gpu_average_package_power{gpu_id=\"1\"}").empty());
  // MI3xx-only families stay away: no junction-only fallback for the edge, no violation counters.
  EXPECT_TRUE(p.query("gpu_violation_current_accumulated_counter").empty());
  EXPECT_EQ(p.scalar("count(gpu_health{pod=\"trainer\",card_series=\"AMD Instinct MI250X\"})"), 1);
}

// Every compute partition has its own series set, as AMD's exporter (metricslist.md): its gpu_id
// (the place in amd-smi's enumeration) and gpu_partition_id, with its GFX busy and memory; what
// metricslist.md gives for the primary partition only (engine activity, power, temperature) once
// per GPU, on partition 0, so that sums count nothing twice.
TEST_F(VendorDashboards, AmdEveryPartitionReported) {
  const VendorStack& p = amd_dpx_stack();
  // GFX busy per XCC of each partition's own (xcc_index from 0, from the metrics table's
  // xcp_stats[k]): DPX on an MI300X is 4 XCCs per partition, SPX all 8; their average is the
  // partition's activity.
  EXPECT_EQ(p.scalar("count(gpu_gfx_busy_instantaneous)"), 4 + 4 + 8);
  EXPECT_TRUE(p.query("gpu_gfx_busy_instantaneous{xcc_index=\"\"}").empty());
  EXPECT_EQ(p.scalar("count(gpu_gfx_busy_instantaneous{gpu_id=\"1\"})"), 4);
  EXPECT_EQ(p.scalar("count(gpu_gfx_busy_instantaneous{gpu_id=\"1\",xcc_index=\"3\"})"), 1);
  EXPECT_EQ(p.scalar("avg by (gpu_id) (gpu_gfx_busy_instantaneous{gpu_id=\"0\"})"), 72);
  EXPECT_EQ(p.scalar("avg by (gpu_id) (gpu_gfx_busy_instantaneous{gpu_id=\"1\"})"), 18);
  // Engine activity as metricslist.md has it: the primary partition's only.
  EXPECT_EQ(p.scalar("count(gpu_gfx_activity)"), 2);
  EXPECT_TRUE(p.query("gpu_umc_activity{gpu_partition_id=\"1\"}").empty());
  EXPECT_EQ(p.scalar("count(gpu_health)"), 3);
  EXPECT_EQ(p.scalar("gpu_gfx_activity{gpu_id=\"0\",gpu_partition_id=\"0\","
                     "gpu_compute_partition_type=\"dpx\",gpu_memory_partition_type=\"nps2\"}"),
            72);
  EXPECT_EQ(p.scalar("avg(gpu_gfx_busy_instantaneous{gpu_id=\"1\",gpu_partition_id=\"1\","
                     "gpu_compute_partition_type=\"dpx\",card_model=\"102-G30211-0C\"})"),
            18);
  EXPECT_EQ(p.scalar("gpu_used_vram{gpu_id=\"1\"}"), 8 * 1024);
  EXPECT_EQ(p.scalar("gpu_gfx_activity{gpu_id=\"2\",gpu_partition_id=\"0\","
                     "gpu_compute_partition_type=\"spx\"}"),
            0);
  // The DPX GPU's memory: its two partitions' shares, 192 GiB in all, in MB as AMD's exporter.
  EXPECT_EQ(p.scalar("sum(gpu_total_vram{gpu_compute_partition_type=\"dpx\"})"), 192 * 1024);
  EXPECT_EQ(p.scalar("sum(gpu_used_vram{gpu_compute_partition_type=\"dpx\"})"), 72 * 1024);
  // Power once per GPU although both partitions' handles answer it.
  EXPECT_EQ(p.scalar("count(gpu_package_power)"), 2);
  EXPECT_EQ(p.scalar("sum(gpu_package_power{gpu_compute_partition_type=\"dpx\"})"), 512);
  EXPECT_TRUE(p.query("gpu_junction_temperature{gpu_partition_id=\"1\"}").empty());
}

// ---- Gaudi ----

TEST_F(VendorDashboards, GaudiEveryListedMetric) {
  const std::map<std::string, std::string> reviewed = {};
  std::string text = read_text(kDashboards / "habana/METRICS.md");
  std::set<std::string> metrics;
  static const std::regex name("habanalabs_[A-Za-z0-9_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it)
    metrics.insert(it->str());
  EXPECT_GE(metrics.size(), 29u);
  int present = 0;
  for (const auto& m : metrics) {
    bool has = !gaudi_stack().query("count(" + m + ")").empty();
    present += has ? 1 : 0;
    if (reviewed.count(m)) {
      EXPECT_FALSE(has) << m << " has data now: take it off the list";
    } else {
      EXPECT_TRUE(has) << m;
    }
  }
  std::cout << "Gaudi metrics with data: " << present << " of " << metrics.size() << "\n";
}

TEST_F(VendorDashboards, GaudiValuesInExporterUnits) {
  const VendorStack& p = gaudi_stack();
  EXPECT_EQ(p.scalar("habanalabs_power_mW{bus_id=\"0000:19:00.0\"}"), 91250);
  EXPECT_EQ(p.scalar("habanalabs_temperature_onboard{bus_id=\"0000:19:00.0\"}"), 29);
  EXPECT_EQ(p.scalar("habanalabs_temperature_onchip{bus_id=\"0000:19:00.0\"}"), 31);
  EXPECT_EQ(p.scalar("count(habanalabs_utilization{pod_name=\"finetune\",pod_namespace=\"ml\"})"),
            1);
  EXPECT_EQ(p.scalar("habanalabs_clock_soc_max_mhz{bus_id=\"0000:19:00.0\"}"), 1800);
  EXPECT_EQ(p.scalar("habanalabs_pci_link_speed{bus_id=\"0000:19:00.0\"}"), 16);
  EXPECT_EQ(p.scalar("count(habanalabs_nic_port_status{bus_id=\"0000:19:00.0\"})"), 24);
  EXPECT_EQ(p.scalar("count(habanalabs_kube_info{pod_name=\"finetune\"})"), 1);
}

// ---- the agent's own defects found on the way ----

// The tuning audit judges the accelerators' inventory, as `polyaccel audit` does: 2a:00.0 runs
// without persistence mode.
TEST_F(VendorDashboards, AuditFindingsIncludeTheGpus) {
  const VendorStack& p = nvidia_stack();
  double n = -1;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    json r = p.query("polyaccel_audit_findings{id=\"gpu.persistence\",severity=\"warning\"}");
    if (r.size() == 1) n = std::stod(r[0]["value"][1].get<std::string>());
    if (n > 0) break;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(n, 1);
}

// Without the device plugin the agent still writes the node labels, readable by nfd-worker.
TEST(AgentNodeLabels, WrittenWithoutTheDevicePlugin) {
  polyaccel::testing::TempDir tmp;
  auto r = run_command(
      std::string("POLYACCEL_AMD_SMI_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent "
                  "POLYACCEL_HLML_LIB=/nonexistent POLYACCEL_NVML_LIB=") +
      NVML_INJECT_LIB + " NVML_INJECT_SCENARIO=" + SCENARIO_DIR +
      "/nvml/scenarios/hgx-8xh100.json '" + polyaccel::testing::polyaccel_binary() +
      "' agent --once --accel-backends on --pod-resources-socket '' "
      "--kubelet-dir '' --nfd-features-dir '" +
      tmp.path().string() + "' > /dev/null 2>&1");
  ASSERT_EQ(r.exit_code, 0);
  fs::path file = tmp.path() / "polyaccel";
  ASSERT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  std::string text = read_text(file);
  EXPECT_NE(text.find("nvidia.com/gpu.present=true"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia.com/gpu.compute.major=9"), std::string::npos) << text;
}

}  // namespace
}  // namespace polyaccel
