// audit.limits: what the audit could not read, so that a missing fact is reported as such and
// never taken for a good or a bad setting.
#include "audit/checks.h"

namespace polyaccel::audit {

Findings check_audit_limits(const AuditContext& c) {
  Findings out;
  for (const auto& p : c.facts.problems) {
    Finding f;
    f.id = "audit.limits";
    f.severity = Severity::info;
    f.subject = p.path;
    f.observed = p.problem;
    f.expected = "a readable file in the kernel's format";
    f.remedy.summary =
        "the checks that need this file were skipped; run the audit as root on the host, or "
        "capture the file into the tree given to --root";
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace polyaccel::audit
