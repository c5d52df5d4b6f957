// vfio.binding: a device meant for a guest is bound to vfio-pci, and its IOMMU group holds
// nothing that stays on the host.
#include <algorithm>
#include <cstdio>

#include "audit/checks.h"
#include "audit/support.h"
#include "core/strings.h"

namespace polyaccel::audit {

namespace {

// Drivers a device may keep in a group that is given to a guest (the kernel's vfio allows them).
bool harmless_in_group(const PciFunctionFacts& p) {
  return p.driver.empty() || is_vfio_driver(p.driver) || p.driver == "pci-stub" ||
         p.driver == "pcieport" || p.is_bridge();
}

std::string id_pair(const PciFunctionFacts& p) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%04x", p.vendor_id, p.device_id);
  return buf;
}

}  // namespace

Findings check_vfio(const AuditContext& c) {
  Findings out;
  const TuningFacts& f = c.facts;
  for (const auto& addr : c.passthrough) {
    const PciFunctionFacts* p = f.pci_function(addr);
    if (!p) continue;
    const std::string sysfs = "/sys/bus/pci/devices/" + addr.to_string();
    if (!is_vfio_driver(p->driver)) {
      Finding fd;
      fd.id = "vfio.binding";
      fd.severity = Severity::warning;
      fd.subject = c.device_name(addr);
      fd.observed = p->driver.empty() ? "bound to no driver" : "bound to " + p->driver;
      fd.expected = "bound to vfio-pci, as it is meant for passthrough";
      fd.remedy.summary =
          "have vfio-pci claim it before the host driver (modprobe.d), and "
          "rebind it now";
      fd.remedy.modprobe.push_back("options vfio-pci ids=" + id_pair(*p));
      if (!p->driver.empty() && !is_vfio_driver(p->driver)) {
        fd.remedy.modprobe.push_back("softdep " + p->driver + " pre: vfio-pci");
      }
      fd.remedy.commands = {"modprobe vfio-pci", "echo vfio-pci > " + sysfs + "/driver_override"};
      if (!p->driver.empty()) {
        fd.remedy.commands.push_back("echo " + addr.to_string() + " > " + sysfs + "/driver/unbind");
      }
      fd.remedy.commands.push_back("echo " + addr.to_string() + " > /sys/bus/pci/drivers_probe");
      out.push_back(std::move(fd));
    }
    if (!p->iommu_group) continue;
    auto g = f.iommu_groups.find(*p->iommu_group);
    if (g == f.iommu_groups.end()) continue;
    std::vector<std::string> on_host;
    for (const auto& other : g->second.devices) {
      if (other == addr || c.is_passthrough(other)) continue;
      const PciFunctionFacts* q = f.pci_function(other);
      if (!q || harmless_in_group(*q)) continue;
      on_host.push_back(other.to_string() + " (" + q->driver + ")");
    }
    if (on_host.empty()) continue;
    Finding fd;
    fd.id = "vfio.binding";
    fd.severity = Severity::warning;
    fd.subject = c.device_name(addr);
    fd.observed =
        "IOMMU group " + std::to_string(g->second.id) + " also holds " + join(on_host, ", ");
    fd.expected = "every device of its IOMMU group given to the guest or unbound";
    fd.remedy.summary =
        "vfio refuses a group with devices the host still drives: pass those functions through "
        "too (the GPU's audio function), or move the card to a slot with its own group (ACS in "
        "the firmware); do not use pcie_acs_override, which only hides the shared group";
    out.push_back(std::move(fd));
  }
  return out;
}

}  // namespace polyaccel::audit
