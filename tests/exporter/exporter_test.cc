// The exporter in-process: a monitor on the test vendor libraries, the scrape it serialises
// (every family with the scenario's values, pod labels, MIG instances, --compat), a failing
// collector, HTTP with gzip and /healthz, and a hung vendor call during which scrapes still answer.
#include "exporter/exporter.h"

#include <dlfcn.h>

#include <prometheus/text_serializer.h>
#include <atomic>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "discover/accel/backends.h"
#include "exporter/families.h"
#include "exporter/family_values.h"
#include "exporter/http_front.h"
#include "exporter/text_format.h"
#include "support/test_support.h"

namespace polyaccel::exporter {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kNvmlScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json";
const std::string kRocmScenario = std::string(ROCM_SMI_SCENARIO_DIR) + "/mi300x-8x.json";

class Exporter : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NVML_INJECT_SCENARIO", kNvmlScenario.c_str(), 1);
    ::setenv("ROCM_SMI_INJECT_SCENARIO", kRocmScenario.c_str(), 1);
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("POLYACCEL_ROCM_SMI_LIB", ROCM_SMI_INJECT_LIB, 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
  }

  void start_monitor() {
    MonitorOptions o;
    o.interval = 20ms;
    monitor_ = std::make_unique<AcceleratorMonitor>(HostModel{}, make_all_backends(), o);
    monitor_->start();
  }

  // Waits until every device has a sample (bounded; not a timing assertion).
  void wait_sampled() {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    auto snap = monitor_->snapshot();
    while (std::chrono::steady_clock::now() < deadline) {
      if (snap->ready && !snap->devices.empty() &&
          std::all_of(snap->devices.begin(), snap->devices.end(),
                      [](const MonitoredDevice& d) { return d.sample.has_value(); }))
        return;
      snap = monitor_->wait_newer(snap->generation, 1s);
    }
    FAIL() << "devices never sampled";
  }

  std::shared_ptr<Scraper> scraper(std::set<NameSet> names = {NameSet::polyaccel, NameSet::dcgm,
                                                              NameSet::amd, NameSet::habana},
                                   std::chrono::milliseconds stall_after = 60s) {
    ExporterOptions o;
    o.listen = "127.0.0.1:0";
    o.names = std::move(names);
    o.hostname = "node-7";
    o.version = "test";
    o.stall_after = stall_after;
    Sources s{[this] { return monitor_->snapshot(); }, nullptr,
              [this] { return std::make_shared<const PodAssignments>(pods_); },
              [this]() -> std::shared_ptr<const DraStatus> {
                return dra_ ? std::make_shared<const DraStatus>(*dra_) : nullptr;
              }};
    return std::make_shared<Scraper>(make_all_collectors(), o, s);
  }

  std::unique_ptr<AcceleratorMonitor> monitor_;
  PodAssignments pods_;
  std::optional<DraStatus> dra_;  // none: the agent runs without --dra
};

// A whole scrape of the H100 and MI300X scenarios (every name set, pod labels): the text the
// agent serves is what prometheus-cpp's TextSerializer writes for the same families.
TEST_F(Exporter, ScrapeTextIsPrometheusCppsByteForByte) {
  start_monitor();
  wait_sampled();
  pods_.reachable = true;
  pods_.by_device["GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"] = {
      {"train-0", "ml", "worker", "nvidia.com/gpu"}};
  Families f = scraper()->scrape();
  ASSERT_GT(f.size(), 100u);
  std::string ours = text_format(f);
  EXPECT_EQ(ours, prometheus::TextSerializer().Serialize(f));
  EXPECT_THAT(ours, HasSubstr("pod=\"train-0\""));
}

