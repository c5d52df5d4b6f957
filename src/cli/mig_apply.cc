// `polyaccel mig apply`: plans against the instances that exist, then changes only what must
// change (destroy what goes, create what is new at its planned place), under a lock so that two
// applies never interleave. A failure half way stops there and reports what was done: every
// step is a driver call that either happened or not, and the final layout is read back.
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/mig.h"
#include "core/json.h"
#include "partition_manager/mig_apply.h"

namespace polyaccel::cli {

namespace {

nlohmann::json report_json(const MigPlan& plan, const std::vector<MigGpuApplyReport>& reports,
                           const std::optional<Error>& error) {
  nlohmann::json doc = plan_json(plan);
  doc["applied"] = !error.has_value();
  doc["error"] = error ? nlohmann::json(error->message()) : nlohmann::json();
  doc["pending_reset"] = nlohmann::json::array();
  doc["results"] = nlohmann::json::array();
  for (const auto& r : reports) {
    if (r.mode == "pending_reset") doc["pending_reset"].push_back(r.index);
    doc["results"].push_back({{"index", r.index},
                              {"mode", r.mode},
                              {"destroyed", instances_json(r.destroyed)},
                              {"created", instances_json(r.created)},
                              {"instances", instances_json(r.instances)}});
  }
  return doc;
}

void print_report(const std::vector<MigGpuApplyReport>& reports, const std::optional<Error>& error,
                  std::ostream& out) {
  for (const auto& r : reports) {
    out << "GPU " << r.index << ": " << r.destroyed.size() << " destroyed, " << r.created.size()
        << " created";
    if (r.mode == "pending_reset") out << ", MIG mode change pending a GPU reset";
    if (r.mode == "enabled" || r.mode == "disabled") out << ", MIG " << r.mode;
    out << "\n";
    for (const auto& i : r.instances) {
      out << "  " << i.profile << "  start " << i.start << " size " << i.size << "  GPU instance "
          << i.gpu_instance_id << (i.uuid.empty() ? "" : "  " + i.uuid) << "\n";
    }
  }
  if (error) out << "Stopped: " << error->message() << "\n";
}

}  // namespace

int run_mig_apply(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  MigApplyLock lock;
  if (auto st = lock.acquire(); !st) return fail(st.error());
  auto host = open_mig_host(options);
  if (!host) return fail(host.error());
  auto plan = plan_for(options, host->inputs);
  if (!plan) return fail(plan.error());
  if (!plan->fit) return report_plan(*plan, global.json, out);
  std::vector<MigGpuApplyReport> reports;
  std::optional<Error> error;
  for (const auto& g : plan->gpus) {
    reports.push_back({g.index, "unchanged", {}, {}, {}});
    if (auto st = apply_mig_gpu_plan(*host->control, g, reports.back()); !st) {
      error = st.error();
      break;
    }
  }
  // What the driver has now, whatever happened.
  if (auto now = host->control->gpus()) {
    for (auto& r : reports) {
      for (const auto& g : *now) {
        if (g.index == r.index) r.instances = g.instances;
      }
      for (auto& i : r.instances) {
        for (const auto& in : host->inputs) {
          const MigProfile* p = in.index == r.index && in.geometry
                                    ? in.geometry->profile_by_id(i.profile_id)
                                    : nullptr;
          if (p && i.profile.empty()) i.profile = p->name;
        }
      }
    }
  }
  if (global.json) {
    out << json_text(report_json(*plan, reports, error)) << "\n";
  } else {
    print_report(reports, error, out);
  }
  if (error) std::cerr << "polyaccel: " << error->message() << "\n";
  return error ? kExitError : kExitOk;
}

}  // namespace polyaccel::cli
