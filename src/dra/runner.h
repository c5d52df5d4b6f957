// The DRA driver inside `polyaccel agent --dra`, on the agent's accelerator monitor (as the
// device plugin and the exporter): builds the pool from each new snapshot (device set, health),
// hands it to the kubelet plugin and publishes it through the API server when it changed (MIG
// layouts as the monitor's rescans see them, on the model it opened with), or
// every resync interval (a list, no write when nothing differs). It follows the monitor from a
// thread of its own: a slow API server never holds up sampling, and one that is away is retried
// with a growing delay.
//
// What the API server does to the slices is checked, not assumed:
// - Feature gates: a server with DRAPartitionableDevices off stores the slices without their
//   counters, and one with DRADeviceTaints off without taints (Kubernetes 1.34 and 1.35 by
//   default). A dry-run create before the first publication and every `recheck`, and the
//   stored objects after every write, say what it keeps. Without counters only devices that
//   cannot be over-committed are published (whole GPUs, existing MIG instances: no placements);
//   without taints unhealthy devices are withdrawn. Each switch is logged once and shows in
//   status() (polyaccel_dra_* metrics); it switches back when the server keeps them again.
// - Where counter sets go: Kubernetes 1.35 and later refuse a slice with both counter sets and
//   devices, 1.34 a device that consumes a counter set of another slice (CounterLayout). The dry
//   run tries 1.35's layout and falls back on 1.34's own 422; a write refused with either 422
//   switches the layout too (a server that refuses dry runs). Going by the server's answers and
//   not by its version number holds for distributions that carry another rule.
// - Wipes: the kubelet deletes every ResourceSlice of its node when it starts and when a plugin
//   unregisters. A watch on the pool's slices (field selectors spec.nodeName, spec.driver) sees
//   the deletes, and the pool is published again within a second or so, not at the next resync.
//
// The kubelet plugin's health stream (pod status, KEP 4680) says what the slices say: a device
// the pool taints polyaccel.io/unhealthy (an XID, an uncorrectable ECC error, a GPU off the bus,
// one the partition manager is changing) is Unhealthy, the others of an accelerator Healthy,
// withdrawn ones included (a server that drops taints); NICs, whose health is not watched, are
// left to the kubelet's Unknown.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/dra_status.h"
#include "discover/accel/monitor.h"
#include "dra/plugin.h"
#include "dra/publisher.h"

namespace polyaccel::dra {

struct DraRunnerOptions {
  SliceOptions slices;  // node, driver, MIG devices, withdraw or taint unhealthy devices
  DraPluginOptions plugin;
  std::string root = "/";        // where device minors are read for CDI
  std::string driver_root;       // the NVIDIA driver's files for CDI (cdi_driver.h); empty: none
  std::string host_driver_root;  // the same on the host, when mounted elsewhere here
  std::chrono::milliseconds resync{std::chrono::minutes(5)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(60)};
  // How often the server is asked (dry run) which gated fields it keeps.
  std::chrono::milliseconds recheck{std::chrono::minutes(1)};
  // Watch the pool's slices and republish what someone else deleted or changed; the watch is
  // renewed every `watch_timeout` (the server's timeoutSeconds).
  bool watch = true;
  std::chrono::seconds watch_timeout{std::chrono::minutes(5)};
  std::function<void(const std::string&)> log;
};

class DraRunner {
 public:
  // `client` may be null: the plugin runs, nothing is published (claims cannot be read then).
  DraRunner(const AcceleratorMonitor& monitor, DraRunnerOptions options,
            std::unique_ptr<kube_api::KubeClient> client);
  ~DraRunner();
  DraRunner(const DraRunner&) = delete;
  DraRunner& operator=(const DraRunner&) = delete;

  Status start(std::chrono::milliseconds ready_timeout);
  void stop();

  const DraPlugin& plugin() const { return *plugin_; }
  DraPlugin& plugin() { return *plugin_; }
  // Successful syncs so far, and the API writes they made.
  std::uint64_t syncs() const { return syncs_; }
  std::uint64_t api_writes() const { return client_ ? client_->writes() : 0; }
  // The pool as last built.
  Pool pool() const;
  // GPUs (PCI bus ids) the partition manager is changing: handled as unhealthy ones (left out of
  // the slice with withdraw_unhealthy, else tainted NoSchedule) until an empty set is given.
  void set_withdrawn(std::set<std::string> bus_ids);
  // Builds the pool again from the monitor's newest snapshot, with the withdrawn GPUs as set now,
  // publishes it at once and returns when the API server has stored it: Ok then (or at once
  // without a client), an Error naming the last failure when it has not within `timeout`. The
  // runner keeps trying after a timeout, as it does for any failed publication. For the
  // partition manager: a GPU leaves the slices before it changes, and comes back with its new
  // layout before the apply is reported done.
  Status publish_now(std::chrono::milliseconds timeout);
  // What it knows of the server and its slices, for people and metrics (polyaccel_dra_*).
  DraStatus status() const;

 private:
  void follow(std::shared_ptr<const AcceleratorSnapshot> start_snapshot);
  void watch_slices();
  Result<Pool> build(const HostModel& model, const AcceleratorSnapshot& snap) const;
  // The health of every accelerator device of the pool `build` makes, by the taint it gives.
  PoolHealth health_of(const HostModel& model, const AcceleratorSnapshot& snap) const;
  // A new view of what the server keeps: logged when it changes; true when it did.
  bool note_fields(const ServerFields& fields, const char* how);
  void log(const std::string& line) const;

  const AcceleratorMonitor& monitor_;
  DraRunnerOptions options_;
  std::unique_ptr<kube_api::KubeClient> client_;
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<DraPlugin> plugin_;
  mutable std::mutex mu_;
  Pool pool_;
  std::set<std::string> withdrawn_;  // under mu_
  std::atomic<bool> withdrawn_changed_{false};
  // publish_now: how many were asked, and up to which the server has stored the pool (under mu_).
  std::uint64_t publishes_asked_ = 0, publishes_stored_ = 0;
  std::string last_sync_error_;  // under mu_
  std::condition_variable published_cv_;
  ServerFields fields_;  // under mu_
  bool fields_known_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> resync_now_{false};  // the watch saw our slices deleted or changed
  std::atomic<bool> watching_{false};
  std::atomic<std::uint64_t> syncs_{0}, restores_{0}, sync_errors_{0};
  std::unique_ptr<kube_api::KubeClient>
      watch_client_;  // its own connection: a watch holds one for minutes
  std::thread follower_, watcher_;
};

}  // namespace polyaccel::dra
