// The audit's findings for people and as JSON, shared by `audit` and `report`.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audit/audit.h"
#include "cli/output.h"

namespace polyaccel::cli {

inline constexpr int kAuditSchemaVersion = 1;

nlohmann::json to_json(const Finding& finding);
// {"schema_version", "host", "source", "role", "pinned_cpus", "counts", "checks", "findings"}
nlohmann::json audit_json(const HostModel& model, const AuditContext& context,
                          const std::vector<Finding>& findings, const AuditCoverage& coverage);
// "No findings in the checks that ran." when some could not run (print_unchecked lists them).
void print_findings(const std::vector<Finding>& findings, const AuditCoverage& coverage,
                    std::ostream& out, const OutputStyle& style = {});
void print_unchecked(const AuditCoverage& coverage, std::ostream& out);

// One sample of every accelerator that a present vendor backend answers for.
std::vector<AcceleratorSample> sample_accelerators(const HostModel& model);

}  // namespace polyaccel::cli
