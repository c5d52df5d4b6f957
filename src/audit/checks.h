// The families of checks, one file each; checks.cc lists them once (DESIGN.md: explicit lists,
// not self-registration).
#pragma once

#include <vector>

#include "audit/audit.h"

namespace polyaccel::audit {

using Findings = std::vector<Finding>;

struct CheckFamily {
  const char* name;              // "hugepages"
  std::vector<const char*> ids;  // the finding ids it may give
  Findings (*run)(const AuditContext&);
};

const std::vector<CheckFamily>& check_families();  // checks.cc

Findings check_audit_limits(const AuditContext& c);  // limits.cc
Findings check_hugepages(const AuditContext& c);     // hugepages.cc
Findings check_numa(const AuditContext& c);          // numa.cc
Findings check_cpu(const AuditContext& c);           // cpu.cc
Findings check_iommu(const AuditContext& c);         // iommu.cc
Findings check_pcie(const AuditContext& c);          // pcie.cc
Findings check_gpudirect(const AuditContext& c);     // gpudirect.cc
Findings check_vfio(const AuditContext& c);          // vfio.cc
Findings check_gpu(const AuditContext& c);           // gpu.cc
Findings check_memory(const AuditContext& c);        // memory.cc
Findings check_runtime(const AuditContext& c);       // runtime.cc

}  // namespace polyaccel::audit
