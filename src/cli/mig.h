// `polyaccel mig`: shared between mig.cc (show, plan, partition) and mig_apply.cc (apply).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "discover/accel/partition.h"
#include "share/mig_planner.h"

namespace polyaccel::cli {

// This host's MIG-capable GPUs, with the geometry each is planned with.
struct MigHost {
  std::unique_ptr<MigControl> control;
  std::vector<MigGpu> gpus;
  std::vector<MigGpuInput> inputs;  // parallel to gpus; geometries point into tables or gpus
};

Result<MigHost> open_mig_host(const MigOptions& options);

// The plan the options ask for, over `inputs`.
Result<MigPlan> plan_for(const MigOptions& options, const std::vector<MigGpuInput>& inputs);

nlohmann::json plan_json(const MigPlan& plan);
nlohmann::json instance_json(const MigPlacedInstance& instance);
nlohmann::json instances_json(const std::vector<MigPlacedInstance>& instances);
void print_plan(const MigPlan& plan, std::ostream& out);
// Prints the plan; the exit code: 0 fit, 1 no fit, 2 (with a line on stderr) beyond the hardware.
int report_plan(const MigPlan& plan, bool json, std::ostream& out);

int run_mig_apply(const GlobalOptions& global, const MigOptions& options, std::ostream& out);

}  // namespace polyaccel::cli
