// `polyaccel report`: the main job of `make run`. Each capability adds its section here.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/host_model_json.h"
#include "render/openstack.h"

namespace polyaccel::cli {

inline constexpr int kReportSchemaVersion = 1;

int run_report(const GlobalOptions& options, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  if (options.json) {
    nlohmann::json j;
    j["schema_version"] = kReportSchemaVersion;
    j["topology"] = to_json(*model);
    auto plan = render::plan_flavors(*model, render::FlavorOptions{});
    j["flavors"] = plan ? render::to_json(*plan) : nlohmann::json();
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << "== Topology ==\n";
  print_topology(*model, out);
  out << "\n== Accelerator flavors ==\n";
  auto plan = render::plan_flavors(*model, render::FlavorOptions{});
  out << (plan ? render::openstack_commands(*plan) : "none: " + plan.error().message() + "\n");
  return kExitOk;
}

}  // namespace polyaccel::cli
