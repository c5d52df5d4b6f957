#include "partition_manager/amd_workflow.h"

#include <algorithm>

#include "discover/accel/partition.h"
#include "share/amd_partition_config.h"

namespace polyaccel {

namespace {

class AmdWorkflow final : public PartitionWorkflow {
 public:
  explicit AmdWorkflow(std::filesystem::path sysfs) : sysfs_(std::move(sysfs)) {}

  Result<std::vector<PartitionGpuChange>> plan(const std::string& text, const std::string& source,
                                               const std::string& name) override {
    auto config = parse_amd_partition_config(text, source);
    if (!config) return config.error();
    auto gpus = read_amd_partitions(sysfs_);
    if (!gpus) return gpus.error();
    if (gpus->empty())
      return Error{ErrorCode::not_found, sysfs_.string(), "no partitionable AMD GPU", ""};
    std::sort(gpus->begin(), gpus->end(),
              [](const auto& a, const auto& b) { return a.pci_bus_id < b.pci_bus_id; });
    auto targets = select_amd_partition_profile(*config, name, gpus->size());
    if (!targets) {
      Error e = targets.error();
      e.input = source + ": profile " + e.input;
      return e;
    }
    std::vector<PartitionGpuChange> changes;
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      const auto& target = (*targets)[i];
      const AmdPartitionState& g = (*gpus)[i];
      if (!target) continue;
      // Refused before anything changes: a mode the device does not list, a pair that does
      // not fit (check_amd_partition_pair names the modes that pair).
      if (auto st = check_amd_partition_pair(g, target->compute, target->memory); !st)
        return st.error();
      wanted_.push_back({g.pci_bus_id, *target});
      if (g.compute == target->compute && g.memory == target->memory) continue;
      changes.push_back({g.pci_bus_id, {}});
      changing_.push_back(wanted_.back());
    }
    return changes;
  }

  Result<bool> apply(std::size_t i) override {
    const auto& [bus, target] = changing_.at(i);
    auto after = set_amd_partition(sysfs_, bus, target.compute, target.memory);
    if (!after) return after.error();
    return true;
  }

  Status verify() override {
    auto gpus = read_amd_partitions(sysfs_);
    if (!gpus) return gpus.error();
    for (const auto& [bus, target] : wanted_) {
      const std::string& id = bus;  // clang 14 cannot capture a structured binding
      auto it = std::find_if(gpus->begin(), gpus->end(),
                             [&](const auto& g) { return g.pci_bus_id == id; });
      if (it == gpus->end())
        return Error{ErrorCode::not_found, "AMD GPU " + bus, "is gone after the apply", ""};
      if (it->compute != target.compute || it->memory != target.memory) {
        return Error{ErrorCode::internal, "AMD GPU " + bus,
                     "reads " + it->compute + "/" + it->memory + " after the apply, not " +
                         target.compute + "/" + target.memory,
                     ""};
      }
    }
    return Ok{};
  }

 private:
  std::filesystem::path sysfs_;
  std::vector<std::pair<std::string, AmdPartitionTarget>> wanted_;    // every selected GPU
  std::vector<std::pair<std::string, AmdPartitionTarget>> changing_;  // the ones that change
};

}  // namespace

PartitionLabels amd_partition_labels() {
  PartitionLabels l;
  l.config = kAmdConfigProfileLabel;
  l.state = kAmdConfigProfileStateLabel;
  l.failed = "failure";  // DCM's word
  l.what = "GPU partition profile";
  l.event_prefix = "GpuPartitionProfile";
  return l;
}

PartitionManagerOptions amd_partition_manager_options() {
  PartitionManagerOptions o;
  o.labels = amd_partition_labels();
  o.config_map = "config-manager-config";
  o.config_map_key = "config.json";
  o.state_file = "/var/lib/polyaccel/amd-partition-manager.json";
  o.component = "polyaccel-partition-manager";
  return o;
}

std::function<std::unique_ptr<PartitionWorkflow>()> amd_partition_workflow(
    std::filesystem::path sysfs_root) {
  return [sysfs_root] { return std::make_unique<AmdWorkflow>(sysfs_root); };
}

}  // namespace polyaccel
