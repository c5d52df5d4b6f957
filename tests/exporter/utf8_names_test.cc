// UTF-8 names on /metrics (src/exporter/accept_header.h): a scraper whose Accept header asks
// escaping=allow-utf-8 also gets the hw.* families of OpenTelemetry's conventions with quoted
// names, under the matching Content-Type; any other gets exactly the body of before. Checked
// with curl and with Prometheus 3.5 (Debian forky's, unpacked by scripts/install-deps.sh), which
// scrapes one agent three times: as a UTF-8 job, as a legacy-names job, and with its defaults.
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/fake_pod_resources.h"
#include "support/prometheus_server.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using polyaccel::testing::Background;
using polyaccel::testing::run_command;
namespace fs = std::filesystem;

const std::string kPrometheus3 = "/usr/local/lib/polyaccel-test/prometheus/usr/bin/prometheus";
const std::string kGpu0 = "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21";
const std::string kUtf8Accept = "text/plain;version=1.0.0;escaping=allow-utf-8";

struct Agent {
  polyaccel::testing::TempDir tmp;
  std::unique_ptr<Background> process;
  int port = 0;
  // COMPAT: the agent's --compat (otel: the hw.* names for a scraper that negotiates them);
  // `pod_resources`: kubelet's pod-resources socket ("": none).
  explicit Agent(const std::string& compat = "all,otel", const std::string& pod_resources = "") {
    process = std::make_unique<Background>(
        "NVML_INJECT_STEP=4 POLYACCEL_HLML_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent "
        "POLYACCEL_AMD_SMI_LIB=/nonexistent POLYACCEL_NVML_LIB=" +
            std::string(INJECT_DIR) +
            "/nvml/libnvidia-ml.so.1 NVML_INJECT_SCENARIO=" + SCENARIO_DIR +
            "/nvml/scenarios/hgx-8xh100.json exec '" + polyaccel::testing::polyaccel_binary() +
            "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 --hostname node-7 "
            "--pod-resources-socket '" +
            pod_resources + "' --kubelet-dir '' --state '' --compat " + compat,
        tmp.path() / "agent.log");
    port = polyaccel::testing::agent_port(*process);
    // The first samples.
    for (int i = 0; i < 100 && get("").find("DCGM_FI_DEV_GPU_TEMP{") == std::string::npos; ++i)
      std::this_thread::sleep_for(100ms);
  }
  // /metrics with `accept` (none when empty); the response head and body.
  std::string get(const std::string& accept) const {
    return run_command("curl -sS -i --max-time 5 " +
                       (accept.empty() ? "" : "-H 'Accept: " + accept + "' ") +
                       "http://127.0.0.1:" + std::to_string(port) + "/metrics")
        .output;
  }
};

TEST(Utf8Names, AnAllowUtf8ScraperAlsoGetsTheHwFamiliesOthersTheBodyOfBefore) {
  Agent agent;
  std::string utf8 = agent.get(kUtf8Accept);
  EXPECT_THAT(utf8, ::testing::HasSubstr("Content-Type: text/plain; version=1.0.0; charset=utf-8; "
                                         "escaping=allow-utf-8\r\n"));
  EXPECT_THAT(utf8, ::testing::HasSubstr("# TYPE \"hw.energy\" counter\n"));
  EXPECT_THAT(utf8, ::testing::HasSubstr("{\"hw.power\",\"hw.id\"=\"" + kGpu0 +
                                         "\",\"hw.type\"=\"gpu\",\"hw.vendor\"=\"NVIDIA\","));
  EXPECT_THAT(utf8, ::testing::HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));  // the rest as before
  for (const std::string& accept :
       {std::string(), std::string("text/plain;version=0.0.4"),
        std::string("text/plain;version=1.0.0;escaping=underscores"),
        std::string("text/plain;version=1.0.0;escaping=allow-utf-8;q=0")}) {
    SCOPED_TRACE(accept);
    std::string plain = agent.get(accept);
    EXPECT_THAT(plain, ::testing::HasSubstr("Content-Type: text/plain; charset=utf-8\r\n"));
    EXPECT_THAT(plain, ::testing::HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));
    EXPECT_THAT(plain, ::testing::Not(::testing::HasSubstr("hw.")));
  }
}

// Prometheus 3 negotiates UTF-8 names by default: without otel in --compat its jobs get the body
// every other scraper gets, not each accelerator's series twice.
TEST(Utf8Names, WithoutOtelInCompatAnAllowUtf8ScraperGetsTheBodyOfBefore) {
  Agent agent("all");
  std::string utf8 = agent.get(kUtf8Accept);
  EXPECT_THAT(utf8, ::testing::HasSubstr("Content-Type: text/plain; charset=utf-8\r\n"));
  EXPECT_THAT(utf8, ::testing::HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));
  EXPECT_THAT(utf8, ::testing::Not(::testing::HasSubstr("hw.")));
}

