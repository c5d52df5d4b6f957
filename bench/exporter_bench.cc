// The agent's scrape path: serialising the snapshot of 8 H100 GPUs (test NVML library, 8×H100
// scenario) plus the host of this machine, with every name set, as a scrape does.
#include <benchmark/benchmark.h>
#include <prometheus/text_serializer.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "discover/rdma_ports.h"
#include "exporter/collector.h"
#include "exporter/exporter.h"
#include "exporter/hw_metrics.h"
#include "exporter/otlp.h"
#include "exporter/text_format.h"

namespace {

using namespace polyaccel;

struct Agent {
  std::unique_ptr<AcceleratorMonitor> monitor;
  std::unique_ptr<exporter::HostSampler> host;
  std::shared_ptr<exporter::Scraper> scraper;

  Agent() {
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("NVML_INJECT_SCENARIO", NVML_SCENARIO, 1);
    ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent", 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent", 1);
    DiscoverOptions o;
    o.backends = BackendMode::off;
    HostModel model = discover_host(o).value();
    MonitorOptions mo;
    mo.interval = std::chrono::seconds(10);
    monitor = std::make_unique<AcceleratorMonitor>(model, make_all_backends(), mo);
    monitor->start();
    auto snap = monitor->wait_newer(0, std::chrono::seconds(30));
    while (snap->devices.empty() || !snap->devices.back().sample)
      snap = monitor->wait_newer(snap->generation, std::chrono::seconds(30));
    host = std::make_unique<exporter::HostSampler>(model, "/", std::chrono::seconds(10));
    // The placement state (absent here: nothing allocated) and the audit, as the agent runs them.
    host->set_extras({"/nonexistent/allocations.json", std::chrono::hours(1), nullptr, nullptr});
    host->start();
    exporter::ExporterOptions eo;
    eo.hostname = "bench";
    scraper = std::make_shared<exporter::Scraper>(
        exporter::make_all_collectors(), eo,
        exporter::Sources{[this] { return monitor->snapshot(); },
                          [this] { return host->snapshot(); }, nullptr});
  }
};

Agent& agent() {
  static Agent* a = new Agent();  // lives for the whole benchmark run
  return *a;
}

HostModel this_host() {
  DiscoverOptions o;
  o.backends = BackendMode::off;
  return discover_host(o).value();
}

void BM_CollectFamilies(benchmark::State& state) {
  auto& a = agent();
  for (auto _ : state) {
    auto families = a.scraper->scrape();
    benchmark::DoNotOptimize(families.data());
  }
}
BENCHMARK(BM_CollectFamilies);

// What a scrape serialises, as the agent does (text_format) and as prometheus-cpp's
// TextSerializer, which the agent used before and whose bytes text_format reproduces.
void BM_ScrapeText(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state)
    bytes = exporter::text_format(a.scraper->scrape()).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeText);

void BM_ScrapeTextPrometheusCpp(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, a.scraper->scrape());
    bytes = out.str().size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeTextPrometheusCpp);

// A whole scrape's answer to Prometheus: collected, serialised and gzipped.
void BM_ScrapeGzip(benchmark::State& state) {
  auto& a = agent();
  size_t bytes = 0;
  for (auto _ : state)
    bytes = exporter::gzip(exporter::text_format(a.scraper->scrape())).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeGzip);

void BM_ReadHostSample(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::read_host_sample(model, "/");
    benchmark::DoNotOptimize(s.numa.size());
  }
}
BENCHMARK(BM_ReadHostSample);

// The sampler's placement step on this host: build the host view, read the state, count usage.
void BM_ReadPlacement(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::read_placement(model, "/nonexistent/allocations.json");
    benchmark::DoNotOptimize(s.nodes.size());
  }
}
BENCHMARK(BM_ReadPlacement);

// One audit of this host (read_tuning_facts + every check), once per --audit-interval.
void BM_RunHostAudit(benchmark::State& state) {
  HostModel model = this_host();
  for (auto _ : state) {
    auto s = exporter::run_host_audit(model, "/", {});
    benchmark::DoNotOptimize(s.counts.size());
  }
}
BENCHMARK(BM_RunHostAudit)->Unit(benchmark::kMillisecond);

