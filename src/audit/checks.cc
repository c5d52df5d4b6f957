// The one list of audit checks, in the order they run and are documented (docs/audit.md).
#include "audit/checks.h"

namespace polyaccel::audit {

const std::vector<CheckFamily>& check_families() {
  static const std::vector<CheckFamily> families = {
      {"audit", {"audit.limits"}, check_audit_limits},
      {"hugepages",
       {"hugepages.reserved", "hugepages.1g-runtime", "hugepages.mount"},
       check_hugepages},
      {"numa", {"numa.balancing", "numa.pci-locality-unknown"}, check_numa},
      {"cpu", {"cpu.governor", "cpu.isolation"}, check_cpu},
      {"iommu", {"iommu.enabled", "iommu.passthrough"}, check_iommu},
      {"pcie", {"pcie.link-degraded", "pcie.acs-redirect"}, check_pcie},
      {"gpudirect", {"gpudirect.peer-memory", "gpudirect.nic-distance"}, check_gpudirect},
      {"vfio", {"vfio.binding"}, check_vfio},
      {"gpu",
       {"gpu.persistence", "gpu.ecc", "gpu.mig-pending", "gpu.clocks-throttled",
        "gpu.row-remap-pending"},
       check_gpu},
      {"memory", {"memory.swap"}, check_memory},
      {"runtime",
       {"runtime.cdi-disabled", "runtime.cdi-spec-missing", "runtime.cdi-spec-stale",
        "runtime.toolkit-missing", "runtime.fabricmanager", "runtime.persistenced",
        "runtime.driver-mismatch"},
       check_runtime},
  };
  return families;
}

}  // namespace polyaccel::audit
