// GPU partitioning driven from a Node label, as NVIDIA's GPU Operator (mig-manager:
// nvidia.com/mig.config) and AMD's (Device Config Manager: dcm.amd.com/gpu-config-profile) do it,
// in the agent. An operator labels the Node with a config's name; the manager reads that config
// from a ConfigMap, plans it against what the GPUs have (the vendor's PartitionWorkflow), and for
// the GPUs that change only: stops advertising them, waits for the pods that hold them to end (or
// evicts them, with the policy on), applies the change under `polyaccel mig apply`'s lock,
// advertises them again, and reports the outcome in the state label and an Event naming what
// failed and why. GPUs the plan leaves alone keep serving throughout.
//
// The Node is read (a GET), then watched from that resourceVersion: a change of its labels starts
// the apply within a moment; a dropped watch or a 410 Gone reads the Node again before watching
// again, and each watch ends after options.recheck for a slow re-check. The ConfigMap is read once
// per apply: an edit during an apply counts for the next one. A state file, written atomically
// before each step that touches the GPUs, lets an agent killed in the middle finish the apply or
// report it failed when it starts again (state_file.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/pod_assignments.h"
#include "kube_api/client.h"
#include "partition_manager/node_api.h"
#include "partition_manager/state_file.h"

namespace polyaccel {

// The labels and words of one vendor's workflow.
struct PartitionLabels {
  std::string config;  // the label that names the config: "nvidia.com/mig.config"
  std::string state;   // the label the outcome goes to: "nvidia.com/mig.config.state"
  std::string pending = "pending", success = "success", failed = "failed",
              rebooting = "rebooting";  // its values
  std::string what;                     // in messages: "MIG config"
  std::string event_prefix;             // Events' reasons: <prefix>Applied, <prefix>Failed, ...
};

// One GPU the plan changes.
struct PartitionGpuChange {
  std::string bus_id;                   // "0000:2a:00.0"
  std::vector<std::string> device_ids;  // what kubelet may know it by besides: MIG UUIDs
};

// A vendor's planning and applying, made fresh for each apply.
class PartitionWorkflow {
 public:
  virtual ~PartitionWorkflow() = default;
  // Reads the ConfigMap's text (`source` names it) and plans config `name` against what the GPUs
  // have now: the GPUs that change. Nothing is changed; an Error says why the config cannot be
  // applied (unknown name, bad format, does not fit).
  virtual Result<std::vector<PartitionGpuChange>> plan(const std::string& text,
                                                       const std::string& source,
                                                       const std::string& name) = 0;
  // Applies the plan's change `i`: true when done, false when it waits for a GPU reset or a
  // reboot. An Error names the GPU and what was done before it.
  virtual Result<bool> apply(std::size_t i) = 0;
  // After the applies: whether the GPUs have what was planned.
  virtual Status verify() = 0;
};

struct PartitionManagerOptions {
  std::string node;  // this agent's Node
  PartitionLabels labels;
  std::string config_map_namespace = "polyaccel-system";
  std::string config_map;
  std::string config_map_key;
  std::filesystem::path state_file;
  // Evict the pods that hold a changing GPU through the Eviction API; off: wait for them to end.
  bool evict_pods = false;
  std::chrono::milliseconds pod_wait{std::chrono::minutes(10)};  // then the apply fails
  std::chrono::milliseconds pod_check{std::chrono::seconds(2)};  // between two looks at the pods
  // The Node is watched: a change of the labels is looked at at once. Off: looked at every
  // `recheck` only.
  bool watch = true;
  // The longest between two looks at the Node (a watch lasts this long, then the Node is read
  // again): the fallback should a watch miss a change.
  std::chrono::milliseconds recheck{std::chrono::seconds(60)};
  // How long `publish` may wait for the API server to store what `withdraw` gave it.
  std::chrono::milliseconds publish_wait{std::chrono::seconds(30)};
  std::string component = "polyaccel-partition-manager";  // Events' source
  std::function<void(const std::string&)> log;            // stderr when empty
};

// The steps of one apply, for tests that stop the apply after one as a kill would.
enum class ApplyStep { pending_set, gpus_withdrawn, pods_gone, gpu_applied, verified };

struct PartitionManagerHooks {
  // A fresh workflow for each apply (NVIDIA MIG: mig_workflow.h; AMD: amd_workflow.h).
  std::function<std::unique_ptr<PartitionWorkflow>()> workflow;
  // Stops advertising these GPUs (PCI bus ids); every other GPU is advertised. The device
  // plugin marks their devices Unhealthy, the DRA driver handles them as unhealthy.
  std::function<void(const std::set<std::string>&)> withdraw;
  // Returns when what `withdraw` last gave is what the DRA driver's ResourceSlices stored by
  // the API server say, with the GPUs' partitions as they are now; an Error after at most the
  // timeout. Called after each withdraw: the changing GPUs leave the slices before the first
  // change (an Error fails the apply with nothing changed), and come back with their new
  // partitions before the state label says success (an Error is logged; the label is set).
  // Empty: nothing is published through the API server.
  std::function<Status(std::chrono::milliseconds timeout)> publish;
  // Which pods hold which devices now (kubelet's pod-resources); null: no pods are known.
  std::function<PodAssignments()> pods;
  // The device ids a GPU is known by to kubelet besides its bus id and MIG UUIDs (its UUID).
  std::function<std::vector<std::string>(const std::string& bus_id)> device_ids;
  // Tests: called after each step; false abandons the apply there without any cleanup, as a
  // kill of the agent would (the state file and the GPUs stay as they are).
  std::function<bool(ApplyStep)> after_step;
};

// What the last apply ended with.
struct PartitionOutcome {
  std::string config;
  std::string state;                      // the state label's value set at the end; empty: none yet
  std::string reason;                     // why, when it failed or waits for a reset
  std::vector<std::string> changed_gpus;  // bus ids
  std::chrono::nanoseconds apply_time{0};  // everything but the pod waits
  bool abandoned = false;                  // after_step stopped it
};

class PartitionLabelManager {
 public:
  PartitionLabelManager(kube_api::KubeClient& client, PartitionManagerOptions options,
                        PartitionManagerHooks hooks);
  ~PartitionLabelManager();
  PartitionLabelManager(const PartitionLabelManager&) = delete;
  PartitionLabelManager& operator=(const PartitionLabelManager&) = delete;