TEST_F(Exporter, EveryNameSetWithTheScenarioValues) {
  start_monitor();
  wait_sampled();
  Families f = scraper()->scrape();
  // DCGM-exporter's names and labels for the H100s.
  Labels gpu0 = {{"gpu", "0"},
                 {"UUID", "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"},
                 {"device", "nvidia0"},
                 {"modelName", "NVIDIA H100 80GB HBM3"},
                 {"pci_bus_id", "00000000:18:00.0"},
                 {"Hostname", "node-7"}};
  EXPECT_EQ(value(f, "DCGM_FI_DEV_GPU_TEMP", gpu0), 31);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_MEMORY_TEMP", gpu0), 38);
  EXPECT_DOUBLE_EQ(*value(f, "DCGM_FI_DEV_POWER_USAGE", gpu0), 71.25);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu0), 4127554000.0);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_SM_CLOCK", gpu0), 345);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_MEM_CLOCK", gpu0), 2619);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", gpu0), 2);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_XID_ERRORS", gpu0), 0);
  EXPECT_EQ(value(f, "DCGM_FI_DEV_FB_USED", gpu0), 0);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL"), 8u);
  // 5f:00.0 has no memory temperature: no series, not a zero.
  EXPECT_FALSE(value(f, "DCGM_FI_DEV_MEMORY_TEMP", {{"pci_bus_id", "00000000:5F:00.0"}}));
  // db:00.0 runs three MIG instances: GPU-wide values (temperature, power, clocks) once, on the
  // GPU, so that no sum over the series counts them twice; memory per instance.
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_TEMP", {{"pci_bus_id", "00000000:DB:00.0"}}), 1u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_TEMP", {{"GPU_I_PROFILE", "3g.40gb"}, {"GPU_I_ID", "2"}}),
            0u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_FB_USED", {{"GPU_I_PROFILE", "3g.40gb"}, {"GPU_I_ID", "2"}}), 1u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pci_bus_id", "00000000:DB:00.0"}}), 1u);
  // AMD device-metrics-exporter's names for the MI300X.
  Labels amd0 = {{"gpu_id", "0"}, {"card_model", "AMD Instinct MI300X"}, {"hostname", "node-7"}};
  EXPECT_EQ(value(f, "gpu_package_power", amd0), 131);
  EXPECT_EQ(value(f, "gpu_junction_temperature", amd0), 41);
  EXPECT_EQ(value(f, "gpu_health", amd0), 1);
  EXPECT_EQ(value(f, "gpu_nodes_total", {}), 8);
  EXPECT_EQ(count(f, "gpu_clock"), 16u);
  // metricslist.md's further fields through ROCm SMI: each RAS block with ECC on (46:00.0 had one
  // correctable SDMA error), GTT in MB, XGMI data per link in KB, the metrics table's
  // bandwidths (GB/s), residencies and VCN busy; what ROCm SMI lacks (deferred counts,
  // residency percentages, average power on MI300X) absent.
  EXPECT_EQ(value(f, "gpu_ecc_correct_sdma", {{"gpu_id", "2"}}), 1);
  EXPECT_EQ(value(f, "gpu_ecc_correct_sdma", amd0), 0);
  EXPECT_EQ(count(f, "gpu_ecc_uncorrect_umc"), 8u);
  EXPECT_EQ(count(f, "gpu_ecc_correct_athub"), 0u);
  EXPECT_EQ(count(f, "gpu_ecc_deferred_umc"), 0u);
  EXPECT_EQ(value(f, "gpu_total_gtt", amd0), 1572864);
  EXPECT_EQ(value(f, "gpu_used_gtt", amd0), 12);
  EXPECT_EQ(value(f, "gpu_free_gtt", amd0), 1572852);
  EXPECT_EQ(value(f, "gpu_total_visible_vram", amd0), 196608);
  EXPECT_EQ(value(f, "gpu_xgmi_link_rx", with(amd0, {{"link_index", "1"}})), 2776148);
  EXPECT_EQ(count(f, "gpu_xgmi_link_tx"), 64u);
  EXPECT_EQ(value(f, "pcie_bidirectional_bandwidth", amd0), 1824);
  EXPECT_EQ(value(f, "gpu_vram_max_bandwidth", amd0), 5300);
  EXPECT_EQ(value(f, "gpu_violation_current_accumulated_counter", amd0), 5180000);
  EXPECT_EQ(value(f, "gpu_violation_ppt_residency_accumulated", amd0), 0);
  EXPECT_EQ(count(f, "gpu_violation_ppt_residency_percentage"), 0u);
  EXPECT_EQ(value(f, "gpu_vcn_busy_instantaneous", with(amd0, {{"xcc_index", "0"}})), 12);
  EXPECT_EQ(count(f, "gpu_gfx_busy_instantaneous"), 8u * 8);  // per XCC
  EXPECT_EQ(value(f, "gpu_gfx_busy_instantaneous", with(amd0, {{"xcc_index", "5"}})),
            value(f, "gpu_gfx_activity", amd0));
  EXPECT_EQ(count(f, "gpu_jpeg_busy_instantaneous"), 8u * 32);
  EXPECT_EQ(count(f, "gpu_average_package_power"), 0u);
  // The vendor-neutral family covers both, in base units.
  EXPECT_EQ(count(f, "polyaccel_accelerator_power_watts"), 16u);
  EXPECT_EQ(value(f, "polyaccel_accelerator_power_watts", {{"vendor", "amd"}, {"gpu", "gpu0"}}),
            131);
  EXPECT_EQ(value(f, "polyaccel_accelerator_clock_hertz",
                  {{"pci_bus_id", "0000:18:00.0"}, {"clock", "compute"}}),
            345e6);
  EXPECT_EQ(value(f, "polyaccel_accelerator_energy_joules_total", {{"pci_bus_id", "0000:18:00.0"}}),
            4127554.0);
  EXPECT_EQ(count(f, "polyaccel_accelerator_mig_instance_info"), 3u);
  EXPECT_EQ(count(f, "polyaccel_accelerator_healthy"), 16u);
  // No Gaudi on this host: no habanalabs family at all.
  EXPECT_EQ(count(f, "habanalabs_utilization"), 0u);
  // Self-metrics: every collector succeeded.
  EXPECT_EQ(count(f, "polyaccel_collector_success"), make_all_collectors().size());
  EXPECT_EQ(count(f, "polyaccel_collector_success", {{"collector", "dcgm"}}), 1u);
  for (const auto& c : make_all_collectors())
    EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", c->name()}}), 1) << c->name();
  EXPECT_EQ(value(f, "polyaccel_build_info", {{"version", "test"}}), 1);
}

