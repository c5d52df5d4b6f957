// `polyaccel report`: the main job of `make run`. Each capability adds its section here.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/audit_view.h"
#include "cli/commands.h"
#include "core/host_model_json.h"
#include "core/json.h"
#include "render/openstack.h"

namespace polyaccel::cli {

inline constexpr int kReportSchemaVersion = 1;

int run_report(const GlobalOptions& options, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  // The audit with its default intent, as `polyaccel audit` with no options would run it.
  TuningFacts facts = read_tuning_facts(filesystem_root(options.discover));
  std::vector<AcceleratorSample> samples = sample_accelerators(*model);
  AuditInput input{*model, facts, samples, {}};
  std::vector<Finding> findings = run_audit(input);
  AuditCoverage coverage = audit_coverage(input);
  if (options.json) {
    nlohmann::json j;
    j["schema_version"] = kReportSchemaVersion;
    j["topology"] = to_json(*model);
    auto plan = render::plan_flavors(*model, render::FlavorOptions{});
    j["flavors"] = plan ? render::to_json(*plan) : nlohmann::json();
    j["audit"] = audit_json(*model, make_context(input), findings, coverage);
    out << json_text(j) << "\n";
    return kExitOk;
  }
  out << "== Topology ==\n";
  print_topology(*model, filesystem_root(options.discover), out, options.style);
  out << "\n== Accelerator flavors ==\n";
  auto plan = render::plan_flavors(*model, render::FlavorOptions{});
  out << (plan ? render::openstack_commands(*plan) : "none: " + plan.error().message() + "\n");
  out << "\n== Audit ==\n";
  print_findings(findings, coverage, out, options.style);
  print_unchecked(coverage, out);
  return kExitOk;
}

}  // namespace polyaccel::cli
