// The Kubernetes device plugin (kubelet's device plugin API v1beta1,
// ../shared/reference/kubelet-apis.md 1): one gRPC server per resource on its own unix socket
// under the kubelet directory, registered with kubelet.sock and registered again when kubelet
// restarts; ListAndWatch follows device health both ways; GetPreferredAllocation and Allocate
// answer from an immutable snapshot (the pure functions of preferred_allocation.h, allocate.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "kube/allocate.h"
#include "kube/resources.h"

namespace polyaccel {

struct DevicePluginOptions {
  std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
  // The MIG strategy; unset: the sharing config's flags.migStrategy, else none.
  std::optional<MigStrategy> mig_strategy;
  std::string sharing_config;    // NVIDIA's config file format; empty: nothing is shared
  std::string nfd_features_dir;  // empty: no node labels
  std::string root = "/";        // where /sys and /proc are read (device nodes)
  // SR-IOV VF pools and shared HCAs (nic_resources.h); empty: no NIC resources.
  std::string nic_config;
  AllocateOptions allocate;
  // The kubelet directory and the config files' directories are watched with inotify, and looked
  // at within milliseconds of a change; this is the longest wait between two looks without one.
  std::chrono::milliseconds poll_interval{5000};
  // One line per event worth a person's attention; stderr when empty.
  std::function<void(const std::string&)> log;
};

class DevicePlugin {
 public:
  explicit DevicePlugin(DevicePluginOptions options);
  ~DevicePlugin();
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Takes the directory's lock (another agent holding it is a bad_input Error naming it), reads
  // the sharing config, plans the resources, starts one server per resource, registers them and
  // starts watching. A sharing config that cannot be used is an Error here (there is no
  // earlier good one to keep); later it is logged and the last good one stays.
  Status start(HostModel model);
  void stop();

  // The device set changed (the accelerator monitor saw a device come or go).
  void set_model(HostModel model);
  // Health by PCI bus id; a device left out keeps its health. ListAndWatch streams send the
  // new list where it changed.
  void set_health(const std::map<std::string, bool>& healthy_by_bus_id);

  // What it serves now: resource names, and how many registrations kubelet accepted so far.
  std::vector<std::string> resources() const;
  unsigned registrations() const;
  // The error of the sharing config last read, if it was refused.
  std::optional<Error> sharing_config_error() const;
  // The error of the NIC config last read, if it was refused (the last good one stays).
  std::optional<Error> nic_config_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polyaccel