TEST_F(Exporter, PodLabelsOneSeriesPerPod) {
  start_monitor();
  wait_sampled();
  // 18:00.0 is time-sliced between two pods; a pod holds db:00.0's 3g.40gb instance.
  pods_.reachable = true;
  pods_.by_device["GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21"] = {
      {"infer-a", "serve", "server", "nvidia.com/gpu"},
      {"infer-b", "serve", "server", "nvidia.com/gpu"}};
  // Held: the monitor's next sample releases the snapshot it replaces.
  const auto sampled = monitor_->snapshot();
  const MonitoredDevice* mig_gpu = sampled->device("0000:db:00.0");
  ASSERT_NE(mig_gpu, nullptr);
  const MigInstance* three_g = nullptr;
  for (const auto& m : mig_gpu->inventory.mig_instances) {
    if (m.profile_name == "3g.40gb") three_g = &m;
  }
  ASSERT_NE(three_g, nullptr);
  pods_.by_device[three_g->uuid] = {{"trainer", "ml", "worker", "nvidia.com/mig-3g.40gb"}};
  Families f = scraper()->scrape();
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pci_bus_id", "00000000:18:00.0"}}), 2u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pod", "infer-a"}, {"namespace", "serve"}}), 1u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pod", "infer-b"}, {"container", "server"}}), 1u);
  EXPECT_EQ(count(f, "polyaccel_accelerator_power_watts", {{"pod", "infer-b"}}), 1u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_FB_USED",
                  {{"pod", "trainer"}, {"GPU_I_PROFILE", "3g.40gb"}, {"namespace", "ml"}}),
            1u);
  EXPECT_EQ(count(f, "polyaccel_accelerator_mig_instance_info", {{"pod", "trainer"}}), 1u);
  // A GPU no pod holds has no pod labels at all (DCGM-exporter's habit).
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pci_bus_id", "00000000:2A:00.0"}, {"pod", ""}}),
            0u);
  // AMD's exporter always has the labels, empty without a pod.
  EXPECT_EQ(count(f, "gpu_gfx_activity", {{"pod", ""}}), 8u);
  EXPECT_EQ(value(f, "polyaccel_pod_resources_up", {}), 1);
}

// Issue 41, 1: a GPU and a MIG instance allocated through DRA claims carry their pods' labels as
// a device plugin's do; the claim devices of another driver or another node's pool do not.
TEST_F(Exporter, PodLabelsOfDraClaimDevices) {
  start_monitor();
  wait_sampled();
  // Held: the monitor's next sample releases the snapshot it replaces.
  const auto sampled = monitor_->snapshot();
  const MonitoredDevice* mig_gpu = sampled->device("0000:db:00.0");
  ASSERT_NE(mig_gpu, nullptr);
  std::string three_g;
  for (const auto& m : mig_gpu->inventory.mig_instances)
    if (m.profile_name == "3g.40gb") three_g = m.uuid;
  ASSERT_FALSE(three_g.empty());
  pods_.reachable = true;
  pods_.by_claim_device[claim_device_key("polyaccel.io", "node-7", "gpu-0")] = {
      {"train-0", "ml", "main", "ml/train"}};
  pods_.by_claim_device[claim_device_key("polyaccel.io", "node-7", "gpu-7-mig-3g-40gb-s4")] = {
      {"infer-0", "serve", "server", "serve/infer"}};
  pods_.by_claim_device[claim_device_key("gpu.nvidia.com", "node-7", "gpu-1")] = {
      {"other-driver", "ml", "main", "ml/x"}};
  pods_.by_claim_device[claim_device_key("polyaccel.io", "node-8", "gpu-1")] = {
      {"other-node", "ml", "main", "ml/y"}};
  Families without = scraper()->scrape();
  EXPECT_EQ(count(without, "DCGM_FI_DEV_GPU_UTIL", {{"pod", "train-0"}}), 0u)
      << "without the DRA driver's names nothing is joined";
  dra_ = DraStatus{};
  dra_->driver = "polyaccel.io";
  dra_->pool = "node-7";
  dra_->device_ids = {{"gpu-0", {"0000:18:00.0"}},
                      {"gpu-1", {"0000:2a:00.0"}},
                      {"gpu-7-mig-3g-40gb-s4", {three_g}}};
  Families f = scraper()->scrape();
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL",
                  {{"pci_bus_id", "00000000:18:00.0"},
                   {"pod", "train-0"},
                   {"namespace", "ml"},
                   {"container", "main"}}),
            1u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_FB_USED",
                  {{"pod", "infer-0"}, {"GPU_I_PROFILE", "3g.40gb"}, {"namespace", "serve"}}),
            1u);
  EXPECT_EQ(count(f, "gpu_gfx_activity", {{"pod", "train-0"}}), 0u) << "an NVIDIA GPU's claim";
  // gpu-1 of another driver or another pool is not our gpu-1.
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pci_bus_id", "00000000:2A:00.0"}}), 1u);
  EXPECT_EQ(
      count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pci_bus_id", "00000000:2A:00.0"}, {"namespace", "ml"}}),
      0u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pod", "other-driver"}}), 0u);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL", {{"pod", "other-node"}}), 0u);
  // The hw.* families (UTF-8 names, and the OTLP push from the same input) carry OpenTelemetry's
  // k8s.* attributes on the claimed GPU's and MIG instance's points.
  std::string hw = scraper()->body()->hw_text();
  EXPECT_THAT(hw,
              HasSubstr("{\"hw.power\",\"hw.id\"=\"GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21\""));
  std::smatch gpu0, mig;
  ASSERT_TRUE(
      std::regex_search(hw, gpu0, std::regex("\\{\"hw.power\",\"hw.id\"=\"GPU-5b2e7a1c-[^\n]*\n")));
  EXPECT_THAT(gpu0.str(), HasSubstr(",\"k8s.namespace.name\"=\"ml\",\"k8s.pod.name\"=\"train-0\","
                                    "\"k8s.container.name\"=\"main\"} "));
  ASSERT_TRUE(std::regex_search(
      hw, mig, std::regex("\\{\"hw.gpu.memory.usage\",\"hw.id\"=\"" + three_g + "\"[^\n]*\n")));
  EXPECT_THAT(mig.str(), HasSubstr("\"k8s.pod.name\"=\"infer-0\""));
  EXPECT_THAT(hw, Not(HasSubstr("other-driver")));
  EXPECT_THAT(hw, Not(HasSubstr("other-node")));
  // gpu-1 (2a:00.0) is no pod's here.
  const MonitoredDevice* gpu_2a = sampled->device("0000:2a:00.0");
  ASSERT_NE(gpu_2a, nullptr);
  std::smatch gpu1;
  ASSERT_TRUE(std::regex_search(
      hw, gpu1,
      std::regex("\\{\"hw.power\",\"hw.id\"=\"" + gpu_2a->inventory.uuid + "\"[^\n]*\n")));
  EXPECT_THAT(gpu1.str(), Not(HasSubstr("k8s.")));
}

