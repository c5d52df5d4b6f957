// The node's CDI specs, written by the agent for its device plugin (--node-cdi-specs,
// docs/kubernetes.md "Nodes without the NVIDIA container runtime"): the specs `polyaccel cdi
// generate` writes, kept current as devices come and go, so that Allocate can name CDI devices
// (cdi-cri) and a node whose runtime has CDI on and no NVIDIA container runtime gives a GPU pod
// the driver's libraries as well as its device nodes.
#pragma once

#include <string>

#include "cli/commands.h"
#include "discover/accel/monitor.h"

namespace polyaccel::cli {

// With --cdi-hook-path: the image's polyaccel-cdi-hook copied there and run once (a program the
// node's runtime cannot start would fail every GPU pod at container creation); the path the specs'
// hooks name either way (beside this binary when no --cdi-hook-path). For the DRA driver and the
// node specs alike; call before any thread starts (it runs the hook).
Result<std::string> install_cdi_hook(const AgentOptions& options, const std::string& who);

// With --node-cdi-specs: the hook installed, then `monitor` (before its start) writes the specs
// into --cdi-dir whenever its device set changes, and removes the spec of a class that has no
// device left; a failure is said once, and the last good specs stay. An Error for a hook that
// cannot run there.
Status subscribe_node_cdi_specs(AcceleratorMonitor& monitor, const AgentOptions& options,
                                const DiscoverOptions& discover);

}  // namespace polyaccel::cli
