// iommu.enabled, iommu.passthrough.
#include "audit/checks.h"
#include "audit/support.h"
#include "core/strings.h"

namespace polyaccel::audit {

namespace {

bool iommu_on(const TuningFacts& f) {
  return f.iommu_present || !f.iommu_groups.empty();
}

// The kernel arguments that turn the IOMMU on with identity mapping for the host's devices.
// AMD's IOMMU is on by default and amd_iommu= has no "on" (off, fullflush, force_isolation...):
// iommu=pt is all; Intel's needs intel_iommu=on on kernels built without it on by default.
std::vector<std::string> iommu_on_args(const TuningFacts& f) {
  if (f.cpu_vendor == "AuthenticAMD") return {"iommu=pt"};
  return {"intel_iommu=on", "iommu=pt"};
}

}  // namespace

Findings check_iommu(const AuditContext& c) {
  Findings out;
  const TuningFacts& f = c.facts;
  if (!f.kernel_cmdline_known) return out;  // no facts (an XML capture)

  if (!iommu_on(f)) {
    if (c.hypervisor || !c.passthrough.empty()) {
      Finding fd;
      fd.id = "iommu.enabled";
      fd.severity = Severity::critical;
      fd.subject = "kernel";
      fd.observed = "no IOMMU (sys/class/iommu and sys/kernel/iommu_groups are empty)";
      fd.expected = "the IOMMU on, so that devices can be passed through with vfio-pci";
      fd.remedy.summary =
          "enable VT-d / AMD-Vi in the firmware and the IOMMU on the kernel command line";
      fd.remedy.kernel_args = iommu_on_args(f);
      out.push_back(std::move(fd));
    }
    return out;
  }

  // Devices the host keeps pay for translated DMA (IOTLB misses, slower P2P): identity mapping
  // on the host side keeps the IOMMU for the passed-through devices only.
  std::vector<std::string> translated;
  bool type_known = false;
  auto look = [&](const PciDevice& pci) {
    if (c.is_passthrough(pci.address)) return;
    const PciFunctionFacts* p = f.pci_function(pci.address);
    if (!p || !p->iommu_group) return;
    auto g = f.iommu_groups.find(*p->iommu_group);
    if (g == f.iommu_groups.end() || g->second.type.empty()) return;
    type_known = true;
    if (g->second.type.rfind("DMA", 0) == 0) {
      translated.push_back(c.device_name(pci.address) + " (group " + std::to_string(g->second.id) +
                           ", " + g->second.type + ")");
    }
  };
  for (const auto& a : c.model.accelerators)
    look(a.pci);
  for (const auto& n : c.model.nics)
    look(n.pci);
  bool pt_arg = f.kernel_arg("iommu") == std::optional<std::string>("pt");
  if (!translated.empty() || (!type_known && !pt_arg && !c.model.accelerators.empty())) {
    Finding fd;
    fd.id = "iommu.passthrough";
    fd.severity = translated.empty() ? Severity::info : Severity::warning;
    fd.subject = "kernel";
    if (translated.empty()) {
      fd.observed = "IOMMU on, no iommu=pt, translation mode of the accelerators' groups unknown";
    } else {
      fd.observed = "translated DMA for devices that stay on the host: " + join(translated, ", ");
    }
    fd.expected = "iommu=pt: identity mapping for host devices, the IOMMU only for guests";
    fd.remedy.summary =
        "translated DMA costs GPU/NIC bandwidth and can send PCIe peer traffic through the root "
        "complex: boot with iommu=pt";
    fd.remedy.kernel_args = {"iommu=pt"};
    out.push_back(std::move(fd));
  }
  return out;
}

}  // namespace polyaccel::audit
