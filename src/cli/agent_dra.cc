#include "cli/agent_dra.h"

#include <sched.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/agent_cdi.h"
#include "cli/conventions.h"
#include "cli/dra_commands.h"
#include "core/file_io.h"
#include "core/log.h"
#include "core/strings.h"
#include "discover/discover.h"
#include "dra/cdi_driver.h"
#include "dra/cdi_hook.h"
#include "dra/cpu_devices.h"

namespace polyaccel::cli {

void add_dra_agent_options(CLI::App* agent, AgentOptions& o) {
  agent->add_flag("--dra", o.dra,
                  "run the DRA driver (resource.k8s.io/v1): kubelet plugin and ResourceSlices");
  agent->add_option("--dra-plugins-dir", o.dra_plugins_dir, "kubelet's plugins directory")
      ->capture_default_str();
  agent->add_option("--dra-registry-dir", o.dra_registry_dir, "kubelet's plugin watcher directory")
      ->capture_default_str();
  agent->add_option("--cdi-dir", o.cdi_dir, "where CDI specs of prepared claims go")
      ->capture_default_str();
  agent
      ->add_option("--kubeconfig", o.kubeconfig,
                   "API server access (default: in-cluster; \"none\": publish nothing)")
      ->type_name("FILE");
  agent->add_option("--node-name", o.node_name, "the Node's name (default: $NODE_NAME, hostname)");
  one_of(agent->add_option("--dra-mig-devices", o.dra_mig_devices,
                           "existing MIG instances, or all placements"),
         std::vector<std::string>{"existing", "all"})
      ->capture_default_str();
  one_of(agent->add_option("--dra-cpus", o.dra_cpus,
                           "publish CPUs as DRA devices: off, core (a core with its SMT "
                           "siblings each) or numa (a NUMA node's cores each); docs/dra.md"),
         std::vector<std::string>{"off", "core", "numa"})
      ->capture_default_str();
  agent->add_flag("--dra-memory", o.dra_memory,
                  "publish each NUMA node's memory and hugepages as a DRA device");
  agent
      ->add_option("--reserved-cpus", o.reserved_cpus,
                   "CPUs never offered as DRA devices, as kubelet's reservedSystemCPUs "
                   "(0-1,64-65); isolcpus, nohz_full and a pinned agent's own CPUs are added")
      ->type_name("LIST");
  agent
      ->add_option("--dra-nic-shares", o.dra_nic_shares,
                   "share each RDMA NIC among this many claims (2-1000; 0: one claim each), as "
                   "the RDMA shared device plugin's rdmaHcaMax (Kubernetes 1.36+)")
      ->capture_default_str();
  agent
      ->add_option("--dra-root", o.dra_root,
                   "where /proc and /sys are read for CDI device nodes (default: / or --fsroot)")
      ->type_name("DIR");
  agent
      ->add_option("--driver-root", o.driver_root,
                   "the NVIDIA driver's libraries and binaries for CDI (/run/nvidia/driver for "
                   "the GPU Operator's driver container)")
      ->type_name("DIR")
      ->capture_default_str();
  agent
      ->add_option("--host-driver-root", o.host_driver_root,
                   "where the host has --driver-root, when this container mounts it elsewhere")
      ->type_name("DIR");
  agent
      ->add_option("--cdi-hook-path", o.cdi_hook_path,
                   "a host path the polyaccel-cdi-hook beside this binary is copied to "
                   "(atomically, then run once to check it) and the runtime runs as the CDI "
                   "specs' hooks (default: the one beside this binary, right outside a "
                   "container only)")
      ->type_name("PATH");
  agent
      ->add_option("--nri-socket", o.nri_socket,
                   "the container runtime's NRI socket (/var/run/nri/nri.sock): pin the "
                   "containers of pods with CPU claims to their CPUs and keep the others off "
                   "them (docs/dra.md); empty: no NRI plugin")
      ->type_name("PATH");
  agent
      ->add_option("--cpu-manager-state", o.cpu_manager_state,
                   "kubelet's CPU Manager state file, whose policy must be none with --nri-socket")
      ->type_name("FILE")
      ->capture_default_str();
}

Result<std::unique_ptr<nri::NriPlugin>> start_nri(const std::string& root, const AgentOptions& o) {
  if (o.nri_socket.empty()) return std::unique_ptr<nri::NriPlugin>();
  // kubelet's static policy pins Guaranteed pods itself and rewrites their cpusets every 10 s:
  // two owners of one cpuset. Its state file names the policy (absent: none, the default).
  if (auto text = read_text_file(o.cpu_manager_state)) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    const std::string policy =
        j.is_object() && j.contains("policyName") && j["policyName"].is_string()
            ? j["policyName"].get<std::string>()
            : "";
    if (policy != "none" && !policy.empty()) {
      return bad_input("--nri-socket with kubelet's CPU Manager policy " + printable(policy) +
                           " (" + o.cpu_manager_state + ")",
                       "kubelet would pin Guaranteed pods itself and undo the claims' cpusets",
                       "set the kubelet's cpuManagerPolicy to none on this node, or drop "
                       "--nri-socket");
    }
  }
  nri::NriOptions no;
  no.socket = o.nri_socket;
  // The kernel's own lists under `root`, not the model's: cpusets name the CPUs this kernel has
  // online, whatever topology the model was read from (a capture, with --topology).
  for (auto [file, set] : {std::pair{"sys/devices/system/cpu/online", &no.online},
                           std::pair{"sys/devices/system/node/online", &no.nodes}}) {
    const auto path = std::filesystem::path(root) / file;
    auto line = read_first_line(path);
    auto parsed = line ? CpuSet::parse_list(*line) : std::nullopt;
    if (!parsed || parsed->empty()) {
      return Error{ErrorCode::not_found, path.string(),
                   line ? "is not a CPU list" : "cannot be read", "--nri-socket needs it"};
    }
    *set = *parsed;
  }
  // The claimed nodes' hugepages bound the limits of the containers pinned to them.
  no.read_hugepages = [root, nodes = no.nodes] {
    HostModel m;
    for (unsigned n : nodes.to_vector())
      m.numa_nodes.emplace_back().os_index = n;
    refresh_from_sysfs(m, root);
    nri::NodeHugepages out;
    for (const auto& n : m.numa_nodes)
      for (const auto& h : n.hugepages)
        out[n.os_index][h.size_bytes] = h.size_bytes * h.total;  // read_hugepages bounds total
    return out;
  };
  auto plugin = std::make_unique<nri::NriPlugin>(no);
  plugin->start();
  return plugin;
}

