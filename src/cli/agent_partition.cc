#include "cli/agent_partition.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <mutex>

#include "cli/dra_commands.h"
#include "core/log.h"
#include "core/number.h"
#include "discover/discover.h"
#include "dra/slices.h"
#include "partition_manager/amd_workflow.h"
#include "partition_manager/mig_workflow.h"

namespace polyaccel::cli {

void add_partition_agent_options(CLI::App* agent, AgentOptions& o) {
  agent->add_flag("--mig-manager", o.mig_manager,
                  "apply the MIG config the Node's nvidia.com/mig.config label names, as the GPU "
                  "Operator's mig-manager (docs/kubernetes.md)");
  agent
      ->add_option("--mig-config-map", o.mig_config_map,
                   "the ConfigMap of mig-parted configs, NAMESPACE/NAME (key config.yaml)")
      ->capture_default_str();
  agent->add_flag("--amd-partition-manager", o.amd_partition_manager,
                  "apply the AMD partition profile the Node's dcm.amd.com/gpu-config-profile "
                  "label names, as AMD's Device Config Manager");
  agent
      ->add_option("--amd-config-map", o.amd_config_map,
                   "the ConfigMap of AMD partition profiles, NAMESPACE/NAME (key config.json)")
      ->capture_default_str();
  agent->add_flag("--partition-evict-pods", o.partition_evict_pods,
                  "evict the pods holding a GPU whose partitions change (Eviction API), rather "
                  "than wait for them to end");
  agent
      ->add_option("--partition-pod-wait", o.partition_pod_wait,
                   "how long to wait for those pods to end (0..24h)")
      ->capture_default_str();
  agent
      ->add_option("--partition-state-dir", o.partition_state_dir,
                   "where the managers' state files are kept across restarts")
      ->type_name("DIR")
      ->capture_default_str();
}

namespace {

// How long a GPU given back waits for the monitor to list its new partitions.
constexpr std::chrono::milliseconds kPartitionRescanWait{30000};

Status set_config_map(const std::string& option, const std::string& value,
                      PartitionManagerOptions& mo) {
  auto slash = value.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == value.size() ||
      !dra::is_dns_subdomain(value.substr(0, slash)) ||
      !dra::is_dns_subdomain(value.substr(slash + 1)))
    return bad_input(option + " " + value, "is not NAMESPACE/NAME");
  mo.config_map_namespace = value.substr(0, slash);
  mo.config_map = value.substr(slash + 1);
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<PartitionAgent>> start_partition_agent(const AcceleratorMonitor& monitor,
                                                              const AgentOptions& o,
                                                              const DiscoverOptions& discover,
                                                              DevicePluginRunner* plugin,
                                                              dra::DraRunner* dra_runner) {
  if (!o.mig_manager && !o.amd_partition_manager) return std::unique_ptr<PartitionAgent>();
  // The options first: a bad one fails the start in one line before anything is reached.
  PartitionManagerOptions mig_options = mig_manager_options();
  PartitionManagerOptions amd_options = amd_partition_manager_options();
  if (auto st = set_config_map("--mig-config-map", o.mig_config_map, mig_options); !st)
    return st.error();
  if (auto st = set_config_map("--amd-config-map", o.amd_config_map, amd_options); !st)
    return st.error();
  auto wait = polyaccel::parse_duration(o.partition_pod_wait,
                                        "--partition-pod-wait " + o.partition_pod_wait,
                                        std::chrono::milliseconds(0), std::chrono::hours(24));
  if (!wait) return wait.error();
  auto node = agent_node_name(*monitor.snapshot()->host, o.node_name);
  if (!node) return node.error();
  if (o.kubeconfig == "none")
    return bad_input("--mig-manager", "needs the API server: --kubeconfig none turns it off");
  auto config = o.kubeconfig.empty() ? kube_api::in_cluster_config()
                                     : kube_api::kubeconfig_file(o.kubeconfig);
  if (!config) return config.error();
  auto agent = std::make_unique<PartitionAgent>();
  agent->client = std::make_unique<kube_api::KubeClient>(*config);

  // Both managers withdraw through one set each; a GPU is advertised when neither holds it.
  struct Withdrawals {
    std::mutex mu;
    std::map<int, std::set<std::string>> by_manager;
  };
  auto withdrawals = std::make_shared<Withdrawals>();
  auto hooks_for = [&, withdrawals](int manager) {
    PartitionManagerHooks hooks;
    const AcceleratorMonitor* monitor_ptr = &monitor;
    hooks.withdraw = [withdrawals, manager, plugin, dra_runner,
                      monitor_ptr](const std::set<std::string>& gpus) {
      std::set<std::string> all;
      bool given_back = false;
      {
        std::lock_guard<std::mutex> lock(withdrawals->mu);
        for (const auto& g : withdrawals->by_manager[manager])
          given_back = given_back || !gpus.count(g);
        withdrawals->by_manager[manager] = gpus;
        for (const auto& [m, set] : withdrawals->by_manager)
          all.insert(set.begin(), set.end());
      }
      // A GPU given back is listed again first: offered with the partitions just applied, never
      // with the old ones the monitor saw before (its next rescan may be a minute away).
      if (given_back && !monitor_ptr->rescan_now(kPartitionRescanWait))
        log_line("polyaccel agent: the accelerator monitor did not list the GPUs again within " +
                 std::to_string(kPartitionRescanWait.count()) + " ms");
      if (plugin) plugin->set_withdrawn(all);
      if (dra_runner) dra_runner->set_withdrawn(all);
    };
    if (dra_runner) {
      hooks.publish = [dra_runner](std::chrono::milliseconds timeout) {
        return dra_runner->publish_now(timeout);
      };
    }
    std::string socket = o.pod_resources_socket;
    if (!socket.empty()) {
      hooks.pods = [socket] {
        PodResourcesOptions po;
        po.socket = socket;
        return list_pod_resources(po);
      };
    }
    // A whole GPU is known to kubelet by its UUID (the device plugin's and DRA's device ids).
    const AcceleratorMonitor* m = &monitor;
    hooks.device_ids = [m](const std::string& bus) {
      std::vector<std::string> ids;
      auto snap = m->snapshot();
      if (const MonitoredDevice* d = snap->device(bus); d && !d->inventory.uuid.empty())
        ids.push_back(d->inventory.uuid);
      return ids;
    };
    return hooks;
  };
  auto start = [&](PartitionManagerOptions mo, PartitionManagerHooks hooks,
                   const std::string& config_map) -> Status {
    mo.node = *node;
    mo.evict_pods = o.partition_evict_pods;
    mo.pod_wait = *wait;
    mo.state_file = std::filesystem::path(o.partition_state_dir) / mo.state_file.filename();
    auto manager = std::make_unique<PartitionLabelManager>(*agent->client, mo, std::move(hooks));
    if (auto st = manager->recover(); !st) return st;
    manager->start();
    log_line("polyaccel agent: following " + mo.labels.config + " on node " + *node +
             " (ConfigMap " + config_map + ", " + (mo.evict_pods ? "evicting" : "waiting for") +
             " pods)");
    agent->managers.push_back(std::move(manager));
    return Ok{};
  };
  if (o.mig_manager) {
    PartitionManagerHooks hooks = hooks_for(0);
    hooks.workflow = mig_workflow();
    if (auto st = start(mig_options, std::move(hooks), o.mig_config_map); !st) return st.error();
  }
  if (o.amd_partition_manager) {
    std::string root = filesystem_root(discover);
    PartitionManagerHooks hooks = hooks_for(1);
    hooks.workflow =
        amd_partition_workflow(std::filesystem::path(root.empty() ? "/" : root) / "sys");
    if (auto st = start(amd_options, std::move(hooks), o.amd_config_map); !st) return st.error();
  }
  return agent;
}

}  // namespace polyaccel::cli