TEST(Utf8Names, Prometheus35ScrapesHwNamesAsUtf8AndDcgmNamesAsEver) {
  ASSERT_TRUE(fs::exists(kPrometheus3)) << kPrometheus3 << " missing: run scripts/install-deps.sh";
  polyaccel::testing::TempDir tmp;
  // GPU 0 time-sliced between two pods (a fake kubelet's pod-resources, as kubelet 1.34 answers).
  const std::string socket = (tmp.path() / "kubelet.sock").string();
  polyaccel::testing::FakePodResources kubelet(socket);
  kubelet.set({{"infer-a", "serve", "server", "nvidia.com/gpu", {kGpu0 + "::0"}},
               {"infer-b", "serve", "server", "nvidia.com/gpu", {kGpu0 + "::1"}}});
  Agent agent("all,otel", socket);
  const std::string target = "['127.0.0.1:" + std::to_string(agent.port) + "']";
  std::ofstream(tmp.path() / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n"
         "  - job_name: utf8\n    metric_name_validation_scheme: utf8\n"
         "    metric_name_escaping_scheme: allow-utf-8\n    static_configs: [{targets: "
      << target
      << "}]\n"
         "  - job_name: legacy\n    metric_name_validation_scheme: legacy\n"
         "    metric_name_escaping_scheme: underscores\n"
         "    static_configs: [{targets: "
      << target << "}]\n  - job_name: default\n    static_configs: [{targets: " << target << "}]\n";
  int port = polyaccel::testing::free_port();
  Background prometheus(
      "exec '" + kPrometheus3 + "' --config.file='" + (tmp.path() / "prometheus.yml").string() +
          "' --storage.tsdb.path='" + (tmp.path() / "tsdb").string() +
          "' --web.listen-address=127.0.0.1:" + std::to_string(port) + " --log.level=warn",
      tmp.path() / "prometheus.log");
  auto query = [&](const std::string& promql) {
    return polyaccel::testing::prometheus_query(port, tmp.path(), promql);
  };

  // Two scrapes of each job.
  bool scraped = false;
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       !scraped && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(250ms)) {
    json r = query("count(count_over_time(up[1m]) >= 2)");
    scraped = !r.empty() && r[0]["value"][1] == "3";
  }
  ASSERT_TRUE(scraped) << prometheus.log();
  json power = query("{\"hw.power\", job=\"utf8\", \"hw.id\"=\"" + kGpu0 + "\"}");
  ASSERT_EQ(power.size(), 2u) << prometheus.log();  // once per pod
  std::set<std::string> pods;
  for (const auto& series : power) {
    EXPECT_EQ(series["value"][1], "73.12");
    EXPECT_EQ(series["metric"]["hw.model"], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(series["metric"]["k8s.namespace.name"], "serve");
    EXPECT_EQ(series["metric"]["k8s.container.name"], "server");
    pods.insert(series["metric"]["k8s.pod.name"].get<std::string>());
  }
  EXPECT_EQ(pods, (std::set<std::string>{"infer-a", "infer-b"}));
  // A GPU no pod holds has no k8s.* attribute.
  EXPECT_EQ(query("{\"hw.power\", job=\"utf8\", \"k8s.pod.name\"=\"\"}").size(), 7u);
  // 8 GPUs (GPU 0 once per pod), and GPU 7's 3 MIG instances, each with its GPU as hw.parent.
  json util = query("{\"hw.gpu.utilization\", job=\"utf8\", \"hw.gpu.task\"=\"general\"}");
  EXPECT_EQ(util.size(), 12u);
  int migs = 0;
  for (const auto& series : util) {
    if (!series["metric"].contains("hw.parent")) continue;
    ++migs;
    EXPECT_EQ(series["metric"]["hw.parent"], "GPU-b8a14e70-5c9f-2d63-e07b-41f8a6c3d5b8");
  }
  EXPECT_EQ(migs, 3);
  // The DCGM names in every job (GPU 0 once per pod, as DCGM-exporter labels a time-sliced
  // GPU); the legacy job has no hw.* name at all.
  for (const std::string job : {"utf8", "legacy", "default"}) {
    SCOPED_TRACE(job);
    json temp = query("DCGM_FI_DEV_GPU_TEMP{job=\"" + job + "\", UUID=\"" + kGpu0 +
                      "\", pod=\"infer-a\", namespace=\"serve\"}");
    ASSERT_EQ(temp.size(), 1u);
    EXPECT_EQ(temp[0]["value"][1], "36");
  }
  EXPECT_TRUE(query("{job=\"legacy\", __name__=~\"hw[.].*\"}").empty());
}

}  // namespace
}  // namespace polyaccel
