// The device plugin inside `polyaccel agent` (docs/kubernetes.md): started on the agent's
// accelerator monitor, so that one process opens each vendor library once.
#pragma once

#include <memory>
#include <string>

#include "cli/commands.h"
#include "discover/accel/monitor.h"
#include "kube/runner.h"

namespace polyaccel::cli {

// The plugin's options from the agent's, every file among them (sharing and NIC configs) read
// and checked: called before the agent starts any thread, so that a bad option or file fails
// the start at once, in one line. An Error names the option or file.
struct PreparedDevicePlugin {
  DevicePluginOptions options;
  std::string device_list_reason;  // why that device list strategy, said when the plugin starts
};
Result<PreparedDevicePlugin> prepare_device_plugin(const AgentOptions& options,
                                                   const DiscoverOptions& discover);

// Null when the plugin is off: --kubelet-dir is empty, or the directory does not exist (a host
// without kubelet; said once on stderr). An Error when kubelet does not take the registration.
Result<std::unique_ptr<DevicePluginRunner>> start_device_plugin(const AcceleratorMonitor& monitor,
                                                                const PreparedDevicePlugin& plugin);

// Without the device plugin (it writes them itself when it runs), the node labels still go to
// --nfd-features-dir: written from the monitor's model when the accelerators are first known and
// whenever the device set changes. Subscribes to `monitor` (before its start); returns the
// listener id, or 0 when there is nothing to write.
int subscribe_node_labels(AcceleratorMonitor& monitor, const AgentOptions& options);
// One line on stderr when there will be no node labels because the directory is missing.
void say_why_no_node_labels(const AgentOptions& options);

}  // namespace polyaccel::cli
