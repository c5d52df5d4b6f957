// The list of vendor backends, and the step that merges what they know into the HostModel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/host_model.h"
#include "discover/accel/backend.h"

namespace polyaccel {

// One factory per vendor, each defined in its own file.
std::unique_ptr<AcceleratorBackend> make_nvml_backend();      // nvml.cc
std::unique_ptr<AcceleratorBackend> make_rocm_smi_backend();  // rocm.cc
std::unique_ptr<AcceleratorBackend> make_amd_smi_backend();   // amd_smi.cc
// The AMD entry of the list: amd-smi where libamd_smi.so opens, else ROCm SMI (amd_smi.cc).
std::unique_ptr<AcceleratorBackend> make_amd_backend();
std::unique_ptr<AcceleratorBackend> make_hlml_backend();  // hlml.cc

// Every backend, in a fixed order (NVIDIA, AMD, Gaudi). Listed here once (DESIGN.md).
std::vector<std::unique_ptr<AcceleratorBackend>> make_all_backends();

// Opens every backend, joins each device to the HostModel's accelerator by PCI address (a device
// hwloc missed is added), fills inventory and NVLink/XGMI peers, and recomputes the link matrix
// and closest NICs. Never fails: a broken backend is reported in the status and skipped.
std::vector<AcceleratorBackendStatus> merge_accelerators(
    HostModel& model, std::vector<std::unique_ptr<AcceleratorBackend>>& backends);

}  // namespace polyaccel
