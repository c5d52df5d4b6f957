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
// {"schema_version", "host", "source", "role", "pinned_cpus", "findings", "counts"}
nlohmann::json audit_json(const HostModel& model, const AuditContext& context,
                          const std::vector<Finding>& findings);
void print_findings(const std::vector<Finding>& findings, std::ostream& out,
                    const OutputStyle& style = {});

// One sample of every accelerator that a present vendor backend answers for.
std::vector<AcceleratorSample> sample_accelerators(const HostModel& model);

}  // namespace polyaccel::cli