// hw.gpu.io from each vendor's sources: NVIDIA's NVLink counters and GPM's PCIe rates, AMD's
// XGMI read (receive) and write (transmit) counters; every GPU both ways, from 0 up.
TEST_F(Exporter, HwGpuIoOfNvidiaAndAmdGpus) {
  start_monitor();
  wait_sampled();
  std::string hw = scraper()->body()->hw_text();
  EXPECT_THAT(hw, HasSubstr("# TYPE \"hw.gpu.io\" counter\n"));
  for (const std::string vendor : {"NVIDIA", "AMD"}) {
    for (const std::string direction : {"receive", "transmit"}) {
      SCOPED_TRACE(vendor + " " + direction);
      std::regex point("\\{\"hw.gpu.io\",[^\n]*\"hw.vendor\"=\"" + vendor +
                       "\"[^\n]*\"network.io.direction\"=\"" + direction + "\"\\} [0-9.e+]+\n");
      EXPECT_EQ(
          std::distance(std::sregex_iterator(hw.begin(), hw.end(), point), std::sregex_iterator()),
          8);
    }
  }
}

// The DRA driver's state: nothing without --dra; with it, whether the API server keeps counters
// and taints (only once known), and how the pool's slices are kept published.
TEST_F(Exporter, DraStateOnlyWithTheDriver) {
  start_monitor();
  Families none = scraper()->scrape();
  EXPECT_EQ(count(none, "polyaccel_dra_published_devices", {}), 0u);
  dra_ = DraStatus{};
  Families unknown = scraper()->scrape();
  EXPECT_EQ(count(unknown, "polyaccel_dra_server_keeps_counters", {}), 0u) << "not asked yet";
  dra_->server_fields_known = true;
  dra_->server_keeps_counters = false;
  dra_->server_keeps_taints = true;
  dra_->devices = 27;
  dra_->restores = 2;
  dra_->watching = true;
  Families f = scraper()->scrape();
  EXPECT_EQ(value(f, "polyaccel_dra_server_keeps_counters", {}), 0);
  EXPECT_EQ(value(f, "polyaccel_dra_server_keeps_taints", {}), 1);
  EXPECT_EQ(value(f, "polyaccel_dra_published_devices", {}), 27);
  EXPECT_EQ(value(f, "polyaccel_dra_slices_restored_total", {}), 2);
  EXPECT_EQ(value(f, "polyaccel_dra_slices_watch_up", {}), 1);
  EXPECT_THAT(text_format(f), HasSubstr("# TYPE polyaccel_dra_slices_restored_total counter"));
}

// The claims' CPUs and memory (--dra-cpus, --dra-memory): per claim and NUMA node, and the free
// CPUs per node; a claim name is a label value, escaped by the text format.
TEST_F(Exporter, DraClaimsCpusAndMemoryAndFreeCpusPerNode) {
  start_monitor();
  dra_ = DraStatus{};
  EXPECT_EQ(count(scraper()->scrape(), "polyaccel_dra_free_cpus"), 0u) << "no CPU devices";
  dra_->claim_holdings = {
      {"ns1", "a", 0, 16, 0}, {"ns1", "a", 1, 0, 1ull << 30}, {"ns2", "b\"x", 1, 4, 0}};
  dra_->free_cpus = {{0, 40}, {1, 52}};
  Families f = scraper()->scrape();
  EXPECT_EQ(value(f, "polyaccel_dra_claim_cpus",
                  {{"namespace", "ns1"}, {"claim", "a"}, {"numa_node", "0"}}),
            16);
  EXPECT_EQ(count(f, "polyaccel_dra_claim_cpus"), 2u) << "no zero sample for memory-only";
  EXPECT_EQ(value(f, "polyaccel_dra_claim_memory_bytes", {{"claim", "a"}, {"numa_node", "1"}}),
            1 << 30);
  EXPECT_EQ(value(f, "polyaccel_dra_free_cpus", {{"numa_node", "1"}}), 52);
  EXPECT_THAT(text_format(f), HasSubstr("claim=\"b\\\"x\""));
}

