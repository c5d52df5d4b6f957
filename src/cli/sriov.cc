// `polyaccel sriov set PF COUNT`: enable SR-IOV virtual functions through sysfs.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json.h"
#include "launch/sriov_control.h"

namespace polyaccel::cli {

int run_sriov_set(const GlobalOptions& options, const std::string& pf, const std::string& count,
                  std::ostream& out) {
  const std::string root = filesystem_root(options.discover);
  if (root.empty()) {
    return fail(bad_input("--topology", "sriov set writes sysfs: use the live host or --fsroot"));
  }
  auto change = set_sriov_vf_count(root, pf, count);
  if (!change) return fail(change.error());
  const auto& c = *change;
  if (options.json) {
    nlohmann::json j = {
        {"schema_version", 1},         {"physical_function", c.physical_function.to_string()},
        {"total_vfs", c.total_vfs},    {"previous_vfs", c.previous_vfs},
        {"num_vfs", c.requested_vfs},  {"writes", c.writes},
        {"changed", !c.writes.empty()}};
    out << json_text(j) << "\n";
    return kExitOk;
  }
  out << c.physical_function.to_string() << ": ";
  if (c.writes.empty()) {
    out << c.requested_vfs << " of " << c.total_vfs << " VFs already enabled, nothing written\n";
  } else {
    out << c.previous_vfs << " -> " << c.requested_vfs << " of " << c.total_vfs << " VFs";
    if (c.writes.size() > 1) out << " (reset to 0 first, as the kernel requires)";
    out << "\n";
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
