// The DRA driver inside `polyaccel agent --dra` (docs/dra.md): started on the agent's accelerator
// monitor beside the device plugin and the exporter.
#pragma once

#include <memory>

#include "cli/commands.h"
#include "discover/accel/monitor.h"
#include "dra/runner.h"
#include "nri/plugin.h"

namespace polyaccel::cli {

// Adds --dra and its options to the agent command.
void add_dra_agent_options(CLI::App* agent, AgentOptions& options);

// With a --driver-root other than /, and no POLYACCEL_NVML_LIB: NVML is loaded from that driver
// root (its libnvidia-ml.so.<version>), as NVIDIA's DRA driver does, for the DRA driver and the
// device plugin alike. A node whose runtime does not inject the driver into the agent's container
// (containerd or CRI-O with CDI, no NVIDIA runtime) has it nowhere else. Call before any thread
// starts (it sets the variable).
void use_driver_root_nvml(const AgentOptions& options);

// --driver-root without an NVIDIA driver, and the GPU Operator's under its run/nvidia/driver:
// both roots moved there (dra/cdi_driver.h find_gpu_operator_driver), said in the log, so that
// the same DaemonSet serves nodes with the host's driver and nodes with the operator's.
void use_gpu_operator_driver(AgentOptions& options);

// With --nri-socket: the NRI plugin (nri/plugin.h) started, connecting in the background; an
// Error when kubelet's CPU Manager policy (--cpu-manager-state) is not none. Null without.
// `root`: where the kernel's online CPU and node lists are read (/ or --fsroot).
Result<std::unique_ptr<nri::NriPlugin>> start_nri(const std::string& root,
                                                  const AgentOptions& options);

// Null when --dra is not given. An Error for a bad option, a kubeconfig that cannot be used, or
// sockets that cannot be served.
Result<std::unique_ptr<dra::DraRunner>> start_dra(const AcceleratorMonitor& monitor,
                                                  const AgentOptions& options,
                                                  const DiscoverOptions& discover);

}  // namespace polyaccel::cli
