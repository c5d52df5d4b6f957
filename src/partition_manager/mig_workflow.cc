#include "partition_manager/mig_workflow.h"

#include <map>

#include "core/strings.h"
#include "partition_manager/mig_apply.h"
#include "share/mig_parted_config.h"
#include "share/mig_planner.h"
#include "share/mig_profiles.h"

namespace polyaccel {

namespace {

class MigWorkflow final : public PartitionWorkflow {
 public:
  explicit MigWorkflow(std::function<Result<std::unique_ptr<MigControl>>()> open)
      : open_(std::move(open)) {}

  Result<std::vector<PartitionGpuChange>> plan(const std::string& text, const std::string& source,
                                               const std::string& name) override {
    auto parsed = parse_mig_parted_config(text, source);
    if (!parsed) return parsed.error();
    config_ = std::move(*parsed);
    name_ = name;
    if (!config_.configs.count(name)) {
      std::vector<std::string> names;
      for (const auto& [n, entries] : config_.configs)
        names.push_back(n);
      return bad_input(source, "has no config '" + name + "' (it has: " + join(names, ", ") + ")");
    }
    auto control = open_();
    if (!control) return control.error();
    control_ = std::move(*control);
    auto planned = plan_now();
    if (!planned) return planned.error();
    if (!plan_.fit) return bad_input(name, "does not fit the GPUs: " + plan_.reason);
    std::vector<PartitionGpuChange> changes;
    for (const auto& p : plan_.gpus) {
      if (!mig_gpu_plan_changes(p)) continue;
      const MigGpu& g = *by_index_.at(p.index);
      PartitionGpuChange c{g.pci_bus_id, {}};
      for (const auto& inst : g.instances)
        if (!inst.uuid.empty()) c.device_ids.push_back(inst.uuid);
      changes.push_back(std::move(c));
      changing_.push_back(&p);
    }
    return changes;
  }

  Result<bool> apply(std::size_t i) override {
    const MigGpuPlan& p = *changing_.at(i);
    MigGpuApplyReport report;
    report.index = p.index;
    if (auto st = apply_mig_gpu_plan(*control_, p, report); !st) {
      return Error{
          st.error().code,
          "GPU " + std::to_string(p.index) + " (" + by_index_.at(p.index)->pci_bus_id + ")",
          "half configured, " + std::to_string(report.destroyed.size()) +
              " instances destroyed and " + std::to_string(report.created.size()) +
              " created before: " + st.error().message(),
          "label the node again to retry, or see `polyaccel mig show`"};
    }
    return report.mode != "pending_reset";
  }

  Status verify() override {
    // The same targets planned against what the GPUs have now must change nothing.
    auto again = plan_now();
    if (!again) return again.error();
    for (const auto& p : plan_.gpus) {
      if (mig_gpu_plan_changes(p)) {
        return Error{ErrorCode::internal, "GPU " + std::to_string(p.index),
                     "does not have the planned layout after the apply", ""};
      }
    }
    return Ok{};
  }

 private:
  // Plans config name_ against what the GPUs have now (fills gpus_, by_index_, plan_).
  Status plan_now() {
    auto gpus = control_->gpus();
    if (!gpus) return gpus.error();
    gpus_ = std::move(*gpus);
    by_index_.clear();
    std::vector<MigGpuInput> inputs;
    std::vector<MigPartedGpu> selection;
    for (auto& g : gpus_) {
      const MigGeometry* geo = mig_geometry_for(g);
      for (auto& inst : g.instances) {
        const MigProfile* p = geo ? geo->profile_by_id(inst.profile_id) : nullptr;
        if (p) inst.profile = p->name;
      }
      inputs.push_back({g.index, geo, g.mig_enabled, g.pci_id, g.instances});
      selection.push_back({g.index, g.pci_id});
      by_index_[g.index] = &g;
    }
    auto targets = select_mig_parted_config(config_, name_, selection);
    if (!targets) return targets.error();
    std::vector<MigGpuInput> chosen;
    std::vector<MigGpuTarget> wanted;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!(*targets)[i]) continue;
      if (!inputs[i].geometry) {
        return Error{ErrorCode::unsupported, "GPU " + std::to_string(inputs[i].index),
                     "no MIG profile table for this model and the library lists no profiles", ""};
      }
      chosen.push_back(inputs[i]);
      wanted.push_back(*(*targets)[i]);
    }
    if (chosen.empty())
      return bad_input(name_, "applies to none of the GPUs (devices/device-filter)");
    // Busy instances may go: the pods that hold them are waited for (or evicted) first.
    auto plan = plan_mig_per_gpu(chosen, wanted, /*force=*/true);
    if (!plan) return plan.error();
    plan_ = std::move(*plan);
    return Ok{};
  }

  std::function<Result<std::unique_ptr<MigControl>>()> open_;
  std::unique_ptr<MigControl> control_;
  MigPartedConfig config_;
  std::string name_;
  std::vector<MigGpu> gpus_;
  std::map<unsigned, const MigGpu*> by_index_;
  MigPlan plan_;
  std::vector<const MigGpuPlan*> changing_;  // into the first plan_; kept until verify()
};

}  // namespace

PartitionLabels mig_labels() {
  PartitionLabels l;
  l.config = kMigConfigLabel;
  l.state = kMigConfigStateLabel;
  l.what = "MIG config";
  l.event_prefix = "MigConfig";
  return l;
}

PartitionManagerOptions mig_manager_options() {
  PartitionManagerOptions o;
  o.labels = mig_labels();
  o.config_map = "default-mig-parted-config";
  o.config_map_key = "config.yaml";
  o.state_file = "/var/lib/polyaccel/mig-label-manager.json";
  o.component = "polyaccel-mig-manager";
  return o;
}

std::function<std::unique_ptr<PartitionWorkflow>()> mig_workflow(
    std::function<Result<std::unique_ptr<MigControl>>()> open) {
  return [open] { return std::make_unique<MigWorkflow>(open); };
}

}  // namespace polyaccel