// A root with 8 RDMA devices (mlx5_0..7), one ACTIVE HDR port each with node_exporter's 21
// counters/ files and 29 hw_counters/ of an mlx5 port, as bench/agent_vs_node_exporter.py builds.
struct RdmaTree {
  std::filesystem::path root;
  std::vector<std::string> devices;
  RdmaTree() {
    namespace fs = std::filesystem;
    root = fs::temp_directory_path() / ("exporter_bench_rdma." + std::to_string(::getpid()));
    const char* counters[] = {"excessive_buffer_overrun_errors",
                              "link_downed",
                              "link_error_recovery",
                              "local_link_integrity_errors",
                              "multicast_rcv_packets",
                              "multicast_xmit_packets",
                              "port_rcv_constraint_errors",
                              "port_rcv_data",
                              "port_rcv_errors",
                              "port_rcv_packets",
                              "port_rcv_remote_physical_errors",
                              "port_rcv_switch_relay_errors",
                              "port_xmit_constraint_errors",
                              "port_xmit_data",
                              "port_xmit_discards",
                              "port_xmit_packets",
                              "port_xmit_wait",
                              "symbol_error",
                              "unicast_rcv_packets",
                              "unicast_xmit_packets",
                              "VL15_dropped"};
    const char* hw_counters[] = {"duplicate_request",
                                 "implied_nak_seq_err",
                                 "lifespan",
                                 "local_ack_timeout_err",
                                 "np_cnp_sent",
                                 "np_ecn_marked_roce_packets",
                                 "out_of_buffer",
                                 "out_of_sequence",
                                 "packet_seq_err",
                                 "req_cqe_error",
                                 "req_cqe_flush_error",
                                 "req_remote_access_errors",
                                 "req_remote_invalid_request",
                                 "resp_cqe_error",
                                 "resp_cqe_flush_error",
                                 "resp_local_length_error",
                                 "resp_remote_access_errors",
                                 "rnr_nak_retry_err",
                                 "roce_adp_retrans",
                                 "roce_adp_retrans_to",
                                 "roce_slow_restart",
                                 "roce_slow_restart_cnps",
                                 "roce_slow_restart_trans",
                                 "rp_cnp_handled",
                                 "rp_cnp_ignored",
                                 "rx_atomic_requests",
                                 "rx_icrc_encapsulated",
                                 "rx_read_requests",
                                 "rx_write_requests"};
    auto write = [](const fs::path& p, const std::string& text) {
      fs::create_directories(p.parent_path());
      std::ofstream(p) << text << "\n";
    };
    for (int n = 0; n < 8; ++n) {
      devices.push_back("mlx5_" + std::to_string(n));
      fs::path port = root / "sys/class/infiniband" / devices.back() / "ports/1";
      write(port / "state", "4: ACTIVE");
      write(port / "phys_state", "5: LinkUp");
      write(port / "rate", "200 Gb/sec (4X HDR)");
      int k = 0;
      for (const char* c : counters)
        write(port / "counters" / c, std::to_string(1000000007ull * ++k * (n + 1)));
      k = 0;
      for (const char* c : hw_counters)
        write(port / "hw_counters" / c, std::to_string(1009ull * ++k * (n + 1)));
    }
  }
  ~RdmaTree() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

// The RDMA part of one host sample: every file of 8 ports (the sampler's thread, per interval).
void BM_ReadRdmaPorts(benchmark::State& state) {
  RdmaTree tree;
  for (auto _ : state) {
    size_t n = 0;
    for (const auto& d : tree.devices)
      n += read_rdma_ports(tree.root.string(), d).size();
    benchmark::DoNotOptimize(n);
  }
}
BENCHMARK(BM_ReadRdmaPorts)->Unit(benchmark::kMicrosecond);

// The RDMA port collector over those 8 ports (a scrape's share when the body is rendered).
void BM_CollectRdmaPorts(benchmark::State& state) {
  RdmaTree tree;
  auto sample = std::make_shared<exporter::HostSample>();
  sample->host = std::make_shared<const HostModel>();
  for (const auto& d : tree.devices) {
    for (auto& r : read_rdma_ports(tree.root.string(), d))
      sample->rdma_ports.push_back({"nic0", "0000:1c:00.0", 0u, "gpu0", std::move(r)});
  }
  exporter::ScrapeInput in;
  in.host = sample;
  auto collector = exporter::make_rdma_port_collector();
  for (auto _ : state) {
    exporter::Families out;
    (void)collector->collect(in, out);
    benchmark::DoNotOptimize(out.size());
  }
}
BENCHMARK(BM_CollectRdmaPorts);

}  // namespace