void use_gpu_operator_driver(AgentOptions& o) {
  if (o.driver_root.empty() || o.driver_root == "/") return;
  dra::DriverRoots roots = dra::find_gpu_operator_driver(o.driver_root, o.host_driver_root);
  if (!roots.gpu_operator) return;
  log_line("polyaccel agent: no NVIDIA driver under --driver-root " + o.driver_root +
           ", the GPU Operator's under " + roots.driver_root + " (on the host " +
           roots.host_driver_root + "): using it");
  o.driver_root = roots.driver_root;
  o.host_driver_root = roots.host_driver_root;
}

void use_driver_root_nvml(const AgentOptions& o) {
  const char* set = std::getenv("POLYACCEL_NVML_LIB");
  if (o.driver_root.empty() || o.driver_root == "/" || (set && *set)) return;
  dra::NvidiaDriverFiles driver = dra::read_nvidia_driver(o.driver_root);
  const std::string name = "/libnvidia-ml.so." + driver.version;
  for (const auto& m : driver.mounts) {
    // host_path: the library with every link resolved inside the driver root (no link leads
    // out of it), as this process sees it.
    if (driver.version.empty() || !m.container_path.ends_with(name)) continue;
    const std::string& path = m.host_path;
    ::setenv("POLYACCEL_NVML_LIB", path.c_str(), 1);
    log_line("polyaccel agent: NVML from the driver root: " + path);
    return;
  }
}

