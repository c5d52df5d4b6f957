// The device plugin fed by the accelerator monitor: it starts on the monitor's first complete
// snapshot, plans again when the device set changes (a GPU came or went, a new MIG layout seen by
// the monitor's rescans: `polyaccel mig apply`, nvidia-smi) and passes every device's health on
// to ListAndWatch. It follows the monitor from a thread of its own, so a slow kubelet never holds
// up the monitor's sampling.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/error.h"
#include "discover/accel/monitor.h"
#include "kube/device_plugin.h"

namespace polyaccel {

class DevicePluginRunner {
 public:
  DevicePluginRunner(const AcceleratorMonitor& monitor, DevicePluginOptions options);
  ~DevicePluginRunner();
  DevicePluginRunner(const DevicePluginRunner&) = delete;
  DevicePluginRunner& operator=(const DevicePluginRunner&) = delete;

  // Waits up to `ready_timeout` for the monitor's first complete snapshot, starts the plugin on
  // it and returns; the plugin's start error (a bad sharing config) is returned as is.
  Status start(std::chrono::milliseconds ready_timeout);
  void stop();

  const DevicePlugin& plugin() const { return plugin_; }

  // GPUs (PCI bus ids) not to advertise whatever their health: the partition manager changes
  // them (src/partition_manager). Their devices go Unhealthy in ListAndWatch at once; an empty
  // set advertises every GPU by its health again.
  void set_withdrawn(std::set<std::string> bus_ids);

 private:
  void follow(std::uint64_t generation, const HostModel* host);

  std::map<std::string, bool> health_of(const AcceleratorSnapshot& s) const;

  const AcceleratorMonitor& monitor_;
  DevicePlugin plugin_;
  mutable std::mutex withdrawn_mu_;
  std::set<std::string> withdrawn_;
  std::atomic<bool> stopping_{false};
  std::thread follower_;
  // Bus ids of GPUs whose inventory came from the monitor's devices, not its model (runner.cc).
  std::set<std::string> filled_;
  // The MIG layouts the plan was last made from (mig_layouts of the monitor).
  std::string layouts_;
};

}  // namespace polyaccel
