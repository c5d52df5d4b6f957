// `polyaccel agent`: the node agent. One AcceleratorMonitor samples the vendor libraries in the
// background; the Prometheus exporter serves its snapshot, with host metrics and pod labels from
// kubelet. The device plugin (src/kube, agent_plugin.cc) runs on the same monitor, so that a node
// runs one process that opens NVML once.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/agent_cdi.h"
#include "cli/agent_dra.h"
#include "cli/agent_otlp.h"
#include "cli/agent_partition.h"
#include "cli/agent_plugin.h"
#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "core/log.h"
#include "core/number.h"
#include "discover/accel/backends.h"
#include "discover/accel/monitor.h"
#include "exporter/exporter.h"
#include "exporter/families_json.h"
#include "exporter/text_format.h"
#include "kube/pod_resources.h"

namespace polyaccel::cli {
namespace {

std::string local_hostname(const HostModel& model) {
  if (!model.hostname.empty()) return model.hostname;
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

// What the agent is stopping now, for the watchdog's message: a static string.
std::atomic<const char*> g_stopping{"the agent"};

// Waits for SIGINT or SIGTERM, blocked in every thread the agent starts (see run_agent).
// `sockets` are removed should the stop hang: kubelet must not dial a driver that is gone.
void wait_for_signal(const sigset_t& signals, std::vector<std::string> sockets) {
  int sig = 0;
  ::sigwait(&signals, &sig);
  log_line(std::string("polyaccel agent: ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
           ", stopping");
  // A call that never returns (a vendor library, an API server) would keep a thread from joining.
  std::thread([sockets = std::move(sockets)] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    for (const auto& s : sockets)
      ::unlink(s.c_str());
    log_line(std::string("polyaccel agent: stopping ") + g_stopping.load() +
             " still hangs after 5 s, exiting anyway");
    std::_Exit(0);
  }).detach();
}

}  // namespace

// Sampling and audit periods: a bound on each side, so that nan, inf, 1e300 or 9e12s cannot make
// a sampler spin or a sleep overflow (core/number.h parse_duration).
Result<std::chrono::milliseconds> parse_duration(const std::string& option,
                                                 const std::string& text) {
  auto d = polyaccel::parse_duration(text, option, std::chrono::milliseconds(100),
                                     std::chrono::hours(24));
  if (!d) {
    Error e = d.error();
    // "--interval 0: '0' is out of range (100 ms..86400 s)", or the config file's line
    e.input = option_input(option) + " " + text;
    return e;
  }
  return d;
}

int run_agent(const GlobalOptions& global, const AgentOptions& given, std::ostream& out) {
  AgentOptions options = given;
  use_gpu_operator_driver(options);
  // Two malloc arenas, not glibc's 8 per core: the agent's ten threads each allocate a little
  // (a scrape, a sample), and an arena per thread kept 2 MiB more resident for nothing. Set
  // before any thread starts; MALLOC_ARENA_MAX in the environment still wins.
  if (!std::getenv("MALLOC_ARENA_MAX")) ::mallopt(M_ARENA_MAX, 2);
  if (global.json && !options.once) {
    return fail(bad_input("agent --json", "the agent serves Prometheus text on /metrics",
                          "--once --json prints one scrape as JSON (docs/exporter.md)"));
  }
  auto interval = parse_duration("--interval", options.interval);
  if (!interval) return fail(interval.error());
  // The OTLP flags are checked before anything starts: a bad one exits 2 at once.
  auto otlp_interval = parse_duration("--otlp-interval", options.otlp_interval);
  if (!otlp_interval) return fail(otlp_interval.error());
  if (!options.otlp_endpoint.empty()) {
    auto endpoint = exporter::parse_otlp_endpoint(options.otlp_endpoint);
    if (!endpoint) return fail(endpoint.error());
  }
  // "off" is the only way to run no audit: 0 (in any unit) is refused as for --interval, since
  // a zero period reads as "all the time" as easily as "never".
  std::chrono::milliseconds audit_interval{0};
  if (options.audit_interval != "off") {
    auto a = parse_duration("--audit-interval", options.audit_interval);
    if (!a) {
      Error e = a.error();
      auto zero = polyaccel::parse_duration(options.audit_interval, "--audit-interval",
                                            std::chrono::milliseconds(0), std::chrono::hours(24));
      if (zero && zero->count() == 0) e.remedy = "write --audit-interval off to run no audit";
      return fail(e);
    }
    audit_interval = *a;
  }
  auto names = exporter::parse_compat(options.compat);
  if (!names) return fail(names.error());
  HealthPolicy policy;
  if (!options.health_config.empty()) {
    auto p = HealthPolicy::from_yaml_file(options.health_config);
    if (!p) return fail(p.error());
    policy = *p;
  }
  auto prepared_plugin = prepare_device_plugin(options, global.discover);
  if (!prepared_plugin) return fail(prepared_plugin.error());
  // The topology without vendor libraries: the monitor opens them, once, and keeps them.
  DiscoverOptions discover = global.discover;
  BackendMode backends = discover.backends;
  discover.backends = BackendMode::off;
  auto model = discover_host(discover);
  if (!model) return fail(model.error());
  bool live = global.discover.topology_xml.empty() && global.discover.fsroot.empty();
  bool use_backends = backends == BackendMode::on || (backends == BackendMode::automatic && live);

  // Signals go to sigwait() only: block them before any thread starts, so every thread inherits it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  use_driver_root_nvml(options);  // before the monitor opens NVML (agent_dra.h)
  MonitorOptions mo;
  mo.interval = *interval;
  mo.health = policy;
  AcceleratorMonitor monitor(
      *model,
      use_backends ? make_all_backends() : std::vector<std::unique_ptr<AcceleratorBackend>>{}, mo);
  std::string host_root = filesystem_root(discover);
  if (!options.host_root.empty()) {
    // Any directory: the sampler reads what it finds (a tree of sys/class/infiniband alone is
    // one), each file only when it is a regular file of sane size (core/file_io.h).
    std::error_code ec;
    if (!std::filesystem::is_directory(options.host_root, ec)) {
      return fail(bad_input("--host-root " + options.host_root, "is not a directory",
                            "give the directory that holds the host's sys/ and proc/"));
    }
    host_root = options.host_root;
  }
  exporter::HostSampler host(*model, host_root, *interval);
  host.set_extras({options.state, audit_interval,
                   [&] { return exporter::last_samples(*monitor.snapshot()); },
                   [&]() -> std::shared_ptr<const HostModel> {
                     auto snap = monitor.snapshot();
                     return snap->ready ? snap->host : nullptr;
                   }});
  std::unique_ptr<PodResourcesClient> pods;
  if (!options.pod_resources_socket.empty()) {
    PodResourcesOptions po;
    po.socket = options.pod_resources_socket;
    po.interval = *interval;
    pods = std::make_unique<PodResourcesClient>(po);
  }
  subscribe_node_labels(monitor, options);  // before start(): the first publication counts
  Status cdi_specs = subscribe_node_cdi_specs(monitor, options, discover);  // agent_cdi.h
  if (!cdi_specs) return fail(cdi_specs.error());
  monitor.start();
  host.start();
  if (pods) pods->start();
  exporter::ExporterOptions eo;
  eo.listen = options.listen;
  eo.web_config_file = options.web_config_file;
  eo.names = *names;
  eo.hostname = options.hostname.empty() ? local_hostname(*model) : options.hostname;
  eo.cluster_name = options.cluster_name;
  eo.dcgm_hostname_label = options.dcgm_hostname_label;
  eo.version = kBuildVersion;
  eo.revision = kBuildRevision;
  eo.build_type = kBuildType;
  eo.stall_after = std::max(std::chrono::milliseconds(30000), *interval * 6);
  // The DRA driver starts after the exporter's port (below): scrapes find it once it runs.
  std::atomic<const dra::DraRunner*> dra_runner{nullptr};
  exporter::Sources sources{
      [&] { return monitor.snapshot(); }, [&] { return host.snapshot(); },
      [&]() -> std::shared_ptr<const PodAssignments> { return pods ? pods->snapshot() : nullptr; },
      [&]() -> std::shared_ptr<const DraStatus> {
        const dra::DraRunner* r = dra_runner.load();
        return r ? std::make_shared<const DraStatus>(r->status()) : nullptr;
      }};
  auto scraper = std::make_shared<exporter::Scraper>(exporter::make_all_collectors(), eo, sources);

  if (options.once) {
    // One scrape after the first samples, on stdout: for promtool and for people.
    auto snap = monitor.wait_newer(0, std::chrono::seconds(30));
    while (snap->ready && !snap->devices.empty() &&
           std::any_of(snap->devices.begin(), snap->devices.end(),
                       [](const MonitoredDevice& d) { return !d.sample; })) {
      snap = monitor.wait_newer(snap->generation, std::chrono::seconds(30));
    }
    if (global.json) {
      out << exporter::families_json(scraper->scrape()).dump(2) << "\n";
    } else {
      out << exporter::text_format(scraper->scrape());
    }
    return kExitOk;
  }
  // The port first: a bad --listen fails before the device plugin registers with kubelet.
  auto http = exporter::HttpExporter::start(scraper);
  if (!http) return fail(with_option_input(http.error(), "--listen"));
  std::unique_ptr<DevicePluginRunner> plugin;  // on the same monitor (agent_plugin.h)
  auto started = start_device_plugin(monitor, *prepared_plugin);
  if (!started) return fail(started.error());
  plugin = std::move(*started);
  auto dra = start_dra(monitor, options, discover);  // on the same monitor (agent_dra.h)
  if (!dra) return fail(dra.error());
  auto nri = start_nri(filesystem_root(discover), options);  // agent_dra.h
  if (!nri) return fail(nri.error());
  // After both: it withdraws the GPUs it changes from each (agent_partition.h).
  auto partitions = start_partition_agent(monitor, options, discover, plugin.get(), dra->get());
  if (!partitions) return fail(partitions.error());
  dra_runner = dra->get();
  std::unique_ptr<OtlpPusher> otlp;
  if (!options.otlp_endpoint.empty()) {
    OtlpPushOptions po;
    po.endpoint = options.otlp_endpoint;
    po.interval = *otlp_interval;
    po.resource.host_name = eo.hostname;
    const char* node = std::getenv("NODE_NAME");
    po.resource.k8s_node_name = !options.node_name.empty() ? options.node_name : node ? node : "";
    po.resource.service_version = kBuildVersion;
    auto pusher = OtlpPusher::start(std::move(po), [&] {
      exporter::ScrapeInput in = scraper->input();  // the pods with DRA claims joined
      return OtlpSources{in.accelerators, in.pods};
    });
    if (!pusher) return fail(pusher.error());
    otlp = std::move(*pusher);
  }
  say_why_no_node_labels(options);
  if (!global.quiet) {
    // With port 0 the kernel chose: this line is where people (and scripts) read which.
    log_line("polyaccel agent: serving /metrics and /healthz on port " +
             std::to_string((*http)->port()) + " (--listen " + options.listen +
             "), sampling every " + std::to_string(interval->count()) + " ms");
  }
  std::vector<std::string> sockets;
  if (*dra) sockets = {(*dra)->plugin().registration_socket(), (*dra)->plugin().endpoint()};
  wait_for_signal(signals, std::move(sockets));
  g_stopping = "the OTLP push";
  if (otlp) otlp->stop();
  g_stopping = "the HTTP server";
  http->reset();
  g_stopping = "the NRI plugin";
  if (*nri) (*nri)->stop();
  g_stopping = "the partition manager";
  if (*partitions) (*partitions)->stop();
  dra_runner = nullptr;
  g_stopping = "the DRA driver (an API server call)";
  if (*dra) (*dra)->stop();
  g_stopping = "the device plugin";
  if (plugin) plugin->stop();
  g_stopping = "the pod-resources client";
  if (pods) pods->stop();
  g_stopping = "the host sampler";
  host.stop();
  g_stopping = "the accelerator monitor (a vendor call)";
  monitor.stop();
  return kExitOk;
}

}  // namespace polyaccel::cli