  // Reads the state file: GPUs an interrupted or failed apply left withdrawn are withdrawn
  // before anything is advertised. A state file that cannot be read is an Error.
  Status recover();
  // One look at the Node: applies its config when the label asks for one not yet applied, or
  // finishes an apply the state file says was interrupted. An Error when the API server cannot
  // be reached (the next look tries again); an apply that fails is an outcome, not an Error.
  Status reconcile_once();

  void start();  // reconciles and watches on a thread of its own (call recover() first)
  void stop();

  PartitionOutcome last_outcome() const;
  std::set<std::string> withdrawn() const;

 private:
  void apply(const std::string& config);
  void finish(PartitionOutcome outcome, PartitionApplyRecord record);
  bool step(ApplyStep s);
  void set_withdrawn(const std::set<std::string>& gpus);
  Status published();  // hooks_.publish, when there is one
  void log(const std::string& line) const;
  void run();
  bool wait(std::chrono::milliseconds d);  // true: stopping
  bool stopping() const;

  kube_api::KubeClient& client_;
  const PartitionManagerOptions options_;
  PartitionManagerHooks hooks_;
  std::optional<PartitionApplyRecord> record_;  // as on disk
  mutable std::mutex mu_;
  PartitionOutcome outcome_;
  std::set<std::string> withdrawn_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::unique_ptr<kube_api::KubeClient> watch_client_;
  NodeLabels seen_;  // the last GET of the Node
};

}  // namespace polyaccel