// One OTLP push of the full node: 8 H200 GPUs with 7 MIG instances each, every value the hw.*
// conventions take set: the hw.* metrics from the snapshot and the serialized
// ExportMetricsServiceRequest, as the push thread builds them every --otlp-interval.
AcceleratorSnapshot full_node_snapshot() {
  AcceleratorSnapshot snap;
  snap.generation = 1;
  for (unsigned g = 0; g < 8; ++g) {
    MonitoredDevice d;
    d.id = "gpu" + std::to_string(g);
    d.pci_bus_id = "0000:" + std::to_string(10 + g) + ":00.0";
    d.vendor = Vendor::nvidia;
    d.name = "NVIDIA H200";
    d.inventory.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(g);
    d.inventory.serial = "165492200" + std::to_string(g);
    d.inventory.driver_version = "570.86.15";
    d.inventory.memory_total_bytes = 143771ull << 20;
    d.inventory.mig_enabled = true;
    AcceleratorSample s;
    s.gpu_utilization_percent = 97;
    s.encoder_utilization_percent = 0;
    s.decoder_utilization_percent = 12;
    s.memory_used_bytes = 120000ull << 20;
    s.gpu_temperature_c = 67;
    s.memory_temperature_c = 79;
    s.power_watts = 652.3;
    s.energy_millijoules = 4131814000;
    s.ecc_corrected_volatile = 3;
    s.ecc_uncorrected_volatile = 0;
    s.pcie_replay_count = 0;
    s.io_received_bytes = 91'284'553'728'000;  // hw.gpu.io
    s.io_transmitted_bytes = 88'114'212'864'000;
    for (unsigned i = 0; i < 7; ++i) {
      MigInstance m;
      m.gpu_instance_id = 7 + i;
      m.profile_name = "1g.18gb";
      m.uuid =
          "MIG-a000000" + std::to_string(g) + "-0000-5000-8000-00000000000" + std::to_string(i);
      m.memory_bytes = 17432ull << 20;
      d.inventory.mig_instances.push_back(m);
      MigInstanceSample ms;
      ms.gpu_instance_id = m.gpu_instance_id;
      ms.memory_used_bytes = 9000ull << 20;
      ms.profiling.graphics_active_percent = 55;
      s.mig_instances.push_back(ms);
    }
    d.sample = s;
    snap.devices.push_back(std::move(d));
  }
  return snap;
}

// Arg 1: each MIG instance held by a pod (its k8s.* attributes on the instance's points).
PodAssignments full_node_pods(const AcceleratorSnapshot& snap, bool held) {
  PodAssignments pods;
  if (!held) return pods;
  for (const auto& d : snap.devices)
    for (const auto& m : d.inventory.mig_instances)
      pods.by_device[m.uuid].push_back(
          {"trainer-" + m.uuid.substr(4, 12), "ml-team", "main", "nvidia.com/mig-1g.18gb"});
  return pods;
}

void BM_OtlpRequestFullNode(benchmark::State& state) {
  const AcceleratorSnapshot snap = full_node_snapshot();
  const PodAssignments pods = full_node_pods(snap, state.range(0) != 0);
  const exporter::OtlpResource resource{"node-7", "node-7", "0.1.0"};
  const auto start = std::chrono::system_clock::now();
  size_t bytes = 0, points = 0;
  for (auto _ : state) {
    auto metrics = exporter::hw_metrics(snap, pods);
    points = 0;
    for (const auto& m : metrics)
      points += m.points.size();
    bytes =
        exporter::otlp_request(metrics, resource, start, std::chrono::system_clock::now()).size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["points"] = static_cast<double>(points);
}
BENCHMARK(BM_OtlpRequestFullNode)->Arg(0)->Arg(1);

// What every render of /metrics adds for the scrapers that ask escaping=allow-utf-8: the hw.*
// families of the same full node in UTF-8 text, and their gzip member.
void BM_HwTextFullNode(benchmark::State& state) {
  const AcceleratorSnapshot snap = full_node_snapshot();
  const PodAssignments pods;
  size_t bytes = 0, gzipped = 0;
  for (auto _ : state) {
    std::string text = exporter::hw_text_format(exporter::hw_metrics(snap, pods));
    gzipped = exporter::gzip(text).size();
    bytes = text.size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["gzip_bytes"] = static_cast<double>(gzipped);
}
BENCHMARK(BM_HwTextFullNode);

BENCHMARK_MAIN();