TEST_F(Exporter, CompatChoosesTheNameSets) {
  start_monitor();
  wait_sampled();
  Families f = scraper({NameSet::polyaccel})->scrape();
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_UTIL"), 0u);
  EXPECT_EQ(count(f, "gpu_gfx_activity"), 0u);
  EXPECT_EQ(count(f, "polyaccel_accelerator_utilization_ratio"), 16u);
  Families dcgm_only = scraper({NameSet::dcgm})->scrape();
  EXPECT_EQ(count(dcgm_only, "DCGM_FI_DEV_GPU_UTIL"), 8u);
  EXPECT_EQ(count(dcgm_only, "polyaccel_accelerator_utilization_ratio"), 0u);
  auto parsed = parse_compat("dcgm,amd");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, (std::set<NameSet>{NameSet::dcgm, NameSet::amd}));
  EXPECT_EQ(parse_compat("all")->size(), 4u);
  auto bad = parse_compat("dcgm,nvidia");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("'nvidia'"));
}

class Failing : public Collector {
 public:
  explicit Failing(bool throws) : throws_(throws) {}
  std::string name() const override { return throws_ ? "throwing" : "failing"; }
  Status collect(const ScrapeInput&, Families&) const override {
    if (throws_) throw std::runtime_error("boom");
    return Error{ErrorCode::io, "/sys/x", "cannot be read", {}};
  }

 private:
  bool throws_;
};

TEST_F(Exporter, FailingCollectorShowsAsSuccessZeroAndTheRestGoOn) {
  start_monitor();
  wait_sampled();
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<Failing>(false));
  collectors.push_back(std::make_unique<Failing>(true));
  collectors.push_back(make_dcgm_collector());
  ExporterOptions o;
  Scraper s(std::move(collectors), o, Sources{[this] { return monitor_->snapshot(); }, {}, {}});
  Families f = s.scrape();
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "failing"}}), 0);
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "throwing"}}), 0);
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "dcgm"}}), 1);
  EXPECT_EQ(count(f, "DCGM_FI_DEV_GPU_TEMP"), 8u);  // one per GPU, none per MIG instance
}

// The lines of a scrape without the families that depend on the clock (as of the render).
std::string without_clock_lines(const std::string& text) {
  std::string kept;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + at, end - at);
    if (!line.starts_with("polyaccel_collector_duration_seconds{") &&
        !line.starts_with("polyaccel_accelerator_sample_age_seconds{"))
      kept += line;
    at = end;
  }
  return kept;
}

// /metrics renders a body once per set of snapshots: scrapes in between get the same bytes
// (text and gzip) without rendering; a new snapshot from any source renders again, and so does
// the clock after kMaxBodyAge (the sample ages must grow when the monitor stalls).
TEST_F(Exporter, BodyIsRenderedOncePerSetOfSnapshots) {
  start_monitor();
  wait_sampled();
  std::mutex mu;
  std::shared_ptr<const AcceleratorSnapshot> published = monitor_->snapshot();
  std::optional<DraStatus> dra;
  ExporterOptions o;
  o.hostname = "node-7";
  Scraper s(make_all_collectors(), o,
            Sources{[&] {
                      std::lock_guard lock(mu);
                      return published;
                    },
                    nullptr, nullptr,
                    [&]() -> std::shared_ptr<const DraStatus> {
                      std::lock_guard lock(mu);
                      return dra ? std::make_shared<const DraStatus>(*dra) : nullptr;
                    }});
  auto first = s.body();
  ASSERT_EQ(s.renders(), 1u);
  auto second = s.body();
  EXPECT_EQ(s.renders(), 1u);
  EXPECT_EQ(second->text, first->text);
  EXPECT_EQ(second->gzip, first->gzip);
  EXPECT_FALSE(first->gzip.empty());
  // The body is what a render of the same snapshots writes, but for the clock.
  EXPECT_EQ(without_clock_lines(first->text), without_clock_lines(text_format(s.scrape())));
  EXPECT_THAT(first->text, HasSubstr("polyaccel_accelerator_sample_age_seconds{"));

  // An equal DRA status (a new object on every call) is the same snapshot; a changed one is not.
  {
    std::lock_guard lock(mu);
    dra = DraStatus{};
    dra->devices = 56;
  }
  auto with_dra = s.body();
  EXPECT_EQ(s.renders(), 2u);
  EXPECT_THAT(with_dra->text, HasSubstr("polyaccel_dra_"));
  EXPECT_THAT(first->text, Not(HasSubstr("polyaccel_dra_")));
  EXPECT_EQ(s.body()->text, with_dra->text);
  EXPECT_EQ(s.renders(), 2u);

  // The monitor's next sample.
  {
    std::lock_guard lock(mu);
    published = monitor_->wait_newer(published->generation, 30s);
  }
  auto next = s.body();
  EXPECT_EQ(s.renders(), 3u);
  EXPECT_NE(next->text, with_dra->text);
  EXPECT_EQ(s.body()->text, next->text);
  EXPECT_EQ(s.renders(), 3u);

  // No new sample, but the clock moved past kMaxBodyAge: rendered again.
  std::this_thread::sleep_for(kMaxBodyAge + 50ms);
  s.body();
  EXPECT_EQ(s.renders(), 4u);
}