namespace {

// The CPUs never offered: --reserved-cpus, the kernel's isolated and nohz_full CPUs (housekeeping
// is kept off them on purpose), and the agent's own CPUs when it was pinned narrower than the node
// (a systemd CPUAffinity). Under NRI the agent is a shared container that the plugin keeps off
// the claims' CPUs, and reserving what it runs on then would withdraw the claimed ones.
Result<CpuSet> reserved_cpus(const HostModel& model, const AgentOptions& o,
                             const std::string& root) {
  CpuSet reserved;
  if (!o.reserved_cpus.empty()) {
    auto given = dra::parse_reserved_cpus(model, o.reserved_cpus);
    if (!given) return given.error();
    reserved = *given;
  }
  for (const char* file : {"sys/devices/system/cpu/isolated", "sys/devices/system/cpu/nohz_full"}) {
    auto text = read_text_file((std::filesystem::path(root) / file).string());
    if (!text) continue;  // absent on older kernels and captures: none
    if (auto set = CpuSet::parse_list(*text)) reserved |= *set & model.pus;
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (o.nri_socket.empty() && ::sched_getaffinity(0, sizeof mask, &mask) == 0) {
    CpuSet own;
    for (unsigned c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mask)) own.set(c);
    if (!own.contains(model.pus)) reserved |= own & model.pus;
  }
  return reserved;
}

}  // namespace

Result<std::unique_ptr<dra::DraRunner>> start_dra(const AcceleratorMonitor& monitor,
                                                  const AgentOptions& o,
                                                  const DiscoverOptions& discover) {
  if (!o.dra) return std::unique_ptr<dra::DraRunner>();
  dra::DraRunnerOptions ro;
  auto node = agent_node_name(*monitor.snapshot()->host, o.node_name);
  if (!node) return node.error();
  ro.slices.node = *node;
  ro.slices.mig = o.dra_mig_devices == "all" ? dra::MigDevices::all : dra::MigDevices::existing;
  ro.slices.nic_shares = o.dra_nic_shares;
  if (o.dra_nic_shares == 1 || o.dra_nic_shares > dra::kMaxNicShares) {
    return bad_input("--dra-nic-shares " + std::to_string(o.dra_nic_shares),
                     "must be 0 (NICs not shared) or 2 to " + std::to_string(dra::kMaxNicShares));
  }
  ro.plugin.plugin_dir = o.dra_plugins_dir + "/" + ro.slices.driver;
  ro.plugin.registry_dir = o.dra_registry_dir;
  ro.plugin.cdi_dir = o.cdi_dir;
  if (ro.slices.mig == dra::MigDevices::all) {
    // Placements without an instance are published: prepare makes them (docs/dra.md).
    auto control = open_nvml_mig_control();
    if (control) {
      ro.plugin.mig = std::shared_ptr<MigControl>(std::move(*control));
    } else {
      log_line("polyaccel agent: dra: no MIG control (" + control.error().message() +
               "): a claim for a MIG device that does not exist yet is refused");
    }
  }
  ro.root = o.dra_root.empty() ? filesystem_root(discover) : o.dra_root;
  ro.slices.cpu.grain = o.dra_cpus == "core"   ? dra::CpuGrain::core
                        : o.dra_cpus == "numa" ? dra::CpuGrain::numa
                                               : dra::CpuGrain::off;
  ro.slices.cpu.memory = o.dra_memory;
  if (ro.slices.cpu.grain != dra::CpuGrain::off || o.dra_memory) {
    auto reserved = reserved_cpus(*monitor.snapshot()->host, o, ro.root);
    if (!reserved) return reserved.error();
    ro.slices.cpu.reserved = *reserved;
    log_line("polyaccel agent: dra: CPUs as devices (" +
             std::string(to_string(ro.slices.cpu.grain)) + (o.dra_memory ? ", memory" : "") +
             "), never " +
             (reserved->empty() ? std::string("none reserved") : reserved->to_list()));
  }
  ro.driver_root = o.driver_root;
  ro.host_driver_root = o.host_driver_root;
  auto hook = install_cdi_hook(o, "dra");
  if (!hook) return hook.error();
  ro.plugin.cdi.hook_path = *hook;
  std::unique_ptr<kube_api::KubeClient> client;
  if (o.kubeconfig != "none") {
    auto config = o.kubeconfig.empty() ? kube_api::in_cluster_config()
                                       : kube_api::kubeconfig_file(o.kubeconfig);
    if (!config) return config.error();
    client = std::make_unique<kube_api::KubeClient>(*config);
  }
  auto runner = std::make_unique<dra::DraRunner>(monitor, ro, std::move(client));
  Status st = runner->start(std::chrono::seconds(60));
  if (!st) return st.error();
  log_line("polyaccel agent: DRA driver " + ro.slices.driver + " for node " + ro.slices.node +
           " on " + runner->plugin().endpoint());
  return runner;
}

}  // namespace polyaccel::cli
