#include "cli/agent_plugin.h"

#include <filesystem>

#include "core/log.h"
#include "kube/nic_resources.h"
#include "render/labels.h"
#include "share/time_slicing.h"

namespace polyaccel::cli {
namespace {

// A directory the operator names (--kubelet-dir, --nfd-features-dir): a symbolic link loop or a
// path we may not read is "not a directory", as an absent one, never an exception.
bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// No device plugin: no --kubelet-dir, or no kubelet on this host.
bool device_plugin_off(const AgentOptions& options) {
  return options.kubelet_dir.empty() || !is_directory(options.kubelet_dir);
}

}  // namespace

Result<PreparedDevicePlugin> prepare_device_plugin(const AgentOptions& options,
                                                   const DiscoverOptions& discover) {
  // One allocator per device: the device plugin and the DRA driver would both advertise every
  // GPU, HPU and NIC, and a pod asking nvidia.com/gpu and a pod with a claim could get the same
  // GPU (kubelet's two managers know nothing of each other). NVIDIA's DRA driver and the GPU
  // Operator run one or the other on a node, never both.
  if (options.dra && !device_plugin_off(options)) {
    return bad_input("--dra with --kubelet-dir " + options.kubelet_dir,
                     "the DRA driver and the device plugin would both hand out this node's "
                     "devices, so two pods could get the same GPU",
                     "give --kubelet-dir '' to serve the node through DRA only, or drop --dra "
                     "(docs/kubernetes.md, \"Moving a node between the device plugin and DRA\")");
  }
  // The DRA driver writes a spec per prepared claim; node specs would offer every device to any
  // container that names it, beside the claims.
  if (options.dra && options.node_cdi_specs) {
    return bad_input("--dra with --node-cdi-specs",
                     "the DRA driver writes a CDI spec for each prepared claim, not the node's",
                     "drop --node-cdi-specs (it is for the device plugin)");
  }
  PreparedDevicePlugin p;
  DevicePluginOptions& o = p.options;
  if (!options.mig_strategy.empty()) {
    auto s = parse_mig_strategy(options.mig_strategy, "--mig-strategy");
    if (!s) return s.error();
    o.mig_strategy = *s;
  }
  // Read only for auto; the root is the one every command reads (--fsroot).
  ContainerRuntimeFacts runtime;
  if (options.device_list_strategy == "auto")
    runtime = read_container_runtime_facts(filesystem_root(discover));
  auto device_list =
      choose_device_list_strategy(options.device_list_strategy, "--device-list-strategy", runtime);
  if (!device_list) return device_list.error();
  o.allocate.device_list = device_list->strategy;
  p.device_list_reason = device_list->reason;
  if (options.node_cdi_specs && options.device_list_strategy == "auto") {
    // The agent writes the specs itself (agent_cdi.h), before kubelet can ask: their CDI devices
    // beside the variables and device specs. A runtime with CDI off ignores them (containerd
    // 1.7 without enable_cdi); one with CDI on gives the driver's libraries too.
    o.allocate.device_list = DeviceListStrategy{true, true};
    p.device_list_reason = "auto: --node-cdi-specs writes the node's CDI specs to " +
                           options.cdi_dir + " (" + device_list->reason + ")";
  }
  // The sharing and NIC configs are read and checked here, before the agent says or starts
  // anything, so that a bad file fails the start at once in one line (the runner reloads each
  // on every change and keeps the last good one).
  if (!options.sharing_config.empty()) {
    auto config = read_sharing_config(options.sharing_config);
    if (!config) return config.error();
  }
  if (!options.nic_config.empty()) {
    auto config = read_nic_config(options.nic_config);
    if (!config) return config.error();
  }
  o.kubelet_dir = options.kubelet_dir;
  o.sharing_config = options.sharing_config;
  o.nic_config = options.nic_config;
  o.allocate.gpu_rdma_devices = options.gpu_rdma_devices;
  o.allocate.nvidia_device_specs = options.pass_device_specs;
  o.nfd_features_dir = options.nfd_features_dir;
  o.root = filesystem_root(discover);
  return p;
}

Result<std::unique_ptr<DevicePluginRunner>> start_device_plugin(const AcceleratorMonitor& monitor,
                                                                const PreparedDevicePlugin& p) {
  const DevicePluginOptions& o = p.options;
  if (o.kubelet_dir.empty()) return std::unique_ptr<DevicePluginRunner>();
  if (!is_directory(o.kubelet_dir)) {
    log_line("polyaccel agent: no device plugin: " + o.kubelet_dir +
             " is not a directory (no kubelet on this host?)");
    return std::unique_ptr<DevicePluginRunner>();
  }
  log_line("polyaccel agent: device plugin: device list strategy " +
           std::string(to_string(o.allocate.device_list)) + " (" + p.device_list_reason + ")");
  auto runner = std::make_unique<DevicePluginRunner>(monitor, o);
  Status st = runner->start(std::chrono::seconds(60));
  if (!st) return st.error();
  return runner;
}

void say_why_no_node_labels(const AgentOptions& options) {
  if (options.nfd_features_dir.empty() || !device_plugin_off(options) ||
      is_directory(options.nfd_features_dir)) {
    return;
  }
  log_line("polyaccel agent: no node labels: " + options.nfd_features_dir +
           " is not a directory (no node-feature-discovery on this host?)");
}

int subscribe_node_labels(AcceleratorMonitor& monitor, const AgentOptions& options) {
  if (options.nfd_features_dir.empty() || !device_plugin_off(options)) return 0;
  if (!is_directory(options.nfd_features_dir)) return 0;  // said once later
  std::string path = options.nfd_features_dir + "/polyaccel";
  std::string strategy = options.mig_strategy.empty() ? "none" : options.mig_strategy;
  auto failed = std::make_shared<std::string>();  // the last error, said once
  return monitor.subscribe(
      [path, strategy, failed](const AcceleratorSnapshot& snap, const MonitorChange& change) {
        if (!change.device_set || !snap.ready) return;
        LabelOptions lo;
        lo.mig_strategy = strategy;
        auto w = write_feature_file(path, node_labels(*snap.host, lo));
        std::string error = w ? std::string() : w.error().message();
        if (!error.empty() && error != *failed) log_line("polyaccel agent: node labels: " + error);
        *failed = error;
      });
}

}  // namespace polyaccel::cli
