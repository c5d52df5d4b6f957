// audit_coverage: which checks had the facts they judge. Each check stays silent without its
// fact (an hwloc capture has none); this says so instead of letting silence read as "clean".
#include <algorithm>
#include <map>

#include "audit/audit.h"

namespace polyaccel {
namespace {

// The fact each check needs, and whether the input has it. A check absent from this table needs
// only the model (hugepages.reserved, gpudirect.nic-distance) or reports its own limits.
struct Need {
  const char* fact;
  bool (*present)(const AuditInput&);
};

bool cmdline(const AuditInput& in) {
  return in.facts.kernel_cmdline_known;
}
bool modules(const AuditInput& in) {
  return in.facts.modules_known;
}
bool iommu(const AuditInput& in) {
  return in.facts.kernel_cmdline_known && in.facts.iommu_known;
}
bool pci(const AuditInput& in) {
  return !in.facts.pci.empty() || (in.model.accelerators.empty() && in.model.nics.empty());
}
// GPU checks read the vendor library's samples; without accelerators there is nothing to judge.
bool samples(const AuditInput& in) {
  return in.model.accelerators.empty() || !in.samples.empty();
}

const std::map<std::string, Need>& needs() {
  static const std::map<std::string, Need> table = {
      {"hugepages.1g-runtime", {"proc/cmdline", cmdline}},
      {"hugepages.mount",
       {"proc/mounts", [](const AuditInput& in) { return in.facts.mounts_known; }}},
      {"numa.balancing",
       {"proc/sys/kernel/numa_balancing",
        [](const AuditInput& in) { return in.facts.numa_balancing.has_value(); }}},
      {"numa.pci-locality-unknown", {"sys/bus/pci/devices", pci}},
      {"cpu.governor",
       {"sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        [](const AuditInput& in) { return !in.facts.governors.empty(); }}},
      {"cpu.isolation", {"proc/cmdline", cmdline}},
      {"iommu.enabled", {"proc/cmdline and sys/class/iommu", iommu}},
      {"iommu.passthrough", {"proc/cmdline and sys/class/iommu", iommu}},
      {"pcie.link-degraded", {"sys/bus/pci/devices", pci}},
      {"pcie.acs-redirect", {"sys/bus/pci/devices", pci}},
      {"gpudirect.peer-memory", {"proc/modules", modules}},
      {"vfio.binding", {"proc/modules", modules}},
      {"gpu.persistence", {"the accelerators' samples (--accel-backends)", samples}},
      {"gpu.ecc", {"the accelerators' samples (--accel-backends)", samples}},
      {"gpu.mig-pending", {"the accelerators' samples (--accel-backends)", samples}},
      {"gpu.clocks-throttled", {"the accelerators' samples (--accel-backends)", samples}},
      {"gpu.row-remap-pending", {"the accelerators' samples (--accel-backends)", samples}},
      {"memory.swap",
       {"proc/meminfo",
        [](const AuditInput& in) { return in.facts.swap_total_bytes.has_value(); }}},
  };
  return table;
}

}  // namespace

AuditCoverage audit_coverage(const AuditInput& input, const std::vector<std::string>& only) {
  AuditCoverage c;
  for (const auto& id : all_finding_ids()) {
    if (id == "audit.limits") continue;  // the audit's own notes, not a check of the host
    if (!only.empty() && std::find(only.begin(), only.end(), id) == only.end()) continue;
    ++c.checks;
    auto need = needs().find(id);
    if (need != needs().end() && !need->second.present(input))
      c.unchecked.push_back({id, need->second.fact});
  }
  return c;
}

}  // namespace polyaccel
