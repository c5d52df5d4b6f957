// `polyaccel report`: the main job of `make run`. Each capability adds its section here.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/host_model_json.h"

namespace polyaccel::cli {

inline constexpr int kReportSchemaVersion = 1;

int run_report(const GlobalOptions& options, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  if (options.json) {
    nlohmann::json j;
    j["schema_version"] = kReportSchemaVersion;
    j["topology"] = to_json(*model);
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << "== Topology ==\n";
  print_topology(*model, out);
  return kExitOk;
}

}  // namespace polyaccel::cli
