// The DRA driver inside `polyaccel agent --dra`, on the agent's accelerator monitor (as the
// device plugin and the exporter): builds the pool from each new snapshot (device set, health),
// hands it to the kubelet plugin and publishes it through the API server when it changed (MIG
// layouts as the monitor's rescans see them, on the model it opened with), or
// every resync interval (a list, no write when nothing differs). It follows the monitor from a
// thread of its own: a slow API server never holds up sampling, and one that is away is retried
// with a growing delay.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

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
  std::function<void(const std::string&)> log;
};

class DraRunner {
 public:
  // `client` may be null: the plugin runs, nothing is published (claims cannot be read then).
  DraRunner(const AcceleratorMonitor& monitor, DraRunnerOptions options,
            std::unique_ptr<KubeClient> client);
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

 private:
  void follow(std::uint64_t generation);
  Result<Pool> build(const HostModel& model, const AcceleratorSnapshot& snap) const;
  void log(const std::string& line) const;

  const AcceleratorMonitor& monitor_;
  DraRunnerOptions options_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<DraPlugin> plugin_;
  mutable std::mutex mu_;
  Pool pool_;
  std::set<std::string> withdrawn_;  // under mu_
  std::atomic<bool> withdrawn_changed_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> syncs_{0};
  std::thread follower_;
};

}  // namespace polyaccel::dra