// civetweb serves scrapes on several threads: bodies are read and replaced at once while the
// monitor publishes (the TSan build runs this). Every body is whole: it ends with the last
// family's sample, and a body is a render of one snapshot, never a mix.
TEST_F(Exporter, BodiesFromSeveralThreadsWhileSnapshotsChange) {
  start_monitor();
  wait_sampled();
  auto s =
      std::make_shared<Scraper>(make_all_collectors(), ExporterOptions{},
                                Sources{[this] { return monitor_->snapshot(); }, nullptr, nullptr});
  std::string expected_tail = "polyaccel_accelerator_monitor_ready 1\n";
  std::atomic<int> whole{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto body = s->body();
        if (body->text.ends_with(expected_tail) && !body->gzip.empty()) ++whole;
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(whole.load(), 160);
  EXPECT_GE(s->renders(), 1u);  // how many depends on the timing: not asserted
}

// Fetches a URL with curl: the body, or the response headers with `headers_only`.
std::string curl(const std::string& args) {
  auto r = polyaccel::testing::run_command("curl -sS --max-time 20 " + args + " 2>&1");
  return r.output;
}

TEST_F(Exporter, HttpServesMetricsGzipAndHealthz) {
  start_monitor();
  wait_sampled();
  auto http = HttpExporter::start(scraper());
  ASSERT_TRUE(http) << http.error().message();
  std::string base = "http://127.0.0.1:" + std::to_string((*http)->port());
  std::string body = curl(base + "/metrics");
  EXPECT_THAT(body, HasSubstr("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"));
  EXPECT_THAT(body, HasSubstr("polyaccel_accelerator_power_watts{gpu=\"gpu0\",vendor=\"amd\""));
  std::string headers = curl("-o /dev/null -D - -H 'Accept-Encoding: gzip' " + base + "/metrics");
  EXPECT_THAT(headers, HasSubstr("Content-Encoding: gzip"));
  // One answer per connection, and the answer says so: a keep-alive client (two URLs in one
  // curl, as Python's http.client and Go reuse connections) reconnects instead of failing.
  EXPECT_THAT(headers, HasSubstr("Connection: close"));
  std::string two = curl("-s -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\\n' " +
                         base + "/healthz " + base + "/healthz");
  EXPECT_EQ(two, "200 1\n200 1\n");
  EXPECT_THAT(curl("--compressed " + base + "/metrics"),
              HasSubstr("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"));
  EXPECT_EQ(curl(base + "/healthz"), "ok\n");
  // HEAD: the headers of the answer, no body.
  std::string head = curl("-sS -I " + base + "/metrics");
  EXPECT_THAT(head, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(head, HasSubstr("Content-Type: text/plain; charset=utf-8"));
  EXPECT_THAT(curl("-s -o /dev/null -w '%{http_code}' " + base + "/nothing-here"), "404");
  // A second exporter on the same port: one clear error naming the address.
  ExporterOptions o = scraper()->options();
  o.listen = "127.0.0.1:" + std::to_string((*http)->port());
  auto busy = HttpExporter::start(std::make_shared<Scraper>(make_all_collectors(), o, Sources{}));
  ASSERT_FALSE(busy);
  EXPECT_THAT(busy.error().message(), HasSubstr("--listen 127.0.0.1:"));
}

// A scrape that throws outside the collectors (here its snapshot source, as bad_alloc could) is
// answered 500 and logged; the exception never unwinds through civetweb, and the server answers
// the next request.
TEST_F(Exporter, ScrapeThatThrowsIsAnswered500) {
  ExporterOptions o;
  o.listen = "127.0.0.1:0";
  std::atomic<bool> fail{true};
  Sources s{[&fail]() -> std::shared_ptr<const AcceleratorSnapshot> {
              if (fail) throw std::runtime_error("snapshot source failed");
              return nullptr;
            },
            nullptr, nullptr};
  auto http = HttpExporter::start(std::make_shared<Scraper>(make_all_collectors(), o, s));
  ASSERT_TRUE(http) << http.error().message();
  std::string base = "http://127.0.0.1:" + std::to_string((*http)->port());
  EXPECT_EQ(curl("-s -o /dev/null -w '%{http_code}' " + base + "/metrics"), "500");
  EXPECT_EQ(
      curl("-s -o /dev/null -w '%{http_code}' -H 'Accept-Encoding: gzip' " + base + "/metrics"),
      "500");
  EXPECT_EQ(curl("-s -o /dev/null -w '%{http_code}' " + base + "/"), "200");
  fail = false;
  EXPECT_THAT(curl(base + "/metrics"), HasSubstr("polyaccel_build_info"));
}

// A connected socket to 127.0.0.1:port that has sent `bytes`.
int connect_and_send(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sends until it closes (bounded by `limit` through SO_RCVTIMEO).
std::string read_until_closed(int fd, std::chrono::seconds limit) {
  timeval tv{};
  tv.tv_sec = limit.count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  return out;
}

// Half-sent requests (slow or hostile clients) held a civetweb worker each until the request
// timeout, so that more of them than workers stalled /metrics and /healthz. The front reads
// request heads without a thread: with 200 of them half-sent and a 60 s request timeout, a
// scrape still answers at once. The 20 s bound is generous for a loaded machine and still far
// below the 60 s that a scrape waiting behind the slow clients would take.
TEST_F(Exporter, SlowClientsDoNotStallAScrape) {
  start_monitor();
  wait_sampled();
  auto s = scraper();
  ExporterOptions o = s->options();
  o.request_timeout = 60s;
  auto slow_scraper = std::make_shared<Scraper>(
      make_all_collectors(), o, Sources{[this] { return monitor_->snapshot(); }, nullptr, nullptr});
  auto http = HttpExporter::start(slow_scraper);
  ASSERT_TRUE(http) << http.error().message();
  const int port = (*http)->port();
  std::vector<int> clients;
  for (int i = 0; i < 200; ++i) {
    // every second one stops inside the request line, the others after a header
    int fd =
        connect_and_send(port, i % 2 ? "GET /metr" : "GET /metrics HTTP/1.1\r\nHost: slow\r\n");
    ASSERT_GE(fd, 0) << "client " << i;
    clients.push_back(fd);
  }
  std::this_thread::sleep_for(200ms);  // let the server take them all
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(curl("--max-time 20 " + base + "/healthz"), "ok\n");
  auto t1 = std::chrono::steady_clock::now();
  EXPECT_THAT(curl("--max-time 20 " + base + "/metrics"), HasSubstr("# TYPE DCGM_FI_DEV_GPU_UTIL"));
  auto t2 = std::chrono::steady_clock::now();
  // The figures for the record (not asserted: bench/ measures speed).
  using ms = std::chrono::duration<double, std::milli>;
  std::cout << "with 200 half-sent requests: /healthz " << ms(t1 - t0).count() << " ms, /metrics "
            << ms(t2 - t1).count() << " ms (curl included)\n";
  // A whole request sent byte by byte is served (heads may come in any number of pieces).
  int piecewise = connect_and_send(port, "G");
  ASSERT_GE(piecewise, 0);
  for (char c : std::string("ET /healthz HTTP/1.0\r\n\r\n")) {
    ASSERT_EQ(::send(piecewise, &c, 1, MSG_NOSIGNAL), 1);
    std::this_thread::sleep_for(2ms);
  }
  std::string answer = read_until_closed(piecewise, 20s);
  EXPECT_THAT(answer, HasSubstr(" 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("\r\n\r\nok\n"));
  ::close(piecewise);
  for (int fd : clients)
    ::close(fd);
}

// A client that never finishes its request head is closed after the request timeout; a body
// (which would hold a worker while it trickles in), another method or an oversized head is
// refused at once with its status.
TEST_F(Exporter, FrontClosesStalledClientsAndRefusesBodies) {
  start_monitor();
  wait_sampled();
  ExporterOptions o = scraper()->options();
  o.request_timeout = 300ms;
  auto http = HttpExporter::start(std::make_shared<Scraper>(
      make_all_collectors(), o,
      Sources{[this] { return monitor_->snapshot(); }, nullptr, nullptr}));
  ASSERT_TRUE(http) << http.error().message();
  const int port = (*http)->port();

  int stalled = connect_and_send(port, "GET /healthz HTTP/1.1\r\n");
  ASSERT_GE(stalled, 0);
  EXPECT_EQ(read_until_closed(stalled, 20s), "");  // closed by the server, nothing answered
  ::close(stalled);

  struct Refused {
    std::string request;
    std::string status_line;
  };
  for (const Refused& r : std::vector<Refused>{
           {"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 400 "},
           {"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 405 "},
           {"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 400 "},
           {"PUT /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 "},
           {"GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n", "HTTP/1.1 431 "},
           {"GET metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "}}) {
    int fd = connect_and_send(port, r.request);
    ASSERT_GE(fd, 0);
    std::string answer = read_until_closed(fd, 20s);
    EXPECT_EQ(answer.substr(0, r.status_line.size()), r.status_line) << r.request.substr(0, 40);
    ::close(fd);
  }
}

TEST(RequestHead, CompleteIncompleteOrRefused) {
  using State = RequestHead::State;
  EXPECT_EQ(read_request_head("").state, State::incomplete);
  EXPECT_EQ(read_request_head("GET /metrics HTTP/1.1\r\nHost: a\r\n").state, State::incomplete);
  RequestHead h = read_request_head("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nGET /x");
  EXPECT_EQ(h.state, State::complete);
  EXPECT_EQ(h.size, std::string("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").size());
  EXPECT_EQ(read_request_head("HEAD / HTTP/1.0\n\n").state, State::complete);
  // civetweb ends a head at "\n\r\n" as well: the front agrees, or civetweb would wait.
  EXPECT_EQ(read_request_head("GET / HTTP/1.1\r\nA: b\n\r\n").size, 23u);
  EXPECT_EQ(read_request_head("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").state,
            State::complete);
  EXPECT_EQ(read_request_head("GET / HTTP/1.1\r\ncontent-LENGTH: 1\r\n\r\n").status, 400);
  EXPECT_EQ(read_request_head("DELETE / HTTP/1.1\r\n\r\n").status, 405);
  EXPECT_EQ(read_request_head("GET / HTTP/2\r\n\r\n").status, 400);
  EXPECT_EQ(read_request_head("GET  / HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(read_request_head(" GET / HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(read_request_head(std::string("GET /\0 HTTP/1.1\r\n\r\n", 20)).status, 400);
  EXPECT_EQ(read_request_head(std::string(kMaxRequestHeadBytes, 'a')).status, 431);
}

// Calls polyaccel_inject_set_step in the copy of the test library the backend loaded.
void set_step(const char* library, unsigned step) {
  void* lib = ::dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto fn = reinterpret_cast<void (*)(unsigned)>(::dlsym(lib, "polyaccel_inject_set_step"));
  ASSERT_NE(fn, nullptr);
  fn(step);
  ::dlclose(lib);
}

TEST_F(Exporter, DeviceThatFallsOffTheBusAndComesBack) {
  HealthPolicy policy;
  policy.recovery = 0s;
  MonitorOptions o;
  o.interval = 20ms;
  o.health = policy;
  monitor_ = std::make_unique<AcceleratorMonitor>(HostModel{}, make_all_backends(), o);
  monitor_->start();
  wait_sampled();
  auto s = scraper();
  Labels lost = {{"pci_bus_id", "0000:9a:00.0"}};
  auto until = [&](auto pred) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    Families f = s->scrape();
    while (!pred(f) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
      f = s->scrape();
    }
    return f;
  };
  set_step(NVML_INJECT_LIB, 2);
  Families gone = until([&](const Families& f) {
    return value(f, "polyaccel_accelerator_up", lost) == 0.0 &&
           value(f, "polyaccel_accelerator_xid_errors_total", with(lost, {{"xid", "79"}})) == 1.0;
  });
  EXPECT_EQ(value(gone, "polyaccel_accelerator_healthy", lost), 0);
  EXPECT_EQ(value(gone, "polyaccel_accelerator_events_total", with(lost, {{"kind", "xid"}})), 1);
  // No stale values for a device that does not answer: its sample families are gone.
  EXPECT_EQ(count(gone, "DCGM_FI_DEV_GPU_TEMP", {{"pci_bus_id", "00000000:9A:00.0"}}), 0u);
  EXPECT_EQ(count(gone, "polyaccel_accelerator_power_watts", lost), 0u);
  EXPECT_EQ(count(gone, "polyaccel_accelerator_info"), 16u);  // still listed
  EXPECT_EQ(count(gone, "DCGM_FI_DEV_GPU_TEMP", {{"pci_bus_id", "00000000:18:00.0"}}), 1u);

  set_step(NVML_INJECT_LIB, 3);
  Families back = until([&](const Families& f) {
    return value(f, "polyaccel_accelerator_up", lost) == 1.0 &&
           value(f, "polyaccel_accelerator_healthy", lost) == 1.0;
  });
  EXPECT_EQ(count(back, "DCGM_FI_DEV_GPU_TEMP", {{"pci_bus_id", "00000000:9A:00.0"}}), 1u);
  EXPECT_EQ(value(back, "DCGM_FI_DEV_XID_ERRORS", {{"pci_bus_id", "00000000:9A:00.0"}}), 79);
}

TEST_F(Exporter, HungVendorCallScrapeStillAnswers) {
  polyaccel::testing::TempDir tmp;
  std::string gate = (tmp.path() / "hang").string();
  ::setenv("NVML_INJECT_HANG_FILE", gate.c_str(), 1);
  ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_HANG_LIB, 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
  start_monitor();
  wait_sampled();
  auto http = HttpExporter::start(scraper({NameSet::polyaccel}, 300ms));
  ASSERT_TRUE(http) << http.error().message();
  std::string base = "http://127.0.0.1:" + std::to_string((*http)->port());

  std::ofstream(gate).put('x');
  void* lib = ::dlopen(NVML_INJECT_HANG_LIB, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto waiting = reinterpret_cast<unsigned (*)()>(::dlsym(lib, "polyaccel_inject_hang_waiting"));
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (waiting() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(waiting(), 1u);

  // The scrape answers from the last snapshot while the call hangs, and shows its age; once
  // the snapshot is older than stall_after, /healthz says so.
  std::string body = curl(base + "/metrics");
  EXPECT_THAT(body, HasSubstr("polyaccel_accelerator_sample_age_seconds{gpu=\"gpu0\""));
  EXPECT_THAT(body, HasSubstr("polyaccel_accelerator_temperature_celsius"));
  std::string health;
  while (std::chrono::steady_clock::now() < deadline) {
    health = curl("-w ' %{http_code}' " + base + "/healthz");
    if (health.find("503") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_THAT(health, HasSubstr("accelerator sampling stalled"));
  EXPECT_EQ(waiting(), 1u);

  std::filesystem::remove(gate);
  while (curl(base + "/healthz") != "ok\n" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(curl(base + "/healthz"), "ok\n");
  ::dlclose(lib);
  ::unsetenv("NVML_INJECT_HANG_FILE");
}

}  // namespace
}  // namespace polyaccel::exporter
