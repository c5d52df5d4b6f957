// What the DRA tests of the kubelet side share (plugin, dynamic_mig, agent_dra, runner): the claim
// UIDs, the NVIDIA driver's and ib_uverbs' files of a node under a test's root, the test NVML on
// one of its scenarios, the kubelet plugin's directories under a test's folder, and waiting for
// a condition. Header-only, as fake_api_server.h.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "dra/plugin.h"
#include "kube/models.h"
#include "support/test_support.h"

namespace polyaccel::testing {

// The scenario's GPU in MIG mode without any instance (0000:5d:00.0).
inline const std::string kEmptyGpu = "0000:5d:00.0";
inline const std::string kUidA = "0b8e1c2a-1111-2222-3333-444455556666";
inline const std::string kUidB = "7f3a9d10-aaaa-bbbb-cccc-ddddeeeeffff";
inline const std::string kUidC = "5c6d7e8f-1234-5678-9abc-def012345678";

// The PCI bus ids of the model's accelerators, in its order.
inline std::vector<std::string> accelerator_bus_ids(const HostModel& model) {
  std::vector<std::string> out;
  for (const auto& a : model.accelerators)
    out.push_back(a.pci.address.to_string());
  return out;
}

// What the nvidia driver shows in /proc: device minor i for the i-th bus id.
inline void write_nvidia_minors(const std::filesystem::path& root,
                                const std::vector<std::string>& bus_ids) {
  for (size_t i = 0; i < bus_ids.size(); ++i)
    write_text(root / "proc/driver/nvidia/gpus" / bus_ids[i] / "information",
               "Model: NVIDIA H100 80GB HBM3\nDevice Minor: " + std::to_string(i) + "\n");
}

// nvidia-caps' mig-minors: the config and monitor capabilities, then `instances`
// ("gpu7/gi2/access 66\n...").
inline void write_mig_minors(const std::filesystem::path& root, const std::string& instances) {
  write_text(root / "proc/driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\n" + instances);
}

// What ib_uverbs shows in /sys: uverbsK of mlx5_K, for the first `count`.
inline void write_uverbs(const std::filesystem::path& root, unsigned count) {
  for (unsigned k = 0; k < count; ++k)
    write_text(root / "sys/class/infiniband_verbs" / ("uverbs" + std::to_string(k)) / "ibdev",
               "mlx5_" + std::to_string(k) + "\n");
}

// The test NVML on `scenario` (a file of tests/inject/nvml/scenarios), no AMD or Gaudi library.
inline void use_nvml_scenario(const std::string& scenario) {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  ::setenv("NVML_INJECT_SCENARIO", (std::string(NVML_SCENARIO_DIR) + "/" + scenario).c_str(), 1);
}

// The kubelet plugin's socket and checkpoint directory, the plugin watcher's directory and the
// CDI spec directory under `dir`, as kubelet lays them out; nothing logged.
inline dra::DraPluginOptions dra_plugin_options(const std::filesystem::path& dir) {
  dra::DraPluginOptions o;
  o.plugin_dir = (dir / "plugins/polyaccel.io").string();
  o.registry_dir = (dir / "plugins_registry").string();
  o.cdi_dir = (dir / "cdi").string();
  o.log = [](const std::string&) {};
  return o;
}

// Polls `pred` every 20 ms until it holds or `timeout` passes; its last answer.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace polyaccel::testing
